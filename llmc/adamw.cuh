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

// the AdamW hyperparameters of one launch
struct AdamWStep { float lr, beta1, beta2, bias_corr1, bias_corr2, eps, weight_decay, grad_scale; };

// one AdamW step of one element (torch semantics, decoupled weight decay), the gradient scaled by grad_scale first;
// returns the new master weight. Every operation is an explicitly rounded intrinsic, so no kernel that inlines it can
// contract it into different FMAs: the 4-wide and 1-wide kernels agree bit for bit.
__device__ __forceinline__ float adamw_element(float& m, float& v, float master, float grad, const AdamWStep& a) {
    float g = __fmul_rn(grad, a.grad_scale);
    m = __fmaf_rn(a.beta1, m, __fmul_rn(1.0f - a.beta1, g));
    v = __fmaf_rn(a.beta2, v, __fmul_rn(__fmul_rn(1.0f - a.beta2, g), g));
    float p = __fsub_rn(master, __fmul_rn(__fmul_rn(a.lr, a.weight_decay), master));
    float step = __fdiv_rn(__fdiv_rn(m, a.bias_corr1), __fadd_rn(__fsqrt_rn(__fdiv_rn(v, a.bias_corr2)), a.eps));
    return __fsub_rn(p, __fmul_rn(a.lr, step));
}

// AdamW on VEC consecutive elements per thread (VEC 4: 16-byte loads, the FP32 arrays 16-byte and params 8-byte
// aligned, n a multiple of 4). Traffic: reads grad, master, m, v; writes master, m, v and the BF16 parameter.
template <int VEC>
__global__ void adamw_kernel(floatX* params, float* master, const float* grad, float* m, float* v, size_t n, AdamWStep a) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= n) { return; }
    if (VEC == 4) {
        float4 g4 = *(const float4*)(grad + i), p4 = *(const float4*)(master + i);
        float4 m4 = *(const float4*)(m + i), v4 = *(const float4*)(v + i);
        p4.x = adamw_element(m4.x, v4.x, p4.x, g4.x, a);
        p4.y = adamw_element(m4.y, v4.y, p4.y, g4.y, a);
        p4.z = adamw_element(m4.z, v4.z, p4.z, g4.z, a);
        p4.w = adamw_element(m4.w, v4.w, p4.w, g4.w, a);
        *(float4*)(m + i) = m4; *(float4*)(v + i) = v4; *(float4*)(master + i) = p4;
        __nv_bfloat162 lo = __floats2bfloat162_rn(p4.x, p4.y), hi = __floats2bfloat162_rn(p4.z, p4.w);
        uint2 packed = make_uint2(*(uint32_t*)&lo, *(uint32_t*)&hi);
        *(uint2*)(params + i) = packed;
    } else {
        float mi = m[i], vi = v[i];
        float p = adamw_element(mi, vi, master[i], grad[i], a);
        m[i] = mi; v[i] = vi; master[i] = p;
        params[i] = (floatX)p;
    }
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
    AdamWStep a = {lr, beta1, beta2, bc1, bc2, eps, weight_decay, grad_scale};
    bool vec = n % 4 == 0 && ((uintptr_t)master | (uintptr_t)grad | (uintptr_t)m | (uintptr_t)v) % 16 == 0 &&
               (uintptr_t)params % 8 == 0;
    if (vec) {
        adamw_kernel<4><<<ceil_div((long)(n / 4), 256), 256, 0, stream>>>(params, master, grad, m, v, n, a);
    } else {
        adamw_kernel<1><<<ceil_div((long)n, 512), 512, 0, stream>>>(params, master, grad, m, v, n, a);
    }
    cudaCheckLaunch();
}

#endif
