// SwiGLU of the fused gate/up activation inp [N, 2H] (row n: H gate values, then H up values, as the fused gateupw
// of llmc/llama_config.h produces them): out [N, H] = silu(gate) * up; the channel recomputation for the AdaHOP
// backward; and the backward, written into the fused gradient [N, 2H].
#ifndef LLMC_SWIGLU_CUH
#define LLMC_SWIGLU_CUH

#include "cuda_common.cuh"

// silu(g) u = g / (1 + exp(-g)) u: shared by the kernels below so that recomputed values are bit-identical
__device__ __forceinline__ float swiglu_value(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// swiglu_value of 8 gate and 8 up values, rounded to BF16: the forward's output, also where a producer emits operands
// (dev/cuda/fused_operands.cuh)
__device__ __forceinline__ x128 swiglu8(x128 g, x128 u) {
    x128 o;
    for (int k = 0; k < 8; k++) { o[k] = (floatX)swiglu_value((float)g[k], (float)u[k]); }
    return o;
}

// out[n, j] = swiglu_value(inp[n, j], inp[n, H + j]); 8 outputs per thread. Traffic: reads inp once, writes out.
__global__ void swiglu_forward_kernel(floatX* out, const floatX* inp, long N, int H) {
    long e = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (e >= N * H) { return; }
    const floatX* row = inp + (e / H) * 2 * H + e % H;
    store128(out + e, swiglu8(load128(row), load128(row + H)));
}

// out[j, r] = swiglu_value(inp[r, idx[j]], inp[r, H + idx[j]]): k channels of the SwiGLU output [N, H], transposed
// (channel-major). Traffic: 2 k N strided reads, k N writes.
__global__ void swiglu_channels_kernel(floatX* out, const floatX* inp, const int* idx, int k, int N, int H) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)k * N) { return; }
    const floatX* row = inp + (size_t)(t % N) * 2 * H + idx[t / N];
    out[t] = (floatX)swiglu_value((float)row[0], (float)row[H]);
}

// the backward of one pair (g, u) with incoming gradient d, rounded to BF16 by the caller: d(gate) = d u silu'(g)
// with silu'(g) = sig(g) (1 + g (1 - sig(g))), d(up) = d g sig(g). Shared by swiglu_backward_kernel and the producer
// that emits the gate/up linear's output-gradient operands (dev/cuda/fused_operands.cuh), so that both are bit-identical.
__device__ __forceinline__ float swiglu_sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }
__device__ __forceinline__ float swiglu_dgate_value(float g, float u, float d) {
    float sig = swiglu_sigmoid(g);
    return d * u * sig * (1.0f + g * (1.0f - sig));
}
__device__ __forceinline__ float swiglu_dup_value(float g, float d) { return d * g * swiglu_sigmoid(g); }

// d(gate) of 8 pairs, rounded to BF16
__device__ __forceinline__ x128 swiglu_dgate8(x128 g, x128 u, x128 d) {
    x128 o;
    for (int k = 0; k < 8; k++) { o[k] = (floatX)swiglu_dgate_value((float)g[k], (float)u[k], (float)d[k]); }
    return o;
}

// d(up) of 8 pairs, rounded to BF16
__device__ __forceinline__ x128 swiglu_dup8(x128 g, x128 d) {
    x128 o;
    for (int k = 0; k < 8; k++) { o[k] = (floatX)swiglu_dup_value((float)g[k], (float)d[k]); }
    return o;
}

// dinp[n, j] = d(gate), dinp[n, H + j] = d(up) of the pair (inp[n, j], inp[n, H + j]) with dout[n, j] (overwritten,
// not accumulated; dinp may be inp). 8 pairs per thread. Traffic: reads inp and dout, writes dinp.
__global__ void swiglu_backward_kernel(floatX* dinp, const floatX* dout, const floatX* inp, long N, int H) {
    long e = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (e >= N * H) { return; }
    size_t o = (size_t)(e / H) * 2 * H + e % H;
    x128 g = load128(inp + o), u = load128(inp + o + H), d = load128(dout + e);
    store128(dinp + o, swiglu_dgate8(g, u, d));
    store128(dinp + o + H, swiglu_dup8(g, d));
}

static inline void swiglu_check_shape(long N, int H) {
    if (H <= 0 || H % 8 != 0) { die("swiglu: hidden size H=%d must be a positive multiple of 8", H); }
    if (N <= 0) { die("swiglu: rows N=%ld must be positive", N); }
}

// out [N, H] = silu(gate) * up of inp [N, 2H]
static inline void swiglu_forward(floatX* out, const floatX* inp, long N, int H, cudaStream_t stream) {
    swiglu_check_shape(N, H);
    swiglu_forward_kernel<<<ceil_div(N * H / 8, 256), 256, 0, stream>>>(out, inp, N, H);
    cudaCheckLaunch();
}

// out [k x N] = channels idx (each < hidden) of the SwiGLU output of inp [N, 2 hidden] (see swiglu_channels_kernel)
static inline void swiglu_forward_channels(floatX* out, const floatX* inp, const int* idx, int k, int N, int hidden,
                                           cudaStream_t stream) {
    swiglu_channels_kernel<<<ceil_div((long)k * N, 256), 256, 0, stream>>>(out, inp, idx, k, N, hidden);
    cudaCheckLaunch();
}

// dinp [N, 2H] = (dgate, dup) from dout [N, H] and the forward's inp [N, 2H]; dinp may be inp (in place)
static inline void swiglu_backward(floatX* dinp, const floatX* dout, const floatX* inp, long N, int H, cudaStream_t stream) {
    swiglu_check_shape(N, H);
    swiglu_backward_kernel<<<ceil_div(N * H / 8, 256), 256, 0, stream>>>(dinp, dout, inp, N, H);
    cudaCheckLaunch();
}

#endif
