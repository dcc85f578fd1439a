// Minimal test harness for the C tests: CHECK counts passes and failures, test_summary prints
// "N passed, N failed" and returns the process exit code.
#ifndef DEV_TEST_COMMON_H
#define DEV_TEST_COMMON_H

#include <stdio.h>
#include <math.h>

static int tests_passed = 0, tests_failed = 0;

#define CHECK(cond, ...) do { \
    if (cond) { tests_passed++; } \
    else { tests_failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } \
} while (0)

static inline int test_summary(const char* name) {
    printf("%s: %d passed, %d failed\n", name, tests_passed, tests_failed);
    return tests_failed == 0 ? 0 : 1;
}

#endif
