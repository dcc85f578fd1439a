// MXFP4 on the GPU: fused (Hadamard +) quantization along rows or along columns (transposed output),
// dequantization to BF16, exact re-expression as E4M3 with one FP32 scale per row, and the two GEMM paths
// for MXFP4 operands ("exact": dequantize + BF16 cuBLASLt; "fast": E4M3 cuBLASLt with per-row/column
// scales). The scalar format (rounding, scale rule, Hadamard order) is llmc/mxfp4.h, shared with the CPU
// reference, so codes and scales match it bit for bit.
#ifndef LLMC_MXFP4_CUH
#define LLMC_MXFP4_CUH

#include <cuda_fp8.h>
#include "cuda_common.cuh"
#include "matmul.cuh"
#include "mxfp4.h"

// An MXFP4 operand on the device: rows x K, K contiguous, one scale byte per 32 elements along K.
typedef struct {
    int rows, K;
    uint8_t* codes;    // rows * K / 2 bytes, element 2i in the low nibble
    uint8_t* scales;   // rows * K / 32 E8M0 bytes
} MXOperand;

typedef struct {
    int hadamard;      // 1: multiply every 32-block by H32 (orthonormal) before quantizing
    int rule;          // MX_SCALE_OCP or MX_SCALE_ROUNDUP
    int stochastic;    // 1: stochastic rounding with mx_uniform(seed, output index)
    uint64_t seed;
} MXQuantOptions;

static inline MXOperand mx_operand_alloc(int rows, int K) {
    MXOperand op = {rows, K, NULL, NULL};
    op.codes = (uint8_t*)device_malloc((size_t)rows * K / 2, "MXFP4 codes");
    op.scales = (uint8_t*)device_malloc((size_t)rows * K / 32, "MXFP4 scales");
    return op;
}

static inline void mx_operand_free(MXOperand* op) {
    cudaCheck(cudaFree(op->codes));
    cudaCheck(cudaFree(op->scales));
    device_bytes_allocated -= (size_t)op->rows * op->K / 2 + (size_t)op->rows * op->K / 32;
}

// A 32-block is held by 4 consecutive lanes, 8 elements each: lane q of the group holds elements 8q..8q+7.

// In-place H32 of a group's block, with the butterflies of mxfp4.h's hadamard32 in the same order:
// strides 1, 2, 4 in registers, 8 and 16 across the group (lane strides 1 and 2).
__device__ __forceinline__ void mx_hadamard_group8(float v[8], int q) {
    for (int h = 1; h < 8; h <<= 1) {
        for (int j = 0; j < 8; j++) {
            if ((j & h) == 0) { float a = v[j], b = v[j | h]; v[j] = a + b; v[j | h] = a - b; }
        }
    }
    for (int h = 1; h <= 2; h <<= 1) {
        for (int j = 0; j < 8; j++) {
            float p = __shfl_xor_sync(0xffffffffu, v[j], h);
            v[j] = (q & h) ? p - v[j] : v[j] + p;
        }
    }
    for (int j = 0; j < 8; j++) { v[j] *= 0.17677669529663687f; }
}

// the block's largest magnitude, and *bad = 1 if any element is NaN or Inf (both reduced over the group)
__device__ __forceinline__ float mx_group_amax(const float v[8], int* bad) {
    float amax = 0.0f;
    int b = 0;
    for (int j = 0; j < 8; j++) { amax = fmaxf(amax, fabsf(v[j])); b |= !isfinite(v[j]); }
    for (int h = 1; h <= 2; h <<= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, h));
        b |= __shfl_xor_sync(0xffffffffu, b, h);
    }
    *bad = b;
    return amax;
}

// the 8 E2M1 codes of v / 2^e, packed (RNE, or SR with mx_uniform(seed, index0 + j))
__device__ __forceinline__ uint32_t mx_encode_group8(const float v[8], int e, MXQuantOptions opt, uint64_t index0) {
    uint32_t packed = 0;
    for (int j = 0; j < 8; j++) {
        float s = ldexpf(v[j], -e);
        uint32_t code = opt.stochastic ? e2m1_encode_sr(s, mx_uniform(opt.seed, index0 + j)) : e2m1_encode_rne(s);
        packed |= code << (4 * j);
    }
    return packed;
}

// quantizes a group's block (optionally Hadamard first); returns the packed codes, *scale the E8M0 byte
__device__ __forceinline__ uint32_t mx_quantize_group8(float v[8], int q, MXQuantOptions opt, uint64_t index0,
                                                       uint8_t* scale) {
    if (opt.hadamard) { mx_hadamard_group8(v, q); }
    int bad;
    float amax = mx_group_amax(v, &bad);
    int e = bad ? 128 : mx_block_exponent(amax, opt.rule);
    *scale = mx_scale_byte(e);
    return bad ? 0u : mx_encode_group8(v, e, opt, index0);
}

// 8 packed E2M1 codes of a block with scale byte s, as E4M3 bytes relative to the row's largest scale byte
// emax: code * 2^(s - emax + 6) (exact while s >= emax - 14; a NaN block gives E4M3 NaNs)
__device__ __forceinline__ uint64_t mx_codes_to_e4m3(uint32_t packed, int s, int emax) {
    uint64_t word = 0;
    for (int j = 0; j < 8; j++) {
        float v = s == 0xFF ? NAN : ldexpf(e2m1_decode((uint8_t)(packed >> (4 * j))), s - emax + 6);
        word |= (uint64_t)e4m3_encode(v) << (8 * j);
    }
    return word;
}

// (a) Quantize along rows: x [R x K] BF16, K contiguous -> out [R x K]. One thread per 8 elements, 4 threads
// per block. Traffic: reads 2 bytes, writes 0.53 bytes per element.
__global__ void mx_quantize_rows_kernel(uint8_t* codes, uint8_t* scales, const floatX* x, long n, MXQuantOptions opt) {
    long g = (long)blockIdx.x * blockDim.x + threadIdx.x;   // group of 8 elements
    long base = g * 8;
    bool active = base < n;                                  // n is a multiple of 32: whole blocks are active together
    float v[8];
    x128 in = active ? load128cs(x + base) : x128();
    for (int j = 0; j < 8; j++) { v[j] = active ? (float)in[j] : 0.0f; }
    uint8_t scale;
    uint32_t packed = mx_quantize_group8(v, threadIdx.x & 3, opt, (uint64_t)base, &scale);
    if (!active) { return; }
    reinterpret_cast<uint32_t*>(codes)[g] = packed;
    if ((threadIdx.x & 3) == 0) { scales[base / 32] = scale; }
}

// (b) Quantize along columns: x [R x C] BF16 row-major, blocks of 32 consecutive rows in one column, written
// transposed as out [C x R] (K = R contiguous). A 64 x 64 tile goes through shared memory; within a warp the
// 8 lanes of one column write 32 contiguous code bytes. Traffic: reads 2 bytes, writes 0.53 bytes per element.
__global__ void mx_quantize_cols_kernel(uint8_t* codes, uint8_t* scales, const floatX* x, int R, int C, MXQuantOptions opt) {
    __shared__ floatX tile[64][64 + 2];
    int r0 = blockIdx.y * 64, c0 = blockIdx.x * 64;
    for (int i = threadIdx.x; i < 64 * 8; i += blockDim.x) {   // 64 rows x 8 vectors of 8 columns
        int r = i / 8, cv = (i % 8) * 8;
        x128 in = (r0 + r < R && c0 + cv < C) ? load128cs(x + (size_t)(r0 + r) * C + c0 + cv) : x128();
        for (int j = 0; j < 8; j++) { tile[r][cv + j] = in[j]; }
    }
    __syncthreads();
    for (int task = threadIdx.x; task < 64 * 8; task += blockDim.x) {   // (column, 8 groups of 8 rows)
        int q = task & 3, half = (task >> 2) & 1, c = task >> 3;
        int rl = half * 32 + q * 8;
        float v[8];
        for (int j = 0; j < 8; j++) { v[j] = (float)tile[rl + j][c]; }
        int col = c0 + c, row = r0 + rl;
        uint8_t scale;
        uint32_t packed = mx_quantize_group8(v, q, opt, (uint64_t)col * R + row, &scale);
        if (col < C && row < R) {
            reinterpret_cast<uint32_t*>(codes + ((size_t)col * R + row) / 2)[0] = packed;
            if (q == 0) { scales[((size_t)col * R + row) / 32] = scale; }
        }
    }
}

// (c) Dequantize to BF16: one thread per 8 elements. Traffic: reads 0.53 bytes, writes 2 bytes per element.
__global__ void mx_dequantize_kernel(floatX* out, const uint8_t* codes, const uint8_t* scales, long n) {
    long g = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g * 8 >= n) { return; }
    uint32_t packed = reinterpret_cast<const uint32_t*>(codes)[g];
    float s = mx_scale_value(scales[g * 8 / 32]);
    x128 o;
    for (int j = 0; j < 8; j++) { o[j] = (floatX)(e2m1_decode((uint8_t)(packed >> (4 * j))) * s); }
    store128(out + g * 8, o);
}

// row_exp[r] = largest finite block exponent of row r (E8M0 byte), one warp per row; row_scale = 2^(emax - 6).
// Traffic: reads K/32 bytes per row.
__global__ void mx_row_max_exponent_kernel(int* row_exp, float* row_scale, const uint8_t* scales, int rows, int nblocks) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) { return; }
    int mx = 0;
    for (int b = lane; b < nblocks; b += 32) {
        int s = scales[(size_t)row * nblocks + b];
        if (s != 0xFF && s > mx) { mx = s; }
    }
    for (int o = 16; o > 0; o >>= 1) { mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o)); }
    if (lane == 0) { row_exp[row] = mx; row_scale[row] = ldexpf(1.0f, mx - 127 - 6); }
}

// (d) MXFP4 -> E4M3 with the row scale 2^(emax-6): element = code * 2^(e - emax + 6), exact while
// e >= emax - 14; counts the blocks below that. One thread per 8 elements. Traffic: 0.53 bytes in, 1 out.
__global__ void mx_to_e4m3_kernel(uint8_t* out, int* inexact_blocks, const uint8_t* codes, const uint8_t* scales,
                                  const int* row_exp, int K, long n) {
    long g = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g * 8 >= n) { return; }
    int row = (int)(g * 8 / K);
    int s = scales[g * 8 / 32];
    uint32_t packed = reinterpret_cast<const uint32_t*>(codes)[g];
    int shift = s - row_exp[row] + 6;
    reinterpret_cast<uint64_t*>(out)[g] = mx_codes_to_e4m3(packed, s, row_exp[row]);
    if ((g & 3) == 0 && s != 0xFF && shift < -8) { atomicAdd(inexact_blocks, 1); }
}

// Fast path in one pass: x [R x K] BF16 -> E4M3 [R x K] + FP32 row scales, identical to mx_quantize_rows
// followed by mx_to_e4m3 (and optionally also writing the MXFP4 codes and scales). One warp per row, 8 blocks
// per iteration: a first sweep finds the row's largest finite block magnitude (the row scale only depends on
// it, the scale rule being monotone), the second quantizes. Traffic: reads 2 bytes per element from DRAM (the
// second sweep hits the cache), writes 1 byte (+ 0.53 with codes).
__global__ void mx_quantize_rows_e4m3_kernel(uint8_t* e4m3, float* row_scale, int* inexact_blocks, uint8_t* codes,
                                             uint8_t* scales, const floatX* x, int R, int K, MXQuantOptions opt) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32, q = lane & 3;
    if (row >= R) { return; }   // whole warps leave together
    const floatX* xr = x + (size_t)row * K;
    float row_amax = 0.0f;
    for (int it = 0; it * 256 < K; it++) {   // the same trip count for every lane: shuffles need the whole warp
        int base = it * 256 + (lane >> 2) * 32 + q * 8;
        bool active = base < K;
        x128 in = active ? load128(xr + base) : x128();
        float v[8];
        for (int j = 0; j < 8; j++) { v[j] = active ? (float)in[j] : 0.0f; }
        if (opt.hadamard) { mx_hadamard_group8(v, q); }
        int bad;
        float amax = mx_group_amax(v, &bad);
        if (!bad) { row_amax = fmaxf(row_amax, amax); }
    }
    row_amax = warp_max(row_amax);
    int emax = mx_scale_byte(mx_block_exponent(row_amax, opt.rule));
    if (lane == 0) { row_scale[row] = ldexpf(1.0f, emax - 127 - 6); }
    int inexact = 0;
    for (int it = 0; it * 256 < K; it++) {   // the same trip count for every lane: shuffles need the whole warp
        int base = it * 256 + (lane >> 2) * 32 + q * 8;
        bool active = base < K;
        x128 in = active ? load128cs(xr + base) : x128();
        float v[8];
        for (int j = 0; j < 8; j++) { v[j] = active ? (float)in[j] : 0.0f; }
        uint8_t scale;
        uint64_t out_index = (uint64_t)row * K + base;
        uint32_t packed = mx_quantize_group8(v, q, opt, out_index, &scale);
        if (!active) { continue; }
        reinterpret_cast<uint64_t*>(e4m3)[out_index / 8] = mx_codes_to_e4m3(packed, scale, emax);
        if (codes) { reinterpret_cast<uint32_t*>(codes)[out_index / 8] = packed; }
        if (q == 0) {
            if (scales) { scales[out_index / 32] = scale; }
            inexact += scale != 0xFF && scale - emax + 6 < -8;
        }
    }
    inexact = __reduce_add_sync(0xffffffffu, inexact);
    if (lane == 0 && inexact) { atomicAdd(inexact_blocks, inexact); }
}

static inline void mx_check_shape(const char* what, int rows, int K) {
    if (rows <= 0 || K <= 0 || K % 32 != 0) {
        die("%s: MXFP4 needs the reduction dimension K to be a positive multiple of 32 (got rows=%d K=%d)", what, rows, K);
    }
}

// x [R x K] BF16 -> out [R x K] MXFP4 along K
static inline void mx_quantize_rows(MXOperand* out, const floatX* x, int R, int K, MXQuantOptions opt, cudaStream_t s) {
    mx_check_shape("mx_quantize_rows", R, K);
    if (out->rows != R || out->K != K) { die("mx_quantize_rows: operand is %d x %d, input %d x %d", out->rows, out->K, R, K); }
    long n = (long)R * K;
    mx_quantize_rows_kernel<<<ceil_div(n / 8, 256), 256, 0, s>>>(out->codes, out->scales, x, n, opt);
    cudaCheckLaunch();
}

// x [R x C] BF16 -> out [C x R] MXFP4 along R (the transposed operand)
static inline void mx_quantize_cols(MXOperand* out, const floatX* x, int R, int C, MXQuantOptions opt, cudaStream_t s) {
    mx_check_shape("mx_quantize_cols", C, R);
    if (C % 8 != 0) { die("mx_quantize_cols: C=%d must be a multiple of 8", C); }
    if (out->rows != C || out->K != R) { die("mx_quantize_cols: operand is %d x %d, want %d x %d", out->rows, out->K, C, R); }
    dim3 grid(ceil_div(C, 64), ceil_div(R, 64));
    mx_quantize_cols_kernel<<<grid, 256, 0, s>>>(out->codes, out->scales, x, R, C, opt);
    cudaCheckLaunch();
}

static inline void mx_dequantize(floatX* out, const MXOperand* q, cudaStream_t s) {
    long n = (long)q->rows * q->K;
    mx_dequantize_kernel<<<ceil_div(n / 8, 256), 256, 0, s>>>(out, q->codes, q->scales, n);
    cudaCheckLaunch();
}

// An MXFP4 operand re-expressed for FP8 tensor cores: E4M3 values [rows x K] and one FP32 scale per row.
typedef struct {
    int rows, K;
    uint8_t* values;
    float* row_scale;
    int* row_exp;          // scratch: largest block exponent byte per row
    int* inexact_blocks;   // device counter, accumulated over conversions
} E4M3Operand;

static inline E4M3Operand e4m3_operand_alloc(int rows, int K) {
    E4M3Operand op = {rows, K, NULL, NULL, NULL, NULL};
    op.values = (uint8_t*)device_malloc((size_t)rows * K, "E4M3 values");
    op.row_scale = (float*)device_malloc((size_t)rows * sizeof(float), "E4M3 row scales");
    op.row_exp = (int*)device_malloc((size_t)rows * sizeof(int), "E4M3 row exponents");
    op.inexact_blocks = (int*)device_malloc(sizeof(int), "E4M3 counter");
    cudaCheck(cudaMemset(op.inexact_blocks, 0, sizeof(int)));
    return op;
}

static inline void e4m3_operand_free(E4M3Operand* op) {
    void* p[] = {op->values, op->row_scale, op->row_exp, op->inexact_blocks};
    for (int i = 0; i < 4; i++) { cudaCheck(cudaFree(p[i])); }
    device_bytes_allocated -= (size_t)op->rows * op->K + 2 * (size_t)op->rows * 4 + sizeof(int);
}

static inline void mx_to_e4m3(E4M3Operand* out, const MXOperand* q, cudaStream_t s) {
    if (out->rows != q->rows || out->K != q->K) { die("mx_to_e4m3: shapes %d x %d and %d x %d differ", out->rows, out->K, q->rows, q->K); }
    mx_row_max_exponent_kernel<<<ceil_div(q->rows, 8), 256, 0, s>>>(out->row_exp, out->row_scale, q->scales, q->rows, q->K / 32);
    cudaCheckLaunch();
    long n = (long)q->rows * q->K;
    mx_to_e4m3_kernel<<<ceil_div(n / 8, 256), 256, 0, s>>>(out->values, out->inexact_blocks, q->codes, q->scales,
                                                          out->row_exp, q->K, n);
    cudaCheckLaunch();
}

// x [R x K] BF16 -> E4M3 operand (and, when codes_out is given, the same MXFP4 operand) in one pass
static inline void mx_quantize_rows_e4m3(E4M3Operand* out, MXOperand* codes_out, const floatX* x, int R, int K,
                                         MXQuantOptions opt, cudaStream_t s) {
    mx_check_shape("mx_quantize_rows_e4m3", R, K);
    if (out->rows != R || out->K != K || (codes_out && (codes_out->rows != R || codes_out->K != K))) {
        die("mx_quantize_rows_e4m3: operand shapes do not match the %d x %d input", R, K);
    }
    mx_quantize_rows_e4m3_kernel<<<ceil_div(R, 8), 256, 0, s>>>(out->values, out->row_scale, out->inexact_blocks,
        codes_out ? codes_out->codes : NULL, codes_out ? codes_out->scales : NULL, x, R, K, opt);
    cudaCheckLaunch();
}

// Fast path: out [M x N] (row-major, BF16 or FP32) = beta * out + (A diag(sa)) (B diag(sb))^T for E4M3 A [M x K],
// B [N x K], through cuBLASLt on FP8 tensor cores with OUTER_VEC_32F scales. cuBLAS is column-major, so it
// computes out^T = B A^T: its "A" is our B (transposed, K-major) and its "B" our A.
static inline void mx_gemm_fast(void* out, bool out_fp32, const E4M3Operand* a, const E4M3Operand* b, float beta, cudaStream_t stream) {
    if (a->K != b->K) { die("mx_gemm_fast: inner dimensions %d and %d differ", a->K, b->K); }
    GemmSpec g = {out, out_fp32 ? CUDA_R_32F : CUDA_R_16BF, b->values, a->values, CUDA_R_8F_E4M3, NULL, b->rows, a->rows,
                  a->K, true, false, beta, gemm_single, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, b->row_scale, a->row_scale};
    cublaslt_gemm(&g, stream);
}

// Exact path: out [M x N] = beta * out + deq(A) deq(B)^T through BF16 (dequantization is exact) and cuBLASLt
// with FP32 accumulation. a_bf16 / b_bf16 are scratch of M*K and N*K elements.
static inline void mx_gemm_exact(void* out, bool out_fp32, const MXOperand* a, const MXOperand* b, floatX* a_bf16,
                                 floatX* b_bf16, float beta, cudaStream_t stream) {
    if (a->K != b->K) { die("mx_gemm_exact: inner dimensions %d and %d differ", a->K, b->K); }
    mx_dequantize(a_bf16, a, stream);
    mx_dequantize(b_bf16, b, stream);
    matmul(out, out_fp32, b_bf16, a_bf16, NULL, b->rows, a->rows, a->K, true, false, beta, gemm_single, stream);
}

#endif
