// What the kernel benchmarks share: the median time of repeated runs (CUDA events on the default stream) and
// random BF16 inputs (their distribution is not what is measured).
#ifndef DEV_CUDA_BENCH_COMMON_CUH
#define DEV_CUDA_BENCH_COMMON_CUH

#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"

// median time in ms of `reps` runs of fn (after 3 warm-ups)
template <class F>
static float time_ms(F fn, int reps) {
    static cudaEvent_t ev0 = NULL, ev1 = NULL;
    if (!ev0) { cudaCheck(cudaEventCreate(&ev0)); cudaCheck(cudaEventCreate(&ev1)); }
    for (int i = 0; i < 3; i++) { fn(); }
    float* t = (float*)malloc_check(reps * sizeof(float));
    for (int i = 0; i < reps; i++) {
        cudaCheck(cudaEventRecord(ev0));
        fn();
        cudaCheck(cudaEventRecord(ev1));
        cudaCheck(cudaEventSynchronize(ev1));
        cudaCheck(cudaEventElapsedTime(&t[i], ev0, ev1));
    }
    for (int i = 1; i < reps; i++) {   // insertion sort, reps is small
        float v = t[i]; int j = i - 1;
        while (j >= 0 && t[j] > v) { t[j + 1] = t[j]; j--; }
        t[j + 1] = v;
    }
    float med = t[reps / 2];
    free(t);
    return med;
}

// x[i] uniform in [-half_width, half_width) from a hash of (seed, i). Traffic: n writes.
__global__ void fill_uniform_kernel(floatX* x, long n, uint32_t seed, float half_width) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
    x[i] = (floatX)(((h >> 8) * (2.0f / 16777216.0f) - 1.0f) * half_width);
}

// the start of every benchmark: the repeat count from argv[1] (default 20), a GPU or a clear error, cuBLASLt, and
// a line naming the GPU
static int bench_start(int argc, char** argv) {
    int reps = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 20;
    if (reps < 1) { die("repeats must be a positive integer, got '%s'", argv[1]); }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: the benchmark needs one"); }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    matmul_init();
    printf("GPU: %s, %d SMs, median of %d runs\n", prop.name, prop.multiProcessorCount, reps);
    return reps;
}

// a new device buffer of n BF16 values uniform in [-half_width, half_width)
static floatX* random_bf16(long n, uint32_t seed, float half_width) {
    floatX* x = (floatX*)device_malloc(n * sizeof(floatX), "bench input");
    fill_uniform_kernel<<<ceil_div(n, 256), 256>>>(x, n, seed, half_width);
    cudaCheckLaunch();
    return x;
}

#endif
