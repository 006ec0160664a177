/* test_corpus.c — replays the MEMTRAIL_OPTIONS parser's fuzz corpus
 * (tests/agent/fuzz/corpus/: seeds, every input a finding was fixed with,
 * and the fuzzer's own finds) through its target under ASan+UBSan. */
#include "fuzz_options.c"
#include "fuzz_replay.h"

int main(int argc, char **argv)
{
    return fuzz_replay(argc > 1 ? argv[1] : "tests/agent/fuzz/corpus", 20);
}
