// Deterministic host RNG (splitmix64 seeding + xoshiro256**) with uniform and normal draws.
// The whole state is four words, so it is saved in checkpoints and a resumed run draws the same numbers.
#ifndef LLMC_RAND_H
#define LLMC_RAND_H

#include <stdint.h>
#include <math.h>

typedef struct { uint64_t s[4]; } Rng;

static inline uint64_t splitmix64(uint64_t* x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void rng_seed(Rng* r, uint64_t seed) {
    for (int i = 0; i < 4; i++) { r->s[i] = splitmix64(&seed); }
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_u64(Rng* r) {
    uint64_t* s = r->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

// uniform in [0, 1) with 24 random bits (exactly representable in float)
static inline float rng_uniform(Rng* r) { return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

// uniform integer in [0, n) without modulo bias
static inline uint64_t rng_below(Rng* r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do { x = rng_u64(r); } while (x >= limit);
    return x % n;
}

// standard normal by Box-Muller in double precision; one draw per call keeps the stream simple to replay
static inline float rng_normal(Rng* r) {
    double u1 = ((double)(rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);   // (0, 1]
    double u2 = (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);           // [0, 1)
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// standard normal that depends only on (seed, index): parallel init gives the same numbers as serial
static inline float normal_at(uint64_t seed, uint64_t index) {
    uint64_t x = seed ^ (index * 0xD1B54A32D192ED03ull);
    uint64_t a = splitmix64(&x), b = splitmix64(&x);
    double u1 = ((double)(a >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(b >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
