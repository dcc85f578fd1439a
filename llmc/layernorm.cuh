// LayerNorm (eps 1e-5) forward, optionally fused with the residual add that precedes it, and backward.
#ifndef LLMC_LAYERNORM_CUH
#define LLMC_LAYERNORM_CUH

#include "cuda_common.cuh"
#include "column_sums.cuh"

// the LayerNorm output of one element from its row statistics: shared by the kernels below so that a recomputed
// value equals the forward's bit for bit
__device__ __forceinline__ float layernorm_value(float x, float mu, float rs, float w, float b) { return (x - mu) * rs * w + b; }

// a row's LayerNorm statistics
struct LayerNormStats { float mean, rstd; };

// the statistics of R rows at offsets base[0..R-1] by one warp (every lane calls it and gets them): res = a + b
// stored at res_out as it is read (when b is given; res = a otherwise), mean, then the variance about it. A row's sums
// run in one order whatever R (only the rows' loads interleave, to be in flight together), so layernorm_forward
// (R = 1) and its operand-emitting producer (dev/cuda/fused_operands.cuh, R > 1) agree bit for bit.
template <int R>
__device__ __forceinline__ void layernorm_rows_stats(LayerNormStats st[R], const floatX* a, const floatX* b,
                                                     floatX* res_out, const size_t base[R], int C) {
    int lane = threadIdx.x % 32;
    float sum[R], var[R];
#pragma unroll
    for (int r = 0; r < R; r++) { sum[r] = 0.0f; var[r] = 0.0f; }
    for (int c = lane * 8; c < C; c += 32 * 8) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            x128 av = residual_add_load8(a, b, res_out, base[r] + c);
            for (int i = 0; i < 8; i++) { sum[r] += (float)av[i]; }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) { st[r].mean = warp_sum(sum[r]) / C; }
    const floatX* x = b ? res_out : a;   // each lane re-reads only what it wrote
    for (int c = lane * 8; c < C; c += 32 * 8) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            x128 xv = load128(x + base[r] + c);
            for (int i = 0; i < 8; i++) { float d = (float)xv[i] - st[r].mean; var[r] += d * d; }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) { st[r].rstd = rsqrtf(warp_sum(var[r]) / C + 1e-5f); }
}

// One warp per row: res = a + b (or res = a when b is NULL; res_out written only when b is given),
// out = (res - mean) * rstd * weight + bias, and mean/rstd saved for the backward pass (unless NULL: a recomputation).
// Traffic: reads a (and b) once from DRAM (re-reads hit L1/L2), writes out (and res_out).
__global__ void layernorm_forward_kernel(floatX* out, float* mean, float* rstd, floatX* res_out,
                                         const floatX* a, const floatX* b, const floatX* weight,
                                         const floatX* bias, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) { return; }
    size_t base = (size_t)row * C;
    LayerNormStats st;
    layernorm_rows_stats<1>(&st, a, b, res_out, &base, C);
    const floatX* xr = (b ? res_out : a) + base;
    for (int c = lane * 8; c < C; c += 32 * 8) {
        x128 xv = load128(xr + c), wv = load128(weight + c), bv = load128(bias + c), ov;
        for (int i = 0; i < 8; i++) {
            ov[i] = (floatX)layernorm_value((float)xv[i], st.mean, st.rstd, (float)wv[i], (float)bv[i]);
        }
        store128(out + base + c, ov);
    }
    if (lane == 0 && mean) { mean[row] = st.mean; rstd[row] = st.rstd; }
}

// the row means of g = dout * weight and of g y (y: the normalized input) that the LayerNorm input gradient needs,
// by one warp (every lane gets them)
__device__ __forceinline__ float2 layernorm_row_grad_means(const floatX* dout_row, const floatX* inp_row, const floatX* weight,
                                                          float mu, float rs, int C) {
    float sum_g = 0.0f, sum_gy = 0.0f;
    for (int c = (threadIdx.x % 32) * 8; c < C; c += 32 * 8) {
        x128 dv = load128(dout_row + c), xv = load128(inp_row + c), wv = load128(weight + c);
        for (int i = 0; i < 8; i++) {
            float g = (float)dv[i] * (float)wv[i];
            sum_g += g;
            sum_gy += g * ((float)xv[i] - mu) * rs;
        }
    }
    return make_float2(warp_sum(sum_g) / C, warp_sum(sum_gy) / C);
}

// grad_means[r] = layernorm_row_grad_means of row r, one warp per row. Traffic: reads dout and inp, writes 2 N floats.
__global__ void layernorm_grad_means_kernel(float2* grad_means, const floatX* dout, const floatX* inp, const float* mean,
                                            const float* rstd, const floatX* weight, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) { return; }
    float2 gm = layernorm_row_grad_means(dout + (size_t)row * C, inp + (size_t)row * C, weight, mean[row], rstd[row], C);
    if (threadIdx.x % 32 == 0) { grad_means[row] = gm; }
}

// out[j, r] = LayerNorm(inp)[r, idx[j]] from the saved mean/rstd: k channels of a LayerNorm output, transposed
// (channel-major), as the forward produced them. Traffic: k * N strided reads of inp, k * N writes.
__global__ void layernorm_channels_kernel(floatX* out, const floatX* inp, const float* mean, const float* rstd,
                                          const floatX* weight, const floatX* bias, const int* idx, int k, int N, int C) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)k * N) { return; }
    int j = (int)(t / N), r = (int)(t % N), c = idx[j];
    out[t] = (floatX)layernorm_value((float)inp[(size_t)r * C + c], mean[r], rstd[r], (float)weight[c], (float)bias[c]);
}

static inline void layernorm_check_shape(int C) {
    if (C % 8 != 0) { die("layernorm: channels C=%d must be a multiple of 8", C); }
}

// out = LayerNorm(a + b); res_out = a + b. Pass b = NULL (and res_out = NULL) for a plain LayerNorm of a, and
// mean = rstd = NULL to recompute an output whose statistics are saved already.
static inline void layernorm_forward(floatX* out, float* mean, float* rstd, floatX* res_out, const floatX* a,
                                     const floatX* b, const floatX* weight, const floatX* bias, int N, int C,
                                     cudaStream_t stream) {
    layernorm_check_shape(C);
    const int warps_per_block = 8;
    layernorm_forward_kernel<<<ceil_div(N, warps_per_block), warps_per_block * 32, 0, stream>>>(
        out, mean, rstd, res_out, a, b, weight, bias, N, C);
    cudaCheckLaunch();
}

// out [k x N] = channels idx of LayerNorm(inp) with the forward's mean and rstd (see layernorm_channels_kernel)
static inline void layernorm_forward_channels(floatX* out, const floatX* inp, const float* mean, const float* rstd,
                                              const floatX* weight, const floatX* bias, const int* idx, int k, int N,
                                              int C, cudaStream_t stream) {
    layernorm_channels_kernel<<<ceil_div((long)k * N, 256), 256, 0, stream>>>(out, inp, mean, rstd, weight, bias, idx, k, N, C);
    cudaCheckLaunch();
}

// bytes of scratch layernorm_backward needs for N rows of width C
static inline size_t layernorm_backward_scratch_bytes(int N, int C) {
    return column_sums_mode_scratch_bytes<COLSUM_LAYERNORM_BACKWARD>(C) + (size_t)N * sizeof(float2);
}

// dinp += dLayerNorm/dinp; dweight += sum over rows of dout * y, dbias += sum over rows of dout and, unless
// dinp_sums is NULL, dinp_sums += the column sums of the new dinp (the bias gradient of the linear whose output
// gradient dinp is): deterministic, FP32 accumulators. Two passes: the rows' gradient means, then the rest in one
// column-sum pass, bit for bit the row-wise input gradient followed by column_sums<LAYERNORM> and bias_backward.
// scratch: layernorm_backward_scratch_bytes(N, C).
static inline void layernorm_backward(floatX* dinp, float* dweight, float* dbias, float* dinp_sums, float* scratch,
                                      const floatX* dout, const floatX* inp, const float* mean, const float* rstd,
                                      const floatX* weight, int N, int C, cudaStream_t stream) {
    layernorm_check_shape(C);
    float2* grad_means = (float2*)((char*)scratch + column_sums_mode_scratch_bytes<COLSUM_LAYERNORM_BACKWARD>(C));
    const int warps_per_block = 8;
    layernorm_grad_means_kernel<<<ceil_div(N, warps_per_block), warps_per_block * 32, 0, stream>>>(
        grad_means, dout, inp, mean, rstd, weight, N, C);
    cudaCheckLaunch();
    ColsumRows rows = {inp, mean, rstd, weight, grad_means, dinp};
    column_sums<COLSUM_LAYERNORM_BACKWARD>({{dweight, dbias, dinp_sums}}, scratch, dout, rows, N, C, stream);
}

#endif
