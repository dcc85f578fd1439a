// Reader for the reference files written by dev/reference_gpt2.py (C and C++).
//
// Format, little endian:
//   int32 header[256]: [0]=20261203 magic, [1]=1 version, [2]=B, [3]=T, [4]=num_steps, [5]=V, [6]=Vp,
//     [7]=L, [8]=NH, [9]=C, [10]=maxT; float32 stored bitwise in int32 slots: [16]=lr, [17]=beta1,
//     [18]=beta2, [19]=eps, [20]=weight_decay, [21]=grad_clip (0 = none); other slots zero.
//   int32 inputs[B*T], int32 targets[B*T]
//   float32 logits[B*T*V]            (real vocab columns only)
//   float32 loss                     (mean cross-entropy over the B*T positions)
//   float32 grad_norm                (global L2 norm of the gradients, before clipping)
//   float32 grads[num_params]        (gpt2_param_sizes() layout; padded wte rows are zero)
//   float32 losses[num_steps]        (loss before each of num_steps AdamW steps on the same batch;
//                                     losses[0] == loss)
#ifndef DEV_TEST_REFERENCE_FILE_H
#define DEV_TEST_REFERENCE_FILE_H

#include "llmc/utils.h"
#include "llmc/gpt2_config.h"

#define REF_MAGIC 20261203
#define REF_VERSION 1
#define REF_HEADER_INTS 256

typedef struct {
    GPT2Config config;
    int B, T, num_steps;
    float lr, beta1, beta2, eps, weight_decay, grad_clip;
    size_t num_params;
    int* inputs;        // [B*T]
    int* targets;       // [B*T]
    float* logits;      // [B*T*V]
    float loss;
    float grad_norm;
    float* grads;       // [num_params]
    float* losses;      // [num_steps]
} ReferenceFile;

// the float32 whose bits are stored in an int32 header slot
static inline float ref_slot_float(int32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

// reads and validates a reference file; any problem is a clear error and exit(1)
static inline void reference_file_read(const char* path, ReferenceFile* r) {
    FILE* fp = fopen_check(path, "rb");
    int32_t h[REF_HEADER_INTS];
    long size = file_size(fp);
    if (size < (long)sizeof(h)) { die("reference file '%s' is %ld bytes, shorter than its header", path, size); }
    fread_check(h, sizeof(int32_t), REF_HEADER_INTS, fp, "reference header");
    if (h[0] != REF_MAGIC) { die("'%s' is not a reference file (magic %d, expected %d)", path, h[0], REF_MAGIC); }
    if (h[1] != REF_VERSION) { die("reference file '%s' has version %d; this build reads version %d", path, h[1], REF_VERSION); }
    memset(r, 0, sizeof(*r));
    r->B = h[2]; r->T = h[3]; r->num_steps = h[4];
    r->config.vocab_size = h[5]; r->config.padded_vocab_size = h[6]; r->config.num_layers = h[7];
    r->config.num_heads = h[8]; r->config.channels = h[9]; r->config.max_seq_len = h[10];
    const char* problem = gpt2_config_problem(&r->config);
    if (problem) { die("reference file '%s' has an invalid model shape: %s", path, problem); }
    if (r->B <= 0 || r->T <= 0 || r->T > r->config.max_seq_len || r->num_steps < 0) {
        die("reference file '%s' has an invalid batch B=%d T=%d steps=%d", path, r->B, r->T, r->num_steps);
    }
    r->lr = ref_slot_float(h[16]); r->beta1 = ref_slot_float(h[17]); r->beta2 = ref_slot_float(h[18]);
    r->eps = ref_slot_float(h[19]); r->weight_decay = ref_slot_float(h[20]); r->grad_clip = ref_slot_float(h[21]);
    r->num_params = gpt2_num_params(&r->config);
    size_t BT = (size_t)r->B * r->T;
    long expected = (long)sizeof(h) + (long)(sizeof(int32_t) * 2 * BT + sizeof(float) *
                    (BT * r->config.vocab_size + 2 + r->num_params + (size_t)r->num_steps));
    if (size != expected) { die("reference file '%s' is %ld bytes, its header implies %ld (truncated or corrupt)", path, size, expected); }
    r->inputs = (int*)malloc_check(BT * sizeof(int));
    r->targets = (int*)malloc_check(BT * sizeof(int));
    r->logits = (float*)malloc_check(BT * r->config.vocab_size * sizeof(float));
    r->grads = (float*)malloc_check(r->num_params * sizeof(float));
    r->losses = (float*)malloc_check((size_t)r->num_steps * sizeof(float));
    fread_check(r->inputs, sizeof(int), BT, fp, "reference inputs");
    fread_check(r->targets, sizeof(int), BT, fp, "reference targets");
    fread_check(r->logits, sizeof(float), BT * r->config.vocab_size, fp, "reference logits");
    fread_check(&r->loss, sizeof(float), 1, fp, "reference loss");
    fread_check(&r->grad_norm, sizeof(float), 1, fp, "reference grad norm");
    fread_check(r->grads, sizeof(float), r->num_params, fp, "reference gradients");
    fread_check(r->losses, sizeof(float), (size_t)r->num_steps, fp, "reference losses");
    fclose_check(fp);
    for (size_t i = 0; i < BT; i++) {
        if (r->inputs[i] < 0 || r->inputs[i] >= r->config.vocab_size || r->targets[i] < 0 || r->targets[i] >= r->config.vocab_size) {
            die("reference file '%s': token at %zu is outside the vocab [0, %d)", path, i, r->config.vocab_size);
        }
    }
}

// frees what reference_file_read allocated
static inline void reference_file_free(ReferenceFile* r) {
    free(r->inputs);
    free(r->targets);
    free(r->logits);
    free(r->grads);
    free(r->losses);
    memset(r, 0, sizeof(*r));
}

#endif
