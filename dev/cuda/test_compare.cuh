// Inputs and checks of the GPU tests against a CPU reference: random host data rounded to BF16 (so that both sides
// see the same values), the elementwise comparison with a tolerance relative to the tensor's scale (compare) or an
// absolute one (compare_abs), and the bit-for-bit comparison of two device buffers.
#ifndef DEV_CUDA_TEST_COMPARE_CUH
#define DEV_CUDA_TEST_COMPARE_CUH

#include <time.h>
#include "llmc/cuda_common.cuh"
#include "llmc/rand.h"
#include "dev/test/test_common.h"
#include "dev/cuda/test_transfer.cuh"

static Rng rng;

// seeds rng from the clock (fresh inputs every run) and prints the seed's first word for replay
static inline void seed_fresh_rng(void) {
    rng_seed(&rng, (uint64_t)time(NULL));
    printf("seed of this run: printed as the first rng word %llu\n", (unsigned long long)rng.s[0]);
}

// n values scale * N(0, 1), rounded to BF16
static inline float* host_random(size_t n, float scale) {
    float* h = (float*)malloc_check(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { h[i] = __bfloat162float(__float2bfloat16(scale * rng_normal(&rng))); }
    return h;
}
// n zero floats
static inline float* host_zeros(size_t n) { return (float*)calloc_check(n, sizeof(float)); }

// max |want[i]| over n values, in double
static inline double max_abs_want(const float* want, size_t n) {
    double max_want = 0.0;
    for (size_t i = 0; i < n; i++) { max_want = fmax(max_want, fabs(want[i])); }
    return max_want;
}

// elementwise |got - want| <= atol + rtol |want| with an absolute atol; NaN never passes. Prints max|want| and the worst
// element. Frees got.
static inline void compare_abs(const char* what, float* got, const float* want, size_t n, double atol, float rtol) {
    double max_want = max_abs_want(want, n), worst_excess = -INFINITY, max_err = 0.0;
    size_t bad = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), lim = atol + rtol * fabs(want[i]);
        if (!(err <= lim)) { bad++; }
        if (err > max_err || isnan(err)) { max_err = isnan(err) ? INFINITY : err; }
        if (err - lim > worst_excess || isnan(err)) { worst_excess = isnan(err) ? INFINITY : err - lim; worst = i; }
    }
    printf("  %-38s n=%-9zu max|want| %.3e max|err| %.3e  worst [%zu] got %.6g want %.6g\n", what, n, max_want, max_err, worst,
           got[worst], want[worst]);
    CHECK(bad == 0, "%s: %zu of %zu elements outside atol %.1e rtol %.1e", what, bad, n, atol, rtol);
    free(got);
}

// elementwise |got - want| <= atol_rel max|want| + rtol |want|: compare_abs with atol relative to the tensor's scale
static inline void compare(const char* what, float* got, const float* want, size_t n, float atol_rel, float rtol) {
    compare_abs(what, got, want, n, atol_rel * max_abs_want(want, n), rtol);
}

// the two device buffers of `bytes` bytes hold identical bits
static inline void compare_bits(const char* what, const void* d_a, const void* d_b, size_t bytes) {
    void *a = download(d_a, bytes), *b = download(d_b, bytes);
    int same = memcmp(a, b, bytes) == 0;
    printf("  %-38s %zu bytes %s\n", what, bytes, same ? "identical" : "DIFFER");
    CHECK(same, "%s: two runs differ", what);
    free(a);
    free(b);
}

#endif
