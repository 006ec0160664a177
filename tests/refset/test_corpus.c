/* test_corpus.c — replays the recording reader's fuzz corpus
 * (tests/refset/corpus/: the seeds tests/refset/mkcorpus.c writes, cut and
 * damaged ones, every input the fuzzer found a bug with (crash-*), and the
 * fuzzer's own finds (fuzz-*)) through the fuzz target under ASan+UBSan. */
#include "fuzz_read.c"
#include "fuzz_replay.h"

int main(int argc, char **argv)
{
    return fuzz_replay(argc > 1 ? argv[1] : "tests/refset/corpus", 8);
}
