// Reader for the reference files written by dev/reference_gpt2.py and dev/reference_llama.py (C and C++).
//
// Format, little endian:
//   int32 header[256]: [0]=20261203 magic, [1]=1 version, [2]=B, [3]=T, [4]=num_steps, [5]=V, [6]=Vp,
//     [7]=L, [8]=NH, [9]=C, [10]=maxT, [11]=model family (0 GPT-2, 1 LLaMA), LLaMA only: [12]=NKV, [13]=hidden;
//     float32 stored bitwise in int32 slots: [16]=lr, [17]=beta1, [18]=beta2, [19]=eps, [20]=weight_decay,
//     [21]=grad_clip (0 = none); other slots zero.
//   int32 inputs[B*T], int32 targets[B*T]
//   float32 logits[B*T*V]            (real vocab columns only)
//   float32 loss                     (mean cross-entropy over the B*T positions)
//   float32 grad_norm                (global L2 norm of the gradients, before clipping)
//   float32 grads[num_params]        (gpt2_param_sizes() / llama_param_sizes() layout; padded vocab rows are zero)
//   float32 losses[num_steps]        (loss before each of num_steps AdamW steps on the same batch;
//                                     losses[0] == loss)
//   float32 params[num_params]       (LLaMA only: the weights it all starts from; GPT-2 keeps them in a model file)
#ifndef DEV_TEST_REFERENCE_FILE_H
#define DEV_TEST_REFERENCE_FILE_H

#include "llmc/utils.h"
#include "llmc/gpt2_config.h"
#include "llmc/llama_config.h"
#include "dev/test/test_file.h"

#define REF_MAGIC 20261203
#define REF_VERSION 1
#define REF_HEADER_INTS 256

enum { REF_FAMILY_ANY = -1, REF_FAMILY_GPT2 = 0, REF_FAMILY_LLAMA = 1 };

typedef struct {
    int family;         // REF_FAMILY_*: which of the two shapes below is set
    GPT2Config config;
    LlamaConfig llama;
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
    float* params;      // [num_params] (LLaMA), NULL (GPT-2)
} ReferenceFile;

// the float32 whose bits are stored in an int32 header slot
static inline float ref_slot_float(int32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

// the model shape of header h into r->config or r->llama (by r->family) and r->num_params; dies on an invalid shape
static inline void ref_read_shape(const char* path, const int32_t* h, ReferenceFile* r) {
    GPT2Config g = {h[10], h[5], h[6], h[7], h[8], h[9]};
    LlamaConfig l = {h[10], h[5], h[6], h[7], h[8], h[12], h[9], h[13]};
    const char* problem = r->family == REF_FAMILY_GPT2 ? gpt2_config_problem(&g) : llama_config_problem(&l);
    if (problem) { die("reference file '%s' has an invalid model shape: %s", path, problem); }
    if (r->family == REF_FAMILY_GPT2) { r->config = g; r->num_params = gpt2_num_params(&g); }
    else { r->llama = l; r->num_params = llama_num_params(&l); }
}

// reads and validates a reference file of model family `family` (REF_FAMILY_*; REF_FAMILY_ANY: either, r->family
// says which); any problem is a clear error and exit(1)
static inline void reference_file_read_family(const char* path, int family, ReferenceFile* r) {
    int32_t h[REF_HEADER_INTS];
    long size;
    FILE* fp = test_file_open(path, "reference file", h, REF_HEADER_INTS, REF_MAGIC, REF_VERSION, &size);
    if (h[11] != REF_FAMILY_GPT2 && h[11] != REF_FAMILY_LLAMA) { die("reference file '%s': unknown model family %d (0 GPT-2, 1 LLaMA)", path, h[11]); }
    if (family != REF_FAMILY_ANY && h[11] != family) { die("reference file '%s' is of model family %d, this test reads family %d (0 GPT-2, 1 LLaMA)", path, h[11], family); }
    memset(r, 0, sizeof(*r));
    r->family = family = h[11];
    r->B = h[2]; r->T = h[3]; r->num_steps = h[4];
    int V = h[5], maxT = h[10];
    ref_read_shape(path, h, r);
    if (r->B <= 0 || r->T <= 0 || r->T > maxT || r->num_steps < 0) {
        die("reference file '%s' has an invalid batch B=%d T=%d steps=%d", path, r->B, r->T, r->num_steps);
    }
    r->lr = ref_slot_float(h[16]); r->beta1 = ref_slot_float(h[17]); r->beta2 = ref_slot_float(h[18]);
    r->eps = ref_slot_float(h[19]); r->weight_decay = ref_slot_float(h[20]); r->grad_clip = ref_slot_float(h[21]);
    size_t BT = (size_t)r->B * r->T, nparams = r->num_params * (family == REF_FAMILY_LLAMA ? 2 : 1);
    long expected = (long)sizeof(h) + (long)(sizeof(int32_t) * 2 * BT + sizeof(float) *
                    (BT * V + 2 + nparams + (size_t)r->num_steps));
    test_file_check_size(path, "reference file", size, expected);
    r->inputs = (int*)fread_new(fp, sizeof(int), BT, "reference inputs");
    r->targets = (int*)fread_new(fp, sizeof(int), BT, "reference targets");
    r->logits = (float*)fread_new(fp, sizeof(float), BT * V, "reference logits");
    fread_check(&r->loss, sizeof(float), 1, fp, "reference loss");
    fread_check(&r->grad_norm, sizeof(float), 1, fp, "reference grad norm");
    r->grads = (float*)fread_new(fp, sizeof(float), r->num_params, "reference gradients");
    r->losses = (float*)fread_new(fp, sizeof(float), (size_t)r->num_steps, "reference losses");
    if (family == REF_FAMILY_LLAMA) { r->params = (float*)fread_new(fp, sizeof(float), r->num_params, "reference parameters"); }
    fclose_check(fp);
    for (size_t i = 0; i < BT; i++) {
        if (r->inputs[i] < 0 || r->inputs[i] >= V || r->targets[i] < 0 || r->targets[i] >= V) {
            die("reference file '%s': token at %zu is outside the vocab [0, %d)", path, i, V);
        }
    }
}

// reads and validates a GPT-2 reference file
static inline void reference_file_read(const char* path, ReferenceFile* r) {
    reference_file_read_family(path, REF_FAMILY_GPT2, r);
}

// frees what reference_file_read allocated
static inline void reference_file_free(ReferenceFile* r) {
    free(r->inputs);
    free(r->targets);
    free(r->logits);
    free(r->grads);
    free(r->losses);
    free(r->params);
    memset(r, 0, sizeof(*r));
}

#endif
