// Deterministic column sums over the rows of a row-major [N x C] BF16 tensor (bias gradients, the norms' weight
// gradients, outlier statistics), in two launches with a fixed reduction order.
#ifndef LLMC_COLUMN_SUMS_CUH
#define LLMC_COLUMN_SUMS_CUH

#include "cuda_common.cuh"
#include "gelu.cuh"

// Partial sums per row-chunk, then a sum over chunks added into FP32 outputs out[o] (an output left NULL is not kept).
// Mode PLAIN: out[0][c] += sum_r x[r,c] (bias gradient). Mode LAYERNORM: with y = the normalized input
// (inp - mean[r]) * rstd[r], out[0][c] += sum_r x[r,c] y[r,c] (dweight) and out[1][c] += sum_r x[r,c] (dbias).
// Mode SQUARES (outlier statistics): out[0][c] += sum_r x[r,c]^2 and out[1][c] += sum_r x[r,c].
// Mode RMSNORM: as LAYERNORM with mean 0 (y = inp[r,c] * rstd[r]) and no bias: out[0][c] += sum_r x[r,c] y[r,c].
// Mode GELU_BACKWARD: the GELU backward in the same pass, g[r,c] = x[r,c] gelu'(inp[r,c]) rounded to BF16 and written
// to rows.out (x itself: in place), and out[0][c] += sum_r g[r,c] (the bias gradient of the linear whose output is inp).
// Mode LAYERNORM_BACKWARD: LAYERNORM's two sums of x = d(LayerNorm output), and the LayerNorm's input gradient added in
// the same pass, rows.out[r,c] += layernorm_dinp_term(...) (rounded to BF16), with out[2][c] += sum_r of the new
// rows.out[r,c] (the bias gradient of the linear whose output gradient it is).

enum ColumnSumMode {
    COLSUM_PLAIN = 1, COLSUM_LAYERNORM = 2, COLSUM_SQUARES = 3, COLSUM_RMSNORM = 4, COLSUM_GELU_BACKWARD = 5,
    COLSUM_LAYERNORM_BACKWARD = 6
};
static const int colsum_max_chunks = 256;
static const int colsum_max_outputs = 3;

// what a mode reads besides x, row by row (a mode leaves what it does not read NULL)
struct ColsumRows {
    const floatX* inp;          // [N x C]: the norm's or the GELU's input
    const float* mean;          // [N]: LayerNorm row means of inp
    const float* rstd;          // [N]: the norms' reciprocal row standard deviations of inp
    const floatX* weight;       // [C]: LAYERNORM_BACKWARD's LayerNorm weight
    const float2* grad_means;   // [N]: LAYERNORM_BACKWARD's row means of g and of g y (llmc/layernorm.cuh)
    floatX* out;                // [N x C]: GELU_BACKWARD's gradient (written), LAYERNORM_BACKWARD's dinp (added to)
};

// where the sums go: out[o][c] += sum o of column c; NULL: sum o is not kept
struct ColsumTargets { float* out[colsum_max_outputs]; };

template <int MODE>
struct ColsumCount {
    static constexpr int n = MODE == COLSUM_LAYERNORM_BACKWARD ? 3 : (MODE == COLSUM_LAYERNORM || MODE == COLSUM_SQUARES ? 2 : 1);
};

// the LayerNorm input gradient of one element, g = dout * weight, y = the normalized input, with its row's means of
// g and of g y: shared by every LayerNorm backward so that they agree bit for bit
__device__ __forceinline__ float layernorm_dinp_term(float g, float y, float rs, float2 grad_means) {
    return rs * (g - grad_means.x - y * grad_means.y);
}

// partial[chunk][o][c] = sums over this chunk's rows; each thread owns 8 consecutive columns.
// Traffic: reads x (and inp; LAYERNORM_BACKWARD: and rows.out) once; writes outputs * C * chunks floats
// (GELU_BACKWARD, LAYERNORM_BACKWARD: and rows.out, N C BF16).
template <int MODE>
__global__ void column_sums_partial_kernel(float* partial, const floatX* x, ColsumRows rows, int N, int C, int rows_per_chunk) {
    constexpr int NOUT = ColsumCount<MODE>::n;
    __shared__ float smem[NOUT][8][256 + 8];
    int col = (blockIdx.x * 32 + threadIdx.x) * 8;
    int r0 = blockIdx.y * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    float acc[NOUT][8] = {};
    if (col < C) {
        for (int r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
            size_t at = (size_t)r * C + col;
            x128 xv = load128(x + at);
            if (MODE == COLSUM_LAYERNORM || MODE == COLSUM_RMSNORM) {
                x128 iv = load128(rows.inp + at);
                float mu = MODE == COLSUM_LAYERNORM ? rows.mean[r] : 0.0f, rs = rows.rstd[r];
                for (int i = 0; i < 8; i++) {
                    float g = (float)xv[i];
                    acc[0][i] += g * ((float)iv[i] - mu) * rs;
                    if (MODE == COLSUM_LAYERNORM) { acc[NOUT - 1][i] += g; }
                }
            } else if (MODE == COLSUM_LAYERNORM_BACKWARD) {
                x128 iv = load128(rows.inp + at), wv = load128(rows.weight + col), dv = load128(rows.out + at);
                float mu = rows.mean[r], rs = rows.rstd[r];
                float2 gm = rows.grad_means[r];
                for (int i = 0; i < 8; i++) {
                    float d = (float)xv[i];
                    acc[0][i] += d * ((float)iv[i] - mu) * rs;
                    acc[1][i] += d;
                    dv[i] = (floatX)((float)dv[i] + layernorm_dinp_term(d * (float)wv[i], ((float)iv[i] - mu) * rs, rs, gm));
                    acc[2][i] += (float)dv[i];
                }
                store128(rows.out + at, dv);
            } else if (MODE == COLSUM_GELU_BACKWARD) {
                xv = gelu_backward8(load128(rows.inp + at), xv);
                store128(rows.out + at, xv);
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

// targets.out[o][c] += sum over chunks of partial[chunk][o][c], chunks in order. Traffic: chunks * outputs * C floats.
template <int MODE>
__global__ void column_sums_final_kernel(ColsumTargets targets, const float* partial, int C, int chunks) {
    constexpr int NOUT = ColsumCount<MODE>::n;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    for (int o = 0; o < NOUT; o++) {
        if (targets.out[o] == NULL) { continue; }
        float s = 0.0f;
        for (int ch = 0; ch < chunks; ch++) { s += partial[((size_t)ch * NOUT + o) * C + c]; }
        targets.out[o][c] += s;
    }
}

// bytes of scratch column_sums<MODE> needs for width C
template <int MODE>
static inline size_t column_sums_mode_scratch_bytes(int C) {
    return (size_t)colsum_max_chunks * ColsumCount<MODE>::n * C * sizeof(float);
}

// bytes of scratch every mode but LAYERNORM_BACKWARD (which keeps 3 sums, see layernorm_backward_scratch_bytes) needs
// for width C
static inline size_t column_sums_scratch_bytes(int C) { return column_sums_mode_scratch_bytes<COLSUM_LAYERNORM>(C); }

// the sums of MODE over the N rows of x [N x C] added into targets, in a fixed order: row chunks of a size set by N and
// C alone, so every mode at one shape sums the same rows in the same order
template <int MODE>
static inline void column_sums(ColsumTargets targets, float* scratch, const floatX* x, const ColsumRows& rows, int N, int C,
                               cudaStream_t stream) {
    if (C % 8 != 0) { die("column_sums: C=%d must be a multiple of 8", C); }
    int col_blocks = ceil_div(C, 256);
    int chunks = min(colsum_max_chunks, max(1, 132 * 4 / col_blocks));
    int rows_per_chunk = ceil_div(N, chunks);
    chunks = ceil_div(N, rows_per_chunk);
    dim3 grid(col_blocks, chunks), block(32, 8);
    column_sums_partial_kernel<MODE><<<grid, block, 0, stream>>>(scratch, x, rows, N, C, rows_per_chunk);
    cudaCheckLaunch();
    column_sums_final_kernel<MODE><<<ceil_div(C, 256), 256, 0, stream>>>(targets, scratch, C, chunks);
    cudaCheckLaunch();
}

// dbias[c] += sum over the N rows of dout[r, c]
static inline void bias_backward(float* dbias, float* scratch, const floatX* dout, int N, int C, cudaStream_t stream) {
    ColsumRows rows = {};
    column_sums<COLSUM_PLAIN>({{dbias, NULL, NULL}}, scratch, dout, rows, N, C, stream);
}

// d = d * gelu'(inp) in place and dbias[c] += sum over the N rows of the new d[r, c], in one pass: bit for bit
// gelu_backward followed by bias_backward (the same rounding, chunks and summation order) without re-reading d
static inline void gelu_backward_bias_grad(floatX* d, float* dbias, float* scratch, const floatX* inp, int N, int C,
                                           cudaStream_t stream) {
    ColsumRows rows = {inp, NULL, NULL, NULL, NULL, d};
    column_sums<COLSUM_GELU_BACKWARD>({{dbias, NULL, NULL}}, scratch, d, rows, N, C, stream);
}

#endif
