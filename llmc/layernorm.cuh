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
// (R = 1) and its operand-emitting producer (llmc/fused_operands.cuh, R > 1) agree bit for bit.
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

// dinp[r] += rstd * (g - mean(g) - y * mean(g * y)) with g = dout * weight, y = normalized input.
// One warp per row. Traffic: reads dout, inp, dinp once, writes dinp.
__global__ void layernorm_backward_dinp_kernel(floatX* dinp, const floatX* dout, const floatX* inp,
                                               const float* mean, const float* rstd, const floatX* weight,
                                               int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) { return; }
    const floatX* dr = dout + (size_t)row * C;
    const floatX* xr = inp + (size_t)row * C;
    float mu = mean[row], rs = rstd[row];
    float sum_g = 0.0f, sum_gy = 0.0f;
    for (int c = lane * 8; c < C; c += 32 * 8) {
        x128 dv = load128(dr + c), xv = load128(xr + c), wv = load128(weight + c);
        for (int i = 0; i < 8; i++) {
            float g = (float)dv[i] * (float)wv[i];
            sum_g += g;
            sum_gy += g * ((float)xv[i] - mu) * rs;
        }
    }
    float mean_g = warp_sum(sum_g) / C, mean_gy = warp_sum(sum_gy) / C;
    floatX* dir = dinp + (size_t)row * C;
    for (int c = lane * 8; c < C; c += 32 * 8) {
        x128 dv = load128(dr + c), xv = load128(xr + c), wv = load128(weight + c), iv = load128(dir + c);
        for (int i = 0; i < 8; i++) {
            float g = (float)dv[i] * (float)wv[i];
            float y = ((float)xv[i] - mu) * rs;
            iv[i] = (floatX)((float)iv[i] + rs * (g - mean_g - y * mean_gy));
        }
        store128(dir + c, iv);
    }
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

// dinp += dLayerNorm/dinp; dweight += ..., dbias += ... (deterministic, FP32 accumulators)
static inline void layernorm_backward(floatX* dinp, float* dweight, float* dbias, float* scratch, const floatX* dout,
                                      const floatX* inp, const float* mean, const float* rstd, const floatX* weight,
                                      int N, int C, cudaStream_t stream) {
    layernorm_check_shape(C);
    const int warps_per_block = 8;
    layernorm_backward_dinp_kernel<<<ceil_div(N, warps_per_block), warps_per_block * 32, 0, stream>>>(
        dinp, dout, inp, mean, rstd, weight, N, C);
    cudaCheckLaunch();
    column_sums<COLSUM_LAYERNORM>(dweight, dbias, scratch, dout, inp, mean, rstd, N, C, stream);
}

#endif
