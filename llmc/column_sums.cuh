// Deterministic column sums over the rows of a row-major [N x C] BF16 tensor (bias gradients, the norms' weight
// gradients, outlier statistics), in two launches with a fixed reduction order.
#ifndef LLMC_COLUMN_SUMS_CUH
#define LLMC_COLUMN_SUMS_CUH

#include "cuda_common.cuh"
#include "gelu.cuh"

// Partial sums per row-chunk, then a sum over chunks added into FP32 outputs.
// Mode PLAIN: out0[c] += sum_r x[r,c] (bias gradient). Mode LAYERNORM: with y = the normalized input
// (inp - mean[r]) * rstd[r], out0[c] += sum_r x[r,c] y[r,c] (dweight) and out1[c] += sum_r x[r,c] (dbias).
// Mode SQUARES (outlier statistics): out0[c] += sum_r x[r,c]^2 and out1[c] += sum_r x[r,c].
// Mode RMSNORM: as LAYERNORM with mean 0 (y = inp[r,c] * rstd[r]) and no bias: out0[c] += sum_r x[r,c] y[r,c].
// Mode GELU_BACKWARD: the GELU backward in the same pass, g[r,c] = x[r,c] gelu'(inp[r,c]) rounded to BF16 and written
// to out (x itself: in place), and out0[c] += sum_r g[r,c] (the bias gradient of the linear whose output is inp).

enum ColumnSumMode { COLSUM_PLAIN = 1, COLSUM_LAYERNORM = 2, COLSUM_SQUARES = 3, COLSUM_RMSNORM = 4, COLSUM_GELU_BACKWARD = 5 };
static const int colsum_max_chunks = 256;

// partial[chunk][out][c] = sums over this chunk's rows; each thread owns 8 consecutive columns.
// Traffic: reads x (and inp) once; writes outputs * C * chunks floats (GELU_BACKWARD: and out, N C BF16).
template <int MODE>
struct ColsumOutputs {
    static constexpr int n = MODE == COLSUM_PLAIN || MODE == COLSUM_RMSNORM || MODE == COLSUM_GELU_BACKWARD ? 1 : 2;
};

template <int MODE>
__global__ void column_sums_partial_kernel(float* partial, const floatX* x, const floatX* inp, const float* mean,
                                           const float* rstd, int N, int C, int rows_per_chunk, floatX* out) {
    constexpr int NOUT = ColsumOutputs<MODE>::n;
    __shared__ float smem[NOUT][8][256 + 8];
    int col = (blockIdx.x * 32 + threadIdx.x) * 8;
    int r0 = blockIdx.y * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    float acc[NOUT][8] = {};
    if (col < C) {
        for (int r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
            x128 xv = load128(x + (size_t)r * C + col);
            if (MODE == COLSUM_LAYERNORM || MODE == COLSUM_RMSNORM) {
                x128 iv = load128(inp + (size_t)r * C + col);
                float mu = MODE == COLSUM_LAYERNORM ? mean[r] : 0.0f, rs = rstd[r];
                for (int i = 0; i < 8; i++) {
                    float g = (float)xv[i];
                    acc[0][i] += g * ((float)iv[i] - mu) * rs;
                    if (MODE == COLSUM_LAYERNORM) { acc[NOUT - 1][i] += g; }
                }
            } else if (MODE == COLSUM_GELU_BACKWARD) {
                xv = gelu_backward8(load128(inp + (size_t)r * C + col), xv);
                store128(out + (size_t)r * C + col, xv);
                for (int i = 0; i < 8; i++) { acc[0][i] += (float)xv[i]; }
            } else if (MODE == COLSUM_SQUARES) {
                for (int i = 0; i < 8; i++) { float g = (float)xv[i]; acc[0][i] += g * g; acc[NOUT - 1][i] += g; }
            } else {
                for (int i = 0; i < 8; i++) { acc[0][i] += (float)xv[i]; }
            }
        }
    }
    for (int o = 0; o < NOUT; o++) {
        for (int i = 0; i < 8; i++) { smem[o][threadIdx.y][threadIdx.x * 8 + i] = acc[o][i]; }
    }
    __syncthreads();
    // the first warp sums the 8 warps' partials in order, 8 columns per thread
    if (threadIdx.y == 0 && col < C) {
        for (int o = 0; o < NOUT; o++) {
            for (int i = 0; i < 8; i++) {
                float s = 0.0f;
                for (int w = 0; w < (int)blockDim.y; w++) { s += smem[o][w][threadIdx.x * 8 + i]; }
                partial[((size_t)blockIdx.y * NOUT + o) * C + col + i] = s;
            }
        }
    }
}

// out_o[c] += sum over chunks of partial[chunk][o][c], chunks in order. Traffic: chunks * outputs * C floats.
template <int MODE>
__global__ void column_sums_final_kernel(float* out0, float* out1, const float* partial, int C, int chunks) {
    constexpr int NOUT = ColsumOutputs<MODE>::n;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    for (int o = 0; o < NOUT; o++) {
        float s = 0.0f;
        for (int ch = 0; ch < chunks; ch++) { s += partial[((size_t)ch * NOUT + o) * C + c]; }
        float* out = (o == 0) ? out0 : out1;
        out[c] += s;
    }
}

// bytes of scratch the column sums need for width C
static inline size_t column_sums_scratch_bytes(int C) { return (size_t)colsum_max_chunks * 2 * C * sizeof(float); }

template <int MODE>
static inline void column_sums(float* out0, float* out1, float* scratch, const floatX* x, const floatX* inp,
                               const float* mean, const float* rstd, int N, int C, cudaStream_t stream, floatX* out = NULL) {
    if (C % 8 != 0) { die("column_sums: C=%d must be a multiple of 8", C); }
    int col_blocks = ceil_div(C, 256);
    int chunks = min(colsum_max_chunks, max(1, 132 * 4 / col_blocks));
    int rows_per_chunk = ceil_div(N, chunks);
    chunks = ceil_div(N, rows_per_chunk);
    dim3 grid(col_blocks, chunks), block(32, 8);
    column_sums_partial_kernel<MODE><<<grid, block, 0, stream>>>(scratch, x, inp, mean, rstd, N, C, rows_per_chunk, out);
    cudaCheckLaunch();
    column_sums_final_kernel<MODE><<<ceil_div(C, 256), 256, 0, stream>>>(out0, out1, scratch, C, chunks);
    cudaCheckLaunch();
}

// dbias[c] += sum over the N rows of dout[r, c]
static inline void bias_backward(float* dbias, float* scratch, const floatX* dout, int N, int C, cudaStream_t stream) {
    column_sums<COLSUM_PLAIN>(dbias, NULL, scratch, dout, NULL, NULL, NULL, N, C, stream);
}

// d = d * gelu'(inp) in place and dbias[c] += sum over the N rows of the new d[r, c], in one pass: bit for bit
// gelu_backward followed by bias_backward (the same rounding, chunks and summation order) without re-reading d
static inline void gelu_backward_bias_grad(floatX* d, float* dbias, float* scratch, const floatX* inp, int N, int C,
                                           cudaStream_t stream) {
    column_sums<COLSUM_GELU_BACKWARD>(dbias, NULL, scratch, d, inp, NULL, NULL, N, C, stream, d);
}

#endif
