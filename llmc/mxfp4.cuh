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

// 2^k as a float for k in [-126, 127], built from the exponent bits (exact, unlike powf/exp2f)
__device__ __forceinline__ float mx_pow2(int k) { return __int_as_float((k + 127) << 23); }

// the 8 E2M1 codes of v[0..8) / 2^e, packed (RNE through the block's encoder, or SR with mx_uniform(seed,
// index0 + j) of v * 2^-e, the correctly rounded product as ldexpf(v, -e) in the reference: e is in [-127, 126]).
// Each code enters at the top nibble (one funnel shift moves the earlier ones down), where the sign bit of the code
// is the sign bit of v itself: one OR. The rounding is a template argument, so each loop is branch-free.
template <bool STOCHASTIC>
__device__ __forceinline__ uint32_t mx_encode8(const float* v, const MXScaledEncoder* enc, uint64_t seed, uint64_t index0) {
    uint32_t packed = 0;
    for (int j = 0; j < 8; j++) {
        uint32_t code = STOCHASTIC ? e2m1_encode_sr(v[j] * enc->inv, mx_uniform(seed, index0 + j))
                                   : e2m1_encode_scaled_magnitude(enc, v[j]);
        packed = __funnelshift_r(packed, code, 4) | (__float_as_uint(v[j]) & 0x80000000u);
    }
    return packed;
}

// the 32 codes of a block, packed
template <bool STOCHASTIC>
__device__ __forceinline__ uint4 mx_encode32(const float v[32], int e, uint64_t seed, uint64_t index0) {
    MXScaledEncoder enc = mx_scaled_encoder(e);
    return make_uint4(mx_encode8<STOCHASTIC>(v, &enc, seed, index0), mx_encode8<STOCHASTIC>(v + 8, &enc, seed, index0 + 8),
                      mx_encode8<STOCHASTIC>(v + 16, &enc, seed, index0 + 16), mx_encode8<STOCHASTIC>(v + 24, &enc, seed, index0 + 24));
}

// largest magnitude of a 32-block; *bad = 1 if it holds a NaN or Inf (PTX max.NaN carries a NaN through, so the
// maximum itself says so: one instruction per element)
__device__ __forceinline__ float mx_block_amax(const float v[32], int* bad) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) { asm("max.NaN.f32 %0, %0, %1;" : "+f"(amax) : "f"(fabsf(v[j]))); }
    *bad = mx_nonfinite(amax);
    return amax;
}

// quantizes one 32-block held by one thread, after the reference's own hadamard32 when asked:
// returns the 16 code bytes, *scale the E8M0 byte
__device__ __forceinline__ uint4 mx_quantize_block32(float v[32], MXQuantOptions opt, uint64_t index0, uint8_t* scale) {
    if (opt.hadamard) { hadamard32(v); }
    int bad;
    float amax = mx_block_amax(v, &bad);
    int e = bad ? 128 : mx_block_exponent(amax, opt.rule);
    *scale = mx_scale_byte(e);
    if (bad) { return make_uint4(0, 0, 0, 0); }
    return opt.stochastic ? mx_encode32<true>(v, e, opt.seed, index0) : mx_encode32<false>(v, e, opt.seed, index0);
}

// quantizes the 32-block v (in place: the Hadamard, when asked) and stores it as block b of an MXFP4 operand; the
// stochastic rounding index of its first element is b * 32 (its index in the operand)
__device__ __forceinline__ void mx_quantize_store_block(uint8_t* codes, uint8_t* scales, size_t b, float v[32],
                                                        MXQuantOptions opt) {
    uint8_t scale;
    reinterpret_cast<uint4*>(codes)[b] = mx_quantize_block32(v, opt, (uint64_t)b * 32, &scale);
    scales[b] = scale;
}

// sum of the squares of a block's 32 values, in order (the column sums of squares of OE, taken before any Hadamard)
__device__ __forceinline__ float mx_sum_squares32(const float v[32]) {
    float sq = 0.0f;
    for (int j = 0; j < 32; j++) { sq += v[j] * v[j]; }
    return sq;
}

// the 8 BF16 values of a 16-byte word as floats (a BF16 is the high half of its float: one shift or mask)
__device__ __forceinline__ void mx_unpack8(float v[8], int4 in) {
    uint32_t w[4] = {(uint32_t)in.x, (uint32_t)in.y, (uint32_t)in.z, (uint32_t)in.w};
    for (int j = 0; j < 4; j++) {
        v[2 * j] = __uint_as_float(w[j] << 16);
        v[2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
    }
}

// the 32 BF16 values at p as floats (four 16-byte loads)
__device__ __forceinline__ void mx_load32(float v[32], const floatX* p) {
    for (int i = 0; i < 4; i++) { mx_unpack8(v + 8 * i, __ldcs(reinterpret_cast<const int4*>(p + 8 * i))); }
}

// E4M3 bytes of the 8 magnitudes of E2M1 codes 0..7 scaled by 2^(s - emax + 6), for a block with scale byte s in
// a row whose largest scale byte is emax (exact while s >= emax - 14; RNE below), as two words for __byte_perm
__device__ __forceinline__ uint2 mx_e4m3_table(int s, int emax) {
    int shift = s - emax + 6;                                 // <= 6
    float scale = shift >= -126 ? mx_pow2(shift) : 0.0f;      // below 2^-126 every value rounds to an E4M3 zero
    uint32_t w[2];
    for (int h = 0; h < 2; h++) {
        uint32_t word = 0;
        for (int c = 0; c < 4; c += 2) {
            float2 pair = make_float2(e2m1_decode((uint8_t)(4 * h + c)) * scale, e2m1_decode((uint8_t)(4 * h + c + 1)) * scale);
            word |= (uint32_t)__nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, __NV_E4M3) << (8 * c);
        }
        w[h] = word;
    }
    return make_uint2(w[0], w[1]);
}

// 8 packed E2M1 codes -> 8 E4M3 bytes through the block's table: magnitudes by byte permutation, signs moved
// from bit 3 of each code to bit 7 of each byte. A NaN block (scale 0xFF) gives E4M3 NaNs.
__device__ __forceinline__ uint64_t mx_codes_to_e4m3(uint32_t packed, uint2 table, int s) {
    if (s == 0xFF) { return 0x7F7F7F7F7F7F7F7Full; }
    uint64_t word = 0;
    for (int h = 0; h < 2; h++) {
        uint32_t nib = (packed >> (16 * h)) & 0xFFFFu;                       // 4 codes
        uint32_t mag = __byte_perm(table.x, table.y, nib & 0x7777u);         // selector nibbles 0..7
        uint32_t t = (nib | (nib << 8)) & 0x00FF00FFu;                       // spread the nibbles to bytes
        t = (t | (t << 4)) & 0x0F0F0F0Fu;
        word |= (uint64_t)(mag | ((t & 0x08080808u) << 4)) << (32 * h);
    }
    return word;
}

// (a) Quantize along rows: x [R x K] BF16, K contiguous -> out [R x K]; one thread per 32-block.
// Traffic: reads 2 bytes, writes 0.53 bytes per element.
__global__ void mx_quantize_rows_kernel(uint8_t* codes, uint8_t* scales, const floatX* x, long nblocks, MXQuantOptions opt) {
    long b = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks) { return; }
    float v[32];
    mx_load32(v, x + b * 32);
    mx_quantize_store_block(codes, scales, (size_t)b, v, opt);
}

// (b) Quantize along columns: x [R x C] BF16 row-major, blocks of 32 consecutive rows in one column, written
// transposed as out [C x R] (K = R contiguous). A 64 x 128 tile goes through shared memory; a thread quantizes
// one column block, and the two blocks of a column sit in adjacent lanes, so their 32 code bytes are written
// together. With col_sq_part, also the sum of squares of each column of the tile (of x, before the Hadamard) into
// col_sq_part[tile row][column]. Traffic: reads 2 bytes, writes 0.53 bytes per element (+ 4 bytes per 64).
// Shared memory: rows of 136 elements, the lower 32 rows shifted by 32 more, so that the 16-byte stores of a
// quarter warp cover the 32 banks once and a warp's column reads (16 columns, both halves) hit 16 distinct banks.
__host__ __device__ constexpr int mx_cols_tile_at(int r, int c) { return r * 136 + (r >> 5) * 32 + c; }
__global__ void mx_quantize_cols_kernel(uint8_t* codes, uint8_t* scales, float* col_sq_part, const floatX* x, int R, int C,
                                        MXQuantOptions opt) {
    __shared__ __align__(16) floatX tile[mx_cols_tile_at(64, 0)];
    int r0 = blockIdx.y * 64, c0 = blockIdx.x * 128;
    int r1 = threadIdx.x / 16, cv = threadIdx.x % 16 * 8;   // this thread's vectors: rows r1 + 16 u, columns cv..cv+7
    int4 in[4];   // 64 rows x 16 vectors of 8 columns, loads first; raw 16-byte words (one load and one store each)
    for (int u = 0; u < 4; u++) {
        int r = r1 + 16 * u;
        in[u] = r0 + r < R && c0 + cv < C ? __ldcs(reinterpret_cast<const int4*>(x + (size_t)(r0 + r) * C + c0 + cv))
                                          : make_int4(0, 0, 0, 0);
    }
    for (int u = 0; u < 4; u++) { *reinterpret_cast<int4*>(tile + mx_cols_tile_at(r1 + 16 * u, cv)) = in[u]; }
    __syncthreads();
    int half = threadIdx.x & 1, c = threadIdx.x >> 1;
    int col = c0 + c, row = r0 + half * 32;
    float v[32];
    for (int j = 0; j < 32; j++) { v[j] = (float)tile[mx_cols_tile_at(half * 32 + j, c)]; }   // zeros outside x
    if (col_sq_part) {   // the whole warp takes part in the shuffle: the two halves of a column in fixed order
        float sq = mx_sum_squares32(v);
        sq += __shfl_xor_sync(0xffffffffu, sq, 1);
        if (half == 0 && col < C) { col_sq_part[(size_t)blockIdx.y * C + col] = sq; }
    }
    if (col >= C || row >= R) { return; }
    mx_quantize_store_block(codes, scales, ((size_t)col * R + row) / 32, v, opt);   // R and row are multiples of 32
}

// col_sq[c] = sum over the tiles t < tiles of part[t][c], in order. Traffic: reads 4 * tiles, writes 4 bytes per column.
__global__ void sum_tile_partials_kernel(float* col_sq, const float* part, int tiles, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    float sum = 0.0f;
    for (int t = 0; t < tiles; t++) { sum += part[(size_t)t * C + c]; }
    col_sq[c] = sum;
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

// the running largest finite scale byte of a row: emax, or s when s is larger and not NaN (0xFF)
__device__ __forceinline__ int mx_max_finite_scale(int emax, int s) { return s != 0xFF && s > emax ? s : emax; }

// the FP32 row scale of a row whose largest finite scale byte is emax: 2^(emax - 127 - 6)
__device__ __forceinline__ float mx_e4m3_row_scale(int emax) { return ldexpf(1.0f, emax - 127 - 6); }

// adds the warp's count of inexact E4M3 blocks to *counter, one atomic per warp; every lane of the warp calls it
__device__ __forceinline__ void mx_count_inexact(unsigned long long* counter, int inexact) {
    inexact = __reduce_add_sync(0xffffffffu, inexact);
    if ((threadIdx.x & 31) == 0 && inexact) { atomicAdd(counter, (unsigned long long)inexact); }
}

// row_exp[r] = largest finite block exponent of row r (E8M0 byte), one warp per row; row_scale = 2^(emax - 6).
// Traffic: reads K/32 bytes per row.
__global__ void mx_row_max_exponent_kernel(int* row_exp, float* row_scale, const uint8_t* scales, int rows, int nblocks) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) { return; }
    int mx = 0;
    for (int b = lane; b < nblocks; b += 32) { mx = mx_max_finite_scale(mx, scales[(size_t)row * nblocks + b]); }
    for (int o = 16; o > 0; o >>= 1) { mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o)); }
    if (lane == 0) { row_exp[row] = mx; row_scale[row] = mx_e4m3_row_scale(mx); }
}

// writes 32-block b as E4M3 against the largest scale byte emax of its row or group; returns 1 if the block is
// finite and below the exact range (scale byte < emax - 14). Traffic: 32 bytes written.
__device__ __forceinline__ int mx_store_e4m3_block(uint8_t* e4m3, size_t b, uint4 packed, uint8_t scale, int emax) {
    uint2 table = mx_e4m3_table(scale, emax);
    uint64_t e[4] = {mx_codes_to_e4m3(packed.x, table, scale), mx_codes_to_e4m3(packed.y, table, scale),
                     mx_codes_to_e4m3(packed.z, table, scale), mx_codes_to_e4m3(packed.w, table, scale)};
    uint4* out = reinterpret_cast<uint4*>(e4m3 + b * 32);   // two 16-byte stores
    out[0] = make_uint4((uint32_t)e[0], (uint32_t)(e[0] >> 32), (uint32_t)e[1], (uint32_t)(e[1] >> 32));
    out[1] = make_uint4((uint32_t)e[2], (uint32_t)(e[2] >> 32), (uint32_t)e[3], (uint32_t)(e[3] >> 32));
    return scale != 0xFF && scale - emax + 6 < -8;
}

// (d) MXFP4 -> E4M3 with the row scale 2^(emax-6): element = code * 2^(e - emax + 6), exact while
// e >= emax - 14; counts the blocks below that. One thread per 32-block (its E4M3 table built once).
// Traffic: 0.53 bytes in, 1 out per element.
__global__ void mx_to_e4m3_kernel(uint8_t* out, unsigned long long* inexact_blocks, const uint8_t* codes, const uint8_t* scales,
                                  const int* row_exp, uint32_t blocks_per_row, uint32_t nblocks) {
    uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;   // fewer than 2^32 blocks
    int inexact = 0;
    if (b < nblocks) {
        inexact = mx_store_e4m3_block(out, b, reinterpret_cast<const uint4*>(codes)[b], scales[b], row_exp[b / blocks_per_row]);
    }
    mx_count_inexact(inexact_blocks, inexact);
}

// the 32 values v times p as E4M3 bytes (RNE, saturating), two at a time; two 16-byte stores
__device__ __forceinline__ void mx_store_e4m3_values(uint8_t* out, const float v[32], float p) {
    uint32_t w[8];
    for (int i = 0; i < 8; i++) {
        uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * i] * p, v[4 * i + 1] * p), __NV_SATFINITE, __NV_E4M3);
        uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * i + 2] * p, v[4 * i + 3] * p), __NV_SATFINITE, __NV_E4M3);
        w[i] = lo | (hi << 16);
    }
    uint4* o = reinterpret_cast<uint4*>(out);
    o[0] = make_uint4(w[0], w[1], w[2], w[3]);
    o[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

// v with the sign bit of s
MX_HD float mx_with_sign_of(float v, float s) { return mx_bits_float(mx_float_bits(v) | (mx_float_bits(s) & 0x80000000u)); }

// The rows of the scale byte emax (the row's largest finite one) whose blocks can be rounded at the output's scale
// from the unscaled butterflies: 1/sqrt(32) * 2^(133 - emax) is a float normal, and every value that reaches the
// output (at least 2^-14 there) is a product the reference forms as a float normal, not a subnormal. Other rows
// (every value below 2^-104) take the reference's own multiplies.
#define MX_E4M3_DIRECT_MIN_EMAX 24

// In place, a finite block's butterflies h (its values, without the Hadamard's 1/sqrt(32)) -> its E2M1 values (RNE)
// at the E4M3 output's scale, signed: block scale byte s = 127 + e, row emax, norm 1/sqrt(32) (Hadamard) or 1. The
// output scale 2^shift, shift = s - emax + 6 <= 6, makes 6 * 2^6 = 384 the largest value, inside E4M3's range;
// below shift = -12 (6 * 2^shift < 2^-10) E4M3 holds only zeros, so there every value becomes a zero with its sign.
// The reference's h * norm * 2^-e, rounded to E2M1 and multiplied by 2^shift, is the same number as h * g rounded
// at the unit 2^shift, g = norm * 2^(shift - e) = norm * 2^(133 - emax): the scaling is by powers of two, exact.
MX_HD void mx_block_output_values(float h[32], int s, int e, int emax, float norm) {
    int shift = s - emax + 6;
    float unit = mx_bits_float((uint32_t)(127 + (shift > -12 ? shift : -12)) << 23);   // 2^max(shift, -12)
    if (emax >= MX_E4M3_DIRECT_MIN_EMAX) {   // 2^(shift - e) = 2^(133 - emax) in [2^-121, 2^109]
        float g = shift < -12 ? 0.0f : norm * mx_bits_float((uint32_t)(127 + shift - e) << 23);
        for (int j = 0; j < 32; j++) { h[j] = mx_with_sign_of(e2m1_round_at(fabsf(h[j]) * g, unit), h[j]); }
    } else {   // 2^(133 - emax) > 2^109 in two exact factors, after the reference's product h * norm
        float g1 = shift < -12 ? 0.0f : mx_bits_float((uint32_t)(127 + shift - e - 64) << 23), g2 = 0x1p64f;
        for (int j = 0; j < 32; j++) { h[j] = mx_with_sign_of(e2m1_round_at(fabsf(h[j]) * norm * g1 * g2, unit), h[j]); }
    }
}

// The fast path's row quantizer in one pass: x [R x K] BF16 -> E4M3 [R x K] + FP32 row scales (+ the count of blocks
// below the exact range), bit for bit mx_quantize_rows followed by mx_to_e4m3. A thread quantizes one 32-block and
// keeps its Hadamard butterflies (unscaled) until the row's largest finite scale byte emax is known; then it rounds
// the values straight at the E4M3 output's scale (mx_block_output_values) and converts them in hardware. Rows are
// packed into a CTA one after the other (rows_per_cta of them, K / 32 threads each; a warp may hold parts of
// several rows); each warp reduces emax for each row it holds part of, and the warps meet in shared memory.
// Traffic: reads 2 bytes, writes 1 byte per element.
template <bool STOCHASTIC>
__global__ void mx_quantize_rows_e4m3_kernel(uint8_t* e4m3, float* row_scale, unsigned long long* inexact_blocks, const floatX* x, int R,
                                             int K, int rows_per_cta, MXQuantOptions opt) {
    __shared__ int row_emax[256];   // rows_per_cta <= 256
    int nblocks = K / 32;
    int local_row = threadIdx.x / nblocks, t = threadIdx.x % nblocks;
    int row = blockIdx.x * rows_per_cta + local_row;
    bool active = local_row < rows_per_cta && row < R;   // the other threads take part in the reductions only
    size_t b = (size_t)row * nblocks + t;
    if (threadIdx.x < rows_per_cta) { row_emax[threadIdx.x] = 0; }
    const float norm = opt.hadamard ? MX_H32_NORM : 1.0f;
    float h[32];   // the block's butterflies (its BF16 values without the Hadamard's 1/sqrt(32))
    int scale = 0, e = 0;
    if (active) {
        mx_load32(h, x + b * 32);
        if (opt.hadamard) { sylvester32(h); }
        int bad;
        float amax = mx_block_amax(h, &bad) * norm;   // the largest of the products h * norm (rounding is monotone)
        e = bad ? 128 : mx_block_exponent(amax, opt.rule);
        scale = mx_scale_byte(e);
    }
    __syncthreads();
    // the row's largest finite scale byte: per row within each warp, then across the row's warps
    int mine = active ? mx_max_finite_scale(0, scale) : 0;
    int warp_first = threadIdx.x & ~31;
    int r_first = warp_first / nblocks, r_last = min((warp_first + 31) / nblocks, rows_per_cta - 1);   // warp-uniform
    for (int r = r_first; r <= r_last; r++) {
        int m = __reduce_max_sync(0xffffffffu, local_row == r ? mine : 0);
        if ((threadIdx.x & 31) == 0 && m > 0) { atomicMax(&row_emax[r], m); }
    }
    __syncthreads();
    int emax = active ? row_emax[local_row] : 0;
    if (active && t == 0) { row_scale[row] = mx_e4m3_row_scale(emax); }
    int inexact = 0;
    if (active) {
        uint8_t* out = e4m3 + b * 32;
        int shift = scale - emax + 6;   // the block's values times 2^shift are the output: at most 6 * 2^6 = 384
        if (scale == 0xFF) {
            uint4 nan = make_uint4(0x7F7F7F7Fu, 0x7F7F7F7Fu, 0x7F7F7F7Fu, 0x7F7F7F7Fu);
            reinterpret_cast<uint4*>(out)[0] = nan;
            reinterpret_cast<uint4*>(out)[1] = nan;
        } else if (STOCHASTIC) {   // the reference's codes, then their values
            MXScaledEncoder enc = mx_scaled_encoder(e);
            for (int j = 0; j < 32; j++) { h[j] = e2m1_decode(e2m1_encode_sr(h[j] * norm * enc.inv, mx_uniform(opt.seed, b * 32 + j))); }
            mx_store_e4m3_values(out, h, shift >= -126 ? mx_pow2(shift) : 0.0f);   // below 2^-126 all round to 0
        } else {
            mx_block_output_values(h, scale, e, emax, norm);
            mx_store_e4m3_values(out, h, 1.0f);
        }
        inexact = scale != 0xFF && shift < -8;   // finite, below the exact range (scale byte < emax - 14)
    }
    mx_count_inexact(inexact_blocks, inexact);
}
// The one-pass quantizer's K limit: a row's blocks in one CTA of at most 1024 threads
#define MX_E4M3_ONE_PASS_MAX_K (1024 * 32)

static inline void mx_check_shape(const char* what, int rows, int K) {
    if (rows <= 0 || K <= 0 || K % 32 != 0) {
        die("%s: MXFP4 needs the reduction dimension K to be a positive multiple of 32 (got rows=%d K=%d)", what, rows, K);
    }
}

// x [R x K] BF16 -> out [R x K] MXFP4 along K
static inline void mx_quantize_rows(MXOperand* out, const floatX* x, int R, int K, MXQuantOptions opt, cudaStream_t s) {
    mx_check_shape("mx_quantize_rows", R, K);
    if (out->rows != R || out->K != K) { die("mx_quantize_rows: operand is %d x %d, input %d x %d", out->rows, out->K, R, K); }
    long nblocks = (long)R * K / 32;
    mx_quantize_rows_kernel<<<ceil_div(nblocks, 256), 256, 0, s>>>(out->codes, out->scales, x, nblocks, opt);
    cudaCheckLaunch();
}

// floats of the scratch mx_quantize_cols needs for the column sums of squares of an R x C input
static inline size_t mx_col_sq_scratch_floats(int R, int C) { return (size_t)ceil_div(R, 64) * C; }

// col_sq [C] from the per-64-row partials in scratch of an R x C input (sum_tile_partials_kernel)
static inline void mx_col_sq_from_partials(float* col_sq, const float* scratch, int R, int C, cudaStream_t s) {
    sum_tile_partials_kernel<<<ceil_div(C, 256), 256, 0, s>>>(col_sq, scratch, ceil_div(R, 64), C);
    cudaCheckLaunch();
}

// x [R x C] BF16 -> out [C x R] MXFP4 along R (the transposed operand); with col_sq, also col_sq[c] = sum over r of
// x[r][c]^2 (scratch: mx_col_sq_scratch_floats(R, C) floats)
static inline void mx_quantize_cols(MXOperand* out, const floatX* x, int R, int C, MXQuantOptions opt, float* col_sq,
                                    float* scratch, cudaStream_t s) {
    mx_check_shape("mx_quantize_cols", C, R);
    if (C % 8 != 0) { die("mx_quantize_cols: C=%d must be a multiple of 8", C); }
    if (out->rows != C || out->K != R) { die("mx_quantize_cols: operand is %d x %d, want %d x %d", out->rows, out->K, C, R); }
    dim3 grid(ceil_div(C, 128), ceil_div(R, 64));
    mx_quantize_cols_kernel<<<grid, 256, 0, s>>>(out->codes, out->scales, col_sq ? scratch : NULL, x, R, C, opt);
    cudaCheckLaunch();
    if (col_sq) { mx_col_sq_from_partials(col_sq, scratch, R, C, s); }
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
    unsigned long long* inexact_blocks;   // device counter, accumulated over conversions
} E4M3Operand;

static inline E4M3Operand e4m3_operand_alloc(int rows, int K) {
    E4M3Operand op = {rows, K, NULL, NULL, NULL, NULL};
    op.values = (uint8_t*)device_malloc((size_t)rows * K, "E4M3 values");
    op.row_scale = (float*)device_malloc((size_t)rows * sizeof(float), "E4M3 row scales");
    op.row_exp = (int*)device_malloc((size_t)rows * sizeof(int), "E4M3 row exponents");
    op.inexact_blocks = (unsigned long long*)device_malloc(sizeof(unsigned long long), "E4M3 counter");
    cudaCheck(cudaMemset(op.inexact_blocks, 0, sizeof(unsigned long long)));
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
    long nblocks = (long)q->rows * q->K / 32;
    mx_to_e4m3_kernel<<<ceil_div(nblocks, 256), 256, 0, s>>>(out->values, out->inexact_blocks, q->codes, q->scales,
                                                            out->row_exp, (uint32_t)(q->K / 32), (uint32_t)nblocks);
    cudaCheckLaunch();
}

// x [R x K] BF16 -> E4M3 operand in one pass (mx_quantize_rows_e4m3_kernel); K at most MX_E4M3_ONE_PASS_MAX_K
static inline void mx_quantize_rows_e4m3(E4M3Operand* out, const floatX* x, int R, int K, MXQuantOptions opt, cudaStream_t s) {
    mx_check_shape("mx_quantize_rows_e4m3", R, K);
    if (out->rows != R || out->K != K) { die("mx_quantize_rows_e4m3: operand is %d x %d, input %d x %d", out->rows, out->K, R, K); }
    if (K > MX_E4M3_ONE_PASS_MAX_K) { die("mx_quantize_rows_e4m3: K=%d is above %d (quantize, then mx_to_e4m3)", K, MX_E4M3_ONE_PASS_MAX_K); }
    int nblocks = K / 32;
    int rows_per_cta = nblocks >= 256 ? 1 : 256 / nblocks;
    int threads = 32 * ceil_div(rows_per_cta * nblocks, 32), grid = ceil_div(R, rows_per_cta);
    auto kernel = opt.stochastic ? mx_quantize_rows_e4m3_kernel<true> : mx_quantize_rows_e4m3_kernel<false>;
    kernel<<<grid, threads, 0, s>>>(out->values, out->row_scale, out->inexact_blocks, x, R, K, rows_per_cta, opt);
    cudaCheckLaunch();
}

// zeroes rows idx[0..k) of a byte matrix with row_bytes bytes per row (one block per row). Traffic: k * row_bytes
// bytes written.
__global__ void zero_rows_kernel(uint8_t* data, const int* idx, int row_bytes) {
    uint8_t* row = data + (size_t)idx[blockIdx.x] * row_bytes;
    for (int j = threadIdx.x; j < row_bytes; j += blockDim.x) { row[j] = 0; }
}

// zeroes rows idx[0..k) of an MXFP4 operand (codes 0, scale byte 0)
static inline void mx_zero_rows(MXOperand* q, const int* idx, int k, cudaStream_t s) {
    zero_rows_kernel<<<k, 256, 0, s>>>(q->codes, idx, q->K / 2);
    zero_rows_kernel<<<k, 256, 0, s>>>(q->scales, idx, q->K / 32);
    cudaCheckLaunch();
}

// zeroes rows idx[0..k) of an E4M3 operand (their row scales are left as they are: the rows are zero)
static inline void e4m3_zero_rows(E4M3Operand* e, const int* idx, int k, cudaStream_t s) {
    zero_rows_kernel<<<k, 256, 0, s>>>(e->values, idx, e->K);
    cudaCheckLaunch();
}

// Fast path: out [M x N] (row-major, BF16 or FP32) = beta * out + (A diag(sa)) (B diag(sb))^T (+ bias, BF16 [N], may be
// NULL) for E4M3 A [M x K], B [N x K], through cuBLASLt on FP8 tensor cores with OUTER_VEC_32F scales. cuBLAS is column-major, so it
// computes out^T = B A^T: its "A" is our B (transposed, K-major) and its "B" our A.
static inline void mx_gemm_fast(void* out, bool out_fp32, const E4M3Operand* a, const E4M3Operand* b, const floatX* bias,
                                float beta, cudaStream_t stream) {
    if (a->K != b->K) { die("mx_gemm_fast: inner dimensions %d and %d differ", a->K, b->K); }
    GemmSpec g = {.d = out, .d_type = out_fp32 ? CUDA_R_32F : CUDA_R_16BF, .a = b->values, .b = a->values,
                  .ab_type = CUDA_R_8F_E4M3, .bias = bias, .m = b->rows, .n = a->rows, .k = a->K, .trans_a = true,
                  .trans_b = false, .beta = beta, .batch = gemm_single, .scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                  .a_scale = b->row_scale, .b_scale = a->row_scale, .epilogue = GEMM_EPILOGUE_NONE};
    cublaslt_gemm(&g, stream);
}

// out [M x N] = beta * out + diag(sa) part diag(sb) in FP32: the per-row scales of A (sa [M]) and B (sb [N]) applied
// after a unit-scale GEMM (powers of two, after the FP32 sum, as cuBLASLt applies them). One thread per element.
// Traffic: reads 4 (+4 when beta != 0), writes 4 bytes per element.
__global__ void outer_scale_add_kernel(float* out, const float* part, const float* sa, const float* sb, int N, int n, float beta) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    float v = part[i] * sa[i / N] * sb[i % N];
    out[i] = beta == 0.0f ? v : beta * out[i] + v;
}

// Fast path for a small FP32 output with a long K (the dW GEMM, K = tokens): out [M x N] = beta * out + (A diag(sa))
// (B diag(sb))^T as mx_gemm_fast computes it, but the FP8 GEMM runs with unit scales into part (FP32 [M x N]
// scratch) and the row scales follow in outer_scale_add_kernel: cuBLASLt runs this shape much faster with one
// scale per tensor than with per-row scales (dev/cuda/bench_fp8_scaling.cu measures both).
static inline void mx_gemm_fast_scales_after(float* out, float beta, const E4M3Operand* a, const E4M3Operand* b, float* part,
                                             cudaStream_t stream) {
    if (a->K != b->K) { die("mx_gemm_fast_scales_after: inner dimensions %d and %d differ", a->K, b->K); }
    GemmSpec g = {.d = part, .d_type = CUDA_R_32F, .a = b->values, .b = a->values, .ab_type = CUDA_R_8F_E4M3, .bias = NULL,
                  .m = b->rows, .n = a->rows, .k = a->K, .trans_a = true, .trans_b = false, .beta = 0.0f, .batch = gemm_single,
                  .scale_mode = -1, .epilogue = GEMM_EPILOGUE_NONE};
    cublaslt_gemm(&g, stream);
    long n = (long)a->rows * b->rows;
    if (n > INT_MAX) { die("mx_gemm_fast_scales_after: a %d x %d output is too large", a->rows, b->rows); }
    outer_scale_add_kernel<<<ceil_div(n, 256), 256, 0, stream>>>(out, part, a->row_scale, b->row_scale, b->rows, (int)n, beta);
    cudaCheckLaunch();
}

// Exact path: out [M x N] = beta * out + deq(A) deq(B)^T (+ bias, BF16 [N], may be NULL) through BF16 (dequantization
// is exact) and cuBLASLt with FP32 accumulation. a_bf16 / b_bf16 are scratch of M*K and N*K elements.
static inline void mx_gemm_exact(void* out, bool out_fp32, const MXOperand* a, const MXOperand* b, floatX* a_bf16,
                                 floatX* b_bf16, const floatX* bias, float beta, cudaStream_t stream) {
    if (a->K != b->K) { die("mx_gemm_exact: inner dimensions %d and %d differ", a->K, b->K); }
    mx_dequantize(a_bf16, a, stream);
    mx_dequantize(b_bf16, b, stream);
    matmul(out, out_fp32, b_bf16, a_bf16, bias, b->rows, a->rows, a->K, true, false, beta, gemm_single, stream);
}

#endif
