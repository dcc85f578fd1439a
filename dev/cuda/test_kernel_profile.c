// CPU test of kernel_profile.c's table (no GPU, no CUPTI call): fake kernel, memcpy and memset records go through
// record_name and profile_add, and profile_write must give per-name totals and counts, largest total first.
// Built by `make cuda`, run by `make test`.
#include "dev/cuda/kernel_profile.c"
#include "dev/test/test_common.h"

static void add(const CUpti_Activity* rec) {
    unsigned long long ns;
    const char* name = record_name(rec, &ns);
    if (name) { profile_add(name, ns); }
}

int main(void) {
    char name[64];
    CUpti_ActivityKernel10 k = {.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, .name = name};
    for (int i = 0; i < 300; i++) {   // kernel_j runs 1 + j % 3 times for (j + 1) * 100 ns each
        snprintf(name, sizeof(name), "_Z8kernel_%dv", i / 3);
        if (i % 3 > (i / 3) % 3) { continue; }
        k.start = 1000; k.end = 1000 + 100 * (i / 3 + 1);
        add((CUpti_Activity*)&k);
    }
    CUpti_ActivityMemcpy6 m = {.kind = CUPTI_ACTIVITY_KIND_MEMCPY, .copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, .start = 5, .end = 1000005};
    add((CUpti_Activity*)&m);
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_ATOH;
    add((CUpti_Activity*)&m);
    CUpti_ActivityMemset4 s = {.kind = CUPTI_ACTIVITY_KIND_MEMSET, .start = 10, .end = 7};   // no timestamp: 0 ns
    add((CUpti_Activity*)&s);
    CUpti_Activity other = {.kind = CUPTI_ACTIVITY_KIND_DEVICE};
    add(&other);
    CHECK(num_names == 103, "%d names, expected 100 kernels + 2 memcpy + memset", num_names);

    FILE* f = tmpfile();
    profile_write(f);
    rewind(f);
    unsigned long long prev = ~0ull, total, count;
    char got[64];
    int lines = 0, sorted_ok = 1, sums_ok = 1;
    while (fscanf(f, "%llu\t%llu\t%63[^\n]\n", &total, &count, got) == 3) {
        lines++;
        sorted_ok &= total <= prev;
        prev = total;
        int j;
        if (sscanf(got, "_Z8kernel_%dv", &j) == 1) { sums_ok &= count == 1u + j % 3 && total == count * 100 * (j + 1); }
        else if (strcmp(got, "memset") == 0) { sums_ok &= count == 1 && total == 0; }
        else { sums_ok &= count == 1 && total == 1000000 && (!strcmp(got, "memcpy HtoD") || !strcmp(got, "memcpy other")); }
    }
    fclose(f);
    CHECK(lines == 103, "%d lines written", lines);
    CHECK(sorted_ok, "lines not sorted by total, largest first");
    CHECK(sums_ok, "a line's total or count is wrong");

    for (int i = 0; i < MAX_NAMES; i++) { snprintf(name, sizeof(name), "extra_%d", i); profile_add(name, 1); }
    CHECK(num_names == MAX_NAMES && overflowed, "cap: %d names, overflowed %d", num_names, overflowed);
    return test_summary("test_kernel_profile");
}
