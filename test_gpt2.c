// Checks the FP32 CPU reference (llmc/gpt2_cpu.h) against the PyTorch oracle (dev/reference_gpt2.py):
// logits, loss, gradient norm and every parameter tensor's gradient after one forward/backward, then the
// losses of the AdamW steps on the same batch. Also checks that a wrong gradient would be caught.
//
// usage: ./build/test_gpt2 [model.bin [ref.bin]]   (defaults: the tiny fixture in dev/test/fixtures)
//
// Tolerances: dev/test/reference_checks.h.
#include "llmc/utils.h"
#include "llmc/checkpoint.h"
#include "llmc/gpt2_cpu.h"
#include "dev/test/reference_checks.h"

// one forward/backward of the model on r's batch, then when step > 0 an AdamW update (a ref_step_fn)
static float gpt2_ref_step(void* model, const ReferenceFile* r, int step) {
    GPT2CPU* m = (GPT2CPU*)model;
    gpt2cpu_forward(m, r->inputs, r->targets, r->B, r->T);
    gpt2cpu_zero_grad(m);
    gpt2cpu_backward(m);
    if (step > 0) { gpt2cpu_update(m, r->lr, r->beta1, r->beta2, r->eps, r->weight_decay, r->grad_clip, step); }
    return m->mean_loss;
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

int main(int argc, char** argv) {
    const char* model_path = argc > 1 ? argv[1] : "dev/test/fixtures/tiny_model.bin";
    const char* ref_path = argc > 2 ? argv[2] : "dev/test/fixtures/tiny_ref.bin";
    if (argc > 3) { die("usage: %s [model.bin [ref.bin]]", argv[0]); }
    CheckpointHeader ck;
    float* params = checkpoint_load_params(model_path, FAMILY_GPT2, &ck);
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
    gpt2_ref_step(&m, &ref, 0);
    RefModelOutputs out = {m.acts.logits, ck.config.vocab_size, ck.config.padded_vocab_size, m.mean_loss,
                           m.grads_memory, m.param_sizes, gpt2_param_names, NUM_PARAMETER_TENSORS};
    check_ref_outputs(&out, &ref, P_QKVW, m.param_sizes[P_QKVW] / 3);
    check_ref_steps(&m, gpt2_ref_step, &ref);   // no update has happened yet: the steps start from the file's weights

    gpt2cpu_free(&m);
    reference_file_free(&ref);
    free(params);
    return test_summary("test_gpt2");
}
