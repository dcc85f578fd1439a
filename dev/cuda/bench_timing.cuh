// Timing for the kernel benchmarks: the median of repeated runs, with CUDA events on the default stream.
#ifndef DEV_CUDA_BENCH_TIMING_CUH
#define DEV_CUDA_BENCH_TIMING_CUH

#include "llmc/cuda_common.cuh"

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

#endif
