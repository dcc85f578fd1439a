// Loss and gradient-norm spike skipping (as llm.c's outlier detector): the z-score of a step's value against the
// mean and standard deviation of the previous SPIKE_WINDOW values; the trainers skip the optimizer update of a step
// whose loss or gradient-norm z-score exceeds its threshold (flags -L and -Z; 0 = off, the default). Every value
// enters its window, skipped or not. The windows travel in a checkpoint's header (spike_guard_save), so a resumed
// run makes the same decisions.
#ifndef LLMC_SPIKE_GUARD_H
#define LLMC_SPIKE_GUARD_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "utils.h"

#define SPIKE_WINDOW 64
#define SPIKE_WINDOW_WORDS (2 + SPIKE_WINDOW)
#define SPIKE_GUARD_WORDS (2 * SPIKE_WINDOW_WORDS)   // int32 words of spike_guard_save

typedef struct {
    float values[SPIKE_WINDOW];   // a ring of the last `count` values, the oldest at `next` once full
    int count, next;
} SpikeWindow;

typedef struct {
    float loss_z, norm_z;         // thresholds, 0 = that check is off
    SpikeWindow loss, norm;
} SpikeGuard;

static inline void spike_guard_init(SpikeGuard* g, float loss_z, float norm_z) {
    memset(g, 0, sizeof(*g));
    g->loss_z = loss_z;
    g->norm_z = norm_z;
}

static inline int spike_guard_on(const SpikeGuard* g) { return g->loss_z > 0.0f || g->norm_z > 0.0f; }

// z-score of x against a full window (0 while it fills, and when its values are all equal)
static inline double spike_window_z(const SpikeWindow* w, float x) {
    if (w->count < SPIKE_WINDOW) { return 0.0; }
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < SPIKE_WINDOW; i++) { mean += w->values[i]; }
    mean /= SPIKE_WINDOW;
    for (int i = 0; i < SPIKE_WINDOW; i++) { var += (w->values[i] - mean) * (w->values[i] - mean); }
    double std = sqrt(var / SPIKE_WINDOW);
    return std > 0.0 ? (x - mean) / std : 0.0;
}

static inline void spike_window_push(SpikeWindow* w, float x) {
    w->values[w->next] = x;
    w->next = (w->next + 1) % SPIKE_WINDOW;
    if (w->count < SPIKE_WINDOW) { w->count++; }
}

// whether the update of the step with this loss and gradient norm is to be skipped (a z-score above an enabled
// threshold); logs the skip to each non-NULL stream; both values then enter their windows
static inline int spike_guard_skip(SpikeGuard* g, int step, float loss, float norm, FILE* out, FILE* log) {
    double lz = spike_window_z(&g->loss, loss), nz = spike_window_z(&g->norm, norm);
    int skip = (g->loss_z > 0.0f && lz > g->loss_z) || (g->norm_z > 0.0f && nz > g->norm_z);
    if (skip) {
        FILE* streams[2] = {out, log};
        for (int i = 0; i < 2; i++) {
            if (streams[i]) {
                fprintf(streams[i], "step %d: update skipped: loss %.6f (z %.2f, limit -L %g), grad norm %.4f (z %.2f, limit -Z %g)\n",
                        step, loss, lz, g->loss_z, norm, nz, g->norm_z);
            }
        }
    }
    spike_window_push(&g->loss, loss);
    spike_window_push(&g->norm, norm);
    return skip;
}

// the windows as SPIKE_GUARD_WORDS int32 words (count, next, the float bits of the values; loss then norm)
static inline void spike_guard_save(const SpikeGuard* g, int32_t* words) {
    const SpikeWindow* w[2] = {&g->loss, &g->norm};
    for (int k = 0; k < 2; k++, words += SPIKE_WINDOW_WORDS) {
        words[0] = w[k]->count;
        words[1] = w[k]->next;
        memcpy(words + 2, w[k]->values, sizeof(w[k]->values));
    }
}

// restores the windows from spike_guard_save's words; dies naming `source` on values out of range
static inline void spike_guard_load(SpikeGuard* g, const int32_t* words, const char* source) {
    SpikeWindow* w[2] = {&g->loss, &g->norm};
    for (int k = 0; k < 2; k++, words += SPIKE_WINDOW_WORDS) {
        if (words[0] < 0 || words[0] > SPIKE_WINDOW || words[1] < 0 || words[1] >= SPIKE_WINDOW) {
            die("%s: spike guard window %d has count %d, position %d (corrupt)", source, k, words[0], words[1]);
        }
        w[k]->count = words[0];
        w[k]->next = words[1];
        memcpy(w[k]->values, words + 2, sizeof(w[k]->values));
        for (int i = 0; i < SPIKE_WINDOW; i++) {
            if (!isfinite(w[k]->values[i])) { die("%s: spike guard window %d holds a non-finite value", source, k); }
        }
    }
}

#endif
