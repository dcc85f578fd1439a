// The GPU AdaHOP linear layer (llmc/adahop_linear.cuh) against the independent PyTorch implementation
// (dev/adahop_linear_ref.py case files): for each of the three GEMMs the quantized operands must match bit for
// bit, the OE indices exactly, and the outputs within 1e-5 relative Frobenius error of the reference's float64
// products (exact path, BF16 strategy) or within fast_path_tolerance (FP8 GEMMs). One exception: the GPU ranks
// rows by FP32 sums of squares, the reference by FP64 ones, so where rows' norms agree to within FP32 rounding (e.g. rows dominated by the same
// outlier columns) the two may pick different rows of that near-tie; the test then checks that the selections
// differ only between such rows (relative 1e-5) and does not compare that GEMM's operands and outputs.
// Usage: build/test_adahop_linear_gpu case.bin [case.bin ...]
#include "llmc/cuda_common.cuh"
#include "llmc/adahop_linear.cuh"
#include "llmc/adahop_cpu.h"
#include "dev/test/adahop_case_file.h"
#include "dev/test/test_common.h"
#include "dev/cuda/test_transfer.cuh"

static int same_bytes(const uint8_t* dev, const uint8_t* ref, size_t n) {
    uint8_t* h = (uint8_t*)malloc_check(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost));
    int ok = memcmp(h, ref, n) == 0;
    free(h);
    return ok;
}

static int contains(const int* v, int k, int x) {
    for (int j = 0; j < k; j++) { if (v[j] == x) { return 1; } }
    return 0;
}

// the fast path's E4M3 operand e against mx_to_e4m3 of the reference's MXFP4 codes and scales: the same values, and
// the same row scales outside the k OE rows oe_rows (device; a row zeroed after a one-pass quantization keeps the
// scale it had)
static int same_e4m3_as_codes(const E4M3Operand* e, const uint8_t* codes, const uint8_t* scales, const int* oe_rows, int k) {
    int rows = e->rows, K = e->K;
    MXOperand ref = mx_operand_alloc(rows, K);
    E4M3Operand want = e4m3_operand_alloc(rows, K);
    cudaCheck(cudaMemcpy(ref.codes, codes, (size_t)rows * K / 2, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(ref.scales, scales, (size_t)rows * K / 32, cudaMemcpyHostToDevice));
    mx_to_e4m3(&want, &ref, 0);
    uint8_t *gv = (uint8_t*)download(e->values, (size_t)rows * K), *wv = (uint8_t*)download(want.values, (size_t)rows * K);
    float *gs = (float*)download(e->row_scale, rows * sizeof(float)), *ws = (float*)download(want.row_scale, rows * sizeof(float));
    int* idx = k > 0 ? (int*)download(oe_rows, k * sizeof(int)) : NULL;
    int ok = memcmp(gv, wv, (size_t)rows * K) == 0;
    for (int r = 0; r < rows && ok; r++) { ok = contains(idx, k, r) || memcmp(&gs[r], &ws[r], sizeof(float)) == 0; }
    free(gv); free(wv); free(gs); free(ws); free(idx);
    mx_operand_free(&ref);
    e4m3_operand_free(&want);
    return ok;
}

// 1 when the selection got (k rows, ascending) differs from the reference's want only by rows whose FP64 squared
// norms sq (NaN counting as +Inf) lie within relative 1e-5 of the reference's k-th largest: both are top-k
// selections up to FP32 rounding
static int near_tie_selection(const int* got, const int* want, int k, const double* sq, int rows) {
    double threshold = INFINITY;
    for (int j = 0; j < k; j++) { threshold = fmin(threshold, isnan(sq[want[j]]) ? INFINITY : sq[want[j]]); }
    int ok = 1;
    for (int j = 0; j < k; j++) { ok &= got[j] >= 0 && got[j] < rows && (j == 0 || got[j] > got[j - 1]); }
    for (int j = 0; j < k && ok; j++) {   // a row in one selection only must sit at the threshold
        int rows_in_one[2] = {contains(want, k, got[j]) ? -1 : got[j], contains(got, k, want[j]) ? -1 : want[j]};
        for (int i = 0; i < 2 && ok; i++) {
            if (rows_in_one[i] < 0) { continue; }
            double n = isnan(sq[rows_in_one[i]]) ? INFINITY : sq[rows_in_one[i]];
            ok = isinf(threshold) ? isinf(n) : fabs(n - threshold) <= 1e-5 * threshold;
        }
    }
    return ok;
}

// Hopper's FP8 tensor cores add a k-step's products aligned to the largest with about 14 significant bits
// (DeepSeek-V3 report, section 3.3.2), and cuBLASLt promotes the sum to FP32 every few k-steps (FAST_ACCUM off):
// each output element is off by at most about u * sum_k |a_ik b_jk| with u = 4 k-steps * 2^-13 = 2^-11. The largest
// errors appear on dW products of row-outlier tokens, whose E4M3 rows span many exponents.
#define FP8_ACCUMULATION_U 0x1p-11

// ||(|A| |B|^T)||_F in FP64, A [M x K] and B [N x K] (the quantities bounding FP8 accumulation errors)
static double abs_product_norm(NTOperand a, NTOperand b) {
    double s2 = 0.0;
    for (int i = 0; i < a.rows; i++) {
        for (int j = 0; j < b.rows; j++) {
            double s = 0.0;
            for (int k = 0; k < a.K; k++) { s += fabs((double)nt_at(a, i, k) * nt_at(b, j, k)); }
            s2 += s * s;
        }
    }
    return sqrt(s2);
}

// relative Frobenius tolerance of GEMM g's output against the reference: 1e-5 for BF16 GEMMs (exact path, BF16
// strategy); on the fast path 1e-5 + FP8_ACCUMULATION_U * ||(|A||B|^T)|| / ||reference||, the magnitudes taken
// from the quantized operands (the reference's codes) plus the BF16 ones (OE rows / columns are added in BF16)
static double fast_path_tolerance(const AdahopCase* c, int g, NTOperand a, NTOperand b, const float* want, size_t n) {
    double w2 = 0.0;
    for (size_t i = 0; i < n; i++) { w2 += (double)want[i] * want[i]; }
    double bound = abs_product_norm(a, b);
    float* deq[2];
    for (int o = 0; o < 2; o++) {
        int rows = o == 0 ? a.rows : b.rows;
        MXTensor q = {rows, a.K, c->codes[g][o], c->scales[g][o]};
        deq[o] = (float*)malloc_check((size_t)rows * a.K * sizeof(float));
        dequantize_cpu(deq[o], &q);
    }
    NTOperand qa = {deq[0], a.rows, a.K, 0}, qb = {deq[1], b.rows, a.K, 0};
    bound += abs_product_norm(qa, qb);
    free(deq[0]); free(deq[1]);
    return 1e-5 + FP8_ACCUMULATION_U * bound / sqrt(w2 > 0 ? w2 : 1.0);
}

// what the backward of lin reads of x [N x Cin] (adahop_linear_input_need) written into `into`, as the trainer's
// recomputed inputs are: all of x copied, or its OE channels gathered channel-major; *x_all / *x_channels point at it
static void provide_input(const AdahopLinear* lin, const floatX* x, int N, floatX* into, const floatX** x_all,
                          const floatX** x_channels) {
    LinearInputNeed need = adahop_linear_input_need(lin);
    *x_all = *x_channels = NULL;
    if (need.reads == LINEAR_READS_CHANNELS) {
        gather_cols_kernel<<<ceil_div((long)need.k * N, 256), 256>>>(into, x, need.channels, need.k, N, lin->Cin);
        cudaCheckLaunch();
        *x_channels = into;
    } else if (need.reads == LINEAR_READS_INPUT) {
        cudaCheck(cudaMemcpy(into, x, (size_t)N * lin->Cin * sizeof(floatX), cudaMemcpyDeviceToDevice));
        *x_all = into;
    }
}

// The trainer's path, adahop_linear_forward + adahop_linear_backward with x^T saved in MXFP4 at forward time
// (and only the OE channel indices: their BF16 values are read from x at backward time), or with nothing saved
// when the caller keeps x (input_kept): the saved operand must equal the reference's dW operand bit for bit, and
// y, dX, dW the reference products within the tolerance (those of the GEMMs run_case found comparable).
static void check_saved_path(AdahopWorkspace* ws, const AdahopCase* c, const floatX* x, const floatX* w,
                             const floatX* dy, int gemm_path, bool input_kept, const bool comparable[3], const double tol[3]) {
    if (c->stochastic) { return; }   // the trainer seeds its stochastic rounding per step and linear, not per case
    int N = c->N, Cin = c->Cin, Cout = c->Cout;
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 1, 1, STRAT_PLAIN, 0, 1, c->oe_k);
    st.calibrated = 1;
    for (int g = 0; g < NUM_GEMMS; g++) { st.strategy[LIN_FC * NUM_GEMMS + g] = c->strategy[g]; }
    LinearSaved saved;
    memset(&saved, 0, sizeof(saved));
    saved.input_kept = input_kept;
    if (!input_kept) { saved.x_t = mx_operand_alloc(Cin, N); }
    saved.x_channel_idx = (int*)device_malloc((size_t)c->oe_k * sizeof(int), "OE indices");
    floatX *y = (floatX*)device_malloc((size_t)N * Cout * sizeof(floatX), "y"), *dx = (floatX*)device_malloc((size_t)N * Cin * sizeof(floatX), "dX");
    float* dw = (float*)device_malloc((size_t)Cout * Cin * sizeof(float), "dW");
    cudaCheck(cudaMemset(dw, 0, (size_t)Cout * Cin * sizeof(float)));
    AdahopPass pass = {ws, &st, 0, 0, false, 0};
    AdahopLinear lin = {.pass = &pass, .saved = &saved, .index = LIN_FC, .Cin = Cin, .Cout = Cout, .w = w, .bias = NULL,
                        .dw = dw, .dbias = NULL};
    adahop_linear_forward(&lin, y, x, N, true);
    if (c->strategy[GEMM_DW] != STRAT_BF16 && !input_kept && comparable[GEMM_DW]) {
        CHECK(same_bytes(saved.x_t.codes, c->codes[GEMM_DW][1], (size_t)Cin * N / 2) && same_bytes(saved.x_t.scales, c->scales[GEMM_DW][1], (size_t)Cin * N / 32),
              "saved path: x^T saved at forward time differs from the reference's dW operand (strategy %d)", c->strategy[GEMM_DW]);
    }
    // what the backward reads of x arrives in the dX buffer, as the trainer's recomputed inputs do: all of x, or only
    // its OE channels (channel-major), here copied or gathered from x
    const floatX *x_all, *x_channels;
    provide_input(&lin, x, N, dx, &x_all, &x_channels);
    adahop_linear_backward(&lin, dx, dy, N, x_all, x_channels, NULL);
    float* got[3] = {from_device_bf16(y, (size_t)N * Cout), from_device_bf16(dx, (size_t)N * Cin), (float*)malloc_check((size_t)Cout * Cin * sizeof(float))};
    cudaCheck(cudaMemcpy(got[2], dw, (size_t)Cout * Cin * sizeof(float), cudaMemcpyDeviceToHost));
    const float* want[3] = {c->y, c->dX, c->dW};
    size_t n[3] = {(size_t)N * Cout, (size_t)N * Cin, (size_t)Cout * Cin};
    for (int g = 0; g < 3; g++) {
        double d2 = 0.0, r2 = 0.0;
        for (size_t i = 0; i < n[g]; i++) { double d = (double)got[g][i] - want[g][i]; d2 += d * d; r2 += (double)want[g][i] * want[g][i]; }
        double rel = sqrt(d2 / (r2 > 0 ? r2 : 1.0)), tol_g = g < 2 ? 1e-2 : tol[g];   // y, dX are BF16
        CHECK(!comparable[g] || rel <= tol_g, "saved path%s %s (strategy %d, %s path): relative error %.2e above %.2e", input_kept ? " (input kept)" : "",
              case_gemm_names[g], c->strategy[g], gemm_path ? "fast" : "exact", rel, tol_g);
        free(got[g]);
    }
    mx_operand_free(&saved.x_t);
    cudaCheck(cudaFree(saved.x_channel_idx)); cudaCheck(cudaFree(y)); cudaCheck(cudaFree(dx)); cudaCheck(cudaFree(dw));
    adahop_free(&st);
}

// the deferred pattern statistics: x, W and dY queued, then flushed, give one vote each, for the pattern the C
// reference finds in the same BF16 tensors
static void check_pattern_queue(AdahopWorkspace* ws, const char* path, const floatX* x, const floatX* w, const floatX* dy,
                                int N, int Cin, int Cout) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 1, 1, STRAT_PLAIN, 0, 1, ws->oe_k);
    const floatX* t[NUM_TENSORS] = {x, w, dy};
    int R[NUM_TENSORS] = {N, Cout, N}, C[NUM_TENSORS] = {Cin, Cin, Cout};
    for (int i = 0; i < NUM_TENSORS; i++) { adahop_queue_pattern(ws, LIN_FC, i, t[i], R[i], C[i], 0); }
    adahop_flush_patterns(ws, &st, 0);
    for (int i = 0; i < NUM_TENSORS; i++) {
        float* h = from_device_bf16(t[i], (size_t)R[i] * C[i]);
        int want = tensor_pattern_cpu(h, R[i], C[i]);
        const int* v = st.votes + (LIN_FC * NUM_TENSORS + i) * NUM_PATTERNS;
        CHECK(v[want] == 1 && v[0] + v[1] + v[2] == 1, "%s: queued pattern of tensor %d: votes %d/%d/%d, reference pattern %d",
              path, i, v[0], v[1], v[2], want);
        free(h);
    }
    CHECK(ws->num_pending == 0 && ws->host_stats_used == 0, "%s: the flush empties the queue", path);
    adahop_free(&st);
}

static void run_case(const char* path, int gemm_path) {
    AdahopCase c;
    adahop_case_read(path, &c);
    int N = c.N, Cin = c.Cin, Cout = c.Cout;
    floatX *x = to_device_bf16(c.x, (size_t)N * Cin), *w = to_device_bf16(c.W, (size_t)Cout * Cin), *dy = to_device_bf16(c.dY, (size_t)N * Cout);
    int max_rows = N > Cin ? N : Cin;
    max_rows = max_rows > Cout ? max_rows : Cout;
    size_t max_elems = (size_t)max_rows * max_rows;
    AdahopWorkspace ws;
    AdahopWorkspaceSpec spec = {.max_elems = max_elems, .max_rows = max_rows, .max_k = max_rows, .max_out_elems = (size_t)Cin * Cout,
                                .path = gemm_path, .stochastic_grads = c.stochastic, .oe_k = c.oe_k, .seed = 0,
                                .scale_rule_fwd = MX_SCALE_OCP, .scale_rule_grad = MX_SCALE_OCP, .max_pending = NUM_TENSORS,
                                .stats_floats = 6 * (size_t)max_rows};
    adahop_workspace_init(&ws, &spec);
    Operand a[3] = {{x, N, Cin, false}, {dy, N, Cout, false}, {dy, Cout, N, true}};
    Operand b[3] = {{w, Cout, Cin, false}, {w, Cin, Cout, true}, {x, Cin, N, true}};
    const float* want[3] = {c.y, c.dX, c.dW};
    float* out = (float*)device_malloc(max_elems * sizeof(float), "case output");
    // the same operands on the host (FP64 norms of the OE rows, the fast path's tolerance)
    NTOperand host_a[3] = {{c.x, N, Cin, 0}, {c.dY, N, Cout, 0}, {c.dY, Cout, N, 1}};
    NTOperand host_b[3] = {{c.W, Cout, Cin, 0}, {c.W, Cin, Cout, 1}, {c.x, Cin, N, 1}};
    bool comparable[3] = {true, true, true};
    double tol[3];
    for (int g = 0; g < 3; g++) {
        int M = a[g].rows, Nn = b[g].rows, st = c.strategy[g];
        uint64_t seed = mx_mix64(c.seed ^ (uint64_t)g);
        AdahopGemm gemm = {.strategy = st, .out = out, .out_fp32 = true, .beta = 0.0f, .a = a[g], .b = b[g], .a_is_grad = g > 0,
                           .seed = seed};
        adahop_gemm(&ws, &gemm, 0);
        float* got = (float*)malloc_check((size_t)M * Nn * sizeof(float));
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(got, out, (size_t)M * Nn * sizeof(float), cudaMemcpyDeviceToHost));
        if (c.k[g] > 0) {
            int* idx = (int*)malloc_check(c.k[g] * sizeof(int));
            cudaCheck(cudaMemcpy(idx, ws.oe_idx, c.k[g] * sizeof(int), cudaMemcpyDeviceToHost));
            if (memcmp(idx, c.idx[g], c.k[g] * sizeof(int)) != 0) {
                NTOperand op = st == STRAT_IHT_OE_ROWS_A ? host_a[g] : host_b[g];   // as stored: [K x rows] when trans
                double* sq = op.trans ? norms_sq_cpu(op.p, op.K, op.rows, 1) : norms_sq_cpu(op.p, op.rows, op.K, 0);
                comparable[g] = false;
                CHECK(near_tie_selection(idx, c.idx[g], c.k[g], sq, op.rows),
                      "%s %s: OE indices differ (beyond rows tied within FP32 rounding)", path, case_gemm_names[g]);
                free(sq);
                printf("  %s %-3s: OE picked other rows of a near-tie (norms equal within 1e-5): operands and output not compared\n",
                       path, case_gemm_names[g]);
            }
            free(idx);
        }
        double d2 = 0.0, r2 = 0.0;
        for (size_t i = 0; i < (size_t)M * Nn; i++) { double d = (double)got[i] - want[g][i]; d2 += d * d; r2 += (double)want[g][i] * want[g][i]; }
        double rel = sqrt(d2 / (r2 > 0 ? r2 : 1.0));
        tol[g] = gemm_path == GEMM_PATH_FAST && st != STRAT_BF16 ? fast_path_tolerance(&c, g, host_a[g], host_b[g], want[g], (size_t)M * Nn) : 1e-5;
        CHECK(!comparable[g] || rel <= tol[g], "%s %s (strategy %d, %s path): relative error %.2e above %.2e", path, case_gemm_names[g], st,
              gemm_path ? "fast" : "exact", rel, tol[g]);
        if (st != STRAT_BF16 && comparable[g]) {   // exact path: the MXFP4 operands; fast path: their E4M3 form
            int K = c.K[g], ka = st == STRAT_IHT_OE_ROWS_A ? c.k[g] : 0, kb = st == STRAT_IHT_OE_ROWS_B ? c.k[g] : 0;
            int same;
            if (gemm_path == GEMM_PATH_EXACT) {
                same = same_bytes(ws.qa.codes, c.codes[g][0], (size_t)M * K / 2) && same_bytes(ws.qa.scales, c.scales[g][0], (size_t)M * K / 32) &&
                       same_bytes(ws.qb.codes, c.codes[g][1], (size_t)Nn * K / 2) && same_bytes(ws.qb.scales, c.scales[g][1], (size_t)Nn * K / 32);
            } else {
                E4M3Operand ea = e4m3_view(&ws.ea, M, K), eb = e4m3_view(&ws.eb, Nn, K);
                same = same_e4m3_as_codes(&ea, c.codes[g][0], c.scales[g][0], ws.oe_idx, ka) &&
                       same_e4m3_as_codes(&eb, c.codes[g][1], c.scales[g][1], ws.oe_idx, kb);
            }
            CHECK(same, "%s %s (strategy %d, %s path): quantized operands differ from the PyTorch reference", path, case_gemm_names[g], st,
                  gemm_path ? "fast" : "exact");
        }
        printf("  %s %-3s strategy %d %-5s path: rel. error %.2e (tolerance %.2e)\n", path, case_gemm_names[g], st,
               gemm_path ? "fast" : "exact", rel, tol[g]);
        free(got);
    }
    check_pattern_queue(&ws, path, x, w, dy, N, Cin, Cout);
    check_saved_path(&ws, &c, x, w, dy, gemm_path, false, comparable, tol);
    check_saved_path(&ws, &c, x, w, dy, gemm_path, true, comparable, tol);
    adahop_workspace_free(&ws);
    cudaCheck(cudaFree(x)); cudaCheck(cudaFree(w)); cudaCheck(cudaFree(dy)); cudaCheck(cudaFree(out));
    adahop_case_free(&c);
}

int main(int argc, char** argv) {
    if (argc < 2) { die("usage: %s case.bin [case.bin ...] (write cases with dev/adahop_linear_ref.py)", argv[0]); }
    setvbuf(stdout, NULL, _IOLBF, 0);   // progress lines stay in order with error messages
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: this test needs one"); }
    matmul_init();
    for (int i = 1; i < argc; i++) {
        run_case(argv[i], GEMM_PATH_EXACT);
        run_case(argv[i], GEMM_PATH_FAST);
    }
    matmul_free();
    return test_summary("test_adahop_linear_gpu");
}
