// CPU tests of llmc/mxfp4.h, the scalar and per-block MXFP4 / E4M3 / Hadamard definitions, mostly against
// independent brute-force references: E2M1 rounding (nearest, ties, saturation, signs, stochastic; the quantizers'
// encoder e2m1_encode_scaled on its domain), the E8M0 scale rules, special blocks (NaN, Inf, zero, subnormal),
// the round-trip error bound, the Hadamard transform and E4M3 conversion.
#include <float.h>
#include "llmc/utils.h"
#include "llmc/rand.h"
#include "llmc/mxfp4.h"
#include "dev/test/test_common.h"

static const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// E2M1 code of v by brute force: nearest grid magnitude, equal distances -> the even code
static int e2m1_brute(float v) {
    double a = fabs((double)v);
    int best = 0;
    for (int c = 1; c < 8; c++) {
        double d = fabs(a - grid[c]), db = fabs(a - grid[best]);
        if (d < db || (d == db && c % 2 == 0)) { best = c; }
    }
    return best | (signbit(v) ? 8 : 0);
}

static void test_e2m1_rne(void) {
    Rng r;
    rng_seed(&r, 1);
    int bad = 0;
    for (int i = 0; i < 1000000; i++) {
        float v = (rng_uniform(&r) * 16.0f - 8.0f) * (i % 3 == 0 ? rng_uniform(&r) : 1.0f);
        if (e2m1_encode_rne(v) != e2m1_brute(v)) { bad++; }
    }
    for (int c = 0; c < 7; c++) {   // grid points, midpoints and their float neighbours, both signs
        float pts[5] = {grid[c], 0.5f * (grid[c] + grid[c + 1]), 0.0f, 0.0f, grid[c + 1]};
        pts[2] = nextafterf(pts[1], 0.0f);
        pts[3] = nextafterf(pts[1], 10.0f);
        for (int j = 0; j < 5; j++) { bad += e2m1_encode_rne(pts[j]) != e2m1_brute(pts[j]); bad += e2m1_encode_rne(-pts[j]) != e2m1_brute(-pts[j]); }
    }
    CHECK(bad == 0, "E2M1 round-to-nearest differs from brute force on %d values", bad);
    float ties[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    int want[7] = {0, 2, 2, 4, 4, 6, 6};   // 0, 1.0, 1.0, 2.0, 2, 4, 4
    for (int i = 0; i < 7; i++) {
        CHECK(e2m1_encode_rne(ties[i]) == want[i], "tie %g -> code %d, want %d", ties[i], e2m1_encode_rne(ties[i]), want[i]);
        CHECK(e2m1_encode_rne(-ties[i]) == (want[i] | 8), "tie %g -> code %d", -ties[i], e2m1_encode_rne(-ties[i]));
    }
    float sat[5] = {6.0f, 6.5f, 100.0f, FLT_MAX, INFINITY};
    for (int i = 0; i < 5; i++) {
        CHECK(e2m1_encode_rne(sat[i]) == 7 && e2m1_encode_rne(-sat[i]) == 15, "%g saturates to +-6", sat[i]);
    }
    CHECK(e2m1_encode_rne(0.0f) == 0 && e2m1_encode_rne(-0.0f) == 8 && e2m1_encode_rne(-0.1f) == 8, "signs of zero: -0 and -0.1 give code 8");
    CHECK(e2m1_encode_rne(-FLT_TRUE_MIN) == 8 && e2m1_encode_rne(FLT_TRUE_MIN) == 0, "subnormal inputs round to signed zero");
    int dec = 1;
    for (int c = 0; c < 16; c++) {
        float d = e2m1_decode((uint8_t)c);
        dec &= fabsf(d) == grid[c & 7] && (signbit(d) != 0) == (c >= 8);
    }
    CHECK(dec, "decode gives the grid with the sign bit (code 8 is -0)");
    CHECK(e2m1_decode(0xF7) == 6.0f, "decode uses only the low 4 bits");
}

// the GPU quantizers' encoder (one fused multiply-add) and its value form e2m1_round_at (at units 2^q from 2^-12 to
// 2^6, as the E4M3 re-expression uses it) against the reference e2m1_encode_rne(ldexpf(v, -e)) and that code's value,
// on their domain (finite v, |v| < 8 * 2^e): every such float at e = 0; at other block exponents (the extremes
// included) every subnormal, the E2M1 thresholds and grid points scaled by 2^e with 4 ulps around each, and a strided
// scan of all floats (the GPU test runs all e and v)
static int encoder_domain(int e, float v) { return !mx_nonfinite(v) && fabsf(v) < ldexpf(8.0f, e); }

static const float round_units[] = {1.0f, 0x1p-12f, 0x1p-9f, 0.5f, 8.0f, 64.0f};   // 2^q

static long long encoder_mismatch_k(const MXScaledEncoder* k, int e, float v, int units) {
    if (!encoder_domain(e, v)) { return 0; }
    float y = e == 0 ? v : ldexpf(v, -e);
    uint8_t want = e2m1_encode_rne(y);
    long long bad = e2m1_encode_scaled(k, v) != want;
    for (int i = 0; i < units; i++) {   // |y| 2^q is exact where it is not far below the first threshold
        float unit = round_units[i];
        bad |= mx_float_bits(e2m1_round_at(fabsf(y) * unit, unit)) != mx_float_bits(fabsf(e2m1_decode(want)) * unit);
    }
    return bad;
}

static long long encoder_mismatch(int e, float v) {
    MXScaledEncoder k = mx_scaled_encoder(e);
    return encoder_mismatch_k(&k, e, v, (int)(sizeof(round_units) / sizeof(round_units[0])));
}

static void test_e2m1_scaled_encoder(void) {
    long long mismatches = 0;
    MXScaledEncoder k0 = mx_scaled_encoder(0);
    #pragma omp parallel for reduction(+ : mismatches)
    for (long long i = 0; i < (1ll << 32); i++) {
        float v = mx_bits_float((uint32_t)i);
        mismatches += encoder_mismatch_k(&k0, 0, v, 2);   // units 2^0 and 2^-12
    }
    CHECK(mismatches == 0, "e2m1_encode_scaled or e2m1_round_at (e = 0) differs from e2m1_encode_rne on %lld floats "
          "below 8", mismatches);
    const int exps[] = {-127, -126, -125, -100, -64, -3, -1, 1, 2, 64, 100, 124, 125, 126};
    // thresholds and grid points; of 8 * 2^e only the floats below it are in the domain
    const float points[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f, 7.5f, 8.0f};
    long long checked = 0;
    mismatches = 0;
    for (size_t ei = 0; ei < sizeof(exps) / sizeof(exps[0]); ei++) {
        int e = exps[ei];
        #pragma omp parallel for reduction(+ : mismatches, checked)
        for (uint32_t u = 0; u < (1u << 23); u++) {   // subnormal v, both signs
            mismatches += encoder_mismatch(e, mx_bits_float(u)) + encoder_mismatch(e, mx_bits_float(u | 0x80000000u));
            checked += 2;
        }
        for (size_t p = 0; p < sizeof(points) / sizeof(points[0]); p++) {
            float t = ldexpf(points[p], e);
            if (t == 0.0f || mx_nonfinite(t)) { continue; }
            uint32_t tb = mx_float_bits(t);
            for (int d = -4; d <= 4; d++) {
                float w = mx_bits_float(tb + (uint32_t)d), neg = mx_bits_float((tb + (uint32_t)d) | 0x80000000u);
                mismatches += encoder_mismatch(e, w) + encoder_mismatch(e, neg);
                checked += encoder_domain(e, w) + encoder_domain(e, neg);
            }
        }
        #pragma omp parallel for reduction(+ : mismatches, checked)
        for (long long i = ei; i < (1ll << 32); i += 4093) {
            mismatches += encoder_mismatch(e, mx_bits_float((uint32_t)i));
            checked += encoder_domain(e, mx_bits_float((uint32_t)i));
        }
    }
    CHECK(mismatches == 0, "e2m1_encode_scaled or e2m1_round_at differs from e2m1_encode_rne(ldexpf(v, -e)) on %lld "
          "of %lld (e, v) pairs", mismatches, checked);
}

static void test_e2m1_sr(void) {
    float vals[9] = {0.3f, 0.01f, 1.2f, 1.9f, 2.7f, 4.9f, 5.5f, -3.3f, -0.7f};
    int n = 200000;
    for (int t = 0; t < 9; t++) {
        float v = vals[t], a = fabsf(v);
        int lo = 0;
        while (lo < 6 && grid[lo + 1] <= a) { lo++; }
        double step = grid[lo + 1] - grid[lo], p = (a - grid[lo]) / step, sum = 0.0;
        int only_neighbours = 1;
        for (int i = 0; i < n; i++) {
            int c = e2m1_encode_sr(v, mx_uniform(99 + t, (uint64_t)i));
            only_neighbours &= (c & 8) == (v < 0 ? 8 : 0) && ((c & 7) == lo || (c & 7) == lo + 1);
            sum += e2m1_decode((uint8_t)c);
        }
        double mean = sum / n, tol = 5.0 * step * sqrt(p * (1 - p) / n) + 1e-6;   // 5 standard deviations
        CHECK(only_neighbours, "SR of %g gives a code outside its two neighbours", v);
        CHECK(fabs(mean - v) <= tol, "SR of %g is biased: mean %.6f (tolerance %.6f)", v, mean, tol);
    }
    int exact = 1;
    for (int c = 0; c < 16; c++) {
        for (int i = 0; i < 100; i++) { exact &= e2m1_encode_sr(e2m1_decode((uint8_t)c), mx_uniform(5, i)) == c; }
    }
    CHECK(exact, "SR keeps grid values");
    CHECK(e2m1_encode_sr(6.5f, 0.0f) == 7 && e2m1_encode_sr(-1e30f, 0.999f) == 15 && e2m1_encode_sr(INFINITY, 0.5f) == 7, "SR saturates at 6");
    CHECK(e2m1_encode_sr(0.75f, 0.4999999f) == 2 && e2m1_encode_sr(0.75f, 0.5f) == 1, "SR threshold: up iff u < frac");
    CHECK(e2m1_encode_sr(5.0f, 0.49f) == 7 && e2m1_encode_sr(5.0f, 0.5f) == 6, "SR threshold in the step-2 interval");
    CHECK(e2m1_encode_sr(-0.0f, 0.0f) == 8 && e2m1_encode_sr(-0.1f, 0.9f) == 8, "SR keeps the sign of zero results");
    double s = 0.0;
    int in_range = 1;
    for (int i = 0; i < 100000; i++) {
        float u = mx_uniform(7, i);
        in_range &= u >= 0.0f && u < 1.0f && u * 16777216.0f == floorf(u * 16777216.0f);
        s += u;
    }
    CHECK(in_range && fabs(s / 100000 - 0.5) < 0.005, "mx_uniform: 24-bit values in [0, 1), mean %.4f", s / 100000);
    CHECK(mx_uniform(7, 3) != mx_uniform(8, 3) && mx_uniform(7, 3) == mx_uniform(7, 3), "mx_uniform depends on (seed, index) only");
}

// floor(log2(a)) in double arithmetic (independent of the bit manipulation)
static int floor_log2_ref(double a) {
    int e = 0;
    while (a >= 2.0) { a /= 2.0; e++; }
    while (a < 1.0) { a *= 2.0; e--; }
    return e;
}

// the smallest e with a / 2^e <= 6, clamped at -127
static int roundup_ref(double a) {
    int e = floor_log2_ref(a) - 3;
    while (a / ldexp(1.0, e) > 6.0) { e++; }
    return e < -127 ? -127 : e;
}

// the bump-at-7 exponent from doubles: OCP's, plus 1 when amax / 2^e >= 7
static int bump7_ref(double a) {
    int e = floor_log2_ref(a) - 2;
    if (a / ldexp(1.0, e) >= 7.0) { e++; }
    return e < -127 ? -127 : e;
}

static void test_scales(void) {
    float amax[9] = {6.0f, 7.9f, 8.0f, 0.75f, 1e-40f, FLT_MAX, 0.0f, 6.99f, 7.0f};
    int ocp[9] = {0, 0, 1, -3, -127, 125, -127, 0, 0}, up[9] = {0, 1, 1, -3, -127, 126, -127, 1, 1},
        b7[9] = {0, 1, 1, -3, -127, 126, -127, 0, 1};
    for (int i = 0; i < 9; i++) {
        CHECK(mx_block_exponent(amax[i], MX_SCALE_OCP) == ocp[i], "OCP exponent of %g: %d, want %d", amax[i], mx_block_exponent(amax[i], MX_SCALE_OCP), ocp[i]);
        CHECK(mx_block_exponent(amax[i], MX_SCALE_ROUNDUP) == up[i], "round-up exponent of %g: %d, want %d", amax[i], mx_block_exponent(amax[i], MX_SCALE_ROUNDUP), up[i]);
        CHECK(mx_block_exponent(amax[i], MX_SCALE_BUMP7) == b7[i], "bump-7 exponent of %g: %d, want %d", amax[i], mx_block_exponent(amax[i], MX_SCALE_BUMP7), b7[i]);
    }
    CHECK(mx_block_exponent(INFINITY, 0) == 128 && mx_block_exponent(NAN, 1) == 128, "non-finite amax -> 128");
    CHECK(mx_floor_log2(FLT_TRUE_MIN) == -149 && mx_floor_log2(3 * FLT_TRUE_MIN) == -148 && mx_floor_log2(nextafterf(FLT_MIN, 0)) == -127,
          "floor_log2 of subnormals");
    Rng r;
    rng_seed(&r, 2);
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        float a = ldexpf(1.0f + rng_uniform(&r), (int)rng_below(&r, 270) - 148);
        if (i % 4 == 0) { a = ldexpf(i % 8 ? 1.5f : 1.5f + FLT_EPSILON, (int)rng_below(&r, 250) - 125); }   // round-up boundary
        if (i % 4 == 1) { a = ldexpf(i % 8 == 1 ? 1.75f : 1.75f - FLT_EPSILON, (int)rng_below(&r, 250) - 125); }   // bump-7
        if (a == 0.0f || isinf(a)) { continue; }
        int f = floor_log2_ref(a);
        bad += mx_floor_log2(a) != f;
        bad += mx_block_exponent(a, MX_SCALE_OCP) != (f - 2 < -127 ? -127 : f - 2);
        bad += mx_block_exponent(a, MX_SCALE_ROUNDUP) != roundup_ref(a);
        bad += mx_block_exponent(a, MX_SCALE_BUMP7) != bump7_ref(a);
    }
    CHECK(bad == 0, "scale exponents differ from the double reference on %d values", bad);
    CHECK(mx_scale_byte(0) == 127 && mx_scale_byte(-127) == 0 && mx_scale_byte(127) == 254 && mx_scale_byte(128) == 0xFF, "E8M0 bytes");
    CHECK(mx_scale_value(127) == 1.0f && mx_scale_value(0) == (float)ldexp(1.0, -127) && mx_scale_value(254) == (float)ldexp(1.0, 127)
          && isnan(mx_scale_value(0xFF)), "E8M0 values (2^-127 is a float subnormal, kept exactly)");
}

static void test_special_blocks(void) {
    float x[32], out[32];
    uint8_t p[16];
    for (int bad = 0; bad < 3; bad++) {
        for (int i = 0; i < 32; i++) { x[i] = (float)i - 3.0f; }
        x[17] = bad == 0 ? NAN : (bad == 1 ? INFINITY : -INFINITY);
        int ok = 1;
        for (int sr = 0; sr < 2; sr++) {
            ok &= mx_quantize_block(x, sr, sr, 1, 0, p) == 0xFF;
            for (int i = 0; i < 16; i++) { ok &= p[i] == 0; }
            mx_dequantize_block(p, 0xFF, out);
            for (int i = 0; i < 32; i++) { ok &= isnan(out[i]) != 0; }
        }
        CHECK(ok, "block with %s: scale 0xFF, codes 0, decodes to NaN", bad == 0 ? "NaN" : "Inf");
    }
    for (int i = 0; i < 32; i++) { x[i] = i % 2 ? -0.0f : 0.0f; }
    uint8_t s = mx_quantize_block(x, MX_SCALE_OCP, 0, 0, 0, p);
    int ok = s == 0;
    for (int i = 0; i < 16; i++) { ok &= p[i] == 0x80; }
    mx_dequantize_block(p, s, out);
    for (int i = 0; i < 32; i++) { ok &= out[i] == 0.0f && (signbit(out[i]) != 0) == (i % 2); }
    CHECK(ok, "all-zero block: scale 0x00, codes 0 / 8 by sign, decodes to +-0");
    for (int i = 0; i < 32; i++) { x[i] = 0.0f; }
    x[0] = 1.0f; x[1] = -6.0f; x[2] = 0.5f; x[3] = -0.0f;
    s = mx_quantize_block(x, MX_SCALE_OCP, 0, 0, 0, p);
    CHECK(s == 127 && p[0] == 0xF2 && p[1] == 0x81, "packing: element 2i low nibble (got scale %d, bytes %02x %02x)", s, p[0], p[1]);
    for (int i = 0; i < 32; i++) { x[i] = (float)(i + 1) * FLT_TRUE_MIN; }
    s = mx_quantize_block(x, MX_SCALE_OCP, 0, 0, 0, p);
    ok = s == 0;
    for (int i = 0; i < 16; i++) { ok &= p[i] == 0; }
    CHECK(ok, "block of tiny subnormals: scale 0x00 (clamped), codes 0");
    for (int i = 0; i < 32; i++) { x[i] = ldexpf(grid[i % 8] * (i % 3 ? 1.0f : -1.0f), -127); }   // subnormal grid values
    s = mx_quantize_block(x, MX_SCALE_ROUNDUP, 0, 0, 0, p);
    mx_dequantize_block(p, s, out);
    ok = s == 0;
    for (int i = 0; i < 32; i++) { ok &= out[i] == x[i]; }
    CHECK(ok, "block of subnormal grid values round-trips exactly at scale 2^-127");
}

// |x - q| <= half the grid step around |x| / 2^e times 2^e, unless clipped (then q = +-6 * 2^e); q is also
// the brute-force nearest grid value
static void test_round_trip(void) {
    Rng r;
    rng_seed(&r, 3);
    float x[32], q[32];
    uint8_t p[16];
    int bad_bound = 0, bad_brute = 0, clipped = 0, roundup_clipped = 0, bump7_clipped = 0, bump7_over7 = 0;
    for (int t = 0; t < 20000; t++) {
        int rule = t % MX_NUM_SCALE_RULES, sh = (int)rng_below(&r, 200) - 100;
        for (int i = 0; i < 32; i++) { x[i] = ldexpf(rng_normal(&r) * (i == t % 32 && t % 3 == 0 ? 20.0f : 1.0f), sh); }
        uint8_t s = mx_quantize_block(x, rule, 0, 0, 0, p);
        mx_dequantize_block(p, s, q);
        int e = s - 127;
        for (int i = 0; i < 32; i++) {
            double v = ldexp(x[i], -e), a = fabs(v);
            int lo = 0;
            while (lo < 7 && grid[lo + 1] <= a) { lo++; }
            if (a > 6.0) {
                clipped++;
                roundup_clipped += rule == MX_SCALE_ROUNDUP;
                bump7_clipped += rule == MX_SCALE_BUMP7;
                bump7_over7 += rule == MX_SCALE_BUMP7 && a >= 7.0;
                bad_bound += fabs(q[i]) != ldexp(6.0, e);
            } else {
                double half = lo < 7 ? 0.5 * (grid[lo + 1] - grid[lo]) : 0.0;
                bad_bound += fabs((double)x[i] - q[i]) > ldexp(half, e);
            }
            bad_brute += q[i] != ldexpf(e2m1_decode((uint8_t)e2m1_brute((float)v)), e);
        }
    }
    CHECK(bad_bound == 0, "round-trip error above half a grid step on %d elements", bad_bound);
    CHECK(bad_brute == 0, "dequantize(quantize(x)) differs from brute-force nearest on %d elements", bad_brute);
    CHECK(clipped > 0 && roundup_clipped == 0, "OCP clips some block maxima (%d), round-up none (%d)", clipped, roundup_clipped);
    CHECK(bump7_clipped > 0 && bump7_over7 == 0, "bump-7 clips some (%d), none scaled to 7 or more (%d)", bump7_clipped, bump7_over7);
}

static void test_hadamard(void) {
    Rng r;
    rng_seed(&r, 4);
    double worst_twice = 0.0, worst_matrix = 0.0;
    for (int t = 0; t < 1000; t++) {
        float x[32], y[32];
        for (int i = 0; i < 32; i++) { x[i] = rng_normal(&r); y[i] = x[i]; }
        hadamard32(y);
        for (int i = 0; i < 32; i++) {
            double s = 0.0;
            for (int j = 0; j < 32; j++) { s += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[j]; }
            worst_matrix = fmax(worst_matrix, fabs(s / sqrt(32.0) - y[i]));
        }
        hadamard32(y);
        for (int i = 0; i < 32; i++) { worst_twice = fmax(worst_twice, fabs((double)y[i] - x[i])); }
    }
    CHECK(worst_matrix < 1e-6, "H32 x differs from the Sylvester matrix product by %.3g", worst_matrix);
    CHECK(worst_twice < 1e-6, "H32 H32 x differs from x by %.3g", worst_twice);
}

// value of an E4M3 byte by the format's definition (double)
static double e4m3_value_ref(int b) {
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return s ? -v : v;
}

// E4M3 byte of v by brute force: nearest finite value of the same sign, ties to the even mantissa; NaN -> 0x7F
static int e4m3_brute(float v) {
    if (isnan(v)) { return 0x7F; }
    int base = signbit(v) ? 0x80 : 0, best = base;
    for (int b = base; b < base + 0x7F; b++) {
        double d = fabs(e4m3_value_ref(b) - v), db = fabs(e4m3_value_ref(best) - v);
        if (d < db || (d == db && b % 2 == 0)) { best = b; }
    }
    return best;
}

static void test_e4m3(void) {
    int dec = 1, round = 1;
    for (int b = 0; b < 256; b++) {
        float d = e4m3_decode((uint8_t)b);
        if ((b & 0x7F) == 0x7F) { dec &= isnan(d) != 0; continue; }
        dec &= d == (float)e4m3_value_ref(b) && (signbit(d) != 0) == (b >= 128);
        round &= e4m3_encode(d) == b;
    }
    CHECK(dec, "E4M3 decode of all 256 bytes");
    CHECK(round, "E4M3 encode(decode(b)) == b for every finite byte (incl. -0)");
    int bad = 0, n = 0;
    for (int b = 0; b < 0x7E; b++) {   // midpoints between neighbours and their float neighbours: ties
        double mid = 0.5 * (e4m3_value_ref(b) + e4m3_value_ref(b + 1));
        float pts[3] = {(float)mid, nextafterf((float)mid, 0.0f), nextafterf((float)mid, 1000.0f)};
        for (int j = 0; j < 3; j++) {
            bad += e4m3_encode(pts[j]) != e4m3_brute(pts[j]);
            bad += e4m3_encode(-pts[j]) != e4m3_brute(-pts[j]);
            n += 2;
        }
    }
    Rng r;
    rng_seed(&r, 5);
    for (int i = 0; i < 300000; i++, n++) {
        float v = ldexpf(rng_uniform(&r) + 0.5f, (int)rng_below(&r, 36) - 22) * (i % 2 ? -1.0f : 1.0f);
        bad += e4m3_encode(v) != e4m3_brute(v);
    }
    float special[8] = {448.0f, 449.0f, 464.0f, 480.0f, 1e30f, INFINITY, FLT_TRUE_MIN, ldexpf(1.0f, -10)};
    for (int i = 0; i < 8; i++, n += 2) { bad += e4m3_encode(special[i]) != e4m3_brute(special[i]); bad += e4m3_encode(-special[i]) != e4m3_brute(-special[i]); }
    CHECK(bad == 0, "E4M3 encode differs from brute force on %d of %d values", bad, n);
    CHECK(e4m3_encode(INFINITY) == 0x7E && e4m3_encode(-INFINITY) == 0xFE && e4m3_encode(500.0f) == 0x7E, "E4M3 saturates to +-448");
    CHECK(e4m3_encode(NAN) == 0x7F && e4m3_encode(-NAN) == 0x7F, "E4M3 NaN -> 0x7F");
    CHECK(e4m3_encode(-0.0f) == 0x80 && e4m3_encode(ldexpf(1.0f, -10)) == 0x00 && e4m3_encode(ldexpf(3.0f, -10)) == 0x02
          && e4m3_encode(ldexpf(15.0f, -10)) == 0x08, "E4M3 subnormal ties (2^-10 -> 0, 1.5 * 2^-9 -> 2 * 2^-9, 7.5 * 2^-9 -> 2^-6)");
}

int main(void) {
    test_e2m1_rne();
    test_e2m1_scaled_encoder();
    test_e2m1_sr();
    test_scales();
    test_special_blocks();
    test_round_trip();
    test_hadamard();
    test_e4m3();
    return test_summary("test_mxfp4");
}
