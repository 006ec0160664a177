/* test_corpus_sessions.c — replays the fuzz corpus of fuzz_sessions.c
 * (tests/xe/fuzz/corpus_sessions/: seeds, every input a finding was fixed with,
 * and the fuzzer's own finds) through its target under ASan+UBSan. */
#include "fuzz_sessions.c"
#include "fuzz_replay.h"

int main(int argc, char **argv)
{
    return fuzz_replay(argc > 1 ? argv[1] : "tests/xe/fuzz/corpus_sessions", 20);
}
