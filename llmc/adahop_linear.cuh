// The AdaHOP linear layer: y = x W^T + b and its two backward GEMMs, each run with its own strategy
// (llmc/adahop.h): BF16, plain MXFP4, IHT (Hadamard + MXFP4), or IHT with outlier extraction (OE) on the
// rows of A or the rows of the NT-form B. All three GEMMs are written out = A B^T with both operands
// K-major ("NT form"):
//   forward  y  [N x Cout] : A = x    [N x Cin]  , B = W   [Cout x Cin]
//   backward dX [N x Cin]  : A = dY   [N x Cout] , B = W^T [Cin x Cout]   (W quantized along its columns)
//   backward dW [Cout x Cin]: A = dY^T [Cout x N], B = x^T [Cin x N]      (x saved in this form at forward time)
// The quantized product runs on the exact path (dequantize + BF16 GEMM) or the fast path (E4M3 on FP8
// tensor cores); both compute the same MXFP4 arithmetic (llmc/mxfp4.cuh).
#ifndef LLMC_ADAHOP_LINEAR_CUH
#define LLMC_ADAHOP_LINEAR_CUH

#include "cuda_common.cuh"
#include "matmul.cuh"
#include "mxfp4.cuh"
#include "outliers.cuh"
#include "adahop.h"
#include "adahop_cpu.h"

enum { GEMM_PATH_EXACT = 0, GEMM_PATH_FAST = 1 };

// A GEMM operand as it sits in memory: the NT-form operand is `data` [rows x K] row-major, or, when
// transposed, the transpose of `data` [K x rows].
typedef struct { const floatX* data; int rows, K; bool transposed; } Operand;

// one tensor's pattern statistics waiting in the pinned buffer: row variances [R] at offset, column variances [C] after
typedef struct { int linear, tensor, R, C; size_t offset; } PendingPattern;

// Scratch shared by every linear of the model, sized for the largest operand
typedef struct {
    int path, stochastic_grads, oe_k;
    int keep_codes;                   // fast path: also write the MXFP4 codes of one-pass operands into qa / qb (tests)
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
// which the caller recomputes when it does not keep x: see adahop_linear_backward_reads_input). A linear whose
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

// max_pending tensors of pattern statistics per step holding at most stats_floats row and column variances together;
// max_out_elems is the largest FP32 GEMM output (the largest weight's dW)
static inline void adahop_workspace_init(AdahopWorkspace* ws, size_t max_elems, int max_rows, int max_k, size_t max_out_elems,
                                         int path, int stochastic_grads, int oe_k, uint64_t seed, int max_pending, size_t stats_floats) {
    memset(ws, 0, sizeof(*ws));
    ws->path = path; ws->stochastic_grads = stochastic_grads; ws->oe_k = oe_k; ws->seed = seed;
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

// squared L2 norms of the operand's rows into ws->row_sq (its rows are the source's columns when transposed)
static inline const float* operand_row_norms(AdahopWorkspace* ws, Operand op, cudaStream_t s) {
    if (!op.transposed) {
        row_stats_kernel<<<ceil_div(op.rows, 8), 256, 0, s>>>(ws->row_var, ws->row_sq, op.data, op.rows, op.K);
        cudaCheckLaunch();
        return ws->row_sq;
    }
    cudaCheck(cudaMemsetAsync(ws->col_sq, 0, op.rows * sizeof(float), s));
    cudaCheck(cudaMemsetAsync(ws->col_sum, 0, op.rows * sizeof(float), s));
    column_sums<COLSUM_SQUARES>(ws->col_sq, ws->col_sum, ws->colsum_scratch, op.data, NULL, NULL, NULL, op.K, op.rows, s);
    return ws->col_sq;
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

// quantizes the operand into q (a view of the right shape), with or without the Hadamard
static inline void operand_quantize(MXOperand* q, Operand op, MXQuantOptions opt, cudaStream_t s) {
    if (!op.transposed) { mx_quantize_rows(q, op.data, op.rows, op.K, opt, s); }
    else { mx_quantize_cols(q, op.data, op.K, op.rows, opt, NULL, NULL, s); }
}

// One operand of a GEMM made ready for the workspace's path, in the slot (q, e, deq): quantized with opt (or taken
// from `saved`, an MXFP4 operand already quantized), its rows zero_idx[0..k) zeroed (OE), then E4M3 on the fast path or dequantized
// BF16 on the exact path. A row-major operand goes BF16 -> E4M3 in one pass on the fast path up to MX_E4M3_ONE_PASS_MAX_K (its
// MXFP4 codes are then written only with ws->keep_codes).
static inline void operand_prepare(AdahopWorkspace* ws, MXOperand* q, E4M3Operand* e, floatX* deq, Operand op,
                                   const MXOperand* saved, MXQuantOptions opt, const int* zero_idx, int k, cudaStream_t s) {
    bool fast = ws->path == GEMM_PATH_FAST;
    if (fast && !saved && !op.transposed && op.K <= MX_E4M3_ONE_PASS_MAX_K) {
        mx_quantize_rows_e4m3(e, ws->keep_codes ? q : NULL, op.data, op.rows, op.K, opt, s);
        if (k > 0) {
            e4m3_zero_rows(e, zero_idx, k, s);
            if (ws->keep_codes) { mx_zero_rows(q, zero_idx, k, s); }
        }
        return;
    }
    if (!saved) {
        operand_quantize(q, op, opt, s);
        if (k > 0) { mx_zero_rows(q, zero_idx, k, s); }
    }
    const MXOperand* src = saved ? saved : q;
    if (fast) { mx_to_e4m3(e, src, s); } else { mx_dequantize(deq, src, s); }
}

// out [M x N] = A B^T of the operands prepared in the workspace's A and B slots (K inner); bias (BF16 [N], may be
// NULL) added in the epilogue. On the fast path an FP32 output without bias (the dW GEMM) gets its row scales after
// a unit-scale FP8 GEMM (mx_gemm_fast_scales_after), other outputs in cuBLASLt's epilogue.
static inline void prepared_gemm(AdahopWorkspace* ws, void* out, bool out_fp32, float beta, int M, int N, int K,
                                 const floatX* bias, cudaStream_t s) {
    E4M3Operand ea = e4m3_view(&ws->ea, M, K), eb = e4m3_view(&ws->eb, N, K);
    if (ws->path == GEMM_PATH_FAST && out_fp32 && bias == NULL && (size_t)M * N <= ws->max_out_elems) {
        mx_gemm_fast_scales_after((float*)out, beta, &ea, &eb, ws->gemm_part, s);
    } else if (ws->path == GEMM_PATH_FAST) {
        mx_gemm_fast(out, out_fp32, &ea, &eb, bias, beta, s);
    } else {
        matmul(out, out_fp32, ws->deq_b, ws->deq_a, bias, N, M, K, true, false, beta, gemm_single, s);
    }
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

// One GEMM out [M x N] = A B^T (+ beta out) (+ bias) under `strategy`. qb_saved, when given, is B already
// quantized (the dW operand saved at forward time) with its OE rows b_idx zeroed; those rows in BF16 are then
// b_rows [k x K] when given, else gathered from b.
static inline void adahop_gemm(AdahopWorkspace* ws, int strategy, void* out, bool out_fp32, float beta, Operand a,
                               Operand b, const MXOperand* qb_saved, const int* b_idx, const floatX* b_rows,
                               const floatX* bias, int a_is_grad, int b_is_grad, uint64_t seed, cudaStream_t s) {
    if (strategy == STRAT_BF16) { gemm_nt_bf16(out, out_fp32, beta, a, b, bias, s); return; }
    MXQuantOptions oa = {strategy != STRAT_PLAIN, MX_SCALE_OCP, a_is_grad && ws->stochastic_grads, seed};
    MXQuantOptions ob = {strategy != STRAT_PLAIN, MX_SCALE_OCP, b_is_grad && ws->stochastic_grads, seed ^ 0xB};
    int M = a.rows, N = b.rows;
    int ka = strategy == STRAT_IHT_OE_ROWS_A ? min(ws->oe_k, M) : 0;
    int kb = strategy == STRAT_IHT_OE_COLS_B ? min(ws->oe_k, N) : 0;
    if (ka > 0) { topk_rows(ws->oe_idx, operand_row_norms(ws, a, s), M, ka, s); }
    MXOperand qa = mx_view(&ws->qa, M, a.K), qb = mx_view(&ws->qb, N, b.K);
    E4M3Operand ea = e4m3_view(&ws->ea, M, a.K), eb = e4m3_view(&ws->eb, N, b.K);
    const int* idx_b = b_idx;
    const MXOperand* qb_ready = qb_saved;
    if (kb > 0 && !qb_saved) {
        idx_b = ws->oe_idx;
        if (b.transposed) {   // the column quantizer gives the norms of B's rows on the way
            mx_quantize_cols(&qb, b.data, b.K, b.rows, ob, ws->col_sq, ws->col_sq_part, s);
            topk_rows(ws->oe_idx, ws->col_sq, N, kb, s);
            mx_zero_rows(&qb, ws->oe_idx, kb, s);
            qb_ready = &qb;
        } else {
            topk_rows(ws->oe_idx, operand_row_norms(ws, b, s), N, kb, s);
        }
    }
    operand_prepare(ws, &qa, &ea, ws->deq_a, a, NULL, oa, ws->oe_idx, ka, s);
    operand_prepare(ws, &qb, &eb, ws->deq_b, b, qb_ready, ob, ws->oe_idx, qb_ready ? 0 : kb, s);
    prepared_gemm(ws, out, out_fp32, beta, M, N, a.K, bias, s);
    if (ka > 0) {
        gemm_nt_bf16(ws->oe_part, true, 0.0f, operand_gather_rows(ws, a, ws->oe_idx, ka, s), b, NULL, s);   // [k x N]
        oe_scatter_add(ws, out, out_fp32, ws->oe_idx, ka, M, N, true, s);
    }
    if (kb > 0) {
        Operand ext = {b_rows, kb, b.K, false};
        if (!qb_saved || !b_rows) { ext = operand_gather_rows(ws, b, idx_b, kb, s); }
        gemm_nt_bf16(ws->oe_part, true, 0.0f, a, ext, NULL, s);   // [M x k]
        oe_scatter_add(ws, out, out_fp32, idx_b, kb, M, N, false, s);
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
        adahop_record(st, p->linear, p->tensor, classify_pattern_cpu(rv, rv + p->R, p->R, p->C, ADAHOP_TAU));
    }
    ws->num_pending = 0;
    ws->host_stats_used = 0;
}

// seed of one quantization: differs per step, global micro-batch of the step (the same at any world size), linear
// and GEMM, so stochastic rounding draws fresh numbers (bits: GEMM 0-3, linear 4-19, step 20-43, micro-batch 44-63)
static inline uint64_t adahop_seed(const AdahopWorkspace* ws, int step, int micro, int linear, int gemm) {
    return mx_mix64(ws->seed ^ ((uint64_t)micro << 44) ^ ((uint64_t)step << 20) ^ ((uint64_t)linear << 4) ^ (uint64_t)gemm);
}

// forward: out [N x Cout] = x W^T + b; with need_backward, prepares saved->x_t for the dW GEMM; with stats,
// queues the patterns of x and W (adahop_flush_patterns records them).
static inline void adahop_linear_forward(AdahopWorkspace* ws, AdahopState* st, LinearSaved* saved, int linear,
                                         int step, int micro, bool need_backward, bool stats, floatX* out, const floatX* x,
                                         const floatX* w, const floatX* bias, int N, int Cin, int Cout, cudaStream_t s) {
    Operand a = {x, N, Cin, false}, b = {w, Cout, Cin, false};
    adahop_gemm(ws, adahop_strategy_of(st, linear, GEMM_FWD), out, false, 0.0f, a, b, NULL, NULL, NULL, bias, 0, 0,
                adahop_seed(ws, step, micro, linear, GEMM_FWD), s);
    int dw = adahop_strategy_of(st, linear, GEMM_DW);
    saved->dw_strategy_saved = dw;
    if (need_backward && dw != STRAT_BF16 && !saved->input_kept) {
        MXQuantOptions opt = {dw != STRAT_PLAIN, MX_SCALE_OCP, 0, 0};
        MXOperand xt_view = mx_view(&saved->x_t, Cin, N);
        bool oe = dw == STRAT_IHT_OE_COLS_B;   // x's outlier channels: the quantizer sums their squares on the way
        mx_quantize_cols(&xt_view, x, N, Cin, opt, oe ? ws->col_sq : NULL, ws->col_sq_part, s);
        if (oe) {
            int k = min(ws->oe_k, Cin);
            topk_rows(saved->x_channel_idx, ws->col_sq, Cin, k, s);
            mx_zero_rows(&xt_view, saved->x_channel_idx, k, s);
        }
    }
    if (stats) {
        adahop_queue_pattern(ws, linear, TENSOR_X, x, N, Cin, s);
        adahop_queue_pattern(ws, linear, TENSOR_W, w, Cout, Cin, s);
    }
}

// what of the BF16 input x adahop_linear_backward reads: nothing (dW from the saved MXFP4 x^T), only x's OE
// channels (OE on the columns of B from the saved x^T), or all of x (BF16 dW, OE on rows of A, or x kept anyway)
enum { LINEAR_READS_NOTHING, LINEAR_READS_CHANNELS, LINEAR_READS_INPUT };
static inline int adahop_linear_backward_reads(const LinearSaved* saved) {
    int dw = saved->dw_strategy_saved;
    if (saved->input_kept || dw == STRAT_BF16 || dw == STRAT_IHT_OE_ROWS_A) { return LINEAR_READS_INPUT; }
    return dw == STRAT_IHT_OE_COLS_B ? LINEAR_READS_CHANNELS : LINEAR_READS_NOTHING;
}

// backward: dweight += dout^T x (FP32), then dinp = dout W; dbias += column sums of dout. What it reads of x is
// adahop_linear_backward_reads: x [N x Cin] (else may be NULL), or x_channels [k x N], the channels
// saved->x_channel_idx of x, channel-major (else may be NULL; gathered from x when x is given instead). Both are
// read before dinp is written, so they may live in the dinp buffer. The dW GEMM uses saved->x_t from the forward.
static inline void adahop_linear_backward(AdahopWorkspace* ws, AdahopState* st, LinearSaved* saved, int linear,
                                          int step, int micro, bool stats, floatX* dinp, float* dweight,
                                          float* dbias, float* scratch, const floatX* dout, const floatX* x,
                                          const floatX* x_channels, const floatX* w, int N, int Cin, int Cout,
                                          cudaStream_t s) {
    int reads = adahop_linear_backward_reads(saved);
    if ((reads == LINEAR_READS_INPUT && !x) || (reads == LINEAR_READS_CHANNELS && !x && !x_channels)) {
        die("AdaHOP linear %d: its backward needs the BF16 input%s", linear, reads == LINEAR_READS_CHANNELS ? " or its OE channels" : "");
    }
    Operand dyt = {dout, Cout, N, true}, xt = {x, Cin, N, true};
    int dw = saved->dw_strategy_saved;
    MXOperand xt_view = mx_view(&saved->x_t, Cin, N);
    bool from_saved = dw != STRAT_BF16 && !saved->input_kept;
    adahop_gemm(ws, dw, dweight, true, 1.0f, dyt, xt, from_saved ? &xt_view : NULL, saved->x_channel_idx, x_channels, NULL,
                1, 0, adahop_seed(ws, step, micro, linear, GEMM_DW), s);
    Operand dy = {dout, N, Cout, false}, wt = {w, Cin, Cout, true};
    adahop_gemm(ws, adahop_strategy_of(st, linear, GEMM_DX), dinp, false, 0.0f, dy, wt, NULL, NULL, NULL, NULL, 1, 0,
                adahop_seed(ws, step, micro, linear, GEMM_DX), s);
    if (dbias) { bias_backward(dbias, scratch, dout, N, Cout, s); }
    if (stats) { adahop_queue_pattern(ws, linear, TENSOR_DY, dout, N, Cout, s); }
}

#endif
