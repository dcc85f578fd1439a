// Finite-difference checks of every backward in llmc/gpt2_cpu.h on tiny random sizes, independent of
// PyTorch: for a layer y = f(x) and a random r, the analytic d(sum r.y)/dx from *_backward_cpu must match
// the central difference (obj(x + h) - obj(x - h)) / 2h. Then the whole model's gradient is checked the
// same way on sampled parameters, AdamW against a double-precision formula, and a deliberately wrong
// gradient must be rejected.
//
// build: gcc -O2 -std=gnu11 -Wall -Wextra -fopenmp -I. dev/test/test_gpt2_layers.c -o build/test_gpt2_layers -lm
//
// Pass criterion per element: |numeric - analytic| <= FD_ATOL + FD_RTOL * |numeric| (FP32 forward, h = 1e-2).
#include "llmc/utils.h"
#include "llmc/gpt2_cpu.h"
#include "dev/test/test_common.h"
#include "dev/test/test_rand.h"

#define FD_H 1e-2f
#define FD_ATOL 2e-4
#define FD_RTOL 2e-3

typedef struct Case Case;
typedef void (*forward_fn)(Case*);

// one layer under test: inputs a, b, c (c often a bias), output out, random cotangent r, forward fwd
struct Case {
    int B, T, C, OC, NH, V, Vp;
    int* tokens;
    float *a, *b, *c, *ga, *gb, *gc;
    float *out, *r, *mean, *rstd, *aux;
    size_t nout;
    forward_fn fwd;
};

// the objective sum(r . fwd(x)) in double of the Case ctx
static double objective(void* ctx) {
    Case* k = (Case*)ctx;
    k->fwd(k);
    double s = 0.0;
    for (size_t i = 0; i < k->nout; i++) { s += (double)k->r[i] * k->out[i]; }
    return s;
}

// worst |numeric - analytic| / (atol + rtol |numeric|) over the n entries of x for the forward f; prints it
static double fd_check(const char* name, Case* k, forward_fn f, float* x, const float* grad, size_t n, int verbose) {
    k->fwd = f;
    return fd_worst_ratio(name, objective, k, x, grad, n, FD_H, FD_ATOL, FD_RTOL, verbose);
}

// runs fd_check and counts the result
static void fd_expect(const char* name, Case* k, forward_fn f, float* x, const float* grad, size_t n) {
    CHECK(fd_check(name, k, f, x, grad, n, 1) <= 1.0, "%s: analytic gradient disagrees with finite differences", name);
}

// ---- layer wrappers: forward and analytic backward with dout = r

static void encoder_fwd(Case* k) { encoder_forward_cpu(k->out, k->tokens, k->a, k->b, k->B, k->T, k->C); }

static void layernorm_fwd(Case* k) { layernorm_forward_cpu(k->out, k->mean, k->rstd, k->a, k->b, k->c, k->B, k->T, k->C); }

static void matmul_fwd(Case* k) { matmul_forward_cpu(k->out, k->a, k->b, k->c, k->B, k->T, k->C, k->OC); }

static void attention_fwd(Case* k) { attention_forward_cpu(k->out, k->aux, k->a, k->B, k->T, k->C, k->NH); }

static void gelu_fwd(Case* k) { gelu_forward_cpu(k->out, k->a, k->nout); }

static void residual_fwd(Case* k) { residual_forward_cpu(k->out, k->a, k->b, k->nout); }

// out = per-position losses, r = 1/BT, so the objective is the mean loss
static void crossentropy_fwd(Case* k) {
    softmax_crossentropy_forward_cpu(k->out, k->aux, k->a, k->tokens, k->B, k->T, k->V, k->Vp);
}

// a Case with random tokens < V and everything else NULL
static Case make_case(int B, int T, int C, int V) {
    Case k;
    memset(&k, 0, sizeof(k));
    k.B = B; k.T = T; k.C = C; k.V = V;
    k.tokens = (int*)malloc_check((size_t)B * T * sizeof(int));
    for (int i = 0; i < B * T; i++) { k.tokens[i] = (int)rng_below(&test_rng, (uint64_t)V); }
    return k;
}

// frees a Case's buffers
static void free_case(Case* k) {
    float* bufs[] = {k->a, k->b, k->c, k->ga, k->gb, k->gc, k->out, k->r, k->mean, k->rstd, k->aux};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { free(bufs[i]); }
    free(k->tokens);
}

// encoder: gradients of wte and wpe (tokens repeat, so rows accumulate)
static void test_encoder(void) {
    Case k = make_case(2, 3, 4, 3);
    size_t BTC = 24;
    k.a = randn(3 * 4, 1.0f); k.b = randn(3 * 4, 1.0f); k.ga = zeros(12); k.gb = zeros(12);
    k.nout = BTC; k.out = zeros(BTC); k.r = randn(BTC, 1.0f);
    encoder_backward_cpu(k.ga, k.gb, k.r, k.tokens, k.B, k.T, k.C);
    fd_expect("encoder dwte", &k, encoder_fwd, k.a, k.ga, 12);
    fd_expect("encoder dwpe", &k, encoder_fwd, k.b, k.gb, 12);
    free_case(&k);
}

// layernorm: gradients of input, weight and bias
static void test_layernorm(void) {
    Case k = make_case(2, 3, 8, 1);
    size_t BTC = 48;
    k.a = randn(BTC, 1.0f); k.b = randn(8, 1.0f); k.c = randn(8, 1.0f);
    k.ga = zeros(BTC); k.gb = zeros(8); k.gc = zeros(8);
    k.nout = BTC; k.out = zeros(BTC); k.r = randn(BTC, 1.0f); k.mean = zeros(6); k.rstd = zeros(6);
    layernorm_fwd(&k);
    layernorm_backward_cpu(k.ga, k.gb, k.gc, k.r, k.a, k.b, k.mean, k.rstd, k.B, k.T, k.C);
    fd_expect("layernorm dinp", &k, layernorm_fwd, k.a, k.ga, BTC);
    fd_expect("layernorm dweight", &k, layernorm_fwd, k.b, k.gb, 8);
    fd_expect("layernorm dbias", &k, layernorm_fwd, k.c, k.gc, 8);
    free_case(&k);
}

// matmul: gradients of input, weight and bias; and a wrong weight gradient must be rejected
static void test_matmul(void) {
    Case k = make_case(2, 3, 5, 1);
    k.OC = 7;
    size_t nin = 30, nw = 35, nout = 42;
    k.a = randn(nin, 1.0f); k.b = randn(nw, 1.0f); k.c = randn(7, 1.0f);
    k.ga = zeros(nin); k.gb = zeros(nw); k.gc = zeros(7);
    k.nout = nout; k.out = zeros(nout); k.r = randn(nout, 1.0f);
    matmul_backward_cpu(k.ga, k.gb, k.gc, k.r, k.a, k.b, k.B, k.T, k.C, k.OC);
    fd_expect("matmul dinp", &k, matmul_fwd, k.a, k.ga, nin);
    fd_expect("matmul dweight", &k, matmul_fwd, k.b, k.gb, nw);
    fd_expect("matmul dbias", &k, matmul_fwd, k.c, k.gc, 7);
    k.gb[11] += 0.05f * (1.0f + fabsf(k.gb[11]));   // one entry off by 0.05 (1 + |g|): must be rejected
    CHECK(fd_check("matmul dweight, wrong", &k, matmul_fwd, k.b, k.gb, nw, 1) > 1.0, "a wrong matmul gradient was not detected");
    free_case(&k);
}

// causal attention: gradient of qkv
static void test_attention(void) {
    Case k = make_case(2, 5, 8, 1);
    k.NH = 2;
    size_t nin = 2 * 5 * 24, nout = 2 * 5 * 8;
    k.a = randn(nin, 1.0f); k.ga = zeros(nin);
    k.nout = nout; k.out = zeros(nout); k.r = randn(nout, 1.0f); k.aux = zeros(2 * 2 * 5 * 5);
    attention_fwd(&k);
    attention_backward_cpu(k.ga, k.r, k.a, k.aux, k.B, k.T, k.C, k.NH);
    fd_expect("attention dqkv", &k, attention_fwd, k.a, k.ga, nin);
    free_case(&k);
}

// gelu and residual: elementwise gradients
static void test_elementwise(void) {
    Case k = make_case(1, 1, 1, 1);
    size_t n = 40;
    k.a = randn(n, 2.0f); k.b = randn(n, 1.0f); k.ga = zeros(n); k.gb = zeros(n);
    k.nout = n; k.out = zeros(n); k.r = randn(n, 1.0f);
    gelu_backward_cpu(k.ga, k.a, k.r, n);
    fd_expect("gelu dinp", &k, gelu_fwd, k.a, k.ga, n);
    memset(k.ga, 0, n * sizeof(float));
    residual_backward_cpu(k.ga, k.gb, k.r, n);
    fd_expect("residual dinp1", &k, residual_fwd, k.a, k.ga, n);
    fd_expect("residual dinp2", &k, residual_fwd, k.b, k.gb, n);
    free_case(&k);
}

// softmax + cross-entropy over V real columns of Vp: gradient of the mean loss; padded columns ignored
static void test_crossentropy(void) {
    Case k = make_case(2, 3, 1, 7);
    k.Vp = 9;
    size_t BT = 6, n = BT * k.Vp;
    k.a = randn(n, 2.0f); k.ga = zeros(n); k.aux = zeros(n);
    for (size_t bt = 0; bt < BT; bt++) { k.a[bt * k.Vp + 7] = 100.0f; k.a[bt * k.Vp + 8] = -100.0f; }
    k.nout = BT; k.out = zeros(BT); k.r = zeros(BT);
    for (size_t i = 0; i < BT; i++) { k.r[i] = 1.0f / (float)BT; }
    crossentropy_fwd(&k);
    crossentropy_softmax_backward_cpu(k.ga, k.r, k.aux, k.tokens, k.B, k.T, k.V, k.Vp);
    fd_expect("crossentropy dlogits", &k, crossentropy_fwd, k.a, k.ga, n);
    int padded_zero = 1;
    for (size_t bt = 0; bt < BT; bt++) {
        for (int i = k.V; i < k.Vp; i++) { padded_zero &= k.ga[bt * k.Vp + i] == 0.0f && k.aux[bt * k.Vp + i] == 0.0f; }
    }
    CHECK(padded_zero, "padded vocab columns must get zero probability and zero gradient");
    free_case(&k);
}

// two AdamW steps against the same formula in double precision
static void test_adamw(void) {
    size_t n = 16;
    float* p = randn(n, 1.0f);
    float* g = randn(n, 1.0f);
    float* m = zeros(n);
    float* v = zeros(n);
    double pd[16], md[16] = {0}, vd[16] = {0};
    double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, max_err = 0.0;
    for (size_t i = 0; i < n; i++) { pd[i] = p[i]; }
    for (int t = 1; t <= 2; t++) {
        adamw_update_cpu(p, g, m, v, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t);
        for (size_t i = 0; i < n; i++) {
            md[i] = b1 * md[i] + (1 - b1) * g[i];
            vd[i] = b2 * vd[i] + (1 - b2) * (double)g[i] * g[i];
            pd[i] -= lr * wd * pd[i];
            pd[i] -= lr * (md[i] / (1 - pow(b1, t))) / (sqrt(vd[i] / (1 - pow(b2, t))) + eps);
        }
    }
    for (size_t i = 0; i < n; i++) { if (fabs(p[i] - pd[i]) > max_err) { max_err = fabs(p[i] - pd[i]); } }
    printf("%-22s n=%-4zu max abs err %.3e  tol 1e-6\n", "adamw 2 steps", n, max_err);
    CHECK(max_err <= 1e-6, "adamw_update_cpu differs from the double formula by %g", max_err);
    free(p); free(g); free(m); free(v);
}

// ---- whole model

static GPT2CPU model;
static int model_B = 2, model_T = 5;
static int* model_tokens;

// whole-model objective: the mean loss (out = &mean_loss copy)
static void model_fwd(Case* k) {
    gpt2cpu_forward(&model, model_tokens, model_tokens + model_B * model_T, model_B, model_T);
    k->out[0] = model.mean_loss;
}

// whole-model gradient on the largest-gradient entry and two random entries of every tensor
static void test_model(void) {
    GPT2Config c = {8, 30, 128, 2, 2, 16};
    size_t n = gpt2_num_params(&c);
    float* params = (float*)malloc_check(n * sizeof(float));
    gpt2_init_params(&c, params, 7);
    for (size_t i = 0; i < n; i++) { params[i] += 0.1f * rng_normal(&test_rng); }   // break the symmetric init
    memset(params + (size_t)c.vocab_size * c.channels, 0, (size_t)(c.padded_vocab_size - c.vocab_size) * c.channels * sizeof(float));
    gpt2cpu_build(&model, &c, params);
    model_tokens = (int*)malloc_check(2 * (size_t)model_B * model_T * sizeof(int));
    for (int i = 0; i < 2 * model_B * model_T; i++) { model_tokens[i] = (int)rng_below(&test_rng, (uint64_t)c.vocab_size); }
    Case k;
    memset(&k, 0, sizeof(k));
    k.nout = 1; k.out = zeros(1); k.r = zeros(1); k.r[0] = 1.0f;
    model_fwd(&k);
    gpt2cpu_zero_grad(&model);
    gpt2cpu_backward(&model);
    size_t off = 0;
    for (int t = 0; t < NUM_PARAMETER_TENSORS; t++) {
        size_t size = model.param_sizes[t], real = t == P_WTE ? (size_t)c.vocab_size * c.channels : size;
        size_t pick[3] = {0, rng_below(&test_rng, real), rng_below(&test_rng, real)};
        for (size_t i = 0; i < real; i++) { if (fabsf(model.grads_memory[off + i]) > fabsf(model.grads_memory[off + pick[0]])) { pick[0] = i; } }
        double worst = 0.0;
        for (int j = 0; j < 3; j++) {
            float* x = model.params_memory + off + pick[j];
            double w = fd_check(gpt2_param_names[t], &k, model_fwd, x, model.grads_memory + off + pick[j], 1, 0);
            if (w > worst) { worst = w; }
        }
        char name[32];
        snprintf(name, sizeof(name), "model d%s (3 entries)", gpt2_param_names[t]);
        printf("%-28s worst err/tol %.3f  %s\n", name, worst, worst <= 1.0 ? "within tol" : "OVER TOL");
        CHECK(worst <= 1.0, "model gradient of %s disagrees with finite differences", gpt2_param_names[t]);
        off += size;
    }
    int padded_zero = 1;
    for (size_t i = (size_t)c.vocab_size * c.channels; i < model.param_sizes[P_WTE]; i++) { padded_zero &= model.grads_memory[i] == 0.0f; }
    CHECK(padded_zero, "padded wte rows must get zero gradient");
    free(k.out); free(k.r); free(params); free(model_tokens);
    gpt2cpu_free(&model);
}

int main(void) {
    rng_seed(&test_rng, 42);
    test_encoder();
    test_layernorm();
    test_matmul();
    test_attention();
    test_elementwise();
    test_crossentropy();
    test_adamw();
    test_model();
    return test_summary("test_gpt2_layers");
}
