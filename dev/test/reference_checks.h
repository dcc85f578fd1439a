// Checks of a CPU model against a PyTorch reference file (dev/test/reference_file.h), shared by test_gpt2.c and
// dev/test/test_llama_cpu.c: logits, loss, gradient norm, every gradient tensor (and a perturbed gradient that must
// be rejected) after one forward/backward on the reference batch, then the losses of the reference's AdamW steps.
//
// Tolerances (FP32 model vs a float64 oracle; element passes when |got - ref| <= atol + rtol * |ref|):
//   logits      atol 1e-5                     rtol 1e-4
//   gradients   atol 1e-4 * max|ref tensor|   rtol 1e-3   (the atol scale keeps near-zero entries fair)
//   loss, grad norm: relative 1e-5;  AdamW step losses: atol 1e-4, rtol 1e-4
#ifndef DEV_TEST_REFERENCE_CHECKS_H
#define DEV_TEST_REFERENCE_CHECKS_H

#include "llmc/utils.h"
#include "llmc/gpt2_cpu.h"   // grad_norm_cpu, sum_sizes_cpu
#include "dev/test/reference_file.h"
#include "dev/test/test_common.h"

#define LOGITS_ATOL 1e-5f
#define LOGITS_RTOL 1e-4f
#define GRAD_ATOL_SCALE 1e-4f
#define GRAD_RTOL 1e-3f
#define SCALAR_RTOL 1e-5f
#define STEP_ATOL 1e-4f
#define STEP_RTOL 1e-4f

// a model's view for the checks: runs forward and backward (zeroed gradients first) on r's batch, then when step > 0
// one AdamW update (1-based step) with r's hyperparameters; returns the mean loss of the forward
typedef float (*ref_step_fn)(void* model, const ReferenceFile* r, int step);

// what a model holds after its first ref_step_fn call (step 0): logits [B*T, Vp], the mean loss and the gradients
// of num_tensors tensors (sizes, names) back to back
typedef struct {
    const float* logits;
    int V, Vp;
    float loss;
    const float* grads;
    const size_t* sizes;
    const char* const* names;
    int num_tensors;
} RefModelOutputs;

// logits of the real vocab columns vs the reference
static inline void check_ref_logits(const RefModelOutputs* o, const ReferenceFile* r) {
    size_t BT = (size_t)r->B * r->T;
    float* got = (float*)malloc_check(BT * o->V * sizeof(float));
    for (size_t bt = 0; bt < BT; bt++) { memcpy(got + bt * o->V, o->logits + bt * o->Vp, o->V * sizeof(float)); }
    CHECK(close_enough("logits", got, r->logits, BT * o->V, LOGITS_ATOL, LOGITS_RTOL, 1), "logits differ from the reference");
    free(got);
}

// every parameter tensor's gradient vs the reference; then tensor `probe` with entry bad_index off by 1% of the
// tensor's largest gradient must be rejected
static inline void check_ref_grads(const RefModelOutputs* o, const ReferenceFile* r, int probe, size_t bad_index) {
    size_t off = 0, probe_off = 0;
    for (int t = 0; t < o->num_tensors; t++) {
        size_t n = o->sizes[t];
        float atol = GRAD_ATOL_SCALE * max_abs_f32(r->grads + off, n) + 1e-12f;
        CHECK(close_enough(o->names[t], o->grads + off, r->grads + off, n, atol, GRAD_RTOL, 1),
              "gradient of %s differs from the reference", o->names[t]);
        if (t == probe) { probe_off = off; }
        off += n;
    }
    size_t n = o->sizes[probe];
    float* bad = (float*)malloc_check(n * sizeof(float));
    memcpy(bad, o->grads + probe_off, n * sizeof(float));
    float scale = max_abs_f32(r->grads + probe_off, n);
    bad[bad_index] += 1e-2f * scale;
    CHECK(!close_enough("probe*", bad, r->grads + probe_off, n, GRAD_ATOL_SCALE * scale, GRAD_RTOL, 0),
          "a perturbed %s gradient was not detected", o->names[probe]);
    free(bad);
}

// runs the reference's AdamW steps on its batch, comparing the loss before each update
static inline void check_ref_steps(void* model, ref_step_fn step_fn, const ReferenceFile* r) {
    for (int step = 1; step <= r->num_steps; step++) {
        float loss = step_fn(model, r, step);
        float ref = r->losses[step - 1], err = fabsf(loss - ref);
        printf("step %2d  loss %.6f  ref %.6f  abs err %.3e\n", step, loss, ref, err);
        CHECK(err <= STEP_ATOL + STEP_RTOL * fabsf(ref), "step %d loss %f vs reference %f", step, loss, ref);
    }
}

// a fresh model's outputs after its first forward/backward (ref_step_fn at step 0) vs the reference: logits, loss,
// gradient norm and gradients (probe and bad_index as in check_ref_grads)
static inline void check_ref_outputs(const RefModelOutputs* o, const ReferenceFile* r, int probe, size_t bad_index) {
    check_ref_logits(o, r);
    check_scalar_rel("loss", o->loss, r->loss, SCALAR_RTOL);
    check_scalar_rel("grad norm", grad_norm_cpu(o->grads, sum_sizes_cpu(o->sizes, o->num_tensors)), r->grad_norm, SCALAR_RTOL);
    check_ref_grads(o, r, probe, bad_index);
}

#endif
