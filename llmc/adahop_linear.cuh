// The AdaHOP linear layer: y = x W^T + b and its two backward GEMMs, each run with its own strategy
// (llmc/adahop.h): BF16, plain MXFP4, IHT (Hadamard + MXFP4), or IHT with outlier extraction (OE) on the
// rows of A or the rows of the NT-form B (the columns of B as [K x N]). All three GEMMs are written
// out = A B^T with both operands K-major ("NT form"):
//   forward  y  [N x Cout] : A = x    [N x Cin]  , B = W   [Cout x Cin]
//   backward dX [N x Cin]  : A = dY   [N x Cout] , B = W^T [Cin x Cout]   (W quantized along its columns)
//   backward dW [Cout x Cin]: A = dY^T [Cout x N], B = x^T [Cin x N]      (x saved in this form at forward time)
// The quantized product runs on the exact path (dequantize + BF16 GEMM) or the fast path (E4M3 on FP8
// tensor cores); both compute the same MXFP4 arithmetic (llmc/mxfp4.cuh). The trainer calls a linear through
// AdahopLinear (adahop_linear_forward / adahop_linear_backward); tests and benches may call adahop_gemm directly.
#ifndef LLMC_ADAHOP_LINEAR_CUH
#define LLMC_ADAHOP_LINEAR_CUH

#include "cuda_common.cuh"
#include "matmul.cuh"
#include "mxfp4.cuh"
#include "outliers.cuh"
#include "adahop.h"

enum { GEMM_PATH_EXACT = 0, GEMM_PATH_FAST = 1 };

// A GEMM operand as it sits in memory: the NT-form operand is `data` [rows x K] row-major, or, when
// transposed, the transpose of `data` [K x rows].
typedef struct { const floatX* data; int rows, K; bool transposed; } Operand;

// one tensor's pattern statistics waiting in the pinned buffer: row variances [R] at offset, column variances [C] after
typedef struct { int linear, tensor, R, C; size_t offset; } PendingPattern;

// what the workspace is sized for and how its linears quantize: the largest rows * K of any operand, its largest
// row count and K, the largest FP32 GEMM output (the largest weight's dW); the GEMM path, stochastic rounding of
// the gradient operands, OE's row count, the seed of the rounding; the block-scale rule (llmc/mxfp4.h) of the
// forward operands (x, W; also x^T and W^T in the backward) and of the gradient operands (dY, dY^T); up to
// max_pending tensors of pattern statistics per step holding at most stats_floats row and column variances together
typedef struct {
    size_t max_elems;
    int max_rows, max_k;
    size_t max_out_elems;
    int path, stochastic_grads, oe_k;
    uint64_t seed;
    int scale_rule_fwd, scale_rule_grad;
    int max_pending;
    size_t stats_floats;
} AdahopWorkspaceSpec;

// Scratch shared by every linear of the model, sized for the largest operand
typedef struct {
    int path, stochastic_grads, oe_k;
    int scale_rule_fwd, scale_rule_grad;   // block-scale rules of the forward and the gradient operands
    uint64_t seed;
    size_t max_elems;                 // largest rows * K of any operand
    int max_rows;                     // largest operand row count
    MXOperand qa, qb;                 // buffers for the quantized operands (views are made per GEMM)
    E4M3Operand ea, eb;
    floatX *deq_a, *deq_b;            // exact path: dequantized operands
    floatX* oe_rows;                  // [oe_k x max K] extracted BF16 rows
    float* oe_part;                   // [oe_k x max rows] FP32 product of the extracted rows
    int* oe_idx;                      // [oe_k]
    float *row_var, *row_sq, *col_var, *col_sq, *col_sum, *colsum_scratch;   // statistics
    float* col_sq_part;               // per-tile column sums of squares from the column quantizer
    float* gemm_part;                 // fast path: [max_out_elems] FP32 unit-scale product of an FP32-output (dW) GEMM
    size_t max_out_elems;             // largest FP32 GEMM output (the largest weight)
    // pattern statistics of a step: row and column variances of each recorded tensor, copied to pinned host memory
    // without waiting and classified together by adahop_flush_patterns at the end of the step
    float* host_stats;                // pinned, host_stats_cap floats
    size_t host_stats_cap, host_stats_used;
    PendingPattern* pending;          // [max_pending]
    int num_pending, max_pending;
    double* host_stats_f64;           // one tensor's variances in double, as the classifier takes them
} AdahopWorkspace;

// one linear's state kept from forward to backward: x^T in MXFP4 (the dW operand) and, for OE on x's
// channels in the dW GEMM, the indices of those channels (their BF16 values are taken from x at backward time,
// which the caller recomputes when it does not keep x: see adahop_linear_input_need). A linear whose
// input the caller keeps in BF16 anyway (input_kept) saves nothing: its dW operand is quantized at backward time.
typedef struct {
    MXOperand x_t;                    // [Cin x N] buffer for the largest N; views of the current N are used
    int* x_channel_idx;               // [oe_k]
    int dw_strategy_saved;            // the dW strategy x_t was prepared for
    bool input_kept;
} LinearSaved;

static inline MXOperand mx_view(const MXOperand* buf, int rows, int K) { MXOperand v = {rows, K, buf->codes, buf->scales}; return v; }
static inline E4M3Operand e4m3_view(const E4M3Operand* buf, int rows, int K) {
    E4M3Operand v = {rows, K, buf->values, buf->row_scale, buf->row_exp, buf->inexact_blocks};
    return v;
}

static inline void adahop_workspace_init(AdahopWorkspace* ws, const AdahopWorkspaceSpec* spec) {
    memset(ws, 0, sizeof(*ws));
    size_t max_elems = spec->max_elems, max_out_elems = spec->max_out_elems, stats_floats = spec->stats_floats;
    int max_rows = spec->max_rows, max_k = spec->max_k, path = spec->path, oe_k = spec->oe_k, max_pending = spec->max_pending;
    ws->path = path; ws->stochastic_grads = spec->stochastic_grads; ws->oe_k = oe_k; ws->seed = spec->seed;
    ws->scale_rule_fwd = spec->scale_rule_fwd; ws->scale_rule_grad = spec->scale_rule_grad;
    ws->max_elems = max_elems; ws->max_rows = max_rows; ws->max_out_elems = max_out_elems;
    ws->qa = mx_operand_alloc(1, (int)(max_elems / 32) * 32);
    ws->qb = mx_operand_alloc(1, (int)(max_elems / 32) * 32);
    if (path == GEMM_PATH_FAST) {
        ws->ea = e4m3_operand_alloc(max_rows, ceil_div((long)max_elems, max_rows));
        ws->eb = e4m3_operand_alloc(max_rows, ceil_div((long)max_elems, max_rows));
        ws->gemm_part = (float*)device_malloc(max_out_elems * sizeof(float), "FP8 GEMM unit-scale product");
    } else {
        ws->deq_a = (floatX*)device_malloc(max_elems * sizeof(floatX), "AdaHOP dequantized A");
        ws->deq_b = (floatX*)device_malloc(max_elems * sizeof(floatX), "AdaHOP dequantized B");
    }
    ws->oe_rows = (floatX*)device_malloc((size_t)oe_k * max_k * sizeof(floatX), "OE rows");
    ws->oe_part = (float*)device_malloc((size_t)oe_k * max_rows * sizeof(float), "OE product");
    ws->oe_idx = (int*)device_malloc((size_t)oe_k * sizeof(int), "OE indices");
    ws->row_var = (float*)device_malloc((size_t)max_rows * sizeof(float), "row variances");
    ws->row_sq = (float*)device_malloc((size_t)max_rows * sizeof(float), "row squares");
    ws->col_var = (float*)device_malloc((size_t)max_rows * sizeof(float), "column variances");
    ws->col_sq = (float*)device_malloc((size_t)max_rows * sizeof(float), "column squares");
    ws->col_sum = (float*)device_malloc((size_t)max_rows * sizeof(float), "column sums");
    ws->colsum_scratch = (float*)device_malloc(column_sums_scratch_bytes(max_rows), "column sum scratch");
    ws->col_sq_part = (float*)device_malloc((max_elems / 64 + max_rows) * sizeof(float), "column square partials");
    cudaCheck(cudaMallocHost((void**)&ws->host_stats, stats_floats * sizeof(float)));
    ws->host_stats_cap = stats_floats;
    ws->max_pending = max_pending;
    ws->pending = (PendingPattern*)malloc_check((size_t)max_pending * sizeof(PendingPattern));
    ws->host_stats_f64 = (double*)malloc_check(2 * (size_t)max_rows * sizeof(double));
}

static inline void adahop_workspace_free(AdahopWorkspace* ws) {
    mx_operand_free(&ws->qa);
    mx_operand_free(&ws->qb);
    if (ws->path == GEMM_PATH_FAST) { e4m3_operand_free(&ws->ea); e4m3_operand_free(&ws->eb); }
    void* bufs[] = {ws->deq_a, ws->deq_b, ws->oe_rows, ws->oe_part, ws->oe_idx, ws->row_var, ws->row_sq, ws->col_var,
                    ws->col_sq, ws->col_sum, ws->colsum_scratch, ws->col_sq_part, ws->gemm_part};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
    cudaCheck(cudaFreeHost(ws->host_stats));
    free(ws->pending);
    free(ws->host_stats_f64);
}

// out [M x N] (+= beta) = A B^T in BF16 operands with FP32 accumulation; the operands' layouts become
// cuBLAS transposes (cuBLAS computes out^T = B A^T in column-major terms).
static inline void gemm_nt_bf16(void* out, bool out_fp32, float beta, Operand a, Operand b, const floatX* bias, cudaStream_t s) {
    matmul(out, out_fp32, b.data, a.data, bias, b.rows, a.rows, a.K, !b.transposed, a.transposed, beta, gemm_single, s);
}

// rows taken out by outlier extraction from an operand with `rows` rows
static inline int adahop_oe_rows(const AdahopWorkspace* ws, int rows) { return min(ws->oe_k, rows); }

// A GEMM's strategy (llmc/adahop.h) decoded once into what it does to the operands of out = A B^T, A [rows_a x K],
// B [rows_b x K]: whether they are quantized at all (STRAT_BF16: a BF16 GEMM), how (the Hadamard, the scale rule of
// a forward or gradient operand, stochastic rounding of a gradient A when the workspace asks for it), and how many of their rows outlier
// extraction takes out in BF16
typedef struct {
    bool quantized;
    MXQuantOptions a, b;
    int oe_rows_a, oe_rows_b;
} StrategyPlan;

static inline StrategyPlan strategy_plan(const AdahopWorkspace* ws, int strategy, int rows_a, int rows_b, bool a_is_grad,
                                         uint64_t seed) {
    int hadamard = strategy != STRAT_BF16 && strategy != STRAT_PLAIN;
    StrategyPlan p = {
        .quantized = strategy != STRAT_BF16,
        .a = {.hadamard = hadamard, .rule = a_is_grad ? ws->scale_rule_grad : ws->scale_rule_fwd,
              .stochastic = a_is_grad && ws->stochastic_grads, .seed = seed},
        .b = {.hadamard = hadamard, .rule = ws->scale_rule_fwd, .stochastic = 0, .seed = seed ^ 0xB},
        .oe_rows_a = strategy == STRAT_IHT_OE_ROWS_A ? adahop_oe_rows(ws, rows_a) : 0,
        .oe_rows_b = strategy == STRAT_IHT_OE_ROWS_B ? adahop_oe_rows(ws, rows_b) : 0,
    };
    return p;
}

// the dW GEMM of a linear with Cin inputs and Cout outputs, A = dY^T [Cout x N], B = x^T [Cin x N], under strategy
static inline StrategyPlan linear_dw_plan(const AdahopWorkspace* ws, int strategy, int Cin, int Cout, uint64_t seed) {
    return strategy_plan(ws, strategy, Cout, Cin, true, seed);
}

// gathers rows idx of the operand into ws->oe_rows as a plain [k x K] BF16 operand
static inline Operand operand_gather_rows(AdahopWorkspace* ws, Operand op, const int* idx, int k, cudaStream_t s) {
    if (!op.transposed) {
        gather_rows_kernel<<<ceil_div((long)k * op.K / 8, 256), 256, 0, s>>>(ws->oe_rows, op.data, idx, k, op.K);
    } else {
        gather_cols_kernel<<<ceil_div((long)k * op.K, 256), 256, 0, s>>>(ws->oe_rows, op.data, idx, k, op.K, op.rows);
    }
    cudaCheckLaunch();
    Operand g = {ws->oe_rows, k, op.K, false};
    return g;
}

// squared L2 norms of the rows of a row-major operand into ws->row_sq
static inline const float* operand_row_norms(AdahopWorkspace* ws, Operand op, cudaStream_t s) {
    row_stats_kernel<<<ceil_div(op.rows, 8), 256, 0, s>>>(ws->row_var, ws->row_sq, op.data, op.rows, op.K);
    cudaCheckLaunch();
    return ws->row_sq;
}

// OE on an MXFP4 operand q whose rows' squared norms are `norms`: the k largest rows into idx, zeroed in q
static inline void mx_extract_top_rows(MXOperand* q, const float* norms, int* idx, int k, cudaStream_t s) {
    topk_rows(idx, norms, q->rows, k, s);
    mx_zero_rows(q, idx, k, s);
}

// An MXFP4 operand in q (a view of the right shape), quantized with opt; with k > 0 its k rows of largest L2 norm are
// picked into idx and zeroed (OE). A transposed operand goes through the column quantizer, which sums the squares of
// its rows on the way; a row-major one has its norms from row_stats_kernel.
static inline void operand_quantize(AdahopWorkspace* ws, MXOperand* q, Operand op, MXQuantOptions opt, int* idx, int k,
                                    cudaStream_t s) {
    if (op.transposed) {
        mx_quantize_cols(q, op.data, op.K, op.rows, opt, k > 0 ? ws->col_sq : NULL, ws->col_sq_part, s);
        if (k > 0) { mx_extract_top_rows(q, ws->col_sq, idx, k, s); }
        return;
    }
    if (k > 0) { topk_rows(idx, operand_row_norms(ws, op, s), op.rows, k, s); }
    mx_quantize_rows(q, op.data, op.rows, op.K, opt, s);
    if (k > 0) { mx_zero_rows(q, idx, k, s); }
}

// One GEMM operand made ready for the workspace's path: on the fast path E4M3 in e, on the exact path MXFP4 (the
// returned operand: q, or `saved` when the operand was quantized already, its OE rows zeroed). A row-major operand
// goes BF16 -> E4M3 in one pass on the fast path up to MX_E4M3_ONE_PASS_MAX_K (OE rows then zeroed in E4M3); every
// other one is quantized to MXFP4 (or taken from `saved`) and re-expressed. OE: the k rows of largest norm, into idx.
static inline const MXOperand* operand_prepare(AdahopWorkspace* ws, MXOperand* q, E4M3Operand* e, Operand op,
                                               const MXOperand* saved, MXQuantOptions opt, int* idx, int k, cudaStream_t s) {
    bool fast = ws->path == GEMM_PATH_FAST;
    if (fast && !saved && !op.transposed && op.K <= MX_E4M3_ONE_PASS_MAX_K) {
        if (k > 0) { topk_rows(idx, operand_row_norms(ws, op, s), op.rows, k, s); }
        mx_quantize_rows_e4m3(e, op.data, op.rows, op.K, opt, s);
        if (k > 0) { e4m3_zero_rows(e, idx, k, s); }
        return NULL;
    }
    if (!saved) { operand_quantize(ws, q, op, opt, idx, k, s); }
    const MXOperand* mx = saved ? saved : q;
    if (fast) { mx_to_e4m3(e, mx, s); }
    return mx;
}

// out (+)= the FP32 product of the extracted part, ws->oe_part, added into rows idx of out [M x N] (rows_of_out;
// part [k x N]) or into its columns idx (part [M x k])
static inline void oe_scatter_add(AdahopWorkspace* ws, void* out, bool out_fp32, const int* idx, int k, int M, int N,
                                  bool rows_of_out, cudaStream_t s) {
    long n = rows_of_out ? (long)k * N : (long)M * k;
    if (out_fp32) { scatter_add_kernel<float><<<ceil_div(n, 256), 256, 0, s>>>((float*)out, ws->oe_part, idx, k, M, N, rows_of_out); }
    else { scatter_add_kernel<floatX><<<ceil_div(n, 256), 256, 0, s>>>((floatX*)out, ws->oe_part, idx, k, M, N, rows_of_out); }
    cudaCheckLaunch();
}

// One GEMM out [M x N] = A B^T (+ beta out) (+ bias) under a strategy. b_saved, when given, is B already quantized (the
// dW operand saved at forward time) with its OE rows b_idx zeroed; those rows in BF16 are then b_rows [k x K] when
// given, else gathered from b.
typedef struct {
    int strategy;
    void* out; bool out_fp32; float beta;
    Operand a, b;
    const MXOperand* b_saved; const int* b_idx; const floatX* b_rows;
    const floatX* bias;       // BF16 [N] or NULL
    bool a_is_grad;           // A is a gradient: stochastic rounding when the workspace asks for it
    uint64_t seed;
} AdahopGemm;

static inline void adahop_gemm(AdahopWorkspace* ws, const AdahopGemm* g, cudaStream_t s) {
    Operand a = g->a, b = g->b;
    int M = a.rows, N = b.rows, K = a.K;
    StrategyPlan plan = strategy_plan(ws, g->strategy, M, N, g->a_is_grad, g->seed);
    if (!plan.quantized) { gemm_nt_bf16(g->out, g->out_fp32, g->beta, a, b, g->bias, s); return; }
    int ka = plan.oe_rows_a, kb = plan.oe_rows_b;
    MXOperand qa = mx_view(&ws->qa, M, K), qb = mx_view(&ws->qb, N, K);
    E4M3Operand ea = e4m3_view(&ws->ea, M, K), eb = e4m3_view(&ws->eb, N, K);
    const MXOperand* mxa = operand_prepare(ws, &qa, &ea, a, NULL, plan.a, ws->oe_idx, ka, s);
    const MXOperand* mxb = operand_prepare(ws, &qb, &eb, b, g->b_saved, plan.b, ws->oe_idx, g->b_saved ? 0 : kb, s);
    const int* idx_b = g->b_saved ? g->b_idx : ws->oe_idx;
    if (ws->path == GEMM_PATH_FAST && g->out_fp32 && g->bias == NULL && (size_t)M * N <= ws->max_out_elems) {
        mx_gemm_fast_scales_after((float*)g->out, g->beta, &ea, &eb, ws->gemm_part, s);
    } else if (ws->path == GEMM_PATH_FAST) {
        mx_gemm_fast(g->out, g->out_fp32, &ea, &eb, g->bias, g->beta, s);
    } else {
        mx_gemm_exact(g->out, g->out_fp32, mxa, mxb, ws->deq_a, ws->deq_b, g->bias, g->beta, s);
    }
    if (ka > 0) {
        gemm_nt_bf16(ws->oe_part, true, 0.0f, operand_gather_rows(ws, a, ws->oe_idx, ka, s), b, NULL, s);   // [k x N]
        oe_scatter_add(ws, g->out, g->out_fp32, ws->oe_idx, ka, M, N, true, s);
    }
    if (kb > 0) {
        Operand ext = {g->b_rows, kb, K, false};
        if (!g->b_saved || !g->b_rows) { ext = operand_gather_rows(ws, b, idx_b, kb, s); }
        gemm_nt_bf16(ws->oe_part, true, 0.0f, a, ext, NULL, s);   // [M x k]
        oe_scatter_add(ws, g->out, g->out_fp32, idx_b, kb, M, N, false, s);
    }
}

// queues the Row / Column / None pattern of x [R x C], tensor `tensor` of `linear`: its row and column variances are
// computed on the GPU and copied to pinned host memory without waiting (adahop_flush_patterns classifies them)
static inline void adahop_queue_pattern(AdahopWorkspace* ws, int linear, int tensor, const floatX* x, int R, int C, cudaStream_t s) {
    if (ws->num_pending == ws->max_pending || ws->host_stats_used + R + C > ws->host_stats_cap) {
        die("AdaHOP statistics: more than %d tensors or %zu variances in one step", ws->max_pending, ws->host_stats_cap);
    }
    float* dst = ws->host_stats + ws->host_stats_used;
    outlier_stats(ws->row_var, ws->row_sq, ws->col_var, ws->col_sq, ws->col_sum, ws->colsum_scratch, x, R, C, s);
    cudaCheck(cudaMemcpyAsync(dst, ws->row_var, R * sizeof(float), cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaMemcpyAsync(dst + R, ws->col_var, C * sizeof(float), cudaMemcpyDeviceToHost, s));
    PendingPattern p = {linear, tensor, R, C, ws->host_stats_used};
    ws->pending[ws->num_pending++] = p;
    ws->host_stats_used += (size_t)R + C;
}

// waits for the queued statistics, classifies each tensor and records its pattern in st; empties the queue
static inline void adahop_flush_patterns(AdahopWorkspace* ws, AdahopState* st, cudaStream_t s) {
    if (ws->num_pending == 0) { return; }
    cudaCheck(cudaStreamSynchronize(s));
    for (int i = 0; i < ws->num_pending; i++) {
        const PendingPattern* p = &ws->pending[i];
        const float* v = ws->host_stats + p->offset;
        double* rv = ws->host_stats_f64;
        for (int j = 0; j < p->R + p->C; j++) { rv[j] = v[j]; }
        adahop_record(st, p->linear, p->tensor, classify_pattern(rv, rv + p->R, p->R, p->C, ADAHOP_TAU));
    }
    ws->num_pending = 0;
    ws->host_stats_used = 0;
}

// seed of one quantization: differs per step, global micro-batch of the step (the same at any world size), linear
// and GEMM, so stochastic rounding draws fresh numbers (bits: GEMM 0-3, linear 4-19, step 20-43, micro-batch 44-63)
static inline uint64_t adahop_seed(const AdahopWorkspace* ws, int step, int micro, int linear, int gemm) {
    return mx_mix64(ws->seed ^ ((uint64_t)micro << 44) ^ ((uint64_t)step << 20) ^ ((uint64_t)linear << 4) ^ (uint64_t)gemm);
}

// ----------------------------------------------------------------------------
// the linear layer

// the model-wide context of a forward / backward pass: scratch, strategies, the optimizer step and the global
// micro-batch of the step (seeds), and whether the pass records outlier patterns
typedef struct {
    AdahopWorkspace* ws;
    AdahopState* st;
    int step, micro;
    bool stats;
    cudaStream_t stream;
} AdahopPass;

// one block linear y = x W^T + b: linear index `index` (layer * NUM_LINEAR_KINDS + kind), x [N x Cin], W [Cout x Cin]
typedef struct {
    const AdahopPass* pass;
    LinearSaved* saved;
    int index, Cin, Cout;
    const floatX* w;
    const floatX* bias;       // [Cout] or NULL
    float* dw;                // FP32 gradients, added into
    float* dbias;             // [Cout] or NULL
} AdahopLinear;

// forward: out [N x Cout] = x W^T + b; with need_backward, prepares lin->saved->x_t for the dW GEMM; in a statistics
// pass, queues the patterns of x and W (adahop_flush_patterns records them)
static inline void adahop_linear_forward(const AdahopLinear* lin, floatX* out, const floatX* x, int N, bool need_backward) {
    const AdahopPass* p = lin->pass;
    AdahopWorkspace* ws = p->ws;
    LinearSaved* saved = lin->saved;
    int Cin = lin->Cin, Cout = lin->Cout;
    cudaStream_t s = p->stream;
    AdahopGemm fwd = {.strategy = adahop_strategy_of(p->st, lin->index, GEMM_FWD), .out = out, .out_fp32 = false, .beta = 0.0f,
                      .a = {x, N, Cin, false}, .b = {lin->w, Cout, Cin, false}, .bias = lin->bias, .a_is_grad = false,
                      .seed = adahop_seed(ws, p->step, p->micro, lin->index, GEMM_FWD)};
    adahop_gemm(ws, &fwd, s);
    int dw = adahop_strategy_of(p->st, lin->index, GEMM_DW);
    saved->dw_strategy_saved = dw;
    StrategyPlan dw_plan = linear_dw_plan(ws, dw, Cin, Cout, 0);
    if (need_backward && dw_plan.quantized && !saved->input_kept) {   // x^T as the dW GEMM's B, OE on x's channels
        MXOperand xt_view = mx_view(&saved->x_t, Cin, N);
        Operand xt = {x, Cin, N, true};
        operand_quantize(ws, &xt_view, xt, dw_plan.b, saved->x_channel_idx, dw_plan.oe_rows_b, s);
    }
    if (p->stats && need_backward) {
        adahop_queue_pattern(ws, lin->index, TENSOR_X, x, N, Cin, s);
        adahop_queue_pattern(ws, lin->index, TENSOR_W, lin->w, Cout, Cin, s);
    }
}

// What the backward of lin reads of its BF16 input x [N x Cin], which the caller provides (recomputes, where it did not
// keep x): nothing (dW from the saved MXFP4 x^T), all of x (a BF16 dW GEMM, OE on the rows of its A, or x kept
// anyway), or only x's OE channels `channels` (k of them, device indices), channel-major [k x N] (OE on the rows of
// the NT-form B, the rest from the saved x^T)
enum { LINEAR_READS_NOTHING, LINEAR_READS_CHANNELS, LINEAR_READS_INPUT };
typedef struct { int reads; const int* channels; int k; } LinearInputNeed;

static inline LinearInputNeed adahop_linear_input_need(const AdahopLinear* lin) {
    const LinearSaved* saved = lin->saved;
    StrategyPlan dw = linear_dw_plan(lin->pass->ws, saved->dw_strategy_saved, lin->Cin, lin->Cout, 0);
    LinearInputNeed need = {LINEAR_READS_NOTHING, NULL, 0};
    if (saved->input_kept || !dw.quantized || dw.oe_rows_a > 0) { need.reads = LINEAR_READS_INPUT; }
    else if (dw.oe_rows_b > 0) { need = (LinearInputNeed){LINEAR_READS_CHANNELS, saved->x_channel_idx, dw.oe_rows_b}; }
    return need;
}

// backward: dw += dout^T x (FP32), then dinp = dout W; dbias += column sums of dout (scratch:
// column_sums_scratch_bytes(Cout)). x: all of the BF16 input, or NULL; x_channels: its OE channels, or NULL; what
// adahop_linear_input_need asks for must be given (either may live in the dinp buffer: they are read before dinp is
// written). The dW GEMM takes saved->x_t from the forward.
static inline void adahop_linear_backward(const AdahopLinear* lin, floatX* dinp, const floatX* dout, int N, const floatX* x,
                                          const floatX* x_channels, float* scratch) {
    const AdahopPass* p = lin->pass;
    AdahopWorkspace* ws = p->ws;
    const LinearSaved* saved = lin->saved;
    int Cin = lin->Cin, Cout = lin->Cout, dw = saved->dw_strategy_saved;
    cudaStream_t s = p->stream;
    LinearInputNeed need = adahop_linear_input_need(lin);
    if ((need.reads == LINEAR_READS_INPUT && !x) || (need.reads == LINEAR_READS_CHANNELS && !x && !x_channels)) {
        die("adahop_linear_backward: linear %d reads its input, none was given", lin->index);
    }
    MXOperand xt_view = mx_view(&saved->x_t, Cin, N);
    bool from_saved = linear_dw_plan(ws, dw, Cin, Cout, 0).quantized && !saved->input_kept;
    AdahopGemm gw = {.strategy = dw, .out = lin->dw, .out_fp32 = true, .beta = 1.0f, .a = {dout, Cout, N, true},
                     .b = {x, Cin, N, true}, .b_saved = from_saved ? &xt_view : NULL, .b_idx = saved->x_channel_idx,
                     .b_rows = x_channels, .bias = NULL, .a_is_grad = true,
                     .seed = adahop_seed(ws, p->step, p->micro, lin->index, GEMM_DW)};
    adahop_gemm(ws, &gw, s);
    AdahopGemm gx = {.strategy = adahop_strategy_of(p->st, lin->index, GEMM_DX), .out = dinp, .out_fp32 = false, .beta = 0.0f,
                     .a = {dout, N, Cout, false}, .b = {lin->w, Cin, Cout, true}, .bias = NULL, .a_is_grad = true,
                     .seed = adahop_seed(ws, p->step, p->micro, lin->index, GEMM_DX)};
    adahop_gemm(ws, &gx, s);
    if (lin->dbias) { bias_backward(lin->dbias, scratch, dout, N, Cout, s); }
    if (p->stats) { adahop_queue_pattern(ws, lin->index, TENSOR_DY, dout, N, Cout, s); }
}

#endif
