// Tests of the precision modes of the CPU reference (llmc/gpt2_cpu.h with llmc/adahop.h): bf16 mode is the
// FP32 model bit for bit; each block-linear GEMM (forward, dX, dW) in each strategy matches the FP64 reference
// adahop_gemm_nt_ref of llmc/adahop_cpu.h on explicitly transposed operands; the dW OE-rows rule holds in the
// model's backward; patterns are recorded exactly when asked; the whole model runs in every mode.
//
// build: gcc -O2 -std=gnu11 -Wall -Wextra -fopenmp -I. dev/test/test_cpu_modes.c -o build/test_cpu_modes -lm
#include "llmc/utils.h"
#include "llmc/rand.h"
#include "llmc/gpt2_cpu.h"
#include "dev/test/test_common.h"

#define GEMM_RTOL 1e-5

static Rng rng;

// n floats from N(0, 1), with every 16th row (of width C) x8 and every 8th column x20: Row and Column outliers
static float* outlier_tensor(int R, int C) {
    float* x = (float*)malloc_check((size_t)R * C * sizeof(float));
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) { x[(size_t)r * C + c] = rng_normal(&rng) * (r % 16 == 3 ? 8.0f : 1.0f) * (c % 8 == 5 ? 20.0f : 1.0f); }
    }
    return x;
}

// t [C x R] = transpose of x [R x C]
static float* transpose(const float* x, int R, int C) {
    float* t = (float*)malloc_check((size_t)R * C * sizeof(float));
    for (int r = 0; r < R; r++) { for (int c = 0; c < C; c++) { t[(size_t)c * R + r] = x[(size_t)r * C + c]; } }
    return t;
}

// max |got - want| / max |want|
static double max_rel(const float* got, const double* want, size_t n) {
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs(got[i] - want[i]));
        ref = fmax(ref, fabs(want[i]));
    }
    return err / ref;
}

// an AdaHOP state of one layer whose GEMMs all run `strategy` (set directly, as after a vote)
static void forced_state(AdahopState* st, int strategy, int oe_k) {
    adahop_init(st, PREC_ADAHOP, 1, 1, STRAT_PLAIN, 0, 1, oe_k);
    st->calibrated = 1;
    for (int i = 0; i < st->num_linears * NUM_GEMMS; i++) { st->strategy[i] = strategy; }
}

// ref [M x N] = adahop_gemm_nt_ref of A [M x K], B [N x K] with OE k clipped to the extracted operand's rows
static double* gemm_ref(const float* A, const float* B, int M, int N, int K, int strategy, int oe_k) {
    double* ref = (double*)malloc_check((size_t)M * N * sizeof(double));
    int rows = strategy == STRAT_IHT_OE_ROWS_A ? M : N;
    adahop_gemm_nt_ref(ref, A, B, M, N, K, strategy, oe_k < rows ? oe_k : rows, MX_SCALE_OCP);
    return ref;
}

// fwd, dX and dW of a block linear in every strategy against the FP64 reference on explicit transposes
static void test_linear_gemms(void) {
    int N = 64, Cin = 64, Cout = 96, ks[2] = {8, 100};
    float* x = outlier_tensor(N, Cin);
    float* w = outlier_tensor(Cout, Cin);
    float* dy = outlier_tensor(N, Cout);
    float* bias = outlier_tensor(1, Cout);
    float *wt = transpose(w, Cout, Cin), *dyt = transpose(dy, N, Cout), *xt = transpose(x, N, Cin);
    float* out = (float*)malloc_check((size_t)N * Cout * sizeof(float));
    float* dinp = (float*)malloc_check((size_t)N * Cin * sizeof(float));
    float* dw = (float*)malloc_check((size_t)Cout * Cin * sizeof(float));
    float* db = (float*)malloc_check((size_t)Cout * sizeof(float));
    int strategies[5] = {STRAT_PLAIN, STRAT_IHT, STRAT_IHT_OE_ROWS_A, STRAT_IHT_OE_ROWS_B, STRAT_BF16};
    double* exact = gemm_ref(x, w, N, Cout, Cin, STRAT_BF16, 1);   // the unquantized forward, bias included
    for (int i = 0; i < N * Cout; i++) { exact[i] += bias[i % Cout]; }
    for (int si = 0; si < 5; si++) {
        for (int ki = 0; ki < 2; ki++) {
            int s = strategies[si], k = ks[ki];
            AdahopState st;
            forced_state(&st, s, k);
            memset(dinp, 0, (size_t)N * Cin * sizeof(float));
            memset(dw, 0, (size_t)Cout * Cin * sizeof(float));
            memset(db, 0, (size_t)Cout * sizeof(float));
            block_linear_forward_cpu(&st, 0, LIN_FC, out, x, w, bias, 1, N, Cin, Cout);
            block_linear_backward_cpu(&st, 0, LIN_FC, dinp, dw, db, dy, x, w, 1, N, Cin, Cout);
            double* rf = gemm_ref(x, w, N, Cout, Cin, s, k);
            double* rx = gemm_ref(dy, wt, N, Cin, Cout, s, k);
            double* rw = gemm_ref(dyt, xt, Cout, Cin, N, s, k);
            for (int i = 0; i < N * Cout; i++) { rf[i] += bias[i % Cout]; }
            double ef = max_rel(out, rf, (size_t)N * Cout), ex = max_rel(dinp, rx, (size_t)N * Cin);
            double ew = max_rel(dw, rw, (size_t)Cout * Cin), eq = max_rel(out, exact, (size_t)N * Cout);
            printf("%-14s k=%-3d fwd %.2e  dX %.2e  dW %.2e   (fwd vs FP64 exact %.2e)\n", adahop_strategy_names[s], k, ef, ex, ew, eq);
            CHECK(ef <= GEMM_RTOL && ex <= GEMM_RTOL && ew <= GEMM_RTOL, "%s k=%d: emulated GEMMs off the reference", adahop_strategy_names[s], k);
            int all_out = (s == STRAT_IHT_OE_ROWS_A && k >= N) || (s == STRAT_IHT_OE_ROWS_B && k >= Cout);   // nothing quantized
            CHECK(s == STRAT_BF16 || all_out ? eq <= GEMM_RTOL : eq > 1e-3, "%s k=%d: the quantization must show unless every row is extracted",
                  adahop_strategy_names[s], k);
            free(rf); free(rx); free(rw);
            adahop_free(&st);
        }
    }
    free(x); free(w); free(dy); free(bias); free(wt); free(dyt); free(xt);
    free(out); free(dinp); free(dw); free(db); free(exact);
}

// a vote that says OE on rows of dY^T for dW gives IHT in the model's dW
static void test_dw_rule(void) {
    int N = 64, Cin = 32, Cout = 64;
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 1, 1, STRAT_PLAIN, 0, 1, 8);
    adahop_record(&st, LIN_QKV, TENSOR_X, PATTERN_NONE);
    adahop_record(&st, LIN_QKV, TENSOR_W, PATTERN_NONE);
    adahop_record(&st, LIN_QKV, TENSOR_DY, PATTERN_COL);   // dW: A = dY^T Row, B = x None -> table: OE rows of A
    adahop_end_step(&st, 0, NULL);
    float* x = outlier_tensor(N, Cin);
    float* w = outlier_tensor(Cout, Cin);
    float* dy = outlier_tensor(N, Cout);
    float *dyt = transpose(dy, N, Cout), *xt = transpose(x, N, Cin);
    float* dinp = (float*)calloc_check((size_t)N * Cin, sizeof(float));
    float* dw = (float*)calloc_check((size_t)Cout * Cin, sizeof(float));
    float* db = (float*)calloc_check((size_t)Cout, sizeof(float));
    block_linear_backward_cpu(&st, 0, LIN_QKV, dinp, dw, db, dy, x, w, 1, N, Cin, Cout);
    double* iht = gemm_ref(dyt, xt, Cout, Cin, N, STRAT_IHT, 8);
    double* oe = gemm_ref(dyt, xt, Cout, Cin, N, STRAT_IHT_OE_ROWS_A, 8);
    CHECK(adahop_strategy_of(&st, LIN_QKV, GEMM_DW) == STRAT_IHT, "dW strategy: IHT");
    CHECK(max_rel(dw, iht, (size_t)Cout * Cin) <= GEMM_RTOL && max_rel(dw, oe, (size_t)Cout * Cin) > 1e-3,
          "the model's dW is the IHT product, not OE on rows of dY^T");
    free(x); free(w); free(dy); free(dyt); free(xt); free(dinp); free(dw); free(db); free(iht); free(oe);
    adahop_free(&st);
}

// the fused reference of the FP32 matmul backward: dinp through matmul_backward_dinp_cpu, then dweight and dbias
// in one loop over the tokens per output channel
static void matmul_backward_fused_ref(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                   const float* weight, int B, int T, int C, int OC) {
    matmul_backward_dinp_cpu(dinp, dout, weight, B, T, C, OC);
    #pragma omp parallel for
    for (int oc = 0; oc < OC; oc++) {
        float* dw = dweight + (size_t)oc * C;
        float db = 0.0f;
        for (int bt = 0; bt < B * T; bt++) {
            const float* x = inp + (size_t)bt * C;
            float g = dout[(size_t)bt * OC + oc];
            db += g;
            for (int i = 0; i < C; i++) { dw[i] += g * x[i]; }
        }
        if (dbias != NULL) { dbias[oc] += db; }
    }
}

// the split matmul backward (separate dweight and dbias passes) equals the fused reference bit for bit
static void test_matmul_split(void) {
    int N = 48, C = 40, OC = 24;
    float *x = outlier_tensor(N, C), *w = outlier_tensor(OC, C), *dy = outlier_tensor(N, OC);
    float* g[2][3];
    for (int v = 0; v < 2; v++) {
        g[v][0] = (float*)calloc_check((size_t)N * C, sizeof(float));
        g[v][1] = (float*)calloc_check((size_t)OC * C, sizeof(float));
        g[v][2] = (float*)calloc_check((size_t)OC, sizeof(float));
    }
    matmul_backward_fused_ref(g[0][0], g[0][1], g[0][2], dy, x, w, 2, N / 2, C, OC);
    matmul_backward_cpu(g[1][0], g[1][1], g[1][2], dy, x, w, 2, N / 2, C, OC);
    CHECK(memcmp(g[0][0], g[1][0], (size_t)N * C * 4) == 0 && memcmp(g[0][1], g[1][1], (size_t)OC * C * 4) == 0
          && memcmp(g[0][2], g[1][2], (size_t)OC * 4) == 0, "matmul_backward_cpu differs from the fused reference");
    for (int v = 0; v < 2; v++) { for (int i = 0; i < 3; i++) { free(g[v][i]); } }
    free(x); free(w); free(dy);
}

// ---- whole model: L2 C32 NH2, V 30 (Vp 128), B 2, T 16 (B*T = 32)

static GPT2Config cfg = {16, 30, 128, 2, 2, 32};
static float* init_params;
static int tokens[2 * 32];

// a model from init_params under st (NULL = FP32) after `steps` AdamW steps on the fixed batch; returns last loss
static float train_model(GPT2CPU* m, AdahopState* st, int steps, int stats) {
    gpt2cpu_build(m, &cfg, init_params);
    gpt2cpu_set_precision(m, st);
    float loss = 0.0f;
    for (int step = 1; step <= steps; step++) {
        m->stats_now = stats;
        gpt2cpu_forward(m, tokens, tokens + 32, 2, 16);
        gpt2cpu_zero_grad(m);
        gpt2cpu_backward(m);
        m->stats_now = 0;
        loss = m->mean_loss;
        gpt2cpu_update(m, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, step);
    }
    return loss;
}

// bf16 mode (and an adahop state whose strategies are all BF16, recording patterns) = the FP32 model bit for bit
static void test_bf16_identical(void) {
    GPT2CPU ref, m;
    train_model(&ref, NULL, 3, 0);
    AdahopState bf, forced;
    adahop_init(&bf, PREC_BF16, cfg.num_layers, 30, STRAT_PLAIN, 0, 5, 64);
    adahop_init(&forced, PREC_ADAHOP, cfg.num_layers, 30, STRAT_PLAIN, 0, 5, 64);
    forced.calibrated = 1;
    for (int i = 0; i < forced.num_linears * NUM_GEMMS; i++) { forced.strategy[i] = STRAT_BF16; }
    AdahopState* states[2] = {&bf, &forced};
    for (int i = 0; i < 2; i++) {
        train_model(&m, states[i], 3, i);
        size_t nacts = gpt2cpu_num_acts(&cfg, 2, 16);
        int same = memcmp(ref.params_memory, m.params_memory, ref.num_params * 4) == 0
                   && memcmp(ref.grads_memory, m.grads_memory, ref.num_params * 4) == 0
                   && memcmp(ref.batch.acts_memory, m.batch.acts_memory, nacts * 4) == 0 && ref.mean_loss == m.mean_loss;
        CHECK(same, "%s: params, grads and activations must equal the FP32 model bit for bit", i == 0 ? "bf16 mode" : "all-BF16 adahop state");
        gpt2cpu_free(&m);
    }
    adahop_free(&bf);
    adahop_free(&forced);
    gpt2cpu_free(&ref);
}

// x, W and dY of every linear are recorded once per forward/backward with stats_now, never without
static void test_recording(void) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, cfg.num_layers, 30, STRAT_PLAIN, 0, 5, 64);
    GPT2CPU m;
    train_model(&m, &st, 1, 0);
    int none = 1, once = 1;
    for (int i = 0; i < st.num_linears * NUM_TENSORS * NUM_PATTERNS; i++) { none &= st.votes[i] == 0; }
    gpt2cpu_free(&m);
    train_model(&m, &st, 2, 1);
    for (int i = 0; i < st.num_linears * NUM_TENSORS; i++) {
        int sum = 0;
        for (int p = 0; p < NUM_PATTERNS; p++) { sum += st.votes[i * NUM_PATTERNS + p]; }
        once &= sum == 2;
    }
    CHECK(none && once, "patterns: none without stats_now, one per step and tensor with it");
    gpt2cpu_free(&m);
    adahop_free(&st);
}

// every mode trains the tiny model: finite falling losses within 10% of FP32, different from it except in bf16 mode
static void test_modes_run(void) {
    GPT2CPU m;
    float base = train_model(&m, NULL, 4, 0);
    gpt2cpu_free(&m);
    for (int p = 0; p < NUM_PRECISIONS; p++) {
        AdahopState st;
        adahop_init(&st, p, cfg.num_layers, 2, STRAT_PLAIN, 0, 1, 4);
        float first = 0.0f, loss = 0.0f;
        gpt2cpu_build(&m, &cfg, init_params);
        gpt2cpu_set_precision(&m, &st);
        for (int step = 0; step < 4; step++) {
            m.stats_now = adahop_wants_stats(&st, step);
            gpt2cpu_forward(&m, tokens, tokens + 32, 2, 16);
            gpt2cpu_zero_grad(&m);
            gpt2cpu_backward(&m);
            m.stats_now = 0;
            loss = m.mean_loss;
            if (step == 0) { first = loss; }
            gpt2cpu_update(&m, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, step + 1);
            adahop_end_step(&st, step, NULL);
        }
        printf("%-9s loss %.6f -> %.6f (FP32 %.6f)\n", precision_names[p], first, loss, base);
        CHECK(isfinite(loss) && loss < first && fabsf(loss - base) < 0.1f * base && (p == PREC_BF16) == (loss == base),
              "%s: loss %f after 4 steps (FP32 %f)", precision_names[p], loss, base);
        CHECK(p != PREC_ADAHOP || st.calibrated, "adahop calibrated after 2 steps");
        gpt2cpu_free(&m);
        adahop_free(&st);
    }
}

int main(void) {
    rng_seed(&rng, 7);
    init_params = (float*)malloc_check(gpt2_num_params(&cfg) * sizeof(float));
    gpt2_init_params(&cfg, init_params, 11);
    for (int i = 0; i < 64; i++) { tokens[i] = (int)rng_below(&rng, (uint64_t)cfg.vocab_size); }
    test_linear_gemms();
    test_dw_rule();
    test_matmul_split();
    test_bf16_identical();
    test_recording();
    test_modes_run();
    free(init_params);
    return test_summary("test_cpu_modes");
}
