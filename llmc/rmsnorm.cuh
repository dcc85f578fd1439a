// RMSNorm (weight only, eps given by the caller) forward, optionally fused with the residual add
// that precedes it, its channel recomputation for the AdaHOP backward, and backward. Same structure and conventions
// as llmc/layernorm.cuh; the dweight reduction is the deterministic column sum (llmc/column_sums.cuh, COLSUM_RMSNORM).
#ifndef LLMC_RMSNORM_CUH
#define LLMC_RMSNORM_CUH

#include "cuda_common.cuh"
#include "column_sums.cuh"

// the RMSNorm output of one element from its row's rstd: shared by the kernels below so that a recomputed value
// equals the forward's bit for bit
__device__ __forceinline__ float rmsnorm_value(float x, float rs, float w) { return x * rs * w; }

// the rstd of R rows at offsets base[0..R-1], 1 / sqrt(mean(res^2) + eps), by one warp (every lane calls it and gets
// them): res = a + b stored at res_out as it is read (when b is given; res = a otherwise). A row's sum runs in one
// order whatever R (only the rows' loads interleave, to be in flight together), so rmsnorm_forward (R = 1) and its
// operand-emitting producer (dev/cuda/fused_operands.cuh, R > 1) agree bit for bit.
template <int R>
__device__ __forceinline__ void rmsnorm_rows_rstd(float rs[R], const floatX* a, const floatX* b, floatX* res_out,
                                                  const size_t base[R], int C, float eps) {
    int lane = threadIdx.x % 32;
    float ss[R];
#pragma unroll
    for (int r = 0; r < R; r++) { ss[r] = 0.0f; }
    for (int c = lane * 8; c < C; c += 32 * 8) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            x128 xv = residual_add_load8(a, b, res_out, base[r] + c);
            for (int i = 0; i < 8; i++) { float x = (float)xv[i]; ss[r] += x * x; }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) { rs[r] = rsqrtf(warp_sum(ss[r]) / C + eps); }
}

// One warp per row: res = a + b (or res = a when b is NULL; res_out written only when b is given),
// out = res * rstd * weight with rstd = 1 / sqrt(mean(res^2) + eps), rstd saved for the backward pass (unless NULL).
// Traffic: reads a (and b) once from DRAM (the second pass hits L1/L2), writes out (and res_out).
__global__ void rmsnorm_forward_kernel(floatX* out, float* rstd, floatX* res_out, const floatX* a, const floatX* b,
                                       const floatX* weight, int N, int C, float eps) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) { return; }
    size_t base = (size_t)row * C;
    float rs;
    rmsnorm_rows_rstd<1>(&rs, a, b, res_out, &base, C, eps);
    const floatX* xr = (b ? res_out : a) + base;   // each lane re-reads only what it wrote
    for (int c = lane * 8; c < C; c += 32 * 8) {
        x128 xv = load128(xr + c), wv = load128(weight + c), ov;
        for (int i = 0; i < 8; i++) { ov[i] = (floatX)rmsnorm_value((float)xv[i], rs, (float)wv[i]); }
        store128(out + base + c, ov);
    }
    if (lane == 0 && rstd) { rstd[row] = rs; }
}

// dinp[r] += rstd * (g - y * mean(g * y)) with g = dout * weight, y = inp * rstd (the normalized input).
// One warp per row. Traffic: reads dout, inp, dinp once (the second pass hits L1/L2), writes dinp.
__global__ void rmsnorm_backward_dinp_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const float* rstd,
                                             const floatX* weight, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) { return; }
    const floatX* dr = dout + (size_t)row * C;
    const floatX* xr = inp + (size_t)row * C;
    float rs = rstd[row], sum_gy = 0.0f;
    for (int c = lane * 8; c < C; c += 32 * 8) {
        x128 dv = load128(dr + c), xv = load128(xr + c), wv = load128(weight + c);
        for (int i = 0; i < 8; i++) { sum_gy += (float)dv[i] * (float)wv[i] * (float)xv[i] * rs; }
    }
    float mean_gy = warp_sum(sum_gy) / C;
    floatX* dir = dinp + (size_t)row * C;
    for (int c = lane * 8; c < C; c += 32 * 8) {
        x128 dv = load128(dr + c), xv = load128(xr + c), wv = load128(weight + c), iv = load128(dir + c);
        for (int i = 0; i < 8; i++) {
            float g = (float)dv[i] * (float)wv[i];
            iv[i] = (floatX)((float)iv[i] + rs * (g - (float)xv[i] * rs * mean_gy));
        }
        store128(dir + c, iv);
    }
}

// out[j, r] = RMSNorm(inp)[r, idx[j]] from the saved rstd: k channels of an RMSNorm output, transposed
// (channel-major), as the forward produced them. Traffic: k * N strided reads of inp, k * N writes.
__global__ void rmsnorm_channels_kernel(floatX* out, const floatX* inp, const float* rstd, const floatX* weight,
                                        const int* idx, int k, int N, int C) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)k * N) { return; }
    int j = (int)(t / N), r = (int)(t % N), c = idx[j];
    out[t] = (floatX)rmsnorm_value((float)inp[(size_t)r * C + c], rstd[r], (float)weight[c]);
}

static inline void rmsnorm_check_shape(int N, int C) {
    if (C <= 0 || C % 8 != 0) { die("rmsnorm: channels C=%d must be a positive multiple of 8", C); }
    if (N <= 0) { die("rmsnorm: rows N=%d must be positive", N); }
}

// out = RMSNorm(a + b); res_out = a + b. Pass b = NULL (and res_out = NULL) for a plain RMSNorm of a.
static inline void rmsnorm_forward(floatX* out, float* rstd, floatX* res_out, const floatX* a, const floatX* b,
                                   const floatX* weight, int N, int C, float eps, cudaStream_t stream) {
    rmsnorm_check_shape(N, C);
    const int warps_per_block = 8;
    rmsnorm_forward_kernel<<<ceil_div(N, warps_per_block), warps_per_block * 32, 0, stream>>>(out, rstd, res_out, a, b,
                                                                                              weight, N, C, eps);
    cudaCheckLaunch();
}

// out [k x N] = channels idx of RMSNorm(inp) with the forward's rstd (see rmsnorm_channels_kernel)
static inline void rmsnorm_forward_channels(floatX* out, const floatX* inp, const float* rstd, const floatX* weight,
                                            const int* idx, int k, int N, int C, cudaStream_t stream) {
    rmsnorm_channels_kernel<<<ceil_div((long)k * N, 256), 256, 0, stream>>>(out, inp, rstd, weight, idx, k, N, C);
    cudaCheckLaunch();
}

// dinp += dRMSNorm/dinp; dweight += sum over rows of dout * inp * rstd (deterministic, FP32 accumulator).
// scratch: column_sums_scratch_bytes(C).
static inline void rmsnorm_backward(floatX* dinp, float* dweight, float* scratch, const floatX* dout, const floatX* inp,
                                    const float* rstd, const floatX* weight, int N, int C, cudaStream_t stream) {
    rmsnorm_check_shape(N, C);
    const int warps_per_block = 8;
    rmsnorm_backward_dinp_kernel<<<ceil_div(N, warps_per_block), warps_per_block * 32, 0, stream>>>(dinp, dout, inp, rstd,
                                                                                                    weight, N, C);
    cudaCheckLaunch();
    ColsumRows rows = {inp, NULL, rstd, NULL, NULL, NULL};
    column_sums<COLSUM_RMSNORM>({{dweight, NULL, NULL}}, scratch, dout, rows, N, C, stream);
}

#endif
