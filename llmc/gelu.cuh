// GELU, tanh approximation (GPT-2), computed in its sigmoid form: forward, and backward applied in place to the
// incoming gradient.
#ifndef LLMC_GELU_CUH
#define LLMC_GELU_CUH

#include "cuda_common.cuh"

#define GELU_SCALE 0.7978845608028654f   // sqrt(2 / pi)

#define GELU_EXP2_SCALE -2.3022081981f   // -2 sqrt(2 / pi) log2(e)

// 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)) for u = sqrt(2/pi) (v + 0.044715 v^3), from two MUFU operations (ex2, rcp;
// relative error ~2^-21) instead of tanhf's ~25 instructions, and with no cancellation in 1 + tanh(u) for negative v
__device__ __forceinline__ float gelu_sigmoid(float v) {
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(GELU_EXP2_SCALE * (v + 0.044715f * v * v * v)));
    return __fdividef(1.0f, 1.0f + e);
}

// 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))) as v gelu_sigmoid(v): shared by the kernels below so that
// recomputed values are bit-identical
__device__ __forceinline__ float gelu_value(float v) { return v * gelu_sigmoid(v); }

// gelu of 8 values, rounded to BF16: the forward's output, also where a producer emits operands (dev/cuda/fused_operands.cuh)
__device__ __forceinline__ x128 gelu8(x128 x) {
    x128 o;
    for (int k = 0; k < 8; k++) { o[k] = (floatX)gelu_value((float)x[k]); }
    return o;
}

// out = gelu(inp); 8 elements per thread. Traffic: one read, one write.
__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, long n) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) { return; }
    store128(out + i, gelu8(load128(inp + i)));
}

// out[j, r] = gelu(inp[r, idx[j]]): k channels of the GELU output, transposed (channel-major).
// Traffic: k * N strided reads, k * N writes.
__global__ void gelu_channels_kernel(floatX* out, const floatX* inp, const int* idx, int k, int N, int C) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)k * N) { return; }
    int j = (int)(t / N), r = (int)(t % N);
    out[t] = (floatX)gelu_value((float)inp[(size_t)r * C + idx[j]]);
}

// d * gelu'(v), rounded to BF16 by the caller: shared by gelu_backward_kernel and the producer that emits the fc
// linear's output-gradient operands (dev/cuda/fused_operands.cuh), so that both are bit-identical
// (the tanh form's 0.5 (1 + th) + 0.5 v (1 - th^2) u' with th = 2 s - 1: s + 2 v s (1 - s) u')
__device__ __forceinline__ float gelu_grad_value(float v, float d) {
    float s = gelu_sigmoid(v);
    float grad = s + 2.0f * v * s * (1.0f - s) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * v * v);
    return d * grad;
}

// the backward of 8 values: d * gelu'(x), rounded to BF16
__device__ __forceinline__ x128 gelu_backward8(x128 x, x128 d) {
    x128 o;
    for (int k = 0; k < 8; k++) { o[k] = (floatX)gelu_grad_value((float)x[k], (float)d[k]); }
    return o;
}

// d = d * gelu'(inp), in place. Traffic: reads d and inp, writes d.
__global__ void gelu_backward_kernel(floatX* d, const floatX* inp, long n) {
    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) { return; }
    store128(d + i, gelu_backward8(load128(inp + i), load128(d + i)));
}

static inline void gelu_forward(floatX* out, const floatX* inp, long n, cudaStream_t stream) {
    if (n % 8 != 0) { die("gelu: size %ld must be a multiple of 8", n); }
    gelu_forward_kernel<<<ceil_div(n / 8, 256), 256, 0, stream>>>(out, inp, n);
    cudaCheckLaunch();
}

// out [k x N] = channels idx of gelu(inp [N x C]) (see gelu_channels_kernel)
static inline void gelu_forward_channels(floatX* out, const floatX* inp, const int* idx, int k, int N, int C, cudaStream_t stream) {
    gelu_channels_kernel<<<ceil_div((long)k * N, 256), 256, 0, stream>>>(out, inp, idx, k, N, C);
    cudaCheckLaunch();
}

static inline void gelu_backward(floatX* d, const floatX* inp, long n, cudaStream_t stream) {
    if (n % 8 != 0) { die("gelu: size %ld must be a multiple of 8", n); }
    gelu_backward_kernel<<<ceil_div(n / 8, 256), 256, 0, stream>>>(d, inp, n);
    cudaCheckLaunch();
}

#endif
