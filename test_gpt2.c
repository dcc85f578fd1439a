// Checks the FP32 CPU reference (llmc/gpt2_cpu.h) against the PyTorch oracle (dev/reference_gpt2.py):
// logits, loss, gradient norm and every parameter tensor's gradient after one forward/backward, then the
// losses of the AdamW steps on the same batch. Also checks that a wrong gradient would be caught.
//
// usage: ./build/test_gpt2 [model.bin [ref.bin]]   (defaults: the tiny fixture in dev/test/fixtures)
//
// Tolerances (FP32 model vs a float64 oracle; element passes when |got - ref| <= atol + rtol * |ref|):
//   logits      atol 1e-5                     rtol 1e-4
//   gradients   atol 1e-4 * max|ref tensor|   rtol 1e-3   (the atol scale keeps near-zero entries fair)
//   loss, grad norm: relative 1e-5;  AdamW step losses: atol 1e-4, rtol 1e-4
#include "llmc/utils.h"
#include "llmc/checkpoint.h"
#include "llmc/gpt2_cpu.h"
#include "dev/test/reference_file.h"
#include "dev/test/test_common.h"

#define LOGITS_ATOL 1e-5f
#define LOGITS_RTOL 1e-4f
#define GRAD_ATOL_SCALE 1e-4f
#define GRAD_RTOL 1e-3f
#define SCALAR_RTOL 1e-5f
#define STEP_ATOL 1e-4f
#define STEP_RTOL 1e-4f

// logits of the real vocab columns vs the reference
static void check_logits(const GPT2CPU* m, const ReferenceFile* r) {
    int V = r->config.vocab_size, Vp = r->config.padded_vocab_size;
    size_t BT = (size_t)r->B * r->T;
    float* got = (float*)malloc_check(BT * V * sizeof(float));
    for (size_t bt = 0; bt < BT; bt++) { memcpy(got + bt * V, m->acts.logits + bt * Vp, V * sizeof(float)); }
    CHECK(close_enough("logits", got, r->logits, BT * V, LOGITS_ATOL, LOGITS_RTOL, 1), "logits differ from the reference");
    free(got);
}

// every parameter tensor's gradient vs the reference; then a perturbed gradient must be rejected
static void check_grads(const GPT2CPU* m, const ReferenceFile* r) {
    size_t off = 0, qkvw_off = 0;
    for (int t = 0; t < NUM_PARAMETER_TENSORS; t++) {
        size_t n = m->param_sizes[t];
        float atol = GRAD_ATOL_SCALE * max_abs_f32(r->grads + off, n) + 1e-12f;
        CHECK(close_enough(gpt2_param_names[t], m->grads_memory + off, r->grads + off, n, atol, GRAD_RTOL, 1),
              "gradient of %s differs from the reference", gpt2_param_names[t]);
        if (t == P_QKVW) { qkvw_off = off; }
        off += n;
    }
    // the check must be able to fail: one qkvw entry off by 1% of the tensor's largest gradient
    size_t n = m->param_sizes[P_QKVW];
    float* bad = (float*)malloc_check(n * sizeof(float));
    memcpy(bad, m->grads_memory + qkvw_off, n * sizeof(float));
    float scale = max_abs_f32(r->grads + qkvw_off, n);
    bad[n / 3] += 1e-2f * scale;
    CHECK(!close_enough("qkvw*", bad, r->grads + qkvw_off, n, GRAD_ATOL_SCALE * scale, GRAD_RTOL, 0),
          "a perturbed qkvw gradient was not detected");
    free(bad);
}

// GPT-2 init statistics of params: unit norm weights, zero biases, N(0, 0.02) matrices with the residual
// projections at 0.02/sqrt(2L) (std within 10%, mean within 5 standard errors), zero padded wte rows
static void check_init(const char* who, const GPT2Config* c, const float* params) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, sizes);
    int ok = 1;
    for (int t = 0; t < NUM_PARAMETER_TENSORS; t++) {
        size_t n = t == P_WTE ? (size_t)c->vocab_size * c->channels : sizes[t];
        double sum = 0.0, sq = 0.0;
        for (size_t i = 0; i < n; i++) { sum += params[i]; sq += (double)params[i] * params[i]; }
        double mean = sum / n, std = sqrt(sq / n - mean * mean);
        if (t == P_LN1W || t == P_LN2W || t == P_LNFW) {
            ok &= mean == 1.0 && std == 0.0;
        } else if (gpt2_param_decays(t)) {
            double want = (t == P_ATTPROJW || t == P_FCPROJW) ? 0.02 / sqrt(2.0 * c->num_layers) : 0.02;
            ok &= fabs(std - want) <= 0.1 * want && fabs(mean) <= 5.0 * want / sqrt((double)n);
        } else {
            ok &= mean == 0.0 && std == 0.0;
        }
        if (t == P_WTE) { for (size_t i = n; i < sizes[t]; i++) { ok &= params[i] == 0.0f; } }
        params += sizes[t];
    }
    printf("%s init: GPT-2 statistics %s\n", who, ok ? "ok" : "WRONG");
    CHECK(ok, "%s init does not have the GPT-2 statistics", who);
}

// runs the reference's AdamW steps on its batch, comparing the loss before each update
static void check_steps(GPT2CPU* m, const ReferenceFile* r) {
    for (int step = 1; step <= r->num_steps; step++) {
        gpt2cpu_forward(m, r->inputs, r->targets, r->B, r->T);
        float ref = r->losses[step - 1], err = fabsf(m->mean_loss - ref);
        printf("step %2d  loss %.6f  ref %.6f  abs err %.3e\n", step, m->mean_loss, ref, err);
        CHECK(err <= STEP_ATOL + STEP_RTOL * fabsf(ref), "step %d loss %f vs reference %f", step, m->mean_loss, ref);
        gpt2cpu_zero_grad(m);
        gpt2cpu_backward(m);
        gpt2cpu_update(m, r->lr, r->beta1, r->beta2, r->eps, r->weight_decay, r->grad_clip, step);
    }
}

int main(int argc, char** argv) {
    const char* model_path = argc > 1 ? argv[1] : "dev/test/fixtures/tiny_model.bin";
    const char* ref_path = argc > 2 ? argv[2] : "dev/test/fixtures/tiny_ref.bin";
    if (argc > 3) { die("usage: %s [model.bin [ref.bin]]", argv[0]); }
    CheckpointHeader ck;
    FILE* fp = checkpoint_open(model_path, &ck);
    float* params = (float*)malloc_check(gpt2_num_params(&ck.config) * sizeof(float));
    checkpoint_read_payload(fp, &ck, params, NULL, NULL);
    fclose_check(fp);
    ReferenceFile ref;
    reference_file_read(ref_path, &ref);
    checkpoint_require_config(model_path, &ck.config, &ref.config);
    printf("model %s: L=%d C=%d NH=%d V=%d Vp=%d maxT=%d, %zu params; reference %s: B=%d T=%d, %d steps\n",
           model_path, ck.config.num_layers, ck.config.channels, ck.config.num_heads, ck.config.vocab_size,
           ck.config.padded_vocab_size, ck.config.max_seq_len, ref.num_params, ref_path, ref.B, ref.T, ref.num_steps);

    if (ck.step == 0) { check_init("torch (model file)", &ck.config, params); }   // untrained: a fresh init
    float* c_init = (float*)malloc_check(gpt2_num_params(&ck.config) * sizeof(float));
    gpt2_init_params(&ck.config, c_init, 1337);
    check_init("C gpt2_init_params", &ck.config, c_init);
    free(c_init);

    GPT2CPU m;
    gpt2cpu_build(&m, &ck.config, params);
    gpt2cpu_forward(&m, ref.inputs, ref.targets, ref.B, ref.T);
    gpt2cpu_zero_grad(&m);
    gpt2cpu_backward(&m);
    check_logits(&m, &ref);
    check_scalar_rel("loss", m.mean_loss, ref.loss, SCALAR_RTOL);
    check_scalar_rel("grad norm", gpt2cpu_grad_norm(&m), ref.grad_norm, SCALAR_RTOL);
    check_grads(&m, &ref);

    check_steps(&m, &ref);   // no update has happened yet: the steps start from the file's weights

    gpt2cpu_free(&m);
    reference_file_free(&ref);
    free(params);
    return test_summary("test_gpt2");
}
