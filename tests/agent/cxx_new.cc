// cxx_new.cc — C++ new/delete, new[]/delete[] and aligned new reach the
// agent through malloc and friends, counted exactly in category "cxx".
// Usage: cxx_new LEDGER_FILE
#include <cstdio>
#include <new>
#include <string>
#include <vector>

extern "C" {
#include "ledger.h"
#include "memtrail.h"
}

struct alignas(64) Wide {
    char bytes[192];
};

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    ledger l = {};
    mt_tag_push("cxx");
    int *one = new int(7);
    ledger_alloc(&l, sizeof(int));
    double *arr = new double[1000];
    ledger_alloc(&l, 1000 * sizeof(double));
    Wide *w = new Wide;
    ledger_alloc(&l, sizeof(Wide));
    EXPECT(((uintptr_t)w & 63) == 0, "aligned new not aligned");
    std::vector<char> *v = new std::vector<char>(5000);
    ledger_alloc(&l, sizeof(std::vector<char>));
    ledger_alloc(&l, 5000);
    delete one;
    ledger_free(&l, sizeof(int));
    delete[] arr;
    ledger_free(&l, 1000 * sizeof(double));
    delete w;
    ledger_free(&l, sizeof(Wide));
    (void)v; // kept live
    mt_tag_pop();
    ledger_write(argv[1], "cxx", &l, 0);
    dprintf(1, "%s cxx_new: %d failures\n", test_failures ? "FAIL" : "PASS", test_failures);
    return test_failures;
}
