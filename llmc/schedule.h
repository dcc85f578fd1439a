// Learning-rate schedule: linear warmup, then cosine decay to a fraction of the peak at the last step.
#ifndef LLMC_SCHEDULE_H
#define LLMC_SCHEDULE_H

#include <math.h>

// lr for optimizer step `step` (0-based) of `max_steps`
static inline float lr_schedule(int step, int max_steps, int warmup_steps, float peak_lr, float final_fraction) {
    if (step < warmup_steps) { return peak_lr * (float)(step + 1) / (float)warmup_steps; }
    if (max_steps <= warmup_steps) { return peak_lr; }
    float progress = (float)(step - warmup_steps) / (float)(max_steps - warmup_steps);
    if (progress > 1.0f) { progress = 1.0f; }
    float cosine = 0.5f * (1.0f + cosf(3.14159265358979f * progress));   // 1 -> 0
    return peak_lr * (final_fraction + (1.0f - final_fraction) * cosine);
}

#endif
