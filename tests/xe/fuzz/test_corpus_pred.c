/* test_corpus_pred.c — replays the fuzz corpus of fuzz_pred.c
 * (tests/xe/fuzz/corpus_pred/: seeds, every input a finding was fixed with,
 * and the fuzzer's own finds) through its target under ASan+UBSan. */
#include "fuzz_pred.c"
#include "fuzz_replay.h"

int main(int argc, char **argv)
{
    return fuzz_replay(argc > 1 ? argv[1] : "tests/xe/fuzz/corpus_pred", 20);
}
