// Tests of the LLaMA-style CPU reference (llmc/llama_config.h, llmc/llama_cpu.h):
//  1. configs: the depth presets' parameter counts, the shape checks, the init statistics;
//  2. layers: finite differences of the rmsnorm, RoPE, SwiGLU and grouped-query attention backwards on tiny sizes
//     (FP32 forward, h = 1e-2, pass when |numeric - analytic| <= 2e-4 + 2e-3 |numeric|), RoPE identities, and
//     grouped-query attention = multi-head attention on repeated key/value heads;
//  3. the model vs the PyTorch oracle dev/reference_llama.py (fixture dev/test/fixtures/llama_tiny_ref.bin): logits,
//     loss, gradient norm, every gradient tensor, a perturbed gradient rejected, the losses of its AdamW steps.
//     Tolerances: dev/test/reference_checks.h.
//  4. precision modes: every block linear records its patterns, every mode trains, bf16 = FP32 bit for bit;
//     invalid shapes and AdaHOP states of another depth are refused.
//
// usage: ./build/test_llama_cpu [ref.bin]   (default: the tiny fixture)
#include "llmc/utils.h"
#include "llmc/llama_cpu.h"
#include "dev/test/reference_checks.h"
#include "dev/test/test_rand.h"

#define FD_H 1e-2f
#define FD_ATOL 2e-4
#define FD_RTOL 2e-3

// ---- 1. configs

// the presets have the parameter counts stated in llama_config.h, within 10% of their nominal sizes
static void test_presets(void) {
    int depths[3] = {8, 12, 24};
    size_t counts[3] = {64576960, 118963840, 368886784};
    double nominal[3] = {60e6, 125e6, 350e6};
    for (int i = 0; i < 3; i++) {
        LlamaConfig c = {0};
        int known = llama_config_from_depth(depths[i], 1024, 50257, &c) == 0;
        size_t n = known ? llama_num_params(&c) : 0;
        printf("d%-2d C=%d NH=%d NKV=%d H=%d Vp=%d: %zu params (nominal %.0fM)\n", depths[i], c.channels, c.num_heads,
               c.num_kv_heads, c.hidden, c.padded_vocab_size, n, nominal[i] / 1e6);
        CHECK(known && llama_config_problem(&c) == NULL && n == counts[i] && fabs(n - nominal[i]) <= 0.1 * nominal[i],
              "d%d: %zu parameters, want %zu", depths[i], n, counts[i]);
    }
    LlamaConfig c;
    CHECK(llama_config_from_depth(10, 1024, 50257, &c) == -1, "unknown depth must be refused");
}

// llama_config_problem accepts the tiny shape and names each broken invariant
static void test_config_problems(void) {
    LlamaConfig ok = {32, 100, 128, 2, 4, 2, 64, 192};
    CHECK(llama_config_problem(&ok) == NULL, "the tiny shape is valid");
    LlamaConfig bad[5] = {ok, ok, ok, ok, ok};
    bad[0].num_kv_heads = 3;          // does not divide 4 heads
    bad[1].num_heads = 3;             // 64 channels are not a multiple of 3
    bad[2].channels = 4 * 17;         // odd head size 17
    bad[3].hidden = 200;              // not a multiple of 32
    bad[4].padded_vocab_size = 100;   // not a multiple of 128
    const char* want[5] = {"num_kv_heads", "multiple of num_heads", "even", "hidden", "padded_vocab_size"};
    for (int i = 0; i < 5; i++) {
        const char* p = llama_config_problem(&bad[i]);
        CHECK(p != NULL && strstr(p, want[i]) != NULL, "broken shape %d: got '%s', want a message about %s", i, p ? p : "(none)", want[i]);
    }
}

// init statistics: unit norm weights, matrices N(0, 0.02) with attprojw and downw at 0.02/sqrt(2L) (std within
// 10%, mean within 5 standard errors), zero padded vocab rows of wte and lmheadw
static void check_init(const char* who, const LlamaConfig* c, const float* params) {
    size_t sizes[NUM_LLAMA_PARAMETER_TENSORS];
    llama_param_sizes(c, sizes);
    int ok = 1;
    for (int t = 0; t < NUM_LLAMA_PARAMETER_TENSORS; t++) {
        int vocab_rows = t == LL_WTE || t == LL_LMHEADW;
        size_t n = vocab_rows ? (size_t)c->vocab_size * c->channels : sizes[t];
        double sum = 0.0, sq = 0.0;
        for (size_t i = 0; i < n; i++) { sum += params[i]; sq += (double)params[i] * params[i]; }
        double mean = sum / n, std = sqrt(sq / n - mean * mean);
        if (!llama_param_decays(t)) {
            ok &= mean == 1.0 && std == 0.0;
        } else {
            double want = (t == LL_ATTPROJW || t == LL_DOWNW) ? 0.02 / sqrt(2.0 * c->num_layers) : 0.02;
            ok &= fabs(std - want) <= 0.1 * want && fabs(mean) <= 5.0 * want / sqrt((double)n);
        }
        if (vocab_rows) { for (size_t i = n; i < sizes[t]; i++) { ok &= params[i] == 0.0f; } }
        params += sizes[t];
    }
    printf("%s init: statistics %s\n", who, ok ? "ok" : "WRONG");
    CHECK(ok, "%s init does not have the expected statistics", who);
}

// ---- 2. layers

typedef struct Layer Layer;

// one layer under test: forward fwd maps the inputs (x, w) to out [nout]; r is the random cotangent; for
// swiglu C is the hidden size H, for rope nh heads of HS rotate in rows of `stride`
struct Layer {
    void (*fwd)(Layer*);
    int B, T, C, NH, NKV, HS, nh, stride;
    size_t nout;
    float *x, *w, *out, *r, *aux, *cos_t, *sin_t;
};

// the objective sum(r . fwd(x, w)) in double
static double layer_objective(void* ctx) {
    Layer* k = (Layer*)ctx;
    k->fwd(k);
    double s = 0.0;
    for (size_t i = 0; i < k->nout; i++) { s += (double)k->r[i] * k->out[i]; }
    return s;
}

// counts a finite-difference check of grad [n], the analytic gradient of the objective w.r.t. x [n]
static void fd_expect(const char* name, Layer* k, float* x, const float* grad, size_t n) {
    CHECK(fd_worst_ratio(name, layer_objective, k, x, grad, n, FD_H, FD_ATOL, FD_RTOL, 1) <= 1.0,
          "%s: analytic gradient disagrees with finite differences", name);
}

static void rmsnorm_fwd(Layer* k) { rmsnorm_forward_cpu(k->out, k->aux, k->x, k->w, k->B, k->T, k->C); }

// out = rope(x): a copy of x rotated in place
static void rope_fwd(Layer* k) {
    memcpy(k->out, k->x, k->nout * sizeof(float));
    rope_forward_cpu(k->out, k->cos_t, k->sin_t, k->B, k->T, k->nh, k->HS, k->stride);
}

static void swiglu_fwd(Layer* k) { swiglu_forward_cpu(k->out, k->x, (size_t)k->B * k->T, k->C); }

static void attention_fwd(Layer* k) { attention_gqa_forward_cpu(k->out, k->aux, k->x, k->B, k->T, k->C, k->NH, k->NKV); }

// rmsnorm: gradients of input and weight
static void test_rmsnorm(void) {
    Layer k = {.fwd = rmsnorm_fwd, .B = 2, .T = 3, .C = 8, .nout = 48};
    k.x = randn(48, 1.0f); k.w = randn(8, 1.0f); k.out = zeros(48); k.r = randn(48, 1.0f); k.aux = zeros(6);
    float *gx = zeros(48), *gw = zeros(8);
    rmsnorm_fwd(&k);
    rmsnorm_backward_cpu(gx, gw, k.r, k.x, k.w, k.aux, k.B, k.T, k.C);
    fd_expect("rmsnorm dinp", &k, k.x, gx, 48);
    fd_expect("rmsnorm dweight", &k, k.w, gw, 8);
    free(k.x); free(k.w); free(k.out); free(k.r); free(k.aux); free(gx); free(gw);
}

// RoPE on 3 of 4 heads per row: gradient by finite differences, position 0 and the 4th head untouched, norms kept
static void test_rope(void) {
    int B = 2, T = 5, HS = 8, stride = 4 * HS;
    size_t n = (size_t)B * T * stride;
    Layer k = {.fwd = rope_fwd, .B = B, .T = T, .HS = HS, .nh = 3, .stride = stride, .nout = n};
    k.x = randn(n, 1.0f); k.out = zeros(n); k.r = randn(n, 1.0f);
    k.cos_t = zeros((size_t)T * HS / 2); k.sin_t = zeros((size_t)T * HS / 2);
    rope_table_cpu(k.cos_t, k.sin_t, T, HS, LLAMA_ROPE_THETA);
    float* g = (float*)malloc_check(n * sizeof(float));
    memcpy(g, k.r, n * sizeof(float));
    rope_backward_cpu(g, k.cos_t, k.sin_t, B, T, 3, HS, stride);
    fd_expect("rope dinp", &k, k.x, g, n);
    rope_fwd(&k);
    int kept = 1;
    for (int bt = 0; bt < B * T; bt++) {
        const float *x = k.x + (size_t)bt * stride, *o = k.out + (size_t)bt * stride;
        kept &= memcmp(x + 3 * HS, o + 3 * HS, HS * sizeof(float)) == 0 && (bt % T != 0 || memcmp(x, o, stride * sizeof(float)) == 0);
        for (int h = 0; h < 3; h++) {
            double nx = 0.0, no = 0.0;
            for (int i = 0; i < HS; i++) { nx += x[h * HS + i] * x[h * HS + i]; no += o[h * HS + i] * o[h * HS + i]; }
            kept &= fabs(nx - no) <= 1e-5 * nx;
        }
    }
    CHECK(kept, "rope: identity at position 0, the 4th head untouched, head norms kept");
    free(k.x); free(k.out); free(k.r); free(k.cos_t); free(k.sin_t); free(g);
}

// RoPE makes the q.k dot product depend on the distance only: q at t+s against k at s is the same for every s
static void test_rope_relative(void) {
    int T = 12, HS = 16;
    float* q = randn(HS, 1.0f);
    float* k = randn(HS, 1.0f);
    float *cos_t = zeros((size_t)T * HS / 2), *sin_t = zeros((size_t)T * HS / 2);
    rope_table_cpu(cos_t, sin_t, T, HS, LLAMA_ROPE_THETA);
    float *qs = zeros((size_t)T * HS), *ks = zeros((size_t)T * HS);
    for (int t = 0; t < T; t++) { memcpy(qs + t * HS, q, HS * sizeof(float)); memcpy(ks + t * HS, k, HS * sizeof(float)); }
    rope_forward_cpu(qs, cos_t, sin_t, 1, T, 1, HS, HS);
    rope_forward_cpu(ks, cos_t, sin_t, 1, T, 1, HS, HS);
    double worst = 0.0;
    for (int s = 0; s + 3 < T; s++) {
        double d0 = 0.0, ds = 0.0;
        for (int i = 0; i < HS; i++) { d0 += (double)qs[3 * HS + i] * ks[i]; ds += (double)qs[(s + 3) * HS + i] * ks[s * HS + i]; }
        worst = fmax(worst, fabs(ds - d0));
    }
    printf("%-22s max |q(t+3).k(t) - q(3).k(0)| %.3e  tol 1e-5\n", "rope relative", worst);
    CHECK(worst <= 1e-5, "rope: q.k must depend on the distance only (off by %g)", worst);
    free(q); free(k); free(cos_t); free(sin_t); free(qs); free(ks);
}

// SwiGLU: gradient of the fused gate+up input
static void test_swiglu(void) {
    int N = 6, H = 5;
    Layer k = {.fwd = swiglu_fwd, .B = 1, .T = N, .C = H, .nout = (size_t)N * H};
    k.x = randn((size_t)N * 2 * H, 2.0f); k.out = zeros((size_t)N * H); k.r = randn((size_t)N * H, 1.0f);
    float* g = zeros((size_t)N * 2 * H);
    swiglu_backward_cpu(g, k.x, k.r, (size_t)N, H);
    fd_expect("swiglu dinp", &k, k.x, g, (size_t)N * 2 * H);
    free(k.x); free(k.out); free(k.r); free(g);
}

// grouped-query attention with 4 query heads on 1, 2 and 4 key/value heads: gradient of the fused qkv
static void test_attention_gqa(void) {
    int B = 2, T = 5, NH = 4, HS = 4, C = NH * HS, kvs[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        int NKV = kvs[i], stride = C + 2 * NKV * HS;
        size_t nin = (size_t)B * T * stride, nout = (size_t)B * T * C;
        Layer k = {.fwd = attention_fwd, .B = B, .T = T, .C = C, .NH = NH, .NKV = NKV, .nout = nout};
        k.x = randn(nin, 1.0f); k.out = zeros(nout); k.r = randn(nout, 1.0f); k.aux = zeros((size_t)B * NH * T * T);
        float* g = zeros(nin);
        attention_fwd(&k);
        attention_gqa_backward_cpu(g, k.r, k.x, k.aux, B, T, C, NH, NKV);
        char name[32];
        snprintf(name, sizeof(name), "attention NKV=%d dqkv", NKV);
        fd_expect(name, &k, k.x, g, nin);
        free(k.x); free(k.out); free(k.r); free(k.aux); free(g);
    }
}

// grouped-query attention = multi-head attention on qkv with each key/value head repeated for its query group:
// the same output and probabilities bit for bit, and dk, dv = the sums of the group's multi-head gradients
static void test_gqa_is_repeated_mha(void) {
    int B = 2, T = 6, NH = 6, NKV = 2, HS = 4, C = NH * HS, group = NH / NKV, sg = C + 2 * NKV * HS, sm = 3 * C;
    size_t BT = (size_t)B * T;
    float* qkv = randn(BT * sg, 1.0f);
    float* mha = zeros(BT * sm);
    for (size_t bt = 0; bt < BT; bt++) {
        const float* g = qkv + bt * sg;
        float* m = mha + bt * sm;
        memcpy(m, g, C * sizeof(float));
        for (int h = 0; h < NH; h++) {
            memcpy(m + C + h * HS, g + C + (h / group) * HS, HS * sizeof(float));
            memcpy(m + 2 * C + h * HS, g + C + NKV * HS + (h / group) * HS, HS * sizeof(float));
        }
    }
    float *out_g = zeros(BT * C), *out_m = zeros(BT * C), *att_g = zeros((size_t)B * NH * T * T), *att_m = zeros((size_t)B * NH * T * T);
    float *dout = randn(BT * C, 1.0f), *d_g = zeros(BT * sg), *d_m = zeros(BT * sm), *d_sum = zeros(BT * sg);
    attention_gqa_forward_cpu(out_g, att_g, qkv, B, T, C, NH, NKV);
    attention_forward_cpu(out_m, att_m, mha, B, T, C, NH);
    attention_gqa_backward_cpu(d_g, dout, qkv, att_g, B, T, C, NH, NKV);
    attention_backward_cpu(d_m, dout, mha, att_m, B, T, C, NH);
    for (size_t bt = 0; bt < BT; bt++) {   // fold the multi-head gradient back onto the grouped layout
        float* s = d_sum + bt * sg;
        const float* m = d_m + bt * sm;
        memcpy(s, m, C * sizeof(float));
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < HS; i++) {
                s[C + (h / group) * HS + i] += m[C + h * HS + i];
                s[C + NKV * HS + (h / group) * HS + i] += m[2 * C + h * HS + i];
            }
        }
    }
    CHECK(memcmp(out_g, out_m, BT * C * sizeof(float)) == 0 && memcmp(att_g, att_m, (size_t)B * NH * T * T * sizeof(float)) == 0,
          "GQA forward must equal MHA on repeated key/value heads bit for bit");
    CHECK(close_enough("gqa dqkv", d_g, d_sum, BT * sg, 1e-6f, 1e-5f, 1), "GQA backward must equal the folded MHA backward");
    free(qkv); free(mha); free(out_g); free(out_m); free(att_g); free(att_m); free(dout); free(d_g); free(d_m); free(d_sum);
}

// ---- 3. the model vs the PyTorch oracle

// one forward/backward of the model on r's batch, then when step > 0 an AdamW update (a ref_step_fn)
static float llama_ref_step(void* model, const ReferenceFile* r, int step) {
    LlamaCPU* m = (LlamaCPU*)model;
    llamacpu_forward(m, r->inputs, r->targets, r->B, r->T);
    llamacpu_zero_grad(m);
    llamacpu_backward(m);
    if (step > 0) { llamacpu_update(m, r->lr, r->beta1, r->beta2, r->eps, r->weight_decay, r->grad_clip, step); }
    return m->mean_loss;
}

// the full model on the fixture: one forward/backward (a perturbed key gradient entry must be rejected), then the
// AdamW steps
static void test_model_vs_oracle(const ReferenceFile* ref) {
    LlamaCPU m;
    llamacpu_build(&m, &ref->llama, ref->params);
    llama_ref_step(&m, ref, 0);
    RefModelOutputs out = {m.acts.logits, ref->llama.vocab_size, ref->llama.padded_vocab_size, m.mean_loss,
                           m.grads_memory, m.param_sizes, llama_param_names, NUM_LLAMA_PARAMETER_TENSORS};
    check_ref_outputs(&out, ref, LL_QKVW, (size_t)m.config.channels * m.config.channels + 5);
    check_ref_steps(&m, llama_ref_step, ref);
    llamacpu_free(&m);
}

// ---- 4. precision modes on the fixture's model and batch

static const ReferenceFile* fixture;

// a model from the fixture's weights under st (NULL = FP32) after `steps` AdamW steps on its batch, the patterns
// recorded when st asks (adahop_wants_stats) and voted after each step; returns the loss of the first step
static float train_model(LlamaCPU* m, AdahopState* st, int steps) {
    llamacpu_build(m, &fixture->llama, fixture->params);
    llamacpu_set_precision(m, st);
    float first = 0.0f;
    for (int step = 0; step < steps; step++) {
        m->stats_now = st != NULL && adahop_wants_stats(st, step);
        llamacpu_forward(m, fixture->inputs, fixture->targets, fixture->B, fixture->T);
        llamacpu_zero_grad(m);
        llamacpu_backward(m);
        m->stats_now = 0;
        if (step == 0) { first = m->mean_loss; }
        llamacpu_update(m, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, step + 1);
        if (st != NULL) { adahop_end_step(st, step, NULL); }
    }
    return first;
}

// while an adahop state calibrates, each of the 4 block linears of every layer records x, W and dY once per
// step; the fixed precisions record nothing
static void test_recording(void) {
    int steps = 2;
    for (int p = 0; p < NUM_PRECISIONS; p++) {
        AdahopState st;
        adahop_init(&st, p, fixture->llama.num_layers, steps + 1, STRAT_PLAIN, 0, 1, 4);
        LlamaCPU m;
        train_model(&m, &st, steps);
        int want = p == PREC_ADAHOP ? steps : 0, ok = 1;
        for (int i = 0; i < st.num_linears * NUM_TENSORS; i++) {
            int sum = 0;
            for (int k = 0; k < NUM_PATTERNS; k++) { sum += st.votes[i * NUM_PATTERNS + k]; }
            ok &= sum == want;
        }
        CHECK(ok, "%s: every linear's x, W and dY recorded %d times", precision_names[p], want);
        llamacpu_free(&m);
        adahop_free(&st);
    }
}

// every mode trains: finite falling losses within 10% of FP32, equal to it bit for bit exactly in bf16 mode;
// adahop calibrates in 2 steps and runs its voted strategies after
static void test_modes_run(void) {
    int steps = 4;
    LlamaCPU base;
    train_model(&base, NULL, steps);
    for (int p = 0; p < NUM_PRECISIONS; p++) {
        AdahopState st;
        adahop_init(&st, p, fixture->llama.num_layers, 2, STRAT_PLAIN, 0, 1, 4);
        LlamaCPU m;
        float first = train_model(&m, &st, steps), loss = m.mean_loss, ref = base.mean_loss;
        int same = memcmp(m.params_memory, base.params_memory, m.num_params * sizeof(float)) == 0 && loss == ref;
        printf("%-9s loss %.6f -> %.6f (FP32 %.6f)%s\n", precision_names[p], first, loss, ref, same ? ", = FP32 bit for bit" : "");
        CHECK(isfinite(loss) && loss < first && fabsf(loss - ref) < 0.1f * ref && (p == PREC_BF16) == same,
              "%s: loss %f after %d steps (FP32 %f)", precision_names[p], loss, steps, ref);
        CHECK(p != PREC_ADAHOP || st.calibrated, "adahop calibrated after 2 steps");
        llamacpu_free(&m);
        adahop_free(&st);
    }
    llamacpu_free(&base);
}

// builds the fixture's model with 3 key/value heads for 4 query heads (must die)
static void build_invalid(void) {
    LlamaConfig c = fixture->llama;
    c.num_kv_heads = 3;
    LlamaCPU m;
    llamacpu_build(&m, &c, fixture->params);
}

// sets an AdaHOP state of one layer more than the model (must die)
static void wrong_state(void) {
    LlamaCPU m;
    AdahopState st;
    llamacpu_build(&m, &fixture->llama, fixture->params);
    adahop_init(&st, PREC_MXFP4, fixture->llama.num_layers + 1, 1, STRAT_PLAIN, 0, 1, 4);
    llamacpu_set_precision(&m, &st);
}

int main(int argc, char** argv) {
    const char* ref_path = argc > 1 ? argv[1] : "dev/test/fixtures/llama_tiny_ref.bin";
    if (argc > 2) { die("usage: %s [ref.bin]", argv[0]); }
    rng_seed(&test_rng, 42);
    ReferenceFile ref;
    reference_file_read_family(ref_path, REF_FAMILY_LLAMA, &ref);
    const LlamaConfig* c = &ref.llama;
    printf("reference %s: L=%d C=%d NH=%d NKV=%d H=%d V=%d Vp=%d maxT=%d, %zu params; B=%d T=%d, %d steps\n", ref_path,
           c->num_layers, c->channels, c->num_heads, c->num_kv_heads, c->hidden, c->vocab_size, c->padded_vocab_size,
           c->max_seq_len, ref.num_params, ref.B, ref.T, ref.num_steps);
    fixture = &ref;

    test_presets();
    test_config_problems();
    check_init("torch (fixture)", c, ref.params);
    float* c_init = (float*)malloc_check(ref.num_params * sizeof(float));
    llama_init_params(c, c_init, 1337);
    check_init("C llama_init_params", c, c_init);
    free(c_init);

    test_rmsnorm();
    test_rope();
    test_rope_relative();
    test_swiglu();
    test_attention_gqa();
    test_gqa_is_repeated_mha();

    test_model_vs_oracle(&ref);

    test_recording();
    test_modes_run();
    CHECK(child_fails_with(build_invalid, "num_kv_heads must divide num_heads"), "an invalid shape must be refused");
    CHECK(child_fails_with(wrong_state, "AdaHOP state for 3 layers, model has 2"), "an AdaHOP state of another depth must be refused");

    reference_file_free(&ref);
    return test_summary("test_llama_cpu");
}
