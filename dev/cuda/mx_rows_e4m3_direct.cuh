// Candidate for the fast path's row quantizer: BF16 -> E4M3 + FP32 row scales in one pass, bit for bit what
// mx_quantize_rows_e4m3 (llmc/mxfp4.cuh) writes, in fewer instructions an element. The production kernel encodes each
// 32-block to E2M1 codes (kept in registers until the row's largest scale byte is known), then maps the codes to
// E4M3 through a per-block table. Here a thread keeps its block's Hadamard butterflies (unscaled) until the row's
// largest finite scale byte emax is known, then rounds each value straight at the E4M3 output's scale: the
// Hadamard's 1/sqrt(32), the block's 2^-e and the output's 2^(s - emax + 6) are one multiply by
// 1/sqrt(32) * 2^(133 - emax) (exact: a power-of-two change of the rounded product the reference forms), then
// e2m1_round_at at that unit and the hardware's two-at-a-time E4M3 conversion. A thread holds one block, so a row
// takes ceil(K / 1024) warps (K up to 32768, against 4096 for the production kernel) that agree on emax through
// shared memory. Compared with the production kernel by dev/cuda/test_mxfp4_gpu.cu (bit for bit against the C
// reference) and dev/cuda/bench_mxfp4.cu (time).
#ifndef DEV_CUDA_MX_ROWS_E4M3_DIRECT_CUH
#define DEV_CUDA_MX_ROWS_E4M3_DIRECT_CUH

#include "llmc/mxfp4.cuh"

// The longest row: 1024 threads of one block each
#define MX_E4M3_DIRECT_MAX_K (1024 * 32)

// the 32 values v times p as E4M3 bytes (RNE, saturating), two at a time; two 16-byte stores
MX_HD void mx_store_e4m3_values(uint8_t* out, const float v[32], float p) {
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
#define MX_DIRECT_MIN_EMAX 24

// In place, a finite block's butterflies h (its values, without the Hadamard) -> its E2M1 values (RNE) at the E4M3
// output's scale, signed: block scale byte s = 127 + e, row emax, norm 1/sqrt(32) (Hadamard) or 1. The output scale
// 2^shift, shift = s - emax + 6 <= 6, makes 6 * 2^6 = 384 the largest value, inside E4M3's range; below shift = -12
// (6 * 2^shift < 2^-10) E4M3 holds only zeros, so there every value becomes a zero with its sign.
MX_HD void mx_block_output_values(float h[32], int s, int e, int emax, float norm) {
    int shift = s - emax + 6;
    float unit = mx_bits_float((uint32_t)(127 + (shift > -12 ? shift : -12)) << 23);   // 2^max(shift, -12)
    if (emax >= MX_DIRECT_MIN_EMAX) {   // 2^(shift - e) = 2^(133 - emax) in [2^-121, 2^109]
        float g = shift < -12 ? 0.0f : norm * mx_bits_float((uint32_t)(127 + shift - e) << 23);
        for (int j = 0; j < 32; j++) { h[j] = mx_with_sign_of(e2m1_round_at(fabsf(h[j]) * g, unit), h[j]); }
    } else {   // 2^(133 - emax) > 2^109 in two exact factors, after the reference's product h * norm
        float g1 = shift < -12 ? 0.0f : mx_bits_float((uint32_t)(127 + shift - e - 64) << 23), g2 = 0x1p64f;
        for (int j = 0; j < 32; j++) { h[j] = mx_with_sign_of(e2m1_round_at(fabsf(h[j]) * norm * g1 * g2, unit), h[j]); }
    }
}

// x [R x K] BF16 -> E4M3 [R x K] + row_scale [R] (+ the count of blocks below the exact range), as
// mx_quantize_rows_e4m3. A CTA holds rows_per_cta rows of row_threads threads (whole warps); thread t of a row
// quantizes its block t (if t < K / 32). Traffic: reads 2 bytes, writes 1 byte per element.
template <bool STOCHASTIC>
__global__ void mx_rows_e4m3_direct_kernel(uint8_t* e4m3, float* row_scale, int* inexact_blocks, const floatX* x, int R,
                                           int K, int row_threads, MXQuantOptions opt) {
    __shared__ int warp_emax[32];
    int local_row = threadIdx.x / row_threads, t = threadIdx.x % row_threads;
    int row = blockIdx.x * (blockDim.x / row_threads) + local_row;
    int nblocks = K / 32;
    bool active = row < R && t < nblocks;   // the other threads take part in the reductions only
    size_t b = (size_t)row * nblocks + t;
    const float norm = opt.hadamard ? MX_H32_NORM : 1.0f;
    float h[32];   // the block's butterflies (its BF16 values without the Hadamard)
    int scale = 0, e = 0;
    if (active) {
        mx_load32(h, x + b * 32);
        if (opt.hadamard) { sylvester32(h); }
        int bad;
        float amax = mx_block_amax(h, &bad) * norm;   // the largest of the products h * norm (rounding is monotone)
        e = bad ? 128 : mx_block_exponent(amax, opt.rule);
        scale = mx_scale_byte(e);
    }
    // the row's largest finite scale byte: in the warp, then (rows of several warps) across its warps
    int emax = __reduce_max_sync(0xffffffffu, active ? mx_max_finite_scale(0, scale) : 0);
    if (row_threads > 32) {
        int warp = threadIdx.x / 32, first = local_row * (row_threads / 32);
        if (threadIdx.x % 32 == 0) { warp_emax[warp] = emax; }
        __syncthreads();
        for (int w = 0; w < row_threads / 32; w++) { emax = max(emax, warp_emax[first + w]); }
    }
    if (t == 0 && row < R) { row_scale[row] = mx_e4m3_row_scale(emax); }
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

// x [R x K] BF16 -> E4M3 operand in one pass, K up to MX_E4M3_DIRECT_MAX_K
static inline void mx_quantize_rows_e4m3_direct(E4M3Operand* out, const floatX* x, int R, int K, MXQuantOptions opt,
                                                cudaStream_t s) {
    mx_check_shape("mx_quantize_rows_e4m3_direct", R, K);
    if (out->rows != R || out->K != K) { die("mx_quantize_rows_e4m3_direct: operand is %d x %d, input %d x %d", out->rows, out->K, R, K); }
    if (K > MX_E4M3_DIRECT_MAX_K) { die("mx_quantize_rows_e4m3_direct: K=%d is above %d", K, MX_E4M3_DIRECT_MAX_K); }
    int row_threads = 32 * ceil_div(K / 32, 32);
    int rows_per_cta = row_threads >= 256 ? 1 : 256 / row_threads;
    int grid = ceil_div(R, rows_per_cta), threads = rows_per_cta * row_threads;
    if (opt.stochastic) {
        mx_rows_e4m3_direct_kernel<true><<<grid, threads, 0, s>>>(out->values, out->row_scale, out->inexact_blocks, x, R, K, row_threads, opt);
    } else {
        mx_rows_e4m3_direct_kernel<false><<<grid, threads, 0, s>>>(out->values, out->row_scale, out->inexact_blocks, x, R, K, row_threads, opt);
    }
    cudaCheckLaunch();
}

#endif
