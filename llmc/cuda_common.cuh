// CUDA basics shared by every kernel header: error checks, the BF16 activation type, 16-byte packed
// loads/stores, warp reductions, and tracked device allocations with a clear out-of-memory message.
#ifndef LLMC_CUDA_COMMON_CUH
#define LLMC_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include "utils.h"

typedef __nv_bfloat16 floatX;   // activations, parameters used in compute, activation gradients

static inline void cuda_check_(cudaError_t err, const char* file, int line) {
    if (err != cudaSuccess) {
        fprintf(stderr, "error: CUDA: %s [%s:%d]\n", cudaGetErrorString(err), file, line);
        exit(EXIT_FAILURE);
    }
}
#define cudaCheck(err) cuda_check_((err), __FILE__, __LINE__)
#define cudaCheckLaunch() cuda_check_(cudaGetLastError(), __FILE__, __LINE__)

static inline int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

// 16 bytes of T, moved with one vector instruction
template <class T>
struct alignas(16) Packed128 {
    static constexpr int size = 16 / sizeof(T);
    T v[size];
    __device__ T& operator[](int i) { return v[i]; }
    __device__ const T& operator[](int i) const { return v[i]; }
};
typedef Packed128<floatX> x128;
typedef Packed128<float> f128;

template <class T> __device__ __forceinline__ Packed128<T> load128(const T* p) { return *reinterpret_cast<const Packed128<T>*>(p); }
// load that bypasses L1 and marks the line evict-first: for data read exactly once
template <class T> __device__ __forceinline__ Packed128<T> load128cs(const T* p) {
    int4 raw = __ldcs(reinterpret_cast<const int4*>(p));
    return *reinterpret_cast<Packed128<T>*>(&raw);
}
template <class T> __device__ __forceinline__ void store128(T* p, Packed128<T> x) { *reinterpret_cast<Packed128<T>*>(p) = x; }

// the 8 values at offset i of a, plus those of b when b is given (the sum then also stored at offset i of res):
// the residual add in front of LayerNorm and RMSNorm
__device__ __forceinline__ x128 residual_add_load8(const floatX* a, const floatX* b, floatX* res, size_t i) {
    x128 av = load128(a + i);
    if (b) {
        x128 bv = load128(b + i);
        for (int j = 0; j < 8; j++) { av[j] = (floatX)((float)av[j] + (float)bv[j]); }
        store128(res + i, av);
    }
    return av;
}

// exponentials in base 2 (ex2 is one MUFU instruction): e^x = 2^(x log2(e)), ln(y) = log2(y) ln(2)
#define LOG2E_F 1.4426950408889634f
#define LN2_F 0.6931471805599453f

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) { x += __shfl_xor_sync(0xffffffffu, x, o); }
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) { x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o)); }
    return x;
}

// ----------------------------------------------------------------------------
// device memory: every allocation goes through here so that the peak is known and a failure is explained

static size_t device_bytes_allocated = 0;

static inline void* device_malloc_(size_t bytes, const char* what, const char* file, int line) {
    void* p = NULL;
    if (bytes == 0) { return NULL; }
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        fprintf(stderr, "error: out of GPU memory allocating %s (%.2f GiB; %.2f GiB already allocated, %.2f GiB free of %.2f GiB) [%s:%d]\n"
                        "       reduce the micro-batch size (-b) or the sequence length (-t)\n",
                what, bytes / 1073741824.0, device_bytes_allocated / 1073741824.0, free_b / 1073741824.0,
                total_b / 1073741824.0, file, line);
        exit(EXIT_FAILURE);
    }
    device_bytes_allocated += bytes;
    return p;
}
#define device_malloc(bytes, what) device_malloc_((bytes), (what), __FILE__, __LINE__)

#endif
