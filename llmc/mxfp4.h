// MXFP4 (OCP Microscaling, E2M1 elements, E8M0 block scales), E4M3 and the 32-point Hadamard transform:
// the scalar and per-block definitions shared bit for bit by the CPU reference (C) and the CUDA kernels.
//
// Semantics (the project's definition; docs/adahop.md section 1):
// - A block is 32 consecutive elements along the GEMM's reduction dimension K. Element codes are E2M1:
//   bit 3 sign, bits 2..1 exponent, bit 0 mantissa; magnitudes of codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6.
//   The sign bit is the sign bit of the scaled input, so -0.1 (scaled) gives code 8 (-0).
// - The block scale is an E8M0 byte e + 127 for the shared exponent e in [-127, 127]; 0xFF is NaN.
//   MX_SCALE_OCP:     e = floor(log2(amax)) - 2 (block maxima in [6, 8) * 2^e clip to 6).
//   MX_SCALE_ROUNDUP: the smallest e with amax / 2^e <= 6 (never clips).
//   MX_SCALE_BUMP7:   OCP's e, plus 1 when amax / 2^e >= 7 (maxima in [7, 8) * 2^e scale to [3.5, 4); those in
//                     [6, 7) * 2^e still clip to 6, by less than 1/7).
//   floor(log2) comes exactly from the float bits (subnormal amax included); e is clamped below at -127
//   (the largest finite amax gives e = 126, so the upper bound 127 is never reached).
//   An all-zero block has e = -127 (byte 0x00) and codes 0 (8 for -0 inputs). A block holding any NaN or
//   Inf gets scale 0xFF and 32 codes 0; it decodes to 32 NaNs.
// - Element encoding of v = ldexpf(x, -e): round to nearest on the magnitude grid, ties to the even code
//   (0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4), |v| > 6 saturates to 6. Stochastic rounding:
//   with lo <= |v| <= hi the neighbouring grid magnitudes, round up iff u < (|v| - lo) / (hi - lo) for
//   u = mx_uniform(seed, index) in [0, 1), index = the element's index row * K + k in the OUTPUT [rows x K]
//   layout; |v| >= 6 gives 6. (|v| - lo) is exact (Sterbenz) and 1 / (hi - lo) is a power of two, so the
//   comparison is exact on both sides.
// - Packing: two codes per byte, element 2i in the low nibble, 2i + 1 in the high nibble.
// - hadamard32: H32 = Sylvester(32) / sqrt(32) as a fast Walsh-Hadamard transform in a fixed order (strides
//   1, 2, 4, 8, 16, butterflies a + b, a - b, then one multiply by 1/sqrt(32)); the GPU reproduces it.
// - E4M3 (OCP FP8: bias 7, max 448, no Inf, 0x7F / 0xFF NaN, subnormals k * 2^-9): round to nearest even,
//   saturating to +-448, NaN -> 0x7F, as CUDA's __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3).
// Only integer ops, float add/sub/mul/compare, ldexpf and the explicit fmaf of e2m1_encode_scaled (each correctly
// rounded on both sides) are used: no contractible multiply-add chains, no log2f/powf/exp2f/frexpf. Scale 2^-127
// is a float subnormal: the GPU build must not flush denormals (no -ftz=true / --use_fast_math).
#ifndef LLMC_MXFP4_H
#define LLMC_MXFP4_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#ifdef __CUDACC__
#define MX_HD static __host__ __device__ __forceinline__
#else
#define MX_HD static inline
#endif

enum { MX_SCALE_OCP = 0, MX_SCALE_ROUNDUP = 1, MX_SCALE_BUMP7 = 2, MX_NUM_SCALE_RULES = 3 };
static const char* const mx_scale_rule_names[MX_NUM_SCALE_RULES] = {"ocp", "roundup", "bump7"};

// the bits of a float
MX_HD uint32_t mx_float_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

// the float with these bits
MX_HD float mx_bits_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// 1 if f is NaN or +-Inf
MX_HD int mx_nonfinite(float f) { return (mx_float_bits(f) & 0x7F800000u) == 0x7F800000u; }

// index of the highest set bit of x > 0
MX_HD int mx_msb32(uint32_t x) {
    int p = 0;
    while (x >>= 1) { p++; }
    return p;
}

// floor(log2(a)) for finite a > 0, exact (subnormals included)
MX_HD int mx_floor_log2(float a) {
    uint32_t u = mx_float_bits(a) & 0x7FFFFFFFu;
    int ef = (int)(u >> 23);
    return ef != 0 ? ef - 127 : mx_msb32(u) - 149;
}

// the significand of finite a > 0 normalised to [2^23, 2^24)
MX_HD uint32_t mx_significand(float a) {
    uint32_t u = mx_float_bits(a) & 0x7FFFFFFFu;
    return (u >> 23) != 0 ? (u & 0x7FFFFFu) | 0x800000u : u << (23 - mx_msb32(u));
}

// shared block exponent for the block maximum magnitude amax under `rule`; 128 for a NaN/Inf amax
MX_HD int mx_block_exponent(float amax, int rule) {
    if (mx_nonfinite(amax)) { return 128; }
    if (amax == 0.0f) { return -127; }
    int e = mx_floor_log2(amax) - 2;                                        // amax / 2^e in [4, 8)
    if (rule == MX_SCALE_ROUNDUP && mx_significand(amax) > 0xC00000u) { e++; }   // (6, 8) -> (3, 4)
    if (rule == MX_SCALE_BUMP7 && mx_significand(amax) >= 0xE00000u) { e++; }    // [7, 8) -> [3.5, 4)
    return e < -127 ? -127 : e;
}

// E8M0 byte of shared exponent e in [-127, 127]; 0xFF (NaN) for e >= 128
MX_HD uint8_t mx_scale_byte(int e) { return e >= 128 ? (uint8_t)0xFF : (uint8_t)(e + 127); }

// value of an E8M0 byte: 2^(byte - 127) exactly, NaN for 0xFF
MX_HD float mx_scale_value(uint8_t byte) {
    return byte == 0xFF ? mx_bits_float(0x7FC00000u) : ldexpf(1.0f, (int)byte - 127);
}

// E2M1 code of v, round to nearest with ties to the even code, saturating at 6; NaN -> 0
MX_HD uint8_t e2m1_encode_rne(float v) {
    if (v != v) { return 0; }
    float a = fabsf(v);
    int c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
    return (uint8_t)(c | ((mx_float_bits(v) >> 31) << 3));
}

// The GPU quantizers' encoder: e2m1_encode_rne(ldexpf(v, -e)) for a block exponent e in [-127, 126] and every
// finite v with |v| < 8 * 2^e (a block's elements under both scale rules: amax / 2^e < 8), tested on all of them,
// in fewer instructions. |v| 2^-e is rounded to the E2M1 grid by one fused multiply-add, |v| * 2^-e + magic with
// magic = 1.5 * 2^(22 + band), whose ulp is the grid step of the scaled value's band (band 0: below 2, step 0.5;
// 1: [2, 4), step 1; 2: [4, 8), step 2): the product is exact (a power of two; where it would be a float
// subnormal it lies far below the first threshold 0.25 either way), so the FMA rounds once, to nearest with ties
// to even, and the sum's bits minus magic's count grid steps; band b starts at code 2b, and above 6 the code
// saturates at 7. The band comes from v's own exponent, at least 127 + e; the block's constants are made once
// (mx_scaled_encoder).
typedef struct {
    float inv;           // 2^-e
    uint32_t band_lo;    // 127 + e: v's biased exponent, at least this, is 127 + band + e
    uint32_t magic0;     // magic bits = (that << 23) + magic0
    uint32_t offset0;    // code = sum bits + that * (2 - 2^23) + offset0
} MXScaledEncoder;

MX_HD MXScaledEncoder mx_scaled_encoder(int e) {
    const uint32_t m = 0x4AC00000u - (127u << 23);   // magic bits of band 0, less the exponent 127
    MXScaledEncoder k;
    k.inv = mx_bits_float((uint32_t)(127 - e) << 23);
    k.band_lo = (uint32_t)(127 + e);
    k.magic0 = m - ((uint32_t)e << 23);
    k.offset0 = (uint32_t)e * (0u - (2u - (1u << 23))) - m - 254u;
    return k;
}

// the code's magnitude bits (0..7), without the sign
MX_HD uint32_t e2m1_encode_scaled_magnitude(const MXScaledEncoder* k, float v) {
    uint32_t u = mx_float_bits(v) & 0x7FFFFFFFu;
    uint32_t exponent = u >> 23, biased = exponent > k->band_lo ? exponent : k->band_lo;
    float sum = fmaf(mx_bits_float(u), k->inv, mx_bits_float((biased << 23) + k->magic0));
    uint32_t code = mx_float_bits(sum) + biased * (2u - (1u << 23)) + k->offset0;
    return code < 7u ? code : 7u;
}

MX_HD uint32_t e2m1_encode_scaled(const MXScaledEncoder* k, float v) {
    return e2m1_encode_scaled_magnitude(k, v) | ((mx_float_bits(v) >> 31) << 3);
}

// unit * (the E2M1 value nearest a / unit, ties to even, saturating at 6) for finite a >= 0 and unit = 2^q (a float
// normal, q <= 100): the value of e2m1_encode_scaled's code of a at block exponent q, without the code, for a consumer
// that wants values (the E4M3 re-expression). a is clamped to 6 * unit (every a / unit in (6, 8) takes code 7 there),
// then rounded by adding and subtracting magic = 1.5 * 2^(22 + band) * unit: the sum rounds to the grid step of the
// band (its ulp), its parity is the code's mantissa bit (magic is even in those steps), and the subtraction is exact.
MX_HD float e2m1_round_at(float a, float unit) {
    a = fminf(a, 6.0f * unit);
    uint32_t band = mx_float_bits(a) & 0x7F800000u, lo = mx_float_bits(unit);   // a's power of two, at least unit
    float magic = mx_bits_float((band > lo ? band : lo) + (22u << 23) + 0x00400000u);
    return (a + magic) - magic;
}

// value of an E2M1 code (low 4 bits of `code`)
MX_HD float e2m1_decode(uint8_t code) {
    uint32_t e = (code >> 1) & 3u, m = code & 1u, sign = (uint32_t)(code & 8u) << 28;
    uint32_t mag = e != 0 ? ((e + 126u) << 23) | (m << 22) : m * 0x3F000000u;   // 0x3F000000 = 0.5f
    return mx_bits_float(sign | mag);
}

// E2M1 code of v by stochastic rounding with uniform u in [0, 1): up iff u < (|v| - lo) / (hi - lo); NaN -> 0
MX_HD uint8_t e2m1_encode_sr(float v, float u) {
    if (v != v) { return 0; }
    float a = fabsf(v);
    int c = 7;
    if (a < 6.0f) {
        c = (a >= 0.5f) + (a >= 1.0f) + (a >= 1.5f) + (a >= 2.0f) + (a >= 3.0f) + (a >= 4.0f);
        float inv_step = c < 4 ? 2.0f : (c < 6 ? 1.0f : 0.5f);
        float frac = (a - e2m1_decode((uint8_t)c)) * inv_step;   // exact
        c += u < frac;
    }
    return (uint8_t)(c | ((mx_float_bits(v) >> 31) << 3));
}

// splitmix64 finaliser
MX_HD uint64_t mx_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// counter-based uniform in [0, 1) with 24 random bits: element `index` of the splitmix64 stream of `seed`
MX_HD float mx_uniform(uint64_t seed, uint64_t index) {
    uint64_t z = mx_mix64(seed ^ 0x9E3779B97F4A7C15ull) + (index + 1) * 0x9E3779B97F4A7C15ull;
    return (float)(uint32_t)(mx_mix64(z) >> 40) * (1.0f / 16777216.0f);
}

// 1 / sqrt(32), the orthonormal Hadamard's one multiply
#define MX_H32_NORM 0.17677669529663687f

// in place, Sylvester(32) x: the fast Walsh-Hadamard transform's butterflies in their fixed order
MX_HD void sylvester32(float x[32]) {
    for (int h = 1; h < 32; h <<= 1) {
        for (int i = 0; i < 32; i++) {
            if ((i & h) == 0) { float a = x[i], b = x[i | h]; x[i] = a + b; x[i | h] = a - b; }
        }
    }
}

// in place, H32 x: the butterflies, then the 1/sqrt(32) scaling
MX_HD void hadamard32(float x[32]) {
    sylvester32(x);
    for (int i = 0; i < 32; i++) { x[i] *= MX_H32_NORM; }
}

// x / 2^s rounded to nearest even, for 1 <= s <= 31
MX_HD uint32_t mx_rne_shift(uint32_t x, int s) {
    uint32_t q = x >> s, rem = x & ((1u << s) - 1u), half = 1u << (s - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

// E4M3 byte of v: round to nearest even, saturate to +-448 (Inf too), NaN -> 0x7F
MX_HD uint8_t e4m3_encode(float v) {
    uint32_t u = mx_float_bits(v), mag = u & 0x7FFFFFFFu;
    uint32_t sign = (u >> 24) & 0x80u;
    if (mag > 0x7F800000u) { return 0x7F; }
    if (mag >= 0x43E00000u) { return (uint8_t)(sign | 0x7Eu); }                        // |v| >= 448
    if (mag >= 0x3C800000u) { return (uint8_t)(sign | (mx_rne_shift(mag, 20) - (120u << 3))); }   // >= 2^-6
    int shift = 141 - (int)(mag >> 23);                      // subnormal k * 2^-9: k = significand / 2^shift
    if ((mag >> 23) == 0 || shift > 31) { return (uint8_t)sign; }   // below 2^-17: rounds to 0
    return (uint8_t)(sign | mx_rne_shift((mag & 0x7FFFFFu) | 0x800000u, shift));   // k = 8 is 2^-6's byte
}

// value of an E4M3 byte
MX_HD float e4m3_decode(uint8_t b) {
    if ((b & 0x7F) == 0x7F) { return mx_bits_float(0x7FC00000u); }
    uint32_t ef = (b >> 3) & 15u, m = b & 7u, sign = (uint32_t)(b & 0x80u) << 24;
    float mag = ef != 0 ? mx_bits_float(((ef + 120u) << 23) | (m << 20)) : ldexpf((float)m, -9);
    return mx_bits_float(sign | mx_float_bits(mag));
}

// quantizes one 32-block into 16 packed code bytes; returns the scale byte. index0 = output index of x[0]
// (used by stochastic rounding only)
MX_HD uint8_t mx_quantize_block(const float x[32], int rule, int stochastic, uint64_t seed, uint64_t index0,
                                uint8_t packed[16]) {
    float amax = 0.0f;
    int bad = 0;
    for (int i = 0; i < 32; i++) {
        float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
        bad |= mx_nonfinite(x[i]);
    }
    if (bad) {
        for (int i = 0; i < 16; i++) { packed[i] = 0; }
        return 0xFF;
    }
    int e = mx_block_exponent(amax, rule);
    for (int i = 0; i < 16; i++) {
        uint8_t c[2];
        for (int j = 0; j < 2; j++) {
            float v = ldexpf(x[2 * i + j], -e);
            c[j] = stochastic ? e2m1_encode_sr(v, mx_uniform(seed, index0 + 2 * i + j)) : e2m1_encode_rne(v);
        }
        packed[i] = (uint8_t)(c[0] | (c[1] << 4));
    }
    return mx_scale_byte(e);
}

// decodes one 32-block: code value * 2^e (exact), 32 NaNs for scale 0xFF
MX_HD void mx_dequantize_block(const uint8_t packed[16], uint8_t scale, float out[32]) {
    float s = mx_scale_value(scale);
    for (int i = 0; i < 32; i++) { out[i] = e2m1_decode((uint8_t)(packed[i / 2] >> (4 * (i % 2)))) * s; }
}

#endif
