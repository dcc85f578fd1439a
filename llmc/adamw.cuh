// Optimizer kernels: the global gradient norm (deterministic two-stage reduction) and AdamW on FP32
// master weights, writing the BF16 copy the forward pass uses.
#ifndef LLMC_ADAMW_CUH
#define LLMC_ADAMW_CUH

#include "cuda_common.cuh"

static const int norm_blocks = 264;   // fixed, so the reduction order never changes

// partial[block] = sum of g^2 over a fixed grid-stride slice of 16-byte vectors (g 16-byte aligned), the last n % 4
// floats in block 0. Traffic: reads n floats once.
__global__ void sum_squares_partial_kernel(float* partial, const float* g, size_t n) {
    float acc = 0.0f;
    size_t n4 = n / 4;
    const float4* g4 = reinterpret_cast<const float4*>(g);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = g4[i];
        acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    if (blockIdx.x == 0 && threadIdx.x < n % 4) { float v = g[n4 * 4 + threadIdx.x]; acc += v * v; }
    __shared__ float buf[32];
    acc = warp_sum(acc);
    if (threadIdx.x % 32 == 0) { buf[threadIdx.x / 32] = acc; }
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < blockDim.x / 32 ? buf[threadIdx.x] : 0.0f;
        acc = warp_sum(acc);
        if (threadIdx.x == 0) { partial[blockIdx.x] = acc; }
    }
}

// out[0] = sqrt(sum of the partials), summed in order by one thread. Traffic: negligible.
__global__ void sum_partials_sqrt_kernel(float* out, const float* partial, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) { s += partial[i]; }
    out[0] = (float)sqrt(s);
}

// One AdamW step per element (torch semantics, decoupled weight decay), grads scaled by grad_scale first.
// Traffic: reads grad, master, m, v; writes master, m, v and the BF16 parameter.
__global__ void adamw_kernel(floatX* params, float* master, const float* grad, float* m, float* v, size_t n,
                             float lr, float beta1, float beta2, float bias_corr1, float bias_corr2, float eps,
                             float weight_decay, float grad_scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    float g = grad[i] * grad_scale;
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    float p = master[i];
    p -= lr * weight_decay * p;
    p -= lr * (mi / bias_corr1) / (sqrtf(vi / bias_corr2) + eps);
    m[i] = mi; v[i] = vi; master[i] = p;
    params[i] = (floatX)p;
}

// partial[0 .. norm_blocks) = the blocks' sums of squares of grads [n] (16-byte aligned)
static inline void sum_squares_partials(float* partial, const float* grads, size_t n, cudaStream_t stream) {
    if ((uintptr_t)grads % 16 != 0) { die("gradient norm: gradients at %p are not 16-byte aligned", (const void*)grads); }
    sum_squares_partial_kernel<<<norm_blocks, 512, 0, stream>>>(partial, grads, n);
    cudaCheckLaunch();
}

// scratch needs norm_blocks + 1 floats; the norm lands in scratch[norm_blocks]
static inline void global_norm(float* scratch, const float* grads, size_t n, cudaStream_t stream) {
    sum_squares_partials(scratch, grads, n, stream);
    sum_partials_sqrt_kernel<<<1, 1, 0, stream>>>(scratch + norm_blocks, scratch, norm_blocks);
    cudaCheckLaunch();
}

static inline void adamw_update(floatX* params, float* master, const float* grad, float* m, float* v, size_t n,
                                float lr, float beta1, float beta2, int step, float eps, float weight_decay,
                                float grad_scale, cudaStream_t stream) {
    float bc1 = 1.0f - powf(beta1, (float)step), bc2 = 1.0f - powf(beta2, (float)step);
    adamw_kernel<<<ceil_div((long)n, 512), 512, 0, stream>>>(params, master, grad, m, v, n, lr, beta1, beta2, bc1, bc2,
                                                            eps, weight_decay, grad_scale);
    cudaCheckLaunch();
}

#endif
