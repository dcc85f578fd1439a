// GPU model test: the trainer's forward, backward and AdamW steps against a reference file written by the
// independent PyTorch models dev/reference_gpt2.py (GPT-2; its weights in a model file, -e) or
// dev/reference_llama.py (LLaMA; the file carries its weights): logits, loss, every parameter gradient, 10 step losses.
// BF16 compute is compared with BF16 tolerances: relative Frobenius error per tensor (stated below), and
// the max abs/rel errors are printed. Also checks that two identical backward passes give identical bits.
// The step losses drift from the float64 ones as AdamW amplifies rounding (an element whose gradient is mostly
// rounding noise still gets a full-size update); -s names the same run made by the reference in mixed precision
// (--dtype bfloat16: FP32 weights and AdamW, BF16 products), and each step's loss may then differ by as much as that
// BF16 engine drifts there, when that exceeds tol_loss.
#define TESTING
#include "train_gpt2_adahop.cu"
#include "dev/test/reference_file.h"
#include "dev/test/test_common.h"

static const double tol_logits = 2e-2;   // relative Frobenius error of the (BF16) logits
static const double tol_grads = 5e-2;    // per parameter tensor, relative Frobenius error
static const double tol_norm = 2e-2;     // relative error of the global gradient norm
static const double tol_loss = 5e-3;     // relative error of each loss (first one and the 10 steps), or the -s drift

// prints and checks ||got - want|| / ||want|| (and the largest elementwise errors)
static void compare_tensor(const char* name, const float* got, const float* want, size_t n, double tol) {
    double diff2 = 0.0, ref2 = 0.0, max_abs = 0.0, max_rel = 0.0;
    int finite = 1;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        finite &= isfinite(got[i]);
        diff2 += d * d;
        ref2 += (double)want[i] * want[i];
        max_abs = fmax(max_abs, fabs(d));
        if (fabs(want[i]) > 1e-3) { max_rel = fmax(max_rel, fabs(d) / fabs(want[i])); }
    }
    double rel = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    printf("  %-10s n=%-10zu rel.frob %.2e (tol %.0e) | max abs %.3e | max rel (|ref|>1e-3) %.3e\n", name, n, rel, tol,
           max_abs, max_rel);
    CHECK(finite && rel <= tol, "%s: relative error %.3e above %.1e (or non-finite values)", name, rel, tol);
}

// the model a reference file was made for, and its starting weights (malloc'ed): a GPT-2 reference keeps them in
// the model file model_path, a LLaMA reference carries them itself
static float* reference_model(const ReferenceFile* ref, const char* model_path, ModelConfig* config) {
    if (ref->family == REF_FAMILY_LLAMA) {
        float* params = (float*)malloc_check(ref->num_params * sizeof(float));
        *config = model_from_llama(&ref->llama);
        memcpy(params, ref->params, ref->num_params * sizeof(float));
        return params;
    }
    CheckpointHeader ck;
    float* params = checkpoint_load_params(model_path, FAMILY_GPT2, &ck);
    checkpoint_require_config(model_path, &ck.config, &ref->config);
    *config = model_from_gpt2(&ck.config);
    return params;
}

static float* grads_to_host(Model* m) {
    float* h = (float*)malloc_check(m->num_params * sizeof(float));
    cudaCheck(cudaStreamSynchronize(m->stream));
    cudaCheck(cudaMemcpy(h, m->grads, m->num_params * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

int main(int argc, char** argv) {
    const char* model_path = "build/ref/d12_model.bin";
    const char* ref_path = "build/ref/d12_ref.bin";
    const char* mixed_path = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 < argc && strcmp(argv[i], "-e") == 0) { model_path = argv[i + 1]; }
        else if (i + 1 < argc && strcmp(argv[i], "-r") == 0) { ref_path = argv[i + 1]; }
        else if (i + 1 < argc && strcmp(argv[i], "-s") == 0) { mixed_path = argv[i + 1]; }
        else { die("usage: %s [-e model.bin (GPT-2 only)] [-r reference.bin] [-s mixed-precision reference.bin]", argv[0]); }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: this test needs one"); }
    ReferenceFile ref;
    reference_file_read_family(ref_path, REF_FAMILY_ANY, &ref);
    double* tol_step = (double*)malloc_check((size_t)ref.num_steps * sizeof(double));
    for (int step = 0; step < ref.num_steps; step++) { tol_step[step] = tol_loss; }
    if (mixed_path) {
        ReferenceFile mixed;
        reference_file_read_family(mixed_path, ref.family, &mixed);
        if (mixed.B != ref.B || mixed.T != ref.T || mixed.num_steps != ref.num_steps ||
            memcmp(mixed.inputs, ref.inputs, (size_t)ref.B * ref.T * sizeof(int)) != 0) {
            die("%s is not the run of %s (batch, steps or tokens differ)", mixed_path, ref_path);
        }
        for (int step = 0; step < ref.num_steps; step++) {
            double drift = fabs((double)mixed.losses[step] - ref.losses[step]) / fabs((double)ref.losses[step]);
            tol_step[step] = fmax(tol_loss, drift);
        }
        reference_file_free(&mixed);
    }
    ModelConfig config;
    float* params = reference_model(&ref, model_path, &config);
    size_t n = ref.num_params;
    int B = ref.B, T = ref.T, V = config.vocab_size, Vp = config.padded_vocab_size;
    printf("%s model (%s): L=%d C=%d NH=%d NKV=%d H=%d V=%d, %.1fM params | reference %s: B=%d T=%d, %d steps\n",
           family_names[config.family], ref.family == REF_FAMILY_LLAMA ? "weights from the reference" : model_path,
           config.num_layers, config.channels, config.num_heads, config.num_kv_heads, config.hidden, V, n / 1e6, ref_path,
           B, T, ref.num_steps);

    matmul_init();
    DataParallel dp;
    DPOptions one_rank = {-1, -1, NULL, RENDEZVOUS_TIMEOUT_S};
    dp_init(&dp, &one_rank);   // the trainer's model runs on a communicator; one rank, so every collective is a copy
    Model model;
    LinearOptions bf16 = {PREC_BF16, GEMM_PATH_EXACT, 0, 1, STRAT_PLAIN, 0, 1, 64};
    model_build(&model, &dp, &config, params, B, T, &bf16, 0);
    model_sync_params(&model);

    // forward only: logits and loss
    model_zero_grad(&model);
    model_forward(&model, ref.inputs, ref.targets, B, T, 0.0f);
    float loss = model_mean_loss(&model, B, T, 1);
    floatX* lx = (floatX*)malloc_check((size_t)B * T * Vp * sizeof(floatX));
    cudaCheck(cudaMemcpy(lx, model.acts.t[A_LOGITS], (size_t)B * T * Vp * sizeof(floatX), cudaMemcpyDeviceToHost));
    float* logits = (float*)malloc_check((size_t)B * T * V * sizeof(float));
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        for (int v = 0; v < V; v++) { logits[bt * V + v] = __bfloat162float(lx[bt * Vp + v]); }
    }
    printf("forward:\n");
    compare_tensor("logits", logits, ref.logits, (size_t)B * T * V, tol_logits);
    printf("  loss %.6f vs reference %.6f\n", loss, ref.loss);
    CHECK(fabs(loss - ref.loss) <= tol_loss * fabs(ref.loss), "loss %.6f vs %.6f", loss, ref.loss);

    // backward: every parameter gradient, twice for determinism
    float dloss = 1.0f / (B * T);
    float* runs[2];
    for (int r = 0; r < 2; r++) {
        model_zero_grad(&model);
        model_forward(&model, ref.inputs, ref.targets, B, T, dloss);
        model_backward(&model, B, T);
        runs[r] = grads_to_host(&model);
    }
    CHECK(memcmp(runs[0], runs[1], n * sizeof(float)) == 0, "two identical backward passes gave different gradients");
    printf("backward (two runs bit-identical: %s):\n", memcmp(runs[0], runs[1], n * sizeof(float)) == 0 ? "yes" : "NO");
    size_t off = 0;
    for (int i = 0; i < model.tensors.num_tensors; i++) {
        compare_tensor(model.tensors.names[i], runs[0] + off, ref.grads + off, model.tensors.sizes[i], tol_grads);
        off += model.tensors.sizes[i];
    }

    // the classifier in chunks of one sequence (-M T: B chunks, the head's weight gradient summed over them)
    LinearOptions chunked_opts = bf16;
    chunked_opts.head_chunk = T;
    Model chunked;
    model_build(&chunked, &dp, &config, params, B, T, &chunked_opts, 0);
    model_sync_params(&chunked);
    model_zero_grad(&chunked);
    model_forward(&chunked, ref.inputs, ref.targets, B, T, dloss);
    model_backward(&chunked, B, T);
    float chunked_loss = model_mean_loss(&chunked, B, T, 1);
    float* chunked_grads = grads_to_host(&chunked);
    printf("classifier in %d chunks of %d tokens (logits buffer %d rows):\n", B, T, chunked.acts.logit_rows);
    CHECK(chunked.acts.logit_rows == T, "the chunked model's logits hold %d rows, want %d", chunked.acts.logit_rows, T);
    printf("  loss %.6f vs reference %.6f\n", chunked_loss, ref.loss);
    CHECK(fabs(chunked_loss - ref.loss) <= tol_loss * fabs(ref.loss), "chunked loss %.6f vs %.6f", chunked_loss, ref.loss);
    off = 0;
    for (int i = 0; i < chunked.tensors.num_tensors; i++) {
        compare_tensor(chunked.tensors.names[i], chunked_grads + off, ref.grads + off, chunked.tensors.sizes[i], tol_grads);
        off += chunked.tensors.sizes[i];
    }
    free(chunked_grads);
    model_free(&chunked);

    // optimizer steps on the same batch
    printf("AdamW steps (lr %g, betas %g %g, eps %g, wd %g, clip %g):\n", ref.lr, ref.beta1, ref.beta2, ref.eps,
           ref.weight_decay, ref.grad_clip);
    for (int step = 0; step < ref.num_steps; step++) {
        model_zero_grad(&model);
        model_forward(&model, ref.inputs, ref.targets, B, T, dloss);
        model_backward(&model, B, T);
        float norm = model_update(&model, ref.lr, ref.beta1, ref.beta2, ref.eps, ref.weight_decay, ref.grad_clip, step + 1);
        float l = model_mean_loss(&model, B, T, 1);
        printf("  step %2d loss %.6f reference %.6f | diff %+.2e (%.2f%%, tol %.2f%%)\n", step, l, ref.losses[step],
               l - ref.losses[step], 100.0 * fabs(l - ref.losses[step]) / fabs(ref.losses[step]), 100.0 * tol_step[step]);
        CHECK(fabs(l - ref.losses[step]) <= tol_step[step] * fabs(ref.losses[step]), "step %d loss %.6f vs %.6f", step, l, ref.losses[step]);
        if (step == 0) {
            printf("  grad norm %.6f vs reference %.6f\n", norm, ref.grad_norm);
            CHECK(fabs(norm - ref.grad_norm) <= tol_norm * ref.grad_norm, "grad norm %.6f vs %.6f", norm, ref.grad_norm);
        }
    }
    free(params); free(lx); free(logits); free(runs[0]); free(runs[1]); free(tol_step);
    reference_file_free(&ref);
    model_free(&model);
    matmul_free();
    dp_free(&dp);
    return test_summary("test_gpt2cu");
}
