/* test_corpus.c — replays the report reader's fuzz corpus
 * (tests/report/fuzz/corpus/: real reports of every mode, hand-made edge
 * cases, every input a finding was fixed with, and the fuzzer's own finds)
 * through its target (reader, printers, exporters) under ASan+UBSan. */
#include "fuzz_report.c"
#include "fuzz_replay.h"

int main(int argc, char **argv)
{
    return fuzz_replay(argc > 1 ? argv[1] : "tests/report/fuzz/corpus", 20);
}
