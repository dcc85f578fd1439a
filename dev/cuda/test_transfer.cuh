// Host <-> device copies for the GPU tests: BF16 uploads of float data, FP32/int uploads, and downloads
// (each synchronizes the device first, so a kernel's output is complete).
#ifndef DEV_CUDA_TEST_TRANSFER_CUH
#define DEV_CUDA_TEST_TRANSFER_CUH

#include "llmc/cuda_common.cuh"

static inline floatX* to_device_bf16(const float* h, size_t n) {
    floatX* tmp = (floatX*)malloc_check(n * sizeof(floatX));
    for (size_t i = 0; i < n; i++) { tmp[i] = __float2bfloat16(h[i]); }
    floatX* d = (floatX*)device_malloc(n * sizeof(floatX), "test tensor");
    cudaCheck(cudaMemcpy(d, tmp, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(tmp);
    return d;
}
static inline float* to_device_f32(const float* h, size_t n) {
    float* d = (float*)device_malloc(n * sizeof(float), "test tensor");
    cudaCheck(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}
static inline int* to_device_int(const int* h, size_t n) {
    int* d = (int*)device_malloc(n * sizeof(int), "test tensor");
    cudaCheck(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
    return d;
}
static inline float* from_device_bf16(const floatX* d, size_t n) {
    floatX* tmp = (floatX*)malloc_check(n * sizeof(floatX));
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(tmp, d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    float* h = (float*)malloc_check(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { h[i] = __bfloat162float(tmp[i]); }
    free(tmp);
    return h;
}
static inline float* from_device_f32(const float* d, size_t n) {
    float* h = (float*)malloc_check(n * sizeof(float));
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}
// a host copy of `bytes` device bytes
static inline void* download(const void* d, size_t bytes) {
    void* h = malloc_check(bytes);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

#endif
