// Drawing the next token from logits: softmax with temperature, then inverse CDF with one uniform coin.
#ifndef LLMC_SAMPLER_H
#define LLMC_SAMPLER_H

#include <math.h>

// index in [0, n) drawn with probability softmax(logits / temperature); coin is uniform in [0, 1)
static inline int sample_softmax(const float* logits, int n, float temperature, float coin) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) { if (logits[i] > mx) { mx = logits[i]; } }
    double sum = 0.0;
    for (int i = 0; i < n; i++) { sum += exp((logits[i] - mx) / temperature); }
    double target = coin * sum, cdf = 0.0;
    for (int i = 0; i < n; i++) {
        cdf += exp((logits[i] - mx) / temperature);
        if (target < cdf) { return i; }
    }
    return n - 1;   // rounding left the coin past the last bucket
}

#endif
