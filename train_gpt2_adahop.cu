// GPT-2 or LLaMA-small training on one GPU, or data-parallel on several (one process per GPU), with explicit
// forward and backward passes.
// Read top to bottom: the model's memory (parameters, optimizer state, activations), the forward pass,
// the backward pass, the optimizer step, then the training loop with data, validation, sampling,
// logging and checkpoints. Parameters and activations are BF16, gradients and AdamW state FP32,
// with FP32 master weights. Every reduction has a fixed order, so a run is bit-for-bit repeatable.
// The four linear layers of every block (qkv, attention projection, MLP up and down) run their forward
// GEMM and both backward GEMMs through llmc/adahop_linear.cuh, in the precision chosen with -p: BF16,
// plain MXFP4, MXFP4 with the Hadamard on every GEMM, or AdaHOP (per-GEMM strategies from the outlier
// patterns, llmc/adahop.h). Everything else stays in BF16/FP32.
// Two model families share everything but their blocks (llmc/model_config.h; -e d12 or -e llama:d12, and the
// checkpoint records which): GPT-2 (LayerNorm, learned positions, GELU MLP, tied head) and LLaMA-small (RMSNorm,
// RoPE, grouped-query attention, SwiGLU MLP, untied head, no biases), whose fused qkv, o, gate/up and down
// matrices take the four linear slots. Parameter tables, memory, the AdaHOP linears, the optimizer, data
// parallelism and the training loop are one code path; only the forward and backward of the blocks differ.
// Data parallel (llmc/nccl_dp.cuh): every rank reads the whole global batch of a step and trains the micro-batches
// k with k % world == rank, so the batches do not depend on the world size; gradients are all-reduced per layer
// on a side stream while the backward pass goes on; AdamW m, v and the FP32 master weights are sharded (ZeRO-1)
// and the BF16 parameters all-gathered after the update. A plain run is world size 1 through the same code: its
// one-rank communicator makes every collective a copy, so the results are those of the single-GPU trainer.
#include <time.h>
// host C
#include "llmc/utils.h"            // defines: die, fopen_check, malloc_check, parse_int, round_up
#include "llmc/cli.h"              // defines: cli_flag_value, cli_handle_help
#include "llmc/rand.h"             // defines: Rng, rng_seed, rng_uniform
#include "llmc/model_config.h"     // defines: ModelConfig, presets of both families, model_init_params, ParamTable
#include "llmc/dataloader.h"       // defines: DataLoader (token shards, shuffled, resumable position)
#include "llmc/checkpoint.h"       // defines: CheckpointHeader, checkpoint read/write (CRC-checked), checkpoint_find_valid, checkpoint_prune
#include "llmc/out_dir.h"          // defines: out_dir_open (the -o directory: created, probed, locked; -y modes)
#include "llmc/stop_signal.h"      // defines: stop_signal_install, stop_signal_received (SIGTERM / SIGINT / SIGHUP / SIGQUIT)
#include "llmc/spike_guard.h"      // defines: SpikeGuard (loss / grad-norm spike skipping, -L / -Z)
#include "llmc/schedule.h"         // defines: lr_schedule (warmup + cosine)
#include "llmc/sampler.h"          // defines: sample_softmax
#include "llmc/tokenizer.h"        // defines: Tokenizer (decoding for samples)
#include "llmc/adahop.h"           // defines: AdahopState, strategies, votes, PREC_*, LIN_*, GEMM_*
#include "llmc/jsonlog.h"          // defines: JsonLine, jsonl_* (main.jsonl, one JSON object per line)
// GPU kernels
#include "llmc/cuda_common.cuh"    // defines: floatX (BF16), cudaCheck, device_malloc, x128 loads/stores
#include "llmc/matmul.cuh"         // defines: matmul, linear_forward/backward (cuBLASLt), the GEMM algorithm table, column sums via column_sums.cuh
                                   // (bias_backward; gelu_backward_bias_grad: the GELU backward with the fc bias sums)
#include "llmc/encoder.cuh"        // defines: encoder_forward/backward (token + position embedding)
#include "llmc/layernorm.cuh"      // defines: layernorm_forward/backward (+ residual add), layernorm_forward_channels;
                                   // the backward also sums the bias gradient of the linear below it
#include "llmc/rmsnorm.cuh"        // defines: rmsnorm_forward/backward (+ residual add), rmsnorm_forward_channels
#include "llmc/rope.cuh"           // defines: RopeTable, rope_forward/backward
#include "llmc/flash_attention.cuh"// defines: flash_attention_forward/backward (causal, grouped-query)
#include "llmc/gelu.cuh"           // defines: gelu_forward, gelu_forward_channels
#include "llmc/swiglu.cuh"         // defines: swiglu_forward/backward, swiglu_forward_channels
#include "llmc/classifier.cuh"     // defines: softmax_crossentropy (fused, in place)
#include "llmc/adamw.cuh"          // defines: AdamWConfig (the update kernels)
#include "llmc/adahop_linear.cuh"  // defines: AdahopLinear, AdahopPass, LinearInputNeed, the MXFP4 / AdaHOP linear layer
#include "llmc/nccl_dp.cuh"        // defines: DataParallel, dp_* collectives, dp_zero_step (ZeRO-1 AdamW)
#include "llmc/evals.h"            // defines: EvalSuite, EvalTask: eval file reading, batching and scoring (host)
#include "llmc/evals.cuh"          // defines: the GPU argmax of the LAMBADA last word

#ifndef BUILD_COMMIT
#define BUILD_COMMIT "unknown"   // the Makefile sets it: the source commit of this build (main.jsonl's run event)
#endif

// ----------------------------------------------------------------------------
// activations kept for the backward pass, and scratch buffers. The names are GPT-2's; in LLaMA ln1/ln2/lnf are
// the RMSNorm outputs, fch the gate/up activation [2H] and mlp_act its SwiGLU [H].

enum { A_ENCODED, A_LN1, A_QKV, A_ATTY, A_RES2, A_LN2, A_FCH, A_MLP_ACT, A_RES3, A_LNF, A_LOGITS,
       A_DRES, A_D4C, A_DC, NUM_ACT_TENSORS };

typedef struct {
    floatX* t[NUM_ACT_TENSORS];
    bool linear_inputs_kept;   // ln1, ln2, mlp_act of every layer (bf16); else one layer's worth, recomputed
    bool fch_recomputed;       // fch of one layer, recomputed in the backward pass (-A 1 or 2); else of every layer
    bool qkv_recomputed;       // qkv of one layer, recomputed in the backward pass (-A 2); else of every layer
    int qkv_ch, fc_ch, hidden; // widths of the rows of qkv, fch and mlp_act (GPT-2: 3C, 4C, 4C)
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lnf_mean, *lnf_rstd;   // the means: LayerNorm only
    float* losses;     // [B*T], summed over the micro-steps of one optimizer step
    float* losses_host;   // pinned copy for the mean
    float* lse;        // [L, B, NH, T] log-sum-exp of every attention row (flash attention keeps no T x T)
    float* delta;      // [B, NH, T] scratch of the attention backward
    int logit_rows;    // tokens of the logits buffer: the classifier's chunk (model_forward)
} Activations;

// elements of each activation tensor for a micro-batch of B x T. The inputs of the qkv, fc and fc-projection
// linears (ln1, ln2, mlp_act) are kept for every layer only when the linears run in BF16. The MXFP4 modes keep
// their dW operands in MXFP4 instead (llmc/adahop_linear.cuh): in the forward pass ln1 and ln2 share one
// layer's buffer and mlp_act goes to the backward scratch A_D4C; a backward that reads the BF16 input
// recomputes it into its own output buffer (block_linear_backward, recompute_linear_input). The attention projection's input
// atty stays, as attention's own output. recompute (-A) >= 1: fch (the MLP's pre-activation) is one layer's buffer,
// recomputed by the backward pass (recompute_fch); 2: qkv too (recompute_qkv). The logits hold logit_rows tokens,
// the classifier's chunk (classifier_rows).
static void activation_sizes(const ModelConfig* c, int B, int T, bool linear_inputs_kept, int recompute, int logit_rows,
                             size_t sizes[NUM_ACT_TENSORS]) {
    size_t L = c->num_layers, C = c->channels, BT = (size_t)B * T, LK = linear_inputs_kept ? L : 0;
    size_t QKV = model_qkv_channels(c), FC = model_fc_channels(c), H = c->hidden;
    sizes[A_ENCODED] = BT * C;      sizes[A_LN1] = (LK ? LK : 1) * BT * C; sizes[A_QKV] = (recompute >= 2 ? 1 : L) * BT * QKV;
    sizes[A_ATTY] = L * BT * C;     sizes[A_RES2] = L * BT * C;
    sizes[A_LN2] = LK * BT * C;     sizes[A_FCH] = (recompute >= 1 ? 1 : L) * BT * FC;      sizes[A_MLP_ACT] = LK * BT * H;
    sizes[A_RES3] = L * BT * C;     sizes[A_LNF] = BT * C;           sizes[A_LOGITS] = (size_t)logit_rows * c->padded_vocab_size;
    sizes[A_DRES] = BT * C;         sizes[A_D4C] = BT * model_widest_linear(c);
    sizes[A_DC] = BT * C;
}

// ----------------------------------------------------------------------------
// the model

typedef struct {
    ModelConfig config;                     // family and shape
    ParamTable tensors;                     // the family's parameter tensors (llmc/param_table.h)
    size_t num_params;
    DataParallel* dp;                       // the ranks of the run (a plain run: one rank)
    ZeroShard shard;                        // this rank's part of the flat parameter vector (ZeRO-1)
    floatX* params;                         // BF16 copy used by forward/backward, shard.padded elements
    floatX* w[MAX_PARAM_TENSORS];           // views into params
    float* master;                          // FP32 master weights, this rank's shard
    float* grads;                           // FP32 gradients, accumulated over micro-steps, shard.padded elements
    float* g[MAX_PARAM_TENSORS];            // views into grads
    float *adam_m, *adam_v;                 // this rank's shard
    Activations acts;
    int max_B, max_T;                       // what the activations were sized for
    float* scratch;                         // column-sum partials, then the grad norm
    // host -> device staging of a micro-batch: inputs, targets and the per-token position groups
    int* staging_host;                      // pinned
    int* staging_dev;
    int* token_counts;                      // host, V ints, for the grouping
    int num_distinct_tokens;
    cudaEvent_t staging_done;
    cudaStream_t stream;
    RopeTable rope;                         // LLaMA: cos/sin of the rotary embeddings
    // low-precision linears
    AdahopState adahop;                     // precision, strategies, calibration and re-classification
    AdahopWorkspace ws;                     // quantization scratch (unused in bf16)
    LinearSaved* saved;                     // per linear: x^T in MXFP4 for the dW GEMM
    AdahopPass pass;                        // the linears' context: step in progress (seeds), statistics or not
    bool reduce_now;                        // backward: all-reduce each gradient bucket as soon as it is final
    int32_t* adahop_words;                  // host and device copies of the serialized AdaHOP state, for
    int32_t* adahop_words_dev;              // sending rank 0's to every rank
} Model;

// precision options of the linear layers
typedef struct {
    int precision, path, stochastic_grads, calib_steps, calib_strategy, reclass_every, reclass_window, oe_k;
    int scale_rule_fwd, scale_rule_grad;   // -Q: MXFP4 block-scale rules of the forward and the gradient operands
    int bf16_first, bf16_last;             // -B: the linears of the first / last this many blocks in BF16
    float bf16_tail;                       // -T: the last this share of the steps in BF16 (every GEMM, or the
    int bf16_tail_fwd;                     //     forward GEMMs only: bf16_tail_fwd)
    int recompute;       // -A: keep one layer's fc (gate/up) output (1), and its qkv output (2), and recompute them in
                         // the backward pass
    int lm_head;         // -H 1: the LM head is one more linear in the run's precision (AdaHOP included)
    int head_chunk;      // -M: tokens whose logits exist at a time (the BF16 head's forward, loss, gradient and
                         // backward run chunk by chunk); 0 = all of the micro-batch
} LinearOptions;

#define DEFAULT_HEAD_CHUNK 8192   // -M

// tokens of the logits buffer for micro-batches of B x T: the chunk, at least one sequence (sampling reads a window's
// logits), or all B T (-M 0, and the low-precision head of -H 1, whose operands span the whole micro-batch)
static int classifier_rows(const LinearOptions* lo, int B, int T) {
    int rows = lo->head_chunk > T ? lo->head_chunk : T;
    return lo->head_chunk > 0 && !lo->lm_head && rows < B * T ? rows : B * T;
}

// the widest output or input of a low-precision linear: the block linears', or the padded vocabulary with -H 1
static int lowp_widest_linear(const ModelConfig* c, const LinearOptions* lo) {
    int w = model_widest_linear(c);
    return lo->lm_head && c->padded_vocab_size > w ? c->padded_vocab_size : w;
}

static void staging_layout(int BT, size_t offs[6]) {
    // inputs, targets, tokens, offsets (BT+1), positions; offs[5] = total ints
    offs[0] = 0; offs[1] = BT; offs[2] = 2 * (size_t)BT; offs[3] = 3 * (size_t)BT; offs[4] = 4 * (size_t)BT + 1;
    offs[5] = 5 * (size_t)BT + 1;
}

// bytes of the reduction scratch: the widest bias gradient's column sums, or the LayerNorm backward of BT rows
static size_t model_scratch_bytes(const ModelConfig* c, int BT) {
    size_t colsums = column_sums_scratch_bytes(model_fc_channels(c)), norm = layernorm_backward_scratch_bytes(BT, c->channels);
    return colsums > norm ? colsums : norm;
}

// device bytes the model needs at micro-batch B x T on one of `world` ranks: used to refuse a batch that cannot fit,
// before allocating
static size_t model_device_bytes(const ModelConfig* c, int B, int T, const LinearOptions* lo, int world) {
    size_t n = model_num_params(c), sizes[NUM_ACT_TENSORS], act = 0, offs[6];
    size_t shard = zero_shard_size(n, world), padded = shard * world;
    activation_sizes(c, B, T, lo->precision == PREC_BF16, lo->recompute, classifier_rows(lo, B, T), sizes);
    for (int i = 0; i < NUM_ACT_TENSORS; i++) { act += sizes[i]; }
    staging_layout(B * T, offs);
    size_t stats = (size_t)c->num_layers * (4 + c->num_heads) * B * T + (3 + (size_t)c->num_heads) * B * T;   // norms, losses, lse, delta
    size_t lowp = 0;
    if (lo->precision != PREC_BF16) {
        size_t N = (size_t)B * T, C = c->channels, wide = lowp_widest_linear(c, lo), max_elems = N * wide;
        lowp = 2 * max_elems * 17 / 32 + 2 * max_elems * (lo->path == GEMM_PATH_FAST ? 1 : 2)   // workspace operands
             + (max_elems / 64 + N + wide) * sizeof(float)                                       // OE column-sum partials
             + (lo->path == GEMM_PATH_FAST ? C * wide * sizeof(float) : 0)                       // unit-scale dW product
             + (size_t)c->num_layers * (2 * C + c->hidden) * N * 17 / 32;   // saved x^T of qkv, fc, fcproj (attproj reads atty)
    }
    size_t rope = c->family == FAMILY_LLAMA ? (size_t)c->max_seq_len * (c->channels / c->num_heads) : 0;   // cos, sin
    return padded * (sizeof(floatX) + sizeof(float)) + 3 * shard * sizeof(float) + act * sizeof(floatX) +
           (stats + rope) * sizeof(float) + model_scratch_bytes(c, B * T) + offs[5] * sizeof(int) +
           cublaslt_workspace_size + lowp;
}

// input and output widths of linear kind k (LIN_QKV, LIN_ATTPROJ, LIN_FC, LIN_FCPROJ) of the model
static void linear_shape(const ModelConfig* c, int kind, int* in, int* out) {
    int C = c->channels;
    int ins[NUM_LINEAR_KINDS] = {C, C, C, c->hidden}, outs[NUM_LINEAR_KINDS] = {model_qkv_channels(c), C, model_fc_channels(c), C};
    *in = ins[kind];
    *out = outs[kind];
}

// the tensors that the shared code addresses, per family (llmc/gpt2_config.h, llmc/llama_config.h): weights and
// biases (-1: none) of the 4 block linears, the LM head (GPT-2's is the token embedding, tied), and the token and
// position embeddings (-1: none)
typedef struct { int linear_w[NUM_LINEAR_KINDS], linear_b[NUM_LINEAR_KINDS], head, wte, wpe; } FamilyTensors;
static const FamilyTensors family_tensors[NUM_FAMILIES] = {
    {{P_QKVW, P_ATTPROJW, P_FCW, P_FCPROJW}, {P_QKVB, P_ATTPROJB, P_FCB, P_FCPROJB}, P_WTE, P_WTE, P_WPE},
    {{LL_QKVW, LL_ATTPROJW, LL_GATEUPW, LL_DOWNW}, {-1, -1, -1, -1}, LL_LMHEADW, LL_WTE, -1},
};

// the low-precision state: strategies (and the buffers that share them across ranks), scratch, and the saved dW
// operand of every linear (with -H 1 the LM head is the last one)
static void model_build_linears(Model* m, const LinearOptions* lo, uint64_t seed) {
    const ModelConfig* c = &m->config;
    int L = c->num_layers, N = m->max_B * m->max_T, widest = lowp_widest_linear(c, lo);
    adahop_init(&m->adahop, lo->precision, L, lo->calib_steps, lo->calib_strategy, lo->reclass_every, lo->reclass_window, lo->oe_k);
    if (lo->lm_head) { adahop_include_head(&m->adahop); }
    if (c->family == FAMILY_LLAMA) { m->adahop.linear_names = llama_linear_names; }
    size_t words = adahop_state_words(&m->adahop);
    m->adahop_words = (int32_t*)malloc_check(words * sizeof(int32_t));
    m->adahop_words_dev = (int32_t*)device_malloc(words * sizeof(int32_t), "AdaHOP state");
    int num_linears = m->adahop.num_linears;
    m->saved = (LinearSaved*)calloc_check((size_t)num_linears, sizeof(LinearSaved));
    AdahopPass pass = {&m->ws, &m->adahop, 0, 0, false, m->stream};
    m->pass = pass;
    if (lo->precision == PREC_BF16) { return; }
    int max_rows = N > widest ? N : widest;
    size_t stats_floats = 0;   // the row and column variances of x [N x cin], W [cout x cin], dY [N x cout] of every linear
    for (int kind = 0; kind < NUM_LINEAR_KINDS; kind++) {
        int cin, cout;
        linear_shape(c, kind, &cin, &cout);
        stats_floats += (size_t)L * (2 * (size_t)N + 2 * cin + 2 * cout);
    }
    if (lo->lm_head) { stats_floats += 2 * (size_t)N + 2 * (size_t)c->channels + 2 * (size_t)c->padded_vocab_size; }
    // the largest FP32 dW output is C x widest: every linear has C inputs or C outputs and at most widest of the other
    AdahopWorkspaceSpec spec = {.max_elems = (size_t)N * widest, .max_rows = max_rows, .max_k = max_rows,
                                .max_out_elems = (size_t)c->channels * widest, .path = lo->path,
                                .stochastic_grads = lo->stochastic_grads, .oe_k = lo->oe_k, .seed = seed,
                                .scale_rule_fwd = lo->scale_rule_fwd, .scale_rule_grad = lo->scale_rule_grad,
                                .max_pending = NUM_TENSORS * num_linears, .stats_floats = stats_floats};
    adahop_workspace_init(&m->ws, &spec);
    for (int i = 0; i < num_linears; i++) {
        int cin, cout, kind = i % NUM_LINEAR_KINDS;
        linear_shape(c, kind, &cin, &cout);
        // atty (attention's output) and the LM head's input (the final norm's output) are kept in BF16 anyway
        m->saved[i].input_kept = kind == LIN_ATTPROJ || (lo->lm_head && i == adahop_head_index(&m->adahop));
        if (!m->saved[i].input_kept) { m->saved[i].x_t = mx_operand_alloc(cin, N); }
        if (lo->precision == PREC_ADAHOP) {
            m->saved[i].x_channel_idx = (int*)device_malloc((size_t)lo->oe_k * sizeof(int), "saved OE indices");
        }
    }
}

// the model on rank dp->rank, from the full FP32 parameters master_init (every rank keeps its shard), AdamW zeroed
static void model_build(Model* m, DataParallel* dp, const ModelConfig* c, const float* master_init, int B, int T,
                       const LinearOptions* lo, uint64_t seed) {
    const char* problem = model_config_problem(c);
    if (problem) { die("invalid model shape: %s", problem); }
    memset(m, 0, sizeof(*m));
    m->config = *c;
    m->dp = dp;
    m->max_B = B; m->max_T = T;
    if (T > c->max_seq_len) { die("sequence length T=%d exceeds the model's max_seq_len %d", T, c->max_seq_len); }
    flash_attention_check_shape(T, c->num_heads, c->num_kv_heads, c->channels / c->num_heads);
    flash_wgmma_available();   // its one synchronizing probe here, not in the first training step
    if (lo->lm_head && (size_t)B * T * c->padded_vocab_size > INT_MAX) {   // the workspace counts an operand's values in int
        die("flag -H: the LM head's operands hold B*T x padded vocab = %d x %d values, more than 2^31 - 1: use -b %d or "
            "less at T=%d (-d keeps the total batch)", B * T, c->padded_vocab_size,
            (int)(INT_MAX / ((size_t)T * c->padded_vocab_size)), T);
    }
    size_t free_b, total_b, need = model_device_bytes(c, B, T, lo, dp->world_size);
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    if (need > free_b) {
        die("micro-batch B=%d T=%d needs %.1f GiB of GPU memory, only %.1f GiB of %.1f GiB are free: reduce -b or -t "
            "(gradient accumulation through -d keeps the total batch)", B, T, need / 1073741824.0, free_b / 1073741824.0,
            total_b / 1073741824.0);
    }
    model_param_table(c, &m->tensors);
    m->num_params = param_table_total(&m->tensors);
    m->shard = zero_shard(m->num_params, dp->world_size, dp->rank);
    size_t padded = m->shard.padded, shard = m->shard.size;
    m->params = (floatX*)device_malloc(padded * sizeof(floatX), "parameters (BF16)");
    m->master = (float*)device_malloc(shard * sizeof(float), "master weights");
    m->grads = (float*)device_malloc(padded * sizeof(float), "gradients");
    m->adam_m = (float*)device_malloc(shard * sizeof(float), "AdamW m");
    m->adam_v = (float*)device_malloc(shard * sizeof(float), "AdamW v");
    size_t off = 0;
    for (int i = 0; i < m->tensors.num_tensors; i++) {
        m->w[i] = m->params + off;
        m->g[i] = m->grads + off;
        off += m->tensors.sizes[i];
    }
    size_t sizes[NUM_ACT_TENSORS];
    m->acts.linear_inputs_kept = lo->precision == PREC_BF16;
    m->acts.fch_recomputed = lo->recompute >= 1;
    m->acts.qkv_recomputed = lo->recompute >= 2;
    m->acts.qkv_ch = model_qkv_channels(c);
    m->acts.fc_ch = model_fc_channels(c);
    m->acts.hidden = c->hidden;
    m->acts.logit_rows = classifier_rows(lo, B, T);
    activation_sizes(c, B, T, m->acts.linear_inputs_kept, lo->recompute, m->acts.logit_rows, sizes);
    for (int i = 0; i < NUM_ACT_TENSORS; i++) { m->acts.t[i] = (floatX*)device_malloc(sizes[i] * sizeof(floatX), "activations"); }
    size_t LBT = (size_t)c->num_layers * B * T, BT = (size_t)B * T;
    float** stats[6] = {&m->acts.ln1_mean, &m->acts.ln1_rstd, &m->acts.ln2_mean, &m->acts.ln2_rstd,
                        &m->acts.lnf_mean, &m->acts.lnf_rstd};
    for (int i = 0; i < 6; i++) { *stats[i] = (float*)device_malloc((i < 4 ? LBT : BT) * sizeof(float), "norm statistics"); }
    m->acts.losses = (float*)device_malloc(BT * sizeof(float), "losses");
    cudaCheck(cudaMallocHost((void**)&m->acts.losses_host, BT * sizeof(float)));
    m->acts.lse = (float*)device_malloc(LBT * c->num_heads * sizeof(float), "attention log-sum-exp");
    m->acts.delta = (float*)device_malloc(flash_attention_delta_floats(B, T, c->num_heads) * sizeof(float), "attention scratch");
    m->scratch = (float*)device_malloc(model_scratch_bytes(c, (int)BT), "reduction scratch");
    size_t offs[6];
    staging_layout((int)BT, offs);
    cudaCheck(cudaMallocHost((void**)&m->staging_host, offs[5] * sizeof(int)));
    m->staging_dev = (int*)device_malloc(offs[5] * sizeof(int), "input staging");
    m->token_counts = (int*)malloc_check((size_t)c->padded_vocab_size * sizeof(int));
    cudaCheck(cudaEventCreateWithFlags(&m->staging_done, cudaEventDisableTiming));
    cudaCheck(cudaStreamCreate(&m->stream));
    if (c->family == FAMILY_LLAMA) { m->rope = rope_table_create(c->max_seq_len, c->channels / c->num_heads, LLAMA_ROPE_THETA, m->stream); }
    zero_upload_shard(m->master, master_init, &m->shard);
    cudaCheck(cudaMemset(m->adam_m, 0, shard * sizeof(float)));
    cudaCheck(cudaMemset(m->adam_v, 0, shard * sizeof(float)));
    cudaCheck(cudaMemset(m->grads, 0, padded * sizeof(float)));
    cudaCheck(cudaMemset(m->acts.losses, 0, BT * sizeof(float)));
    model_build_linears(m, lo, seed);
}

// bytes held from forward to backward only as inputs of the block linears: ln1, ln2, mlp_act of every layer in
// BF16 (bf16 mode), or their MXFP4 dW operands. atty, the attention projection's input, is not counted: it is
// kept in every mode as attention's output.
static size_t model_saved_input_bytes(const Model* m) {
    size_t sizes[NUM_ACT_TENSORS], bytes = 0;
    if (m->acts.linear_inputs_kept) {
        activation_sizes(&m->config, m->max_B, m->max_T, true, 0, m->acts.logit_rows, sizes);   // the linears' inputs only
        return (sizes[A_LN1] + sizes[A_LN2] + sizes[A_MLP_ACT]) * sizeof(floatX);
    }
    for (int i = 0; i < NUM_LINEAR_KINDS * m->config.num_layers; i++) {
        const MXOperand* x = &m->saved[i].x_t;
        bytes += (size_t)x->rows * x->K / 2 + (size_t)x->rows * x->K / 32;
    }
    return bytes;
}

// BF16 compute copy of the master weights (round to nearest)
__global__ void round_to_bf16_kernel(floatX* out, const float* in, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = (floatX)in[i]; }
}

// every rank rounds its shard of the master weights, then the BF16 shards are all-gathered
static void model_sync_params(Model* m) {
    const ZeroShard* sh = &m->shard;
    round_to_bf16_kernel<<<ceil_div((long)sh->size, 512), 512, 0, m->stream>>>(m->params + sh->start, m->master, sh->size);
    cudaCheckLaunch();
    dp_all_gather(m->dp, m->params, m->params + sh->start, sh, ncclBfloat16, m->stream);
}

static void model_free(Model* m) {
    cudaCheck(cudaStreamSynchronize(m->stream));
    void* bufs[] = {m->params, m->master, m->grads, m->adam_m, m->adam_v, m->acts.ln1_mean, m->acts.ln1_rstd,
                    m->acts.ln2_mean, m->acts.ln2_rstd, m->acts.lnf_mean, m->acts.lnf_rstd, m->acts.losses, m->acts.lse, m->acts.delta,
                    m->scratch, m->staging_dev, m->adahop_words_dev};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
    for (int i = 0; i < NUM_ACT_TENSORS; i++) { cudaCheck(cudaFree(m->acts.t[i])); }
    if (m->config.family == FAMILY_LLAMA) { rope_table_free(&m->rope); }
    if (m->adahop.precision != PREC_BF16) {
        for (int i = 0; i < m->adahop.num_linears; i++) {
            mx_operand_free(&m->saved[i].x_t);
            cudaCheck(cudaFree(m->saved[i].x_channel_idx));
        }
        adahop_workspace_free(&m->ws);
    }
    free(m->saved);
    free(m->adahop_words);
    adahop_free(&m->adahop);
    cudaCheck(cudaFreeHost(m->staging_host));
    cudaCheck(cudaFreeHost(m->acts.losses_host));
    free(m->token_counts);
    cudaCheck(cudaEventDestroy(m->staging_done));
    cudaCheck(cudaStreamDestroy(m->stream));
}

// Copies a micro-batch to the device together with the token grouping of the embedding backward.
// The staging buffer is reused only after the previous copy has left it.
static void model_stage_batch(Model* m, const int* inputs, const int* targets, int B, int T) {
    int BT = B * T, V = m->config.vocab_size;
    size_t offs[6];
    staging_layout(BT, offs);
    cudaCheck(cudaEventSynchronize(m->staging_done));
    int* h = m->staging_host;
    for (int i = 0; i < BT; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || (targets && (targets[i] < 0 || targets[i] >= V))) {
            die("token out of range [0, %d) at position %d of the batch", V, i);
        }
    }
    memcpy(h + offs[0], inputs, BT * sizeof(int));
    if (targets) { memcpy(h + offs[1], targets, BT * sizeof(int)); }
    m->num_distinct_tokens = encoder_group_positions(inputs, BT, V, m->token_counts, h + offs[2], h + offs[3], h + offs[4]);
    cudaCheck(cudaMemcpyAsync(m->staging_dev, h, offs[5] * sizeof(int), cudaMemcpyHostToDevice, m->stream));
    cudaCheck(cudaEventRecord(m->staging_done, m->stream));
}

// the activations of layer l for a micro-batch of B x T (per-layer tensors are stacked over layers)
typedef struct { floatX *ln1, *qkv, *atty, *res_in, *res2, *ln2, *fch, *mlp_act, *res3; float* lse; } LayerActs;

static LayerActs layer_acts(const Activations* a, int l, int B, int T, int C, int NH) {
    size_t nc = (size_t)B * T * C, BT = (size_t)B * T;
    bool kept = a->linear_inputs_kept;
    LayerActs la;
    la.ln1 = a->t[A_LN1] + (kept ? l * nc : 0);
    la.qkv = a->t[A_QKV] + (a->qkv_recomputed ? 0 : l * BT * a->qkv_ch);
    la.atty = a->t[A_ATTY] + l * nc;
    la.lse = a->lse + (size_t)l * B * NH * T;
    la.res_in = l == 0 ? a->t[A_ENCODED] : a->t[A_RES3] + (l - 1) * nc;
    la.res2 = a->t[A_RES2] + l * nc;
    la.ln2 = kept ? a->t[A_LN2] + l * nc : la.ln1;
    la.fch = a->t[A_FCH] + (a->fch_recomputed ? 0 : l * BT * a->fc_ch);
    la.mlp_act = kept ? a->t[A_MLP_ACT] + l * BT * a->hidden : a->t[A_D4C];
    la.res3 = a->t[A_RES3] + l * nc;
    return la;
}

// ----------------------------------------------------------------------------
// forward pass: the blocks of the model's family, then the classifier

// linear `kind` of layer l in the run's precision (llmc/adahop_linear.cuh), with its weight and gradient tensors
static AdahopLinear block_linear(Model* m, int l, int kind) {
    const FamilyTensors* ft = &family_tensors[m->config.family];
    int cin, cout, wt = ft->linear_w[kind], bt = ft->linear_b[kind], index = NUM_LINEAR_KINDS * l + kind;
    linear_shape(&m->config, kind, &cin, &cout);
    size_t w_off = (size_t)l * cin * cout, b_off = (size_t)l * cout;
    AdahopLinear lin = {.pass = &m->pass, .saved = m->saved + index, .index = index, .Cin = cin, .Cout = cout,
                        .w = m->w[wt] + w_off, .bias = bt < 0 ? NULL : m->w[bt] + b_off, .dw = m->g[wt] + w_off,
                        .dbias = bt < 0 ? NULL : m->g[bt] + b_off};
    return lin;
}

// the LM head as an AdaHOP linear (-H 1): logits [N x padded vocab] = x W_head^T, x the final norm's output
static AdahopLinear head_linear(Model* m) {
    const ModelConfig* c = &m->config;
    int head = family_tensors[c->family].head, index = adahop_head_index(&m->adahop);
    AdahopLinear lin = {.pass = &m->pass, .saved = m->saved + index, .index = index, .Cin = c->channels,
                        .Cout = c->padded_vocab_size, .w = m->w[head], .bias = NULL, .dw = m->g[head], .dbias = NULL};
    return lin;
}

// which GEMMs run in BF16 whatever their strategy in training step `step` (0-based; llmc/adahop.h bf16_gemms): -B the linears of the first
// and last blocks, always; -T every linear's GEMMs (or only the forward GEMM) from the tail's first step on
static void model_set_bf16_gemms(Model* m, const LinearOptions* lo, int step, int max_steps) {
    AdahopState* st = &m->adahop;
    int L = m->config.num_layers;
    bool tail = lo->bf16_tail > 0.0f && step >= max_steps - (int)lroundf(lo->bf16_tail * max_steps);
    uint8_t all = (1 << NUM_GEMMS) - 1, tail_bits = !tail ? 0 : lo->bf16_tail_fwd ? 1 << GEMM_FWD : all;
    for (int i = 0; i < st->num_linears; i++) {
        int l = i / NUM_LINEAR_KINDS;   // the LM head (-H 1) is the linear after the blocks' (l = L)
        bool edge = l < L && (l < lo->bf16_first || l >= L - lo->bf16_last);
        st->bf16_gemms[i] = (edge ? all : 0) | tail_bits;
    }
}

// forward of linear `kind` of layer l, y = x W^T (+ b); with bw (a backward pass follows) it keeps its dW operand
// and, in a statistics pass, records the patterns of x and W
static void block_linear_forward(Model* m, int l, int kind, floatX* out, const floatX* x, int N, bool bw) {
    AdahopLinear lin = block_linear(m, l, kind);
    adahop_linear_forward(&lin, out, x, N, bw);
}

// the MLP activation of layer l, GELU (GPT-2) or SwiGLU (LLaMA) of fch, into mlp_act, then the MLP's last linear on it
// into out
static void mlp_activation_projection_forward(Model* m, const LayerActs* la, int l, floatX* out, int N, bool bw) {
    int H = m->config.hidden;
    if (m->config.family == FAMILY_LLAMA) { swiglu_forward(la->mlp_act, la->fch, N, H, m->stream); }
    else { gelu_forward(la->mlp_act, la->fch, (long)N * H, m->stream); }
    block_linear_forward(m, l, LIN_FCPROJ, out, la->mlp_act, N, bw);
}

// GPT-2's blocks on the staged micro-batch: token + position embedding, then per layer LayerNorm -> qkv ->
// attention -> projection -> residual + LayerNorm -> fc -> GELU -> fc projection; the last residual add and the
// final LayerNorm leave their output in A_LNF
static void gpt2_blocks_forward(Model* m, int B, int T, bool bw) {
    const ModelConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, N = B * T;
    size_t offs[6];
    staging_layout(N, offs);
    Activations* a = &m->acts;
    floatX** w = m->w;
    cudaStream_t s = m->stream;
    encoder_forward(a->t[A_ENCODED], m->staging_dev + offs[0], w[P_WTE], w[P_WPE], B, T, C, s);
    // the first LayerNorm has no residual add before it
    layernorm_forward(a->t[A_LN1], a->ln1_mean, a->ln1_rstd, NULL, a->t[A_ENCODED], NULL, w[P_LN1W], w[P_LN1B], N, C, s);
    for (int l = 0; l < L; l++) {
        LayerActs la = layer_acts(a, l, B, T, C, NH);
        floatX *ln1 = la.ln1, *qkv = la.qkv, *atty = la.atty, *res_in = la.res_in, *res2 = la.res2;
        floatX *ln2 = la.ln2, *fch = la.fch, *res3 = la.res3;
        block_linear_forward(m, l, LIN_QKV, qkv, ln1, N, bw);
        flash_attention_forward(atty, la.lse, qkv, B, T, NH, NH, C / NH, s);
        // attention projection output goes to the scratch A_DC, then residual add + LayerNorm in one kernel
        block_linear_forward(m, l, LIN_ATTPROJ, a->t[A_DC], atty, N, bw);
        layernorm_forward(ln2, a->ln2_mean + l * N, a->ln2_rstd + l * N, res2, res_in, a->t[A_DC], w[P_LN2W] + l * C, w[P_LN2B] + l * C, N, C, s);
        block_linear_forward(m, l, LIN_FC, fch, ln2, N, bw);
        mlp_activation_projection_forward(m, &la, l, a->t[A_DC], N, bw);
        // residual add, then the next layer's first LayerNorm (or the final one)
        bool last = l == L - 1;
        floatX* next_ln = last ? a->t[A_LNF] : layer_acts(a, l + 1, B, T, C, NH).ln1;
        float* next_mean = last ? a->lnf_mean : a->ln1_mean + (l + 1) * N;
        float* next_rstd = last ? a->lnf_rstd : a->ln1_rstd + (l + 1) * N;
        const floatX* nw = last ? w[P_LNFW] : w[P_LN1W] + (l + 1) * C;
        const floatX* nb = last ? w[P_LNFB] : w[P_LN1B] + (l + 1) * C;
        layernorm_forward(next_ln, next_mean, next_rstd, res3, res2, a->t[A_DC], nw, nb, N, C, s);
    }
}

// LLaMA's blocks on the staged micro-batch: token embedding, then per layer RMSNorm -> qkv -> RoPE on q and k ->
// causal grouped-query attention -> o -> residual + RMSNorm -> gate/up -> SwiGLU -> down; the last residual add
// and the final RMSNorm leave their output in A_LNF. qkv keeps q and k rotated, as attention saw them.
static void llama_blocks_forward(Model* m, int B, int T, bool bw) {
    const ModelConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, NKV = c->num_kv_heads, N = B * T;
    size_t offs[6];
    staging_layout(N, offs);
    Activations* a = &m->acts;
    floatX** w = m->w;
    cudaStream_t s = m->stream;
    encoder_forward(a->t[A_ENCODED], m->staging_dev + offs[0], w[LL_WTE], NULL, B, T, C, s);
    rmsnorm_forward(a->t[A_LN1], a->ln1_rstd, NULL, a->t[A_ENCODED], NULL, w[LL_RMS1W], N, C, LLAMA_RMS_EPS, s);
    for (int l = 0; l < L; l++) {
        LayerActs la = layer_acts(a, l, B, T, C, NH);
        block_linear_forward(m, l, LIN_QKV, la.qkv, la.ln1, N, bw);
        rope_forward(la.qkv, &m->rope, B, T, NH, NKV, s);
        flash_attention_forward(la.atty, la.lse, la.qkv, B, T, NH, NKV, C / NH, s);
        block_linear_forward(m, l, LIN_ATTPROJ, a->t[A_DC], la.atty, N, bw);
        rmsnorm_forward(la.ln2, a->ln2_rstd + l * N, la.res2, la.res_in, a->t[A_DC], w[LL_RMS2W] + l * C, N, C, LLAMA_RMS_EPS, s);
        block_linear_forward(m, l, LIN_FC, la.fch, la.ln2, N, bw);
        mlp_activation_projection_forward(m, &la, l, a->t[A_DC], N, bw);
        // residual add, then the next layer's first RMSNorm (or the final one)
        bool last = l == L - 1;
        floatX* next_norm = last ? a->t[A_LNF] : layer_acts(a, l + 1, B, T, C, NH).ln1;
        float* next_rstd = last ? a->lnf_rstd : a->ln1_rstd + (l + 1) * N;
        const floatX* nw = last ? w[LL_RMSFW] : w[LL_RMS1W] + (l + 1) * C;
        rmsnorm_forward(next_norm, next_rstd, la.res3, la.res2, a->t[A_DC], nw, N, C, LLAMA_RMS_EPS, s);
    }
}

// The classifier over the N tokens of a micro-batch, acts.logit_rows tokens at a time: logits over the padded
// vocabulary with the LM head (GPT-2: the tied embedding); with targets the per-token losses added into acts.losses
// and, where argmax_flags is given, whether each target is the greedy choice (evals); with dloss != 0 the logits are
// replaced by d(loss)/d(logits) * dloss and the head's backward runs on them at once: d(lnf) into A_DC and the head's
// weight gradient added. Chunks keep one chunk of logits in memory, not N x 50304; the head's gradient is then a sum
// of per-chunk GEMMs (the same for every run with the same -M). Without targets all N tokens must fit one chunk.
static void classifier_forward(Model* m, int N, const int* targets, float dloss, float* argmax_flags) {
    const ModelConfig* c = &m->config;
    Activations* a = &m->acts;
    int C = c->channels, Vp = c->padded_vocab_size, rows = a->logit_rows, head = family_tensors[c->family].head;
    if (!targets && N > rows) { die("classifier: logits of %d tokens asked for, the buffer holds %d (-M)", N, rows); }
    for (int t0 = 0; t0 < N; t0 += rows) {
        int n = min(rows, N - t0);
        const floatX* lnf = a->t[A_LNF] + (size_t)t0 * C;
        AdahopLinear lowp_head;
        if (adahop_has_head(&m->adahop)) {   // one chunk (classifier_rows)
            lowp_head = head_linear(m);
            adahop_linear_forward(&lowp_head, a->t[A_LOGITS], lnf, n, dloss != 0.0f);
        } else {
            linear_forward(a->t[A_LOGITS], lnf, m->w[head], NULL, n, C, Vp, m->stream);
        }
        if (!targets) { continue; }
        if (argmax_flags) {
            eval_argmax_flags(argmax_flags + t0, a->t[A_LOGITS], targets + t0, n, c->vocab_size, Vp, m->stream);
        }
        softmax_crossentropy(a->t[A_LOGITS], a->losses + t0, targets + t0, n, c->vocab_size, Vp, dloss, m->stream);
        if (dloss == 0.0f) { continue; }
        if (adahop_has_head(&m->adahop)) {
            adahop_linear_backward(&lowp_head, a->t[A_DC] + (size_t)t0 * C, a->t[A_LOGITS], n, lnf, NULL, m->scratch);
        } else {
            linear_backward(a->t[A_DC] + (size_t)t0 * C, m->g[head], NULL, m->scratch, a->t[A_LOGITS], lnf, m->w[head], n,
                            C, Vp, m->stream);
        }
    }
}

// a micro-batch through the model: the family's blocks, then the classifier (classifier_forward, whose head backward
// runs here when dloss != 0, so model_backward starts at the blocks)
static void model_forward_flags(Model* m, const int* inputs, const int* targets, int B, int T, float dloss,
                                float* argmax_flags) {
    const ModelConfig* c = &m->config;
    if (B > m->max_B || T > m->max_T) { die("forward with B=%d T=%d, but the model was sized for B=%d T=%d", B, T, m->max_B, m->max_T); }
    model_stage_batch(m, inputs, targets, B, T);
    bool bw = dloss != 0.0f;   // a backward pass follows: keep the dW operands
    if (c->family == FAMILY_LLAMA) { llama_blocks_forward(m, B, T, bw); }
    else { gpt2_blocks_forward(m, B, T, bw); }
    size_t offs[6];
    staging_layout(B * T, offs);
    classifier_forward(m, B * T, targets ? m->staging_dev + offs[1] : NULL, dloss, argmax_flags);
}

// model_forward_flags without the argmax flags
static void model_forward(Model* m, const int* inputs, const int* targets, int B, int T, float dloss) {
    model_forward_flags(m, inputs, targets, B, T, dloss, NULL);
}

// ----------------------------------------------------------------------------
// backward pass: gradients of the loss of the last forward (which ran with dloss != 0), added into grads

// into = the input of the MLP's last linear from fch: GELU (GPT-2) or SwiGLU of the gate/up activation (LLaMA);
// all of it [N x H] (channels NULL), or the k channels `channels`, channel-major [k x N]
static void recompute_mlp_activation(Model* m, const LayerActs* la, const int* channels, int k, int N, floatX* into) {
    int H = m->config.hidden;
    cudaStream_t s = m->stream;
    if (m->config.family == FAMILY_LLAMA) {
        if (channels) { swiglu_forward_channels(into, la->fch, channels, k, N, H, s); }
        else { swiglu_forward(into, la->fch, N, H, s); }
    } else if (channels) { gelu_forward_channels(into, la->fch, channels, k, N, H, s); }
    else { gelu_forward(into, la->fch, (long)N * H, s); }
}

// into = the norm in front of the qkv (first) or the fc linear of layer l, from the residual stream and the saved
// statistics: LayerNorm (GPT-2) or RMSNorm (LLaMA); all of it [N x C] (channels NULL), or the k channels `channels`,
// channel-major [k x N]
static void recompute_norm(Model* m, const LayerActs* la, int l, bool first, const int* channels, int k, int N, floatX* into) {
    const Activations* a = &m->acts;
    int C = m->config.channels;
    cudaStream_t s = m->stream;
    const floatX* src = first ? la->res_in : la->res2;
    float* rstd = (first ? a->ln1_rstd : a->ln2_rstd) + l * N;
    if (m->config.family == FAMILY_LLAMA) {
        const floatX* w = m->w[first ? LL_RMS1W : LL_RMS2W] + l * C;
        if (channels) { rmsnorm_forward_channels(into, src, rstd, w, channels, k, N, C, s); }
        else { rmsnorm_forward(into, NULL, NULL, src, NULL, w, N, C, LLAMA_RMS_EPS, s); }   // the forward saved rstd
        return;
    }
    float* mean = (first ? a->ln1_mean : a->ln2_mean) + l * N;
    const floatX* w = m->w[first ? P_LN1W : P_LN2W] + l * C;
    const floatX* b = m->w[first ? P_LN1B : P_LN2B] + l * C;
    if (channels) { layernorm_forward_channels(into, src, mean, rstd, w, b, channels, k, N, C, s); }
    else { layernorm_forward(into, NULL, NULL, NULL, src, NULL, w, b, N, C, s); }   // the forward saved mean, rstd
}

// the output of the linear behind a norm of layer l (the qkv linear behind the first, the fc / gate-up linear behind
// the second) into out again, bit for bit as the forward pass computed it: the norm from the residual stream into
// A_LN1 (free during the backward pass) unless the norms are kept, then the linear, which keeps its dW operand from
// the forward pass
static void recompute_norm_linear(Model* m, const LayerActs* la, int l, bool first, floatX* out, int N) {
    const floatX* x = first ? la->ln1 : la->ln2;
    if (!m->acts.linear_inputs_kept) {
        recompute_norm(m, la, l, first, NULL, 0, N, m->acts.t[A_LN1]);
        x = m->acts.t[A_LN1];
    }
    block_linear_forward(m, l, first ? LIN_QKV : LIN_FC, out, x, N, false);
}

// with -A 1 or 2: fch of layer l again, as the forward pass computed it
static void recompute_fch(Model* m, const LayerActs* la, int l, int N) {
    if (m->acts.fch_recomputed) { recompute_norm_linear(m, la, l, false, la->fch, N); }
}

// with -A 2: qkv of layer l again, as attention saw it (LLaMA: q and k rotated)
static void recompute_qkv(Model* m, const LayerActs* la, int l, int B, int T) {
    if (!m->acts.qkv_recomputed) { return; }
    const ModelConfig* c = &m->config;
    recompute_norm_linear(m, la, l, true, la->qkv, B * T);
    if (c->family == FAMILY_LLAMA) { rope_forward(la->qkv, &m->rope, B, T, c->num_heads, c->num_kv_heads, m->stream); }
}

// the BF16 input of linear `kind` of layer l (or its k channels `channels`, channel-major), recomputed for its backward
// pass from what the forward pass kept: the norm from the residual stream and its saved statistics, the MLP
// activation from fch
static void recompute_linear_input(Model* m, const LayerActs* la, int l, int kind, const int* channels, int k, int N,
                                   floatX* into) {
    if (kind == LIN_FCPROJ) { recompute_mlp_activation(m, la, channels, k, N, into); }
    else { recompute_norm(m, la, l, kind == LIN_QKV, channels, k, N, into); }
}

// backward of linear `kind` of layer l (llmc/adahop_linear.cuh): dinp from dout, its weight and bias gradients (the
// bias gradient not when the caller summed it: bias_summed). What it reads of its input (adahop_linear_input_need)
// is the kept tensor (atty; every input in bf16 mode), else recomputed into the dinp buffer.
static void block_linear_backward(Model* m, const LayerActs* la, int l, int kind, floatX* dinp, const floatX* dout, int N,
                                  bool bias_summed) {
    AdahopLinear lin = block_linear(m, l, kind);
    if (bias_summed) { lin.dbias = NULL; }
    const floatX* kept = NULL;
    if (kind == LIN_ATTPROJ) { kept = la->atty; }
    else if (m->acts.linear_inputs_kept) { kept = kind == LIN_QKV ? la->ln1 : (kind == LIN_FC ? la->ln2 : la->mlp_act); }
    LinearInputNeed need = adahop_linear_input_need(&lin);
    const floatX *x = NULL, *x_channels = NULL;
    if (need.reads != LINEAR_READS_NOTHING && kept) { x = kept; }
    else if (need.reads == LINEAR_READS_CHANNELS) {
        recompute_linear_input(m, la, l, kind, need.channels, need.k, N, dinp);
        x_channels = dinp;
    } else if (need.reads == LINEAR_READS_INPUT) {
        recompute_linear_input(m, la, l, kind, NULL, 0, N, dinp);
        x = dinp;
    }
    adahop_linear_backward(&lin, dinp, dout, N, x, x_channels, m->scratch);
}

// gradient bucket b (llmc/zero.h: block b, or b = L for the tensors outside the blocks) is final: with reduce_now,
// it is summed over the ranks on the comm stream while the backward pass goes on
static void model_bucket_done(Model* m, int bucket) {
    if (m->reduce_now) { dp_reduce_bucket_async(m->dp, m->grads, &m->tensors, bucket, m->stream); }
}

// GPT-2's blocks backward, from d(A_LNF) in A_DC and a zeroed A_DRES to d(embedding output) in A_DRES
static void gpt2_blocks_backward(Model* m, int B, int T) {
    const ModelConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, N = B * T;
    size_t nc = (size_t)N * C;
    Activations* a = &m->acts;
    floatX** w = m->w;
    float** g = m->g;
    cudaStream_t s = m->stream;
    floatX *dres = a->t[A_DRES], *d4c = a->t[A_D4C], *dc = a->t[A_DC];
    // each LayerNorm backward also sums the bias gradient of the projection whose output gradient it leaves in dres
    layernorm_backward(dres, g[P_LNFW], g[P_LNFB], block_linear(m, L - 1, LIN_FCPROJ).dbias, m->scratch, dc,
                       a->t[A_RES3] + (L - 1) * nc, a->lnf_mean, a->lnf_rstd, w[P_LNFW], N, C, s);
    for (int l = L - 1; l >= 0; l--) {
        LayerActs la = layer_acts(a, l, B, T, C, NH);
        floatX *qkv = la.qkv, *res_in = la.res_in, *res2 = la.res2, *fch = la.fch;
        // MLP
        recompute_fch(m, &la, l, N);
        block_linear_backward(m, &la, l, LIN_FCPROJ, d4c, dres, N, true);
        // d(fch) = d(GELU output) gelu'(fch) in place, the fc bias gradient summed in the same pass
        gelu_backward_bias_grad(d4c, block_linear(m, l, LIN_FC).dbias, m->scratch, fch, N, 4 * C, s);
        block_linear_backward(m, &la, l, LIN_FC, dc, d4c, N, true);
        layernorm_backward(dres, g[P_LN2W] + l * C, g[P_LN2B] + l * C, block_linear(m, l, LIN_ATTPROJ).dbias, m->scratch,
                           dc, res2, a->ln2_mean + l * N, a->ln2_rstd + l * N, w[P_LN2W] + l * C, N, C, s);
        // attention
        block_linear_backward(m, &la, l, LIN_ATTPROJ, dc, dres, N, true);
        recompute_qkv(m, &la, l, B, T);
        flash_attention_backward(d4c, a->delta, dc, qkv, la.atty, la.lse, B, T, NH, NH, C / NH, s);
        block_linear_backward(m, &la, l, LIN_QKV, dc, d4c, N, false);
        layernorm_backward(dres, g[P_LN1W] + l * C, g[P_LN1B] + l * C, l > 0 ? block_linear(m, l - 1, LIN_FCPROJ).dbias : NULL,
                           m->scratch, dc, res_in, a->ln1_mean + l * N, a->ln1_rstd + l * N, w[P_LN1W] + l * C, N, C, s);
        model_bucket_done(m, l);
    }
}

// LLaMA's blocks backward, from d(A_LNF) in A_DC and a zeroed A_DRES to d(embedding output) in A_DRES
static void llama_blocks_backward(Model* m, int B, int T) {
    const ModelConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, NKV = c->num_kv_heads, N = B * T;
    size_t nc = (size_t)N * C;
    Activations* a = &m->acts;
    floatX** w = m->w;
    float** g = m->g;
    cudaStream_t s = m->stream;
    floatX *dres = a->t[A_DRES], *d4c = a->t[A_D4C], *dc = a->t[A_DC];
    rmsnorm_backward(dres, g[LL_RMSFW], m->scratch, dc, a->t[A_RES3] + (L - 1) * nc, a->lnf_rstd, w[LL_RMSFW], N, C, s);
    for (int l = L - 1; l >= 0; l--) {
        LayerActs la = layer_acts(a, l, B, T, C, NH);
        // MLP: d(gate, up) overwrites the gate/up activation, which nothing reads afterwards
        recompute_fch(m, &la, l, N);
        block_linear_backward(m, &la, l, LIN_FCPROJ, d4c, dres, N, false);
        swiglu_backward(la.fch, d4c, la.fch, N, c->hidden, s);
        block_linear_backward(m, &la, l, LIN_FC, dc, la.fch, N, false);
        rmsnorm_backward(dres, g[LL_RMS2W] + l * C, m->scratch, dc, la.res2, a->ln2_rstd + l * N, w[LL_RMS2W] + l * C, N, C, s);
        // attention: d(q, k) back through RoPE (in place), then the qkv linear
        block_linear_backward(m, &la, l, LIN_ATTPROJ, dc, dres, N, false);
        recompute_qkv(m, &la, l, B, T);
        flash_attention_backward(d4c, a->delta, dc, la.qkv, la.atty, la.lse, B, T, NH, NKV, C / NH, s);
        rope_backward(d4c, &m->rope, B, T, NH, NKV, s);
        block_linear_backward(m, &la, l, LIN_QKV, dc, d4c, N, false);
        rmsnorm_backward(dres, g[LL_RMS1W] + l * C, m->scratch, dc, la.res_in, a->ln1_rstd + l * N, w[LL_RMS1W] + l * C, N, C, s);
        model_bucket_done(m, l);
    }
}

// the family's blocks from d(lnf) in A_DC (the classifier's backward ran in model_forward), then the embeddings;
// each gradient bucket goes to the all-reduce as soon as it is final (model_bucket_done)
static void model_backward(Model* m, int B, int T) {
    const ModelConfig* c = &m->config;
    const FamilyTensors* ft = &family_tensors[c->family];
    int N = B * T;
    size_t offs[6];
    staging_layout(N, offs);
    Activations* a = &m->acts;
    cudaCheck(cudaMemsetAsync(a->t[A_DRES], 0, (size_t)N * c->channels * sizeof(floatX), m->stream));
    if (c->family == FAMILY_LLAMA) { llama_blocks_backward(m, B, T); }
    else { gpt2_blocks_backward(m, B, T); }
    encoder_backward(m->g[ft->wte], ft->wpe < 0 ? NULL : m->g[ft->wpe], a->t[A_DRES], m->staging_dev + offs[2],
                     m->staging_dev + offs[3], m->staging_dev + offs[4], m->num_distinct_tokens, B, T, c->channels, m->stream);
    model_bucket_done(m, c->num_layers);
}

// ----------------------------------------------------------------------------
// optimizer step

static void model_zero_grad(Model* m) {
    cudaCheck(cudaMemsetAsync(m->grads, 0, m->shard.padded * sizeof(float), m->stream));
    cudaCheck(cudaMemsetAsync(m->acts.losses, 0, (size_t)m->max_B * m->max_T * sizeof(float), m->stream));
}

// sums the gradients over the ranks: waits for the buckets the backward pass reduced (overlapped), or else
// reduce-scatters them now (the update reads only this rank's shard)
static void model_reduce_grads(Model* m, bool overlapped) {
    if (overlapped) { dp_wait_reductions(m->dp, m->stream); }
    else { dp_reduce_scatter(m->dp, m->grads, &m->shard, m->stream); }
}

// On the summed gradients: clips to grad_clip (when > 0), runs AdamW on this rank's shard of every tensor and
// all-gathers the BF16 parameters (llmc/nccl_dp.cuh); returns the gradient norm before clipping
static float model_update(Model* m, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_clip, int step) {
    AdamWConfig a = {lr, beta1, beta2, eps, weight_decay, grad_clip, step};
    return dp_zero_step(m->dp, &m->shard, &m->tensors, m->params, m->master, m->grads, m->adam_m, m->adam_v, m->scratch,
                        &a, m->stream);
}

// every rank takes rank 0's AdaHOP state (votes, patterns, strategies), so all run the same strategies: after each
// vote, the only time strategies can change; then checks that all ranks hold the same strategies (waits for the GPU)
static void model_share_adahop(Model* m) {
    size_t bytes = adahop_state_words(&m->adahop) * sizeof(int32_t);
    adahop_save(&m->adahop, m->adahop_words);
    cudaCheck(cudaMemcpyAsync(m->adahop_words_dev, m->adahop_words, bytes, cudaMemcpyHostToDevice, m->stream));
    dp_broadcast(m->dp, m->adahop_words_dev, bytes, m->stream);
    cudaCheck(cudaMemcpyAsync(m->adahop_words, m->adahop_words_dev, bytes, cudaMemcpyDeviceToHost, m->stream));
    cudaCheck(cudaStreamSynchronize(m->stream));
    adahop_load(&m->adahop, m->adahop_words, bytes / sizeof(int32_t));
    uint32_t sum = adahop_strategy_checksum(&m->adahop);
    if (!dp_same_on_all_ranks(m->dp, sum, (uint32_t*)m->adahop_words_dev, m->stream)) {
        die("rank %d: the AdaHOP strategies differ between ranks after the broadcast (this rank's checksum %08x)", m->dp->rank, sum);
    }
    printf("AdaHOP strategies %08x on all %d ranks\n", sum, m->dp->world_size);
}

// ends the choice of GEMM algorithms by timing (-a 1, the first step of a fresh run): configurations first seen later
// take cuBLASLt's first choice. With several ranks every rank takes rank 0's table (each timed its own), so that all
// run the algorithms a checkpoint saves
static void model_fix_gemm_algos(Model* m) {
    gemm_algo_choice = GEMM_ALGO_FIRST;
    if (m->dp->world_size > 1) {
        size_t max_words = GEMM_TABLE_HEADER_WORDS + (size_t)GEMM_ALGO_CACHE_SIZE * GEMM_ENTRY_WORDS;
        int32_t* words = (int32_t*)calloc_check(max_words, sizeof(int32_t));
        int32_t* dev = NULL;
        cudaCheck(cudaMalloc(&dev, max_words * sizeof(int32_t)));
        gemm_algo_table_save(words);
        cudaCheck(cudaMemcpyAsync(dev, words, max_words * sizeof(int32_t), cudaMemcpyHostToDevice, m->stream));
        dp_broadcast(m->dp, dev, max_words * sizeof(int32_t), m->stream);
        cudaCheck(cudaMemcpyAsync(words, dev, max_words * sizeof(int32_t), cudaMemcpyDeviceToHost, m->stream));
        cudaCheck(cudaStreamSynchronize(m->stream));
        char why[256];
        size_t n = GEMM_TABLE_HEADER_WORDS + (size_t)words[3] * GEMM_ENTRY_WORDS;
        if (gemm_algo_table_load(words, n, why, sizeof(why)) != 0) { die("rank %d: rank 0's GEMM algorithm table: %s", m->dp->rank, why); }
        free(words);
        cudaCheck(cudaFree(dev));
    }
    printf("GEMM algorithms: the fastest of cuBLASLt's candidates for %d configurations, kept for the run (-a 1)\n",
           gemm_timed_entries());
}

// mean of the per-token losses summed into acts.losses by `batches` micro-batches, over all ranks together
// (waits for the GPU)
static float model_mean_loss(Model* m, int B, int T, int batches) {
    int N = B * T;
    float* h = m->acts.losses_host;
    dp_all_reduce(m->dp, m->acts.losses, (size_t)N, m->stream);
    cudaCheck(cudaMemcpyAsync(h, m->acts.losses, (size_t)N * sizeof(float), cudaMemcpyDeviceToHost, m->stream));
    cudaCheck(cudaStreamSynchronize(m->stream));
    double sum = 0.0;
    for (int i = 0; i < N; i++) { sum += h[i]; }
    return (float)(sum / ((double)N * batches));
}

#ifndef TESTING
// ----------------------------------------------------------------------------
// training run: flags, data, validation, sampling, logging, checkpoints

typedef struct {
    const char* train_pattern;
    const char* val_pattern;
    const char* init;            // "dN" / "llama:dN" for a fresh GPT-2 / LLaMA of depth N, else a checkpoint/model file
    const char* out_dir;         // log and checkpoints; NULL = neither
    const char* tokenizer_path;
    const char* evals;           // -E: downstream eval files (a folder or a glob), NULL = none
    int eval_every;              // -V: evals every N steps as well as at the end, 0 = only at the end
    int B, T, total_batch, max_steps, warmup, val_every, val_batches, sample_every, gen_tokens, ckpt_every, keep_ckpts, resume;
    float lr, final_lr_frac, weight_decay, grad_clip;
    uint64_t seed;
    LinearOptions lin;
    DPOptions dp;                // rank, world size, rendezvous file (-I, -G, -F); mpirun sets the first two
    int overlap;                 // all-reduce gradient buckets during the backward pass (-O)
    float skip_loss_z, skip_norm_z;   // spike skipping thresholds (-L, -Z; llmc/spike_guard.h), 0 = off
    int timed_gemms;             // -a: GEMM algorithms by timing in the first step (llmc/matmul.cuh)
    int64_t data_seed;           // -D: the order of the training sequences; -1 = the checkpoint's when resuming, else -r
    int val_bf16;                // -f: quantized runs validate with the block linears in BF16 too
} Options;

static_assert(SPIKE_GUARD_WORDS <= CKPT_TRAINER_WORDS, "the spike guard must fit a checkpoint's trainer words");

static void usage(const char* prog) {
    printf("Usage: %s [options]\n"
           "Trains GPT-2 or LLaMA-small on one GPU, or data-parallel on several (BF16 compute, FP32 master weights and\n"
           "optimizer state).\n"
           "  -i <glob>  training token shards             (default data/tinyshakespeare_train.bin)\n"
           "  -j <glob>  validation token shards           (default data/tinyshakespeare_val.bin)\n"
           "  -e <init>  d6|d12|d24|d36|d48 = fresh GPT-2 of that depth, llama:d8|llama:d12|llama:d24 = fresh LLaMA-small,\n"
           "             or a model/checkpoint file of either family (default d6)\n"
           "  -o <dir>   output directory for main.log and checkpoints (default: none)\n"
           "  -b <int>   micro-batch size B                (default 16)\n"
           "  -t <int>   sequence length T, a multiple of 8, of 32 with MXFP4 (default 256)\n"
           "  -d <int>   total batch in tokens; a multiple of B*T*world, the rest is gradient accumulation (default: the\n"
           "             resumed checkpoint's, else B*T*world)\n"
           "  -x <int>   optimizer steps                   (default 200)\n"
           "  -l <f>     peak learning rate                (default 1e-3)\n"
           "  -u <int>   warmup steps                      (default 20)\n"
           "  -q <f>     final learning rate as a fraction of the peak, cosine decay (default 0.1)\n"
           "  -c <f>     AdamW weight decay on matrices    (default 0.1)\n"
           "  -k <f>     clip the gradient global norm to this, 0 = off (default 1.0)\n"
           "  -v <int>   validation every N steps, 0 = never (default 50)\n"
           "  -m <int>   validation batches, -1 = the whole validation set (default 20)\n"
           "  -f <0|1>   in mxfp4 / hadamard / adahop, validate also with the block linears (and an -H 1 head) in BF16:\n"
           "             the same weights through the bf16 forward, logged as val_loss_bf16 (default 1)\n"
           "  -s <int>   print a sample every N steps, 0 = never (default 100)\n"
           "  -g <int>   tokens per sample                 (default 64)\n"
           "  -n <int>   write a checkpoint every N steps to the -o dir, 0 = never (default 0)\n"
           "  -N <int>   keep only the newest N checkpoints, 0 = all (default 0)\n"
           "  -y <0|1|2> the -o dir's checkpoints and logs: 0 = start afresh, refusing a dir that holds another run's;\n"
           "             1 = resume from the newest valid checkpoint (newer corrupt ones are skipped with a warning;\n"
           "             afresh when there is none); 2 = delete another run's, then start afresh (default 0)\n"
           "  -r <int>   random seed for init, stochastic rounding and sampling (default 1337)\n"
           "  -D <int>   seed of the training data order: one permutation of all sequences of all shards per epoch, so\n"
           "             runs of the same -D read the same batches whatever -r, B or the cut into shards (default: -r;\n"
           "             a resumed run keeps its checkpoint's)\n"
           "  -z <path>  token decoding file               (default data/gpt2_tokenizer.bin)\n"
           "  -E <path>  downstream evals (dev/data/prepare_evals.py files: a folder of them or a glob), scored in the\n"
           "             run's precision on rank 0 at the end, printed and logged (default: none); with -x 0 and a model\n"
           "             file as -e this scores that model without training\n"
           "  -V <int>   run the -E evals every N steps as well, 0 = only at the end (default 0)\n"
           "  -L <f>     skip the update of a step whose loss z-score over the last 64 steps exceeds this, 0 = off (default 0)\n"
           "  -Z <f>     the same for the gradient norm, 0 = off (default 0)\n"
           "  -a <0|1>   GEMM algorithms: 1 = the fastest of cuBLASLt's first %d candidates per GEMM shape, timed in the\n"
           "             first step and saved with the checkpoints; 0 = cuBLASLt's first choice, the same in every run\n"
           "             (two runs then match bit for bit). A resumed run takes the checkpoint's, whatever -a (default 1)\n"
           "SIGTERM / SIGINT / SIGHUP / SIGQUIT: the step finishes, a checkpoint is written to the -o dir, the exit status is\n"
           "128 + signal.\n"
           "Precision of the block linear layers (qkv, attention projection, MLP up and down; all three GEMMs each):\n"
           "  -p <mode>  bf16 | mxfp4 (no transform) | hadamard (IHT on every GEMM) | adahop (default adahop)\n"
           "  -P <path>  MXFP4 GEMM path: fast (E4M3 on FP8 tensor cores) | exact (dequantize + BF16) (default fast)\n"
           "  -S <0|1>   stochastic rounding of the gradient operands (default 0)\n"
           "  -w <int>   AdaHOP calibration steps before the first strategy vote (default 30)\n"
           "  -C <str>   precision of the calibration steps: iht (with the Hadamard; closer to bf16 in dev/RESULTS.md's runs) |\n"
           "             plain (MXFP4, as in the paper; docs/adahop.md) (default iht)\n"
           "  -R <int>   AdaHOP re-classification every R steps, 0 = never (default 250)\n"
           "  -W <int>   steps of pattern statistics before each re-classification (default 10)\n"
           "  -K <int>   rows/columns taken out by outlier extraction (default 64)\n"
           "  -B <f,l>   the block linears of the first f and the last l transformer blocks in BF16 (default 0,0)\n"
           "  -T <F>     the last F (0..1) of the steps with every low-precision GEMM in BF16 (the block linears', the\n"
           "             LM head's with -H 1); F:fwd only the forward GEMMs (default 0)\n"
           "  -Q <rule>  MXFP4 block-scale rule, of every operand or FWD,GRAD (the forward operands x, W and their\n"
           "             transposes; the gradients dY): ocp (e = floor(log2 amax) - 2, maxima in [6, 8) 2^e clip to 6) |\n"
           "             roundup (never clips) | bump7 (ocp, e + 1 where the maximum reaches 7 2^e) (default ocp)\n"
           "  -H <0|1>   the LM head too (logits and their two backward GEMMs) in the -p precision, as one more AdaHOP\n"
           "             linear; B x T x padded vocab below 2^31; with -p bf16 the head is BF16 either way and -H 1 changes\n"
           "             nothing (so a set of runs can share it) (default 0: BF16)\n"
           "Memory:\n"
           "  -A <0|1|2> recompute activations in the backward pass instead of keeping them for every layer: 1 the MLP's\n"
           "             pre-activation (fc / gate-up output), 2 also the qkv output; each saves (layers - 1) x B x T x its\n"
           "             width BF16 values and costs one more forward of its linear per layer; results are identical\n"
           "             (default 0)\n"
           "  -M <int>   tokens whose logits exist at once: the LM head's forward, loss, logits gradient and backward run\n"
           "             on chunks of M tokens (at least T), so the logits take M x padded vocab BF16 values instead of\n"
           "             B x T x that; 0 = the whole micro-batch. The head's weight gradient is then a sum of per-chunk\n"
           "             products (other bits than -M 0). With -H 1 the head takes the whole micro-batch (default %d)\n"
           "Data parallel, one process per GPU: mpirun -np N <this program> ..., or without MPI N processes on one node\n"
           "started with -G N -I 0..N-1 -F <file> (the same batches, results and checkpoints as one GPU with N times the\n"
           "gradient accumulation; only rank 0 prints, samples and writes files):\n"
           "  -G <int>   world size, the number of processes (default 1, or mpirun's)\n"
           "  -I <int>   rank of this process, 0..G-1; it runs on GPU I of the node (default 0, or mpirun's)\n"
           "  -F <path>  rendezvous file that all ranks can see: rank 0 announces the run there (replacing the files of a\n"
           "             failed run, refusing those of a live one), every rank waits for all the others up to %.0f s, and\n"
           "             a rank that fails tells the others there (needed for G > 1 without mpirun)\n"
           "  -O <0|1>   all-reduce the gradients layer by layer during the backward pass (default 1)\n"
           "  -h         this help\n", prog, GEMM_TIMED_CANDIDATES, DEFAULT_HEAD_CHUNK,
           RENDEZVOUS_TIMEOUT_S);
}

// -Q RULE or -Q FWD,GRAD: the block-scale rule of every operand, or of the forward operands (x, W) and of the
// gradient operands (dY) apart (llmc/mxfp4.h: ocp, roundup, bump7)
static void parse_scale_rules(const char* v, int* fwd, int* grad) {
    char first[16] = "", second[16] = "";
    const char* comma = strchr(v, ',');
    size_t n = comma ? (size_t)(comma - v) : strlen(v);
    if (n < sizeof(first)) { memcpy(first, v, n); }
    if (comma && strlen(comma + 1) < sizeof(second)) { strcpy(second, comma + 1); }
    *fwd = *grad = -1;
    for (int r = 0; r < MX_NUM_SCALE_RULES; r++) {
        if (strcmp(first, mx_scale_rule_names[r]) == 0) { *fwd = r; }
        if (strcmp(comma ? second : first, mx_scale_rule_names[r]) == 0) { *grad = r; }
    }
    if (*fwd < 0 || *grad < 0) { die("flag -Q: '%s' is not RULE or FWD,GRAD with rules ocp, roundup, bump7", v); }
}

static Options parse_options(int argc, char** argv) {
    Options o = {
        .train_pattern = "data/tinyshakespeare_train.bin", .val_pattern = "data/tinyshakespeare_val.bin", .init = "d6",
        .out_dir = NULL, .tokenizer_path = "data/gpt2_tokenizer.bin", .evals = NULL, .eval_every = 0,
        .B = 16, .T = 256, .total_batch = -1, .max_steps = 200, .warmup = 20, .val_every = 50, .val_batches = 20,
        .sample_every = 100, .gen_tokens = 64, .ckpt_every = 0, .keep_ckpts = 0, .resume = OUT_DIR_FRESH,
        .lr = 1e-3f, .final_lr_frac = 0.1f, .weight_decay = 0.1f, .grad_clip = 1.0f, .seed = 1337,
        .lin = {.precision = PREC_ADAHOP, .path = GEMM_PATH_FAST, .stochastic_grads = 0, .calib_steps = 30,
                .calib_strategy = STRAT_IHT, .reclass_every = 250, .reclass_window = 10, .oe_k = 64,
                .scale_rule_fwd = MX_SCALE_OCP, .scale_rule_grad = MX_SCALE_OCP, .bf16_first = 0, .bf16_last = 0,
                .bf16_tail = 0.0f, .bf16_tail_fwd = 0, .recompute = 0,
                .lm_head = 0, .head_chunk = DEFAULT_HEAD_CHUNK},
        .dp = {.rank = -1, .world_size = -1, .rendezvous = NULL, .timeout_s = RENDEZVOUS_TIMEOUT_S},
        .overlap = 1, .skip_loss_z = 0.0f, .skip_norm_z = 0.0f, .timed_gemms = 1, .data_seed = -1, .val_bf16 = 1,
    };
    cli_handle_help(argc, argv, usage);
    for (int i = 1; i < argc; i += 2) {
        const char* f = argv[i];
        const char* v = cli_flag_value(argc, argv, i, usage);
        switch (f[1]) {
            case 'i': o.train_pattern = v; break;
            case 'j': o.val_pattern = v; break;
            case 'e': o.init = v; break;
            case 'o': o.out_dir = v; break;
            case 'z': o.tokenizer_path = v; break;
            case 'E': o.evals = v; break;
            case 'V': o.eval_every = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'b': o.B = (int)parse_int(f, v, 1, 1 << 16); break;
            case 't': o.T = (int)parse_int(f, v, 8, 1 << 16); break;
            case 'd': o.total_batch = (int)parse_int(f, v, 1, 1 << 30); break;
            case 'x': o.max_steps = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'u': o.warmup = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'v': o.val_every = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'm': o.val_batches = (int)parse_int(f, v, -1, 1 << 30); break;
            case 's': o.sample_every = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'g': o.gen_tokens = (int)parse_int(f, v, 1, 1 << 16); break;
            case 'n': o.ckpt_every = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'N': o.keep_ckpts = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'y': o.resume = (int)parse_int(f, v, OUT_DIR_FRESH, OUT_DIR_REPLACE); break;
            case 'r': o.seed = (uint64_t)parse_int(f, v, 0, 0x7fffffffffffffffL); break;
            case 'D': o.data_seed = parse_int(f, v, 0, 0x7fffffffffffffffL); break;
            case 'f': o.val_bf16 = (int)parse_int(f, v, 0, 1); break;
            case 'l': o.lr = parse_float(f, v, 0.0f, 10.0f); break;
            case 'q': o.final_lr_frac = parse_float(f, v, 0.0f, 1.0f); break;
            case 'c': o.weight_decay = parse_float(f, v, 0.0f, 10.0f); break;
            case 'k': o.grad_clip = parse_float(f, v, 0.0f, 1e30f); break;
            case 'p':
                o.lin.precision = precision_from_name(v);
                if (o.lin.precision < 0) { die("flag -p: '%s' is not one of bf16, mxfp4, hadamard, adahop", v); }
                break;
            case 'P':
                if (strcmp(v, "fast") == 0) { o.lin.path = GEMM_PATH_FAST; }
                else if (strcmp(v, "exact") == 0) { o.lin.path = GEMM_PATH_EXACT; }
                else { die("flag -P: '%s' is not fast or exact", v); }
                break;
            case 'S': o.lin.stochastic_grads = (int)parse_int(f, v, 0, 1); break;
            case 'w': o.lin.calib_steps = (int)parse_int(f, v, 1, 1 << 30); break;
            case 'C': o.lin.calib_strategy = calib_strategy_from_flag(v); break;
            case 'R': o.lin.reclass_every = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'W': o.lin.reclass_window = (int)parse_int(f, v, 1, 1 << 30); break;
            case 'K': o.lin.oe_k = (int)parse_int(f, v, 1, 4096); break;
            case 'Q': parse_scale_rules(v, &o.lin.scale_rule_fwd, &o.lin.scale_rule_grad); break;
            case 'B': {
                char* end = NULL;
                long first = strtol(v, &end, 10), last = end && *end == ',' ? strtol(end + 1, &end, 10) : -1;
                if (first < 0 || last < 0 || first > 4096 || last > 4096 || !end || *end != '\0') {
                    die("flag -B: '%s' is not FIRST,LAST (blocks counted from each end, e.g. 0,2)", v);
                }
                o.lin.bf16_first = (int)first; o.lin.bf16_last = (int)last;
                break;
            }
            case 'T': {
                char frac[32] = "";
                const char* colon = strchr(v, ':');
                size_t n = colon ? (size_t)(colon - v) : strlen(v);
                if (n >= sizeof(frac) || (colon && strcmp(colon + 1, "fwd") != 0)) { die("flag -T: '%s' is not F or F:fwd", v); }
                memcpy(frac, v, n);
                o.lin.bf16_tail = parse_float(f, frac, 0.0f, 1.0f);
                o.lin.bf16_tail_fwd = colon != NULL;
                break;
            }
            case 'A': o.lin.recompute = (int)parse_int(f, v, 0, 2); break;
            case 'H': o.lin.lm_head = (int)parse_int(f, v, 0, 1); break;
            case 'M': o.lin.head_chunk = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'G': o.dp.world_size = (int)parse_int(f, v, 1, 1 << 16); break;
            case 'I': o.dp.rank = (int)parse_int(f, v, 0, 1 << 16); break;
            case 'F': o.dp.rendezvous = v; break;
            case 'O': o.overlap = (int)parse_int(f, v, 0, 1); break;
            case 'a': o.timed_gemms = (int)parse_int(f, v, 0, 1); break;
            case 'L': o.skip_loss_z = parse_float(f, v, 0.0f, 1e6f); break;
            case 'Z': o.skip_norm_z = parse_float(f, v, 0.0f, 1e6f); break;
            default: usage(argv[0]); die("unknown flag %s", f);
        }
    }
    if (o.T % 8 != 0) { die("flag -t: sequence length %d must be a multiple of 8", o.T); }
    if (o.eval_every > 0 && o.evals == NULL) { die("flag -V: periodic evals need the eval files (-E)"); }
    if ((o.ckpt_every > 0 || o.keep_ckpts > 0 || o.resume) && o.out_dir == NULL) {
        die("checkpoints (-n, -N) and resume (-y) need an output directory (-o)");
    }
    if (o.lin.reclass_every > 0 && o.lin.reclass_window > o.lin.reclass_every) {
        die("flag -W: the statistics window (%d) cannot exceed the re-classification interval -R (%d)", o.lin.reclass_window, o.lin.reclass_every);
    }
    if (o.lin.precision != PREC_BF16 && o.T % 32 != 0) { die("flag -t: MXFP4 needs T (%d) to be a multiple of 32", o.T); }
    if (o.lin.precision == PREC_BF16) { o.lin.lm_head = 0; }   // the BF16 head is the head of every bf16 run
    return o;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// mean validation loss over the first `batches` batches (-1 = all): rank r evaluates batches r, r + world, ...
static float evaluate(Model* m, DataLoader* val, int batches, int B, int T) {
    dataloader_reset(val);
    int n = batches < 0 ? (int)dataloader_batches_per_epoch(val) : batches;
    if (n <= 0) { die("validation set has no complete batch of B=%d x T=%d tokens", B, T); }
    cudaCheck(cudaMemsetAsync(m->acts.losses, 0, (size_t)B * T * sizeof(float), m->stream));
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(val);
        if (dp_micro_owner(i, m->dp->world_size) != m->dp->rank) { continue; }
        model_forward(m, val->inputs, val->targets, B, T, 0.0f);
    }
    return model_mean_loss(m, B, T, n);
}

// evaluate() with every GEMM of the block linears (and of an -H 1 head) in BF16: the run's weights through the bf16
// forward without its quantization (adahop_strategy_of maps precision bf16 to STRAT_BF16)
static float evaluate_bf16_forward(Model* m, DataLoader* val, int batches, int B, int T) {
    int precision = m->adahop.precision;
    m->adahop.precision = PREC_BF16;
    float loss = evaluate(m, val, batches, B, T);
    m->adahop.precision = precision;
    return loss;
}

// the E4M3 blocks the fast path converted inexactly (below its exact range, llmc/mxfp4.cuh) since the last call, its
// two operand slots together, and the counters zeroed (waits for the GPU); -1 off the fast path
static long long model_take_inexact_blocks(Model* m) {
    if (m->adahop.precision == PREC_BF16 || m->ws.path != GEMM_PATH_FAST) { return -1; }
    unsigned long long* counters[2] = {m->ws.ea.inexact_blocks, m->ws.eb.inexact_blocks};
    unsigned long long total = 0;
    for (int i = 0; i < 2; i++) {
        unsigned long long n;
        cudaCheck(cudaMemcpyAsync(&n, counters[i], sizeof(n), cudaMemcpyDeviceToHost, m->stream));
        cudaCheck(cudaStreamSynchronize(m->stream));
        cudaCheck(cudaMemsetAsync(counters[i], 0, sizeof(n), m->stream));
        total += n;
    }
    return (long long)total;
}

// prints gen_tokens sampled tokens after <|endoftext|>, one forward over a B=1 window per token
static void print_sample(Model* m, const Tokenizer* tok, Rng* rng, int gen_tokens, int T) {
    const ModelConfig* c = &m->config;
    int* tokens = (int*)calloc_check((size_t)T, sizeof(int));
    floatX* row = (floatX*)malloc_check((size_t)c->vocab_size * sizeof(floatX));
    float* logits = (float*)malloc_check((size_t)c->vocab_size * sizeof(float));
    int eot = c->vocab_size - 1;
    tokens[0] = eot;
    int n = gen_tokens < T - 1 ? gen_tokens : T - 1;
    printf("---- sample ----\n");
    for (int t = 1; t <= n; t++) {
        int window = round_up(t, 32) < T ? round_up(t, 32) : T;   // MXFP4 blocks need 32-token multiples
        model_forward(m, tokens, NULL, 1, window, 0.0f);
        cudaCheck(cudaMemcpyAsync(row, m->acts.t[A_LOGITS] + (size_t)(t - 1) * c->padded_vocab_size,
                                  (size_t)c->vocab_size * sizeof(floatX), cudaMemcpyDeviceToHost, m->stream));
        cudaCheck(cudaStreamSynchronize(m->stream));
        for (int v = 0; v < c->vocab_size; v++) { logits[v] = __bfloat162float(row[v]); }
        tokens[t] = sample_softmax(logits, c->vocab_size, 1.0f, rng_uniform(rng));
        if (tok->init_ok) { safe_print_token(tokenizer_decode(tok, (uint32_t)tokens[t])); }
        else { printf("%d ", tokens[t]); }
        fflush(stdout);
    }
    printf("\n----------------\n");
    free(tokens); free(row); free(logits);
}

// the model and a device buffer of argmax flags, for the eval forward pass
typedef struct {
    Model* m;
    float* flags;   // [max_B * max_T]
} EvalRunner;

// the eval forward pass (an EvalForwardFn, llmc/evals.h): the run's forward with targets and no gradient, then the
// per-position losses and greedy-argmax flags to the host
static void gpu_eval_forward(void* runner, const EvalBatch* b, float* losses, float* argmax) {
    EvalRunner* r = (EvalRunner*)runner;
    Model* m = r->m;
    int N = b->rows * b->T_used;
    cudaCheck(cudaMemsetAsync(m->acts.losses, 0, (size_t)N * sizeof(float), m->stream));
    model_forward_flags(m, b->inputs, b->targets, b->rows, b->T_used, 0.0f, r->flags);
    cudaCheck(cudaMemcpyAsync(losses, m->acts.losses, (size_t)N * sizeof(float), cudaMemcpyDeviceToHost, m->stream));
    cudaCheck(cudaMemcpyAsync(argmax, r->flags, (size_t)N * sizeof(float), cudaMemcpyDeviceToHost, m->stream));
    cudaCheck(cudaStreamSynchronize(m->stream));
}

// <out_dir>/state_<step>.bin, the same file at any world size: every rank sends its shards of master, m and v
// (through the idle gradient buffer), rank 0 writes them
static void save_state(Model* m, const Options* o, int step, const DataLoader* train, const Rng* rng, const SpikeGuard* guard) {
    size_t n = m->num_params;
    bool writer = m->dp->rank == 0;
    float* host = writer ? (float*)malloc_check(3 * n * sizeof(float)) : NULL;
    const float* shards[3] = {m->master, m->adam_m, m->adam_v};
    for (int k = 0; k < 3; k++) { dp_download_full(m->dp, writer ? host + k * n : NULL, shards[k], m->grads, &m->shard, m->stream); }
    if (!writer) { return; }
    CheckpointHeader ck;
    memset(&ck, 0, sizeof(ck));
    checkpoint_set_model(&ck, &m->config);
    ck.contents = CKPT_PARAMS | CKPT_OPTIMIZER | CKPT_ADAHOP | CKPT_GEMM_ALGOS;
    ck.adahop_words = (int64_t)adahop_state_words(&m->adahop);
    ck.gemm_words = (int64_t)gemm_algo_table_words();
    int32_t* gemm = (int32_t*)malloc_check((size_t)ck.gemm_words * sizeof(int32_t));
    gemm_algo_table_save(gemm);
    ck.step = step;
    ck.seed = (int64_t)o->seed;
    ck.total_batch = o->total_batch;
    dataloader_get_state(train, ck.data_state);
    memcpy(ck.rng_state, rng->s, sizeof(rng->s));
    spike_guard_save(guard, ck.trainer_words);
    char path[4096];
    checkpoint_state_path(path, sizeof(path), o->out_dir, step);
    adahop_save(&m->adahop, m->adahop_words);
    checkpoint_write_state(path, &ck, host, host + n, host + 2 * n, m->adahop_words, gemm);
    free(host);
    free(gemm);
    printf("checkpoint: %s\n", path);
    checkpoint_prune(o->out_dir, path, step, o->keep_ckpts);
}

// the summed gradients of one optimizer step: every rank reads the step's micro_steps micro-batches in the same
// order and trains those it owns (llmc/zero.h), so the batches do not depend on the world size
static void step_gradients(Model* m, DataLoader* train, const Options* o, int micro_steps, int step) {
    int world = m->dp->world_size;
    model_zero_grad(m);
    float dloss = 1.0f / ((float)o->B * o->T * micro_steps);
    m->pass.step = step;
    for (int k = 0; k < micro_steps; k++) {
        dataloader_next_batch(train);
        if (dp_micro_owner(k, world) != m->dp->rank) { continue; }
        m->pass.micro = k;
        m->pass.stats = k == 0 && adahop_wants_stats(&m->adahop, step);   // patterns from one micro-batch, on rank 0
        m->reduce_now = o->overlap && k >= micro_steps - world;           // this rank's last micro-batch
        model_forward(m, train->inputs, train->targets, o->B, o->T, dloss);
        model_backward(m, o->B, o->T);
    }
    m->pass.stats = false;
    if (m->adahop.precision != PREC_BF16) { adahop_flush_patterns(&m->ws, &m->adahop, m->stream); }
    model_reduce_grads(m, o->overlap);
}

// the signal that stops the run after this step (llmc/stop_signal.h), or 0; with several ranks every rank stops when
// any of them received one, so all reach the checkpoint's collectives together (waits for the GPU)
static int stop_after_step(Model* m) {
    int sig = stop_signal_received();
    if (m->dp->world_size == 1) { return sig; }
    int same = dp_same_on_all_ranks(m->dp, (uint32_t)sig, (uint32_t*)m->adahop_words_dev, m->stream);
    return same ? sig : (sig ? sig : SIGTERM);
}

// whether the spike guard skips the update of this step (llmc/spike_guard.h); *norm = the gradient norm it judged
// (the same on every rank: the loss and the norm are global)
static bool model_spike_skip(Model* m, SpikeGuard* g, int step, float loss, float* norm, FILE* logf) {
    *norm = dp_grad_norm(m->dp, m->scratch, m->grads, &m->shard, m->stream);
    return isfinite(loss) && isfinite(*norm) && spike_guard_skip(g, step, loss, *norm, stdout, logf);
}

// What the ranks must agree on (llmc/agreement.h): the options that shape the run and its collectives, the model
// and its initial parameters, and the resume decision (resumed: the checkpoint resumed from, or NULL)
static RunAgreement run_agreement_of(const Options* o, const ModelConfig* c, const float* init,
                                     const CheckpointHeader* resumed, int world) {
    const LinearOptions* l = &o->lin;
    RunAgreement a;
    memset(&a, 0, sizeof(a));   // a field missed below would agree by accident, never differ at random
    a.world_size = world; a.family = c->family; a.num_layers = c->num_layers; a.channels = c->channels;
    a.num_heads = c->num_heads; a.num_kv_heads = c->num_kv_heads; a.hidden = c->hidden; a.vocab_size = c->vocab_size;
    a.max_seq_len = c->max_seq_len; a.micro_batch = o->B; a.seq_len = o->T; a.total_batch = o->total_batch;
    a.max_steps = o->max_steps; a.warmup = o->warmup; a.val_every = o->val_every; a.val_batches = o->val_batches;
    a.ckpt_every = o->ckpt_every; a.lr = agreement_double(o->lr); a.final_lr_frac = agreement_double(o->final_lr_frac);
    a.weight_decay = agreement_double(o->weight_decay); a.grad_clip = agreement_double(o->grad_clip);
    a.precision = l->precision; a.gemm_path = l->path; a.stochastic_grads = l->stochastic_grads;
    a.calib_steps = l->calib_steps; a.calib_strategy = l->calib_strategy; a.reclass_every = l->reclass_every;
    a.reclass_window = l->reclass_window; a.oe_k = l->oe_k; a.recompute = l->recompute; a.lm_head = l->lm_head; a.overlap = o->overlap;
    a.scale_rules = l->scale_rule_fwd * MX_NUM_SCALE_RULES + l->scale_rule_grad;
    a.bf16_blocks = (int64_t)l->bf16_first * 4097 + l->bf16_last;
    a.bf16_tail = agreement_double(l->bf16_tail); a.bf16_tail_fwd = l->bf16_tail_fwd;
    a.skip_loss_z = agreement_double(o->skip_loss_z); a.skip_norm_z = agreement_double(o->skip_norm_z);   // -L, -Z: an extra norm all-reduce
    a.timed_gemms = resumed ? 0 : o->timed_gemms;   // -a 1 broadcasts rank 0's table after the first step; a resume loads it
    a.seed = (int64_t)o->seed;
    a.data_seed = o->data_seed;
    a.resume_step = resumed ? resumed->step : 0;
    a.data_state = resumed ? agreement_hash(resumed->data_state, sizeof(resumed->data_state)) : 0;
    a.init_hash = agreement_hash(init, model_num_params(c) * sizeof(float));
    return a;
}

// the dense BF16 tensor-core peak of an H100 / H200 SXM, the denominator of MFU (for every precision mode, so that
// MFU compares the modes' speed on the same model work)
#define GPU_PEAK_FLOPS 989e12

// what one optimizer step measured, for its lines in the logs
typedef struct {
    int step;                 // 1-based: the step just finished
    float loss, lr, norm;
    double seconds, tok_s, mfu, mem_gib;
    long long inexact_blocks;   // this rank's inexact E4M3 blocks of the step's GEMMs (model_take_inexact_blocks), -1: none
} StepFigures;

// main.jsonl's first line of a run (or of a resumed piece of it): the GPU (rank 0's), the trainer's build commit,
// the model, the batch, the precision, and the FLOPs per token behind the MFU figures
static void json_run_event(FILE* fp, const char* gpu_name, const Model* m, const Options* o, int micro_steps, int start_step,
                           double flops_per_token) {
    if (!fp) { return; }
    const ModelConfig* c = &m->config;
    JsonLine j;
    jsonl_begin(&j, "run");
    jsonl_string(&j, "gpu", gpu_name);
    jsonl_string(&j, "build_commit", BUILD_COMMIT);
    jsonl_string(&j, "family", family_names[c->family]);
    jsonl_int(&j, "layers", c->num_layers);  jsonl_int(&j, "channels", c->channels);
    jsonl_int(&j, "heads", c->num_heads);    jsonl_int(&j, "kv_heads", c->num_kv_heads);
    jsonl_int(&j, "hidden", c->hidden);      jsonl_int(&j, "vocab", c->vocab_size);
    jsonl_int(&j, "params", (long long)m->num_params);
    jsonl_int(&j, "B", o->B);  jsonl_int(&j, "T", o->T);
    jsonl_int(&j, "tokens_per_step", o->total_batch);  jsonl_int(&j, "micro_steps", micro_steps);
    jsonl_int(&j, "world_size", m->dp->world_size);
    jsonl_string(&j, "precision", precision_names[o->lin.precision]);
    jsonl_int(&j, "lm_head_lowp", o->lin.lm_head);
    jsonl_string(&j, "scale_rule_fwd", mx_scale_rule_names[o->lin.scale_rule_fwd]);
    jsonl_string(&j, "scale_rule_grad", mx_scale_rule_names[o->lin.scale_rule_grad]);
    jsonl_int(&j, "bf16_first_blocks", o->lin.bf16_first);
    jsonl_int(&j, "bf16_last_blocks", o->lin.bf16_last);
    jsonl_number(&j, "bf16_tail", o->lin.bf16_tail);
    jsonl_int(&j, "bf16_tail_fwd_only", o->lin.bf16_tail_fwd);
    jsonl_int(&j, "logit_rows", m->acts.logit_rows);
    jsonl_int(&j, "seed", (long long)o->seed);
    jsonl_int(&j, "data_seed", (long long)o->data_seed);
    jsonl_int(&j, "timed_gemms", o->timed_gemms);
    jsonl_int(&j, "start_step", start_step);  jsonl_int(&j, "max_steps", o->max_steps);
    jsonl_number(&j, "flops_per_token", flops_per_token);
    jsonl_number(&j, "peak_flops", GPU_PEAK_FLOPS);
    jsonl_end(&j, fp);
}

// main.jsonl's line of a step: its figures and, when a vote changed strategies (against `before`, the strategies in
// effect during the step), their checksum and the changed GEMMs
static void json_step_event(FILE* fp, const StepFigures* f, const AdahopState* st, const int* before) {
    if (!fp) { return; }
    JsonLine j;
    jsonl_begin(&j, "step");
    jsonl_int(&j, "step", f->step);
    jsonl_number(&j, "loss", f->loss);  jsonl_number(&j, "lr", f->lr);  jsonl_number(&j, "grad_norm", f->norm);
    jsonl_number(&j, "ms", f->seconds * 1e3);  jsonl_number(&j, "tok_s", f->tok_s);
    jsonl_number(&j, "mfu", f->mfu);  jsonl_number(&j, "mem_gib", f->mem_gib);
    if (f->inexact_blocks >= 0) { jsonl_int(&j, "inexact_blocks", f->inexact_blocks); }
    int n = st->num_linears * NUM_GEMMS, changed = 0;
    char (*texts)[ADAHOP_CHANGE_TEXT_MAX] = (char (*)[ADAHOP_CHANGE_TEXT_MAX])malloc_check((size_t)n * ADAHOP_CHANGE_TEXT_MAX);
    const char** items = (const char**)malloc_check((size_t)n * sizeof(char*));
    for (int i = 0; i < n; i++) {
        int now = adahop_strategy_of(st, i / NUM_GEMMS, i % NUM_GEMMS);
        if (now == before[i]) { continue; }
        adahop_change_text(st, i / NUM_GEMMS, i % NUM_GEMMS, before[i], now, texts[changed], ADAHOP_CHANGE_TEXT_MAX);
        items[changed] = texts[changed];
        changed++;
    }
    if (changed > 0) {
        char sum[16];
        snprintf(sum, sizeof(sum), "%08x", adahop_strategy_checksum(st));
        jsonl_string(&j, "strategies", sum);
        jsonl_string_list(&j, "strategy_changes", items, changed);
    }
    jsonl_end(&j, fp);
    free(texts);
    free(items);
}

// main.jsonl's line of a validation, with the loss through the bf16 forward when there is one (val_bf16, -f)
static void json_val_event(FILE* fp, int step, float val_loss, const float* val_loss_bf16) {
    if (!fp) { return; }
    JsonLine j;
    jsonl_begin(&j, "val");
    jsonl_int(&j, "step", step);
    jsonl_number(&j, "val_loss", val_loss);
    if (val_loss_bf16) { jsonl_number(&j, "val_loss_bf16", *val_loss_bf16); }
    jsonl_end(&j, fp);
}

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    stop_signal_install();
    int device_count = 0;
    if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) { die("no CUDA GPU found: this trainer needs one"); }
    DataParallel dp;
    dp_launch(&dp, &o.dp);   // this process's rank and GPU; the rendezvous of all ranks (one rank without -G / mpirun)
    if (dp.rank > 0 && freopen("/dev/null", "w", stdout) == NULL) {   // only rank 0 prints; errors still reach stderr
        die("rank %d: cannot redirect stdout to /dev/null", dp.rank);
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, dp.local_rank));
    if (prop.major < 8) { die("GPU '%s' (sm_%d%d) has no BF16 tensor cores; sm_80 or newer is needed", prop.name, prop.major, prop.minor); }

    // model: fresh, from a file, or the newest checkpoint of the output directory
    ModelConfig config;
    CheckpointHeader ck;
    memset(&ck, 0, sizeof(ck));
    float* init = NULL;
    int32_t* adahop_words = NULL;
    int32_t* gemm_words = NULL;   // the resumed run's GEMM algorithm table
    int start_step = 0;
    char resume_path[4096] = "";
    if (o.out_dir) { out_dir_open(o.out_dir, o.resume, dp.rank == 0); }   // every rank, before anything costly: a bad -o stops all
    if (o.resume == OUT_DIR_RESUME && checkpoint_find_resume(o.out_dir, -1, resume_path, sizeof(resume_path)) != 0) {
        printf("resume: no checkpoint in %s, starting fresh\n", o.out_dir);
        resume_path[0] = '\0';
    }
    const char* load_path = resume_path[0] ? resume_path : (model_is_preset_name(o.init) ? NULL : o.init);
    if (load_path) {
        FILE* fp = checkpoint_open_model(load_path, &ck);
        config = checkpoint_model(&ck);
        size_t n = model_num_params(&config);
        init = (float*)malloc_check(3 * n * sizeof(float));
        checkpoint_read_payload(fp, &ck, init, resume_path[0] ? init + n : NULL, resume_path[0] ? init + 2 * n : NULL);
        if (resume_path[0] && (ck.contents & CKPT_ADAHOP)) {
            adahop_words = (int32_t*)malloc_check((size_t)ck.adahop_words * sizeof(int32_t));
            checkpoint_read_adahop(fp, &ck, adahop_words);
        }
        if (resume_path[0] && (ck.contents & CKPT_GEMM_ALGOS)) {
            gemm_words = (int32_t*)malloc_check((size_t)ck.gemm_words * sizeof(int32_t) + 1);
            checkpoint_read_gemm_algos(fp, &ck, gemm_words);
        }
        fclose_check(fp);
        if (resume_path[0] && !(ck.contents & CKPT_OPTIMIZER)) { die("'%s' holds no optimizer state: cannot resume from it", load_path); }
        if (resume_path[0] && ck.step > o.max_steps) {
            die("resume: '%s' is at step %lld, past -x %d: the run is longer than asked (raise -x to continue it)", resume_path,
                (long long)ck.step, o.max_steps);
        }
        if (resume_path[0] && (uint64_t)ck.seed != o.seed) {   // before anything is seeded from it
            printf("resume: using the checkpoint's seed %lld\n", (long long)ck.seed);
            o.seed = (uint64_t)ck.seed;
        }
        if (resume_path[0] && o.total_batch == -1 && ck.total_batch > 0) { o.total_batch = (int)ck.total_batch; }
        if (resume_path[0]) {   // the data order is the run's: its checkpoint's seed, which an explicit -D must match
            uint64_t data_seed = dataloader_state_seed(ck.data_state);
            if (o.data_seed >= 0 && (uint64_t)o.data_seed != data_seed) {
                die("flag -D %lld: the run resumed from '%s' reads the data order of seed %llu; a resumed run keeps it",
                    (long long)o.data_seed, load_path, (unsigned long long)data_seed);
            }
            o.data_seed = (int64_t)data_seed;
        }
        if (resume_path[0] && model_is_preset_name(o.init)) {   // the checkpoint's model (and family) must be -e's
            ModelConfig want;
            if (model_config_from_preset(o.init, config.max_seq_len, config.vocab_size, &want) == 0) {
                model_require_config(load_path, &config, &want);
            }
        }
    } else {
        if (model_config_from_preset(o.init, 1024, 50257, &config) != 0) {
            die("flag -e: '%s' is neither a preset (d6/d12/d24/d36/d48, llama:d8/llama:d12/llama:d24) nor a readable file", o.init);
        }
        init = (float*)malloc_check(model_num_params(&config) * sizeof(float));
        model_init_params(&config, init, o.seed);
    }
    if (o.data_seed < 0) { o.data_seed = (int64_t)o.seed; }
    if (o.T > config.max_seq_len) { die("flag -t: T=%d exceeds the model's max_seq_len %d", o.T, config.max_seq_len); }
    if (o.lin.bf16_first + o.lin.bf16_last > config.num_layers) {
        die("flag -B: %d first and %d last blocks are more than the model's %d", o.lin.bf16_first, o.lin.bf16_last, config.num_layers);
    }
    if ((int64_t)o.B * o.T * dp.world_size > (1 << 30)) {   // the int token counts below, with room for the products
        die("flags -b, -t: B*T*world = %lld tokens per micro-step round is more than 2^30", (long long)o.B * o.T * dp.world_size);
    }
    if (o.total_batch == -1) { o.total_batch = o.B * o.T * dp.world_size; }
    int micro_steps = dp_accum_steps(o.total_batch, o.B, o.T, dp.world_size) * dp.world_size;   // all ranks together
    RunAgreement agreement = run_agreement_of(&o, &config, init, resume_path[0] ? &ck : NULL, dp.world_size);
    dp_agree(&dp, &agreement);   // every rank stops here, naming what differs, unless all ranks agree
    dp_connect(&dp);             // the NCCL communicator and its watchdog

    matmul_init();
    // GEMM algorithms: a resumed run takes the table it saved (configurations it lacks, and all of an older checkpoint's,
    // get cuBLASLt's first choice, as they did before it was saved); a fresh run times them in its first step with -a 1
    char gemm_why[256] = "";
    if (gemm_words && gemm_algo_table_load(gemm_words, (size_t)ck.gemm_words, gemm_why, sizeof(gemm_why)) != 0) {
        printf("warning: the checkpoint's GEMM algorithms were %s: cuBLASLt's first choices run instead, so the resumed "
               "steps may differ from the original run's in the last bits\n", gemm_why);
    }
    free(gemm_words);
    gemm_algo_choice = o.timed_gemms && !resume_path[0] ? GEMM_ALGO_TIMED : GEMM_ALGO_FIRST;
    Model model;
    model_build(&model, &dp, &config, init, o.B, o.T, &o.lin, o.seed);
    model_sync_params(&model);
    Rng rng;
    rng_seed(&rng, o.seed ^ 0x5eed5eedULL);
    SpikeGuard guard;
    spike_guard_init(&guard, o.skip_loss_z, o.skip_norm_z);
    if (resume_path[0]) {
        size_t n = model.num_params;
        zero_upload_shard(model.adam_m, init + n, &model.shard);
        zero_upload_shard(model.adam_v, init + 2 * n, &model.shard);
        start_step = (int)ck.step;
        memcpy(rng.s, ck.rng_state, sizeof(rng.s));
        spike_guard_load(&guard, ck.trainer_words, resume_path);
        if (!adahop_words) { die("'%s' holds no AdaHOP state (written by an older version?)", resume_path); }
        adahop_load(&model.adahop, adahop_words, (size_t)ck.adahop_words);
        free(adahop_words);
    }
    free(init);

    DataLoader train, val;
    dataloader_init(&train, o.train_pattern, o.B, o.T, 1, (uint64_t)o.data_seed, config.vocab_size);
    if (resume_path[0]) { dataloader_set_state(&train, ck.data_state); }
    int have_val = o.val_every > 0;
    bool val_bf16 = have_val && o.val_bf16 && o.lin.precision != PREC_BF16;   // a bf16 run's val loss is its bf16 forward
    if (have_val) { dataloader_init(&val, o.val_pattern, o.B, o.T, 0, 0, config.vocab_size); }
    Tokenizer tokenizer;
    tokenizer_init(&tokenizer, o.tokenizer_path);
    EvalSuite evals = {0, NULL};
    EvalRunner eval_runner = {&model, NULL};
    if (o.evals) {
        eval_suite_load(&evals, o.evals, config.vocab_size, o.T);
        eval_runner.flags = (float*)device_malloc((size_t)o.B * o.T * sizeof(float), "eval argmax flags");
    }
    EvalModel eval_model = {gpu_eval_forward, &eval_runner, o.B, o.T, EVAL_ROW_ALIGN};
    tokenizer_require_vocab(&tokenizer, o.tokenizer_path, config.vocab_size);

    FILE *logf = NULL, *jsonf = NULL;   // main.log (text) and main.jsonl (one JSON object per event)
    if (o.out_dir && dp.rank == 0) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/main.log", o.out_dir);
        logf = fopen_check(path, start_step > 0 ? "a" : "w");
        snprintf(path, sizeof(path), "%s/main.jsonl", o.out_dir);
        jsonf = fopen_check(path, start_step > 0 ? "a" : "w");
    }
    double flops_per_token = model_flops_per_token(&config, o.T);
    printf("%s: L=%d C=%d NH=%d", family_names[config.family], config.num_layers, config.channels, config.num_heads);
    if (config.family == FAMILY_LLAMA) { printf(" NKV=%d H=%d", config.num_kv_heads, config.hidden); }
    printf(" V=%d (padded %d) maxT=%d, %.1fM parameters\n", config.vocab_size, config.padded_vocab_size,
           config.max_seq_len, model.num_params / 1e6);
    printf("GPU: %s | build %s | B=%d T=%d, %d micro-steps, %d tokens per step | steps %d..%d | lr %.2e warmup %d | %.2f GiB "
           "allocated\n", prop.name, BUILD_COMMIT, o.B, o.T, micro_steps, o.total_batch, start_step, o.max_steps, o.lr, o.warmup,
           device_bytes_allocated / 1073741824.0);
    printf("data parallel: %d rank%s%s, %d micro-steps each, gradient all-reduce %s the backward pass, ZeRO-1 shards of "
           "%zu parameters\n", dp.world_size, dp.world_size > 1 ? "s" : "", dp.use_mpi ? " (MPI)" : "",
           micro_steps / dp.world_size, o.overlap ? "during" : "after", model.shard.size);
    printf("seeds: init, stochastic rounding and sampling %llu (-r), data order %lld (-D): %lld sequences of %d tokens an "
           "epoch, %.2f epochs in %d steps\n", (unsigned long long)o.seed, (long long)o.data_seed, (long long)train.num_sequences,
           o.T, (double)o.total_batch / o.T * o.max_steps / train.num_sequences, o.max_steps);
    if (resume_path[0]) { printf("resumed from %s at step %d\n", resume_path, start_step); }
    if (gemm_algo_choice == GEMM_ALGO_TIMED) { printf("GEMM algorithms: timed in the first step (-a 1)\n"); }
    else if (resume_path[0]) { printf("GEMM algorithms: %d configurations from the checkpoint\n", gemm_algo_entries()); }
    else { printf("GEMM algorithms: cuBLASLt's first choices (-a 0)\n"); }
    printf("saved inputs of the block linears: %.2f GiB\n", model_saved_input_bytes(&model) / 1073741824.0);
    printf("classifier: logits of %d tokens at a time (-M %d)\n", model.acts.logit_rows, o.lin.head_chunk);
    static const char* path_names[2] = {"exact", "fast"};
    printf("block linears%s: %s%s%s, stochastic rounding of gradients %s, block scales %s / %s (forward / gradients)%s\n",
           o.lin.lm_head ? " and the LM head (-H 1)" : "",
           precision_names[o.lin.precision], o.lin.precision == PREC_BF16 ? "" : ", MXFP4 GEMM path ",
           o.lin.precision == PREC_BF16 ? "" : path_names[o.lin.path], o.lin.stochastic_grads ? "on" : "off",
           mx_scale_rule_names[o.lin.scale_rule_fwd], mx_scale_rule_names[o.lin.scale_rule_grad],
           o.lin.recompute == 2 ? ", MLP pre-activation and qkv recomputed in the backward (-A 2)"
           : o.lin.recompute == 1 ? ", MLP pre-activation recomputed in the backward (-A 1)" : "");
    if (o.lin.precision == PREC_ADAHOP) {
        printf("AdaHOP: %d calibration steps of %s MXFP4, re-classification every %d steps over %d steps, OE k=%d\n",
               o.lin.calib_steps, adahop_strategy_names[o.lin.calib_strategy], o.lin.reclass_every, o.lin.reclass_window, o.lin.oe_k);
        adahop_print_table(&model.adahop, stdout);
    }
    if (o.lin.bf16_first + o.lin.bf16_last > 0 || o.lin.bf16_tail > 0.0f) {
        printf("in BF16 whatever the strategy: the linears of the first %d and last %d blocks (-B); from step %d on, %s (-T)\n",
               o.lin.bf16_first, o.lin.bf16_last, o.max_steps - (int)lroundf(o.lin.bf16_tail * o.max_steps) + 1,
               o.lin.bf16_tail == 0.0f ? "nothing more" : o.lin.bf16_tail_fwd ? "every forward GEMM" : "every GEMM");
    }
    printf("model FLOPs per token %.4g (6 x %.1fM matmul weights + attention); MFU against %.0f TFLOP/s per GPU\n",
           flops_per_token, model_matmul_params(&config) / 1e6, GPU_PEAK_FLOPS / 1e12);
    json_run_event(jsonf, prop.name, &model, &o, micro_steps, start_step, flops_per_token);
    int* strategies_before = (int*)malloc_check((size_t)model.adahop.num_linears * NUM_GEMMS * sizeof(int));

    double total_time = 0.0;
    int timed_steps = 0;
    for (int step = start_step; step <= o.max_steps; step++) {
        model_set_bf16_gemms(&model, &o.lin, step, o.max_steps);   // of training step step + 1 and the validation before it
        bool last = step == o.max_steps;
        if (o.ckpt_every > 0 && step > start_step && (step % o.ckpt_every == 0 || last)) { save_state(&model, &o, step, &train, &rng, &guard); }
        if (have_val && (step % o.val_every == 0 || last)) {
            float vl = evaluate(&model, &val, o.val_batches, o.B, o.T);
            if (val_bf16) {
                float vb = evaluate_bf16_forward(&model, &val, o.val_batches, o.B, o.T);
                printf("step %5d | val loss %.6f | bf16 forward %.6f\n", step, vl, vb);
                if (logf) { fprintf(logf, "s:%d vl:%.6f vlb:%.6f\n", step, vl, vb); fflush(logf); }
                json_val_event(jsonf, step, vl, &vb);
            } else {
                printf("step %5d | val loss %.6f\n", step, vl);
                if (logf) { fprintf(logf, "s:%d vl:%.6f\n", step, vl); fflush(logf); }
                json_val_event(jsonf, step, vl, NULL);
            }
        }
        if (o.evals && dp.rank == 0 && ((o.eval_every > 0 && step % o.eval_every == 0) || last)) {
            eval_suite_run(&evals, step, &eval_model, logf, jsonf);
        }
        if (dp.rank == 0 && o.sample_every > 0 && step > 0 && (step % o.sample_every == 0 || last)) { print_sample(&model, &tokenizer, &rng, o.gen_tokens, o.T); }
        if (last) { break; }

        model_take_inexact_blocks(&model);   // those of the validation, evals and samples before the step
        double t0 = now_seconds();
        step_gradients(&model, &train, &o, micro_steps, step);
        if (gemm_algo_choice == GEMM_ALGO_TIMED) { model_fix_gemm_algos(&model); }
        float lr = lr_schedule(step, o.max_steps, o.warmup, o.lr, o.final_lr_frac);
        float loss = model_mean_loss(&model, o.B, o.T, micro_steps);
        float norm = 0.0f;
        bool skipped = spike_guard_on(&guard) && model_spike_skip(&model, &guard, step + 1, loss, &norm, logf);
        if (!skipped) { norm = model_update(&model, lr, 0.9f, 0.95f, 1e-8f, o.weight_decay, o.grad_clip, step + 1); }
        double dt = now_seconds() - t0;
        adahop_effective_strategies(&model.adahop, strategies_before);
        bool voted = adahop_is_vote_step(&model.adahop, step);
        bool changed = adahop_end_step(&model.adahop, step, logf ? logf : stdout) > 0;
        if (voted && model.dp->world_size > 1) { model_share_adahop(&model); }   // only rank 0 recorded the patterns
        char strat[32] = "";   // when the strategies changed: their table, and their checksum on the step's lines
        if (changed) {
            adahop_print_table(&model.adahop, stdout);
            snprintf(strat, sizeof(strat), " strategies:%08x", adahop_strategy_checksum(&model.adahop));
        }
        if (!isfinite(loss) || !isfinite(norm)) {
            die("step %d: loss %f, grad norm %f: training diverged; no checkpoint of it was written (lower the learning rate "
                "-l, or check the data)", step + 1, loss, norm);
        }
        if (step > start_step) { total_time += dt; timed_steps++; }   // the first step includes warm-up
        double tok_s = o.total_batch / dt;
        StepFigures fig = {step + 1, loss, lr, norm, dt, tok_s, flops_per_token * tok_s / (dp.world_size * GPU_PEAK_FLOPS),
                           device_bytes_allocated / 1073741824.0, model_take_inexact_blocks(&model)};
        printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %.1f ms | %.0f tok/s | MFU %.1f%%%s\n", step + 1, o.max_steps,
               loss, lr, norm, dt * 1e3, tok_s, 100.0 * fig.mfu, strat);
        if (logf) {
            fprintf(logf, "s:%d tl:%.6f lr:%.6e norm:%.4f tok/s:%.0f mem_gib:%.3f%s\n", step + 1, loss, lr, norm, tok_s,
                    fig.mem_gib, strat);
            fflush(logf);
        }
        json_step_event(jsonf, &fig, &model.adahop, strategies_before);
        int stop = stop_after_step(&model);
        if (stop) {
            if (o.out_dir) { save_state(&model, &o, step + 1, &train, &rng, &guard); }
            fprintf(stderr, "rank %d: stopped by signal %d after step %d%s%s\n", dp.rank, stop, step + 1,
                    o.out_dir ? ": resume with -y 1 from " : "", o.out_dir ? o.out_dir : " (no -o: nothing saved)");
            if (logf) { fclose_check(logf); }
            dp_free(&dp);
            exit(128 + stop);
        }
    }
    if (timed_steps > 0) {
        size_t free_b, total_b;
        cudaCheck(cudaMemGetInfo(&free_b, &total_b));
        printf("summary: %.0f tok/s average over %d steps (first excluded) | %.2f GiB allocated by the trainer, %.2f GiB in use on the GPU\n",
               (double)o.total_batch * timed_steps / total_time, timed_steps, device_bytes_allocated / 1073741824.0,
               (total_b - free_b) / 1073741824.0);
    }
    free(strategies_before);
    if (logf) { fclose_check(logf); }
    if (jsonf) { fclose_check(jsonf); }
    dataloader_free(&train);
    if (have_val) { dataloader_free(&val); }
    tokenizer_free(&tokenizer);
    if (o.evals) { cudaCheck(cudaFree(eval_runner.flags)); }
    eval_suite_free(&evals);
    model_free(&model);
    matmul_free();
    dp_free(&dp);
    return 0;
}
#endif
