// Random test tensors for the C tests: one seeded generator (test_rng, seeded by the test's main), N(0, std^2)
// floats and zero floats, both malloc'ed.
#ifndef DEV_TEST_RAND_H
#define DEV_TEST_RAND_H

#include "llmc/utils.h"
#include "llmc/rand.h"

static Rng test_rng;

// n floats drawn from N(0, std^2)
static inline float* randn(size_t n, float std) {
    float* x = (float*)malloc_check(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { x[i] = std * rng_normal(&test_rng); }
    return x;
}

// n zero floats
static inline float* zeros(size_t n) { return (float*)calloc_check(n, sizeof(float)); }

#endif
