// Producers that emit operands: the kernel that computes a block linear's BF16 input also writes, in the same pass,
// the quantized operands the linear's strategies need, bit for bit what the separate quantizers of llmc/mxfp4.cuh
// make of that BF16 input: the row-wise operand along K = channels (E4M3 with one FP32 scale per row, the forward
// GEMM's A on the fast path, and/or its MXFP4 codes), x^T in MXFP4 along K = tokens (the dW GEMM's B, Hadamard
// along tokens), and the column sums of squares that OE on x's channels ranks. Producers: LayerNorm and RMSNorm with
// the residual add in front (GPT-2's and LLaMA's qkv and fc / gate-up inputs), GELU (GPT-2's fc-projection input) and
// SwiGLU (LLaMA's down-projection input). An experiment, kept with its test (dev/cuda/test_fused_operands.cu) and
// bench (dev/cuda/bench_fused_operands.cu): the trainer quantizes every operand in a pass of its own, which measured
// faster (dev/RESULTS.md). dev/cuda/fused_reference.cuh is the same contract through the separate quantizers.
//
// Backward producers write a linear's output gradient dY [N x Cout]: its rows are the dX GEMM's A (row_opt), its x^T
// the dW GEMM's A (col_opt), each with its GEMM's stochastic rounding and seed; the rounding index of an element is
// its index in its operand, as in mx_quantize_rows(_e4m3) and mx_quantize_cols. Producers: GELU backward (dY of
// GPT-2's fc) and SwiGLU backward (dY of LLaMA's gate/up, 2H wide).
//
// A producer is a struct with
//   - a type Inputs and load(row, k): the inputs of the 32 outputs of token `row`, channels k..k+31 (k a multiple of 32);
//   - a type Stats, what an output needs of its whole token (a norm's row statistics), has_stats (false: Stats is
//     empty) and prepare(r0, strip): called by every thread of the block before the 32 tokens r0.. are emitted, it
//     writes the Stats of token r0 + i to strip[i] (shared memory); the emitter waits for all threads after it;
//   - outputs(in, stats, out): the 32 outputs in BF16 as four 16-byte words, bit for bit the producer's own kernel.
// Element-wise producers derive from ElementwiseProducer (no Stats). emit_operands does the rest.
//
// The pass: a block of 256 threads owns 64 tokens times one chunk of 256 channels (an element-wise producer: many small
// blocks, enough of them in flight to stream) or times all C channels chunk by chunk (a producer with row statistics,
// which it reduces once per token). In a chunk, lane l of warp w produces the 32 BF16 values of tokens l and 32 + l,
// channels 32 w.. (both tokens' loads in flight together where they fit in registers), quantizes each as a row block
// and stages values and codes in shared memory; after a barrier the block writes the BF16 values and row codes out in
// whole 32-byte sectors (a lane's own 16-byte stores to 32 different tokens would leave every sector half written), and
// thread t takes channel t's 64 tokens, two blocks of x^T (32 bytes of codes together) and their sum of squares, summed
// as mx_quantize_cols sums its 64-token tiles (first 32 tokens, plus the next 32), into the same scratch and added over
// the tiles by the same kernel. The E4M3 rows need each row's largest finite block scale, which no tile knows: the row
// codes are written in MXFP4 and mx_to_e4m3 turns them into E4M3 (0.53 bytes read and 1 written an element). A norm's
// block starts with its tokens' statistics (warp w reduces tokens w, w + 8, w + 16, w + 24 of each 32 at once, each
// token's sums in the norm kernel's order, writing the residual sum and the saved mean/rstd); its chunks then read the
// residual sum back (L2, just written), so a norm reads a and b once from DRAM as its own kernel does and skips the
// write and re-read of its BF16 output.
#ifndef DEV_CUDA_FUSED_OPERANDS_CUH
#define DEV_CUDA_FUSED_OPERANDS_CUH

#include "llmc/cuda_common.cuh"
#include "llmc/mxfp4.cuh"
#include "llmc/gelu.cuh"
#include "llmc/swiglu.cuh"
#include "llmc/layernorm.cuh"
#include "llmc/rmsnorm.cuh"

#define EMIT_THREADS 256
#define EMIT_WARPS (EMIT_THREADS / 32)
#define EMIT_TOKENS 64                      // tokens of a block: two 32-token blocks of x^T in each column
#define EMIT_CHUNK EMIT_THREADS             // channels of a chunk: one row block per warp and token, one column per thread
#define EMIT_TILE_STRIDE (EMIT_CHUNK + 8)   // BF16 elements per staged row: the padding puts the 16-byte stores of
                                            // 8 lanes (8 rows) on the 32 banks once

// What a producer writes for the block linear it feeds; a NULL pointer is not written.
typedef struct {
    floatX* bf16;            // [N x C] its BF16 output, where something reads it in BF16
    E4M3Operand* rows;       // the forward GEMM's A on the fast path: E4M3 [N x C] + row scales, quantized with row_opt;
                             // made from row_codes by mx_to_e4m3, so it needs row_codes (as scratch if nothing reads them)
    MXOperand* row_codes;    // the same row-wise operand in MXFP4 (the exact path; next to rows, its codes)
    MXQuantOptions row_opt;
    MXOperand* cols;         // the dW GEMM's B: x^T [C x N] in MXFP4 (K = tokens), quantized with col_opt
    MXQuantOptions col_opt;
    float* col_sq;           // [C] sums over the tokens of x^2 per channel (OE on x's channels); needs cols
    float* col_sq_scratch;   // mx_col_sq_scratch_floats(N, C) floats, with col_sq
} OperandEmit;

// the device side of an OperandEmit: raw pointers (NULL: not written) and the shape
typedef struct {
    floatX* bf16;
    uint8_t *row_codes, *row_scales, *col_codes, *col_scales;
    float* col_sq_part;      // [ceil(N / 64) x C] the 64-token partials of the column sums of squares
    MXQuantOptions row_opt, col_opt;
    int N, C;
} EmitTargets;

// the base of a producer whose outputs depend on their own inputs only: no row statistics
struct ElementwiseProducer {
    struct Stats {};
    static constexpr bool has_stats = false;
    __device__ void prepare(int, Stats*) const {}
};

// a block's shared memory: the chunk's BF16 values (for the column pass and the BF16 output) and its row blocks'
// codes and scale bytes, staged so that the values and codes reach global memory in whole 32-byte sectors (a token's
// 8 scale bytes of a chunk are a quarter sector)
#define EMIT_CODES_STRIDE (EMIT_WARPS + 1)   // uint4 per staged token: the padding spreads 8 lanes' tokens over the banks
typedef struct {
    floatX tile[EMIT_TOKENS * EMIT_TILE_STRIDE];
    uint4 codes[EMIT_TOKENS * EMIT_CODES_STRIDE];
    uint8_t scales[EMIT_TOKENS * EMIT_WARPS];
} EmitStage;

// the 32 BF16 outputs of token row r0 + trow, channels k..k+31 (k - c0 = 32 w), from the producer's inputs: staged
// in row trow of the tile, and quantized as one row block staged in slot (trow, w)
template <class Producer>
__device__ __forceinline__ void emit_token_values(const Producer& producer, const EmitTargets& t, EmitStage* st,
                                                  const typename Producer::Inputs& in,
                                                  const typename Producer::Stats& stats, int row, int trow, int k) {
    int4 out[4];
    producer.outputs(in, stats, out);
    float v[32];
    int w = threadIdx.x / 32;
    for (int i = 0; i < 4; i++) {
        reinterpret_cast<int4*>(st->tile + trow * EMIT_TILE_STRIDE + 32 * w)[i] = out[i];
        mx_unpack8(v + 8 * i, out[i]);
    }
    if (t.row_codes) {
        uint8_t scale;
        st->codes[trow * EMIT_CODES_STRIDE + w] = mx_quantize_block32(v, t.row_opt, ((uint64_t)row * t.C + k), &scale);
        st->scales[trow * EMIT_WARPS + w] = scale;
    }
}

// the staged chunk (tokens r0.. r0 + rows - 1, channels c0.. c0 + width - 1) to global memory: the BF16 values a
// 512-byte row per warp, the row codes 128 bytes per token (a scale byte per block)
__device__ __forceinline__ void emit_store_rows(const EmitTargets& t, const EmitStage* st, int r0, int rows, int c0, int width) {
    if (t.bf16) {
        for (int i = threadIdx.x; i < rows * 32; i += EMIT_THREADS) {
            int trow = i / 32, q = i % 32;
            if (8 * q < width) {
                *reinterpret_cast<int4*>(t.bf16 + (size_t)(r0 + trow) * t.C + c0 + 8 * q) =
                    *reinterpret_cast<const int4*>(st->tile + trow * EMIT_TILE_STRIDE + 8 * q);
            }
        }
    }
    if (t.row_codes) {
        for (int i = threadIdx.x; i < rows * EMIT_WARPS; i += EMIT_THREADS) {
            int trow = i / EMIT_WARPS, w = i % EMIT_WARPS;
            if (32 * w < width) {
                size_t b = ((size_t)(r0 + trow) * t.C + c0) / 32 + w;
                reinterpret_cast<uint4*>(t.row_codes)[b] = st->codes[trow * EMIT_CODES_STRIDE + w];
                t.row_scales[b] = st->scales[trow * EMIT_WARPS + w];
            }
        }
    }
}

// the column pass of channel `col`, column c of the tile: its 64 tokens from r0 on as two blocks of x^T (the second
// only where those tokens exist; 32 bytes of codes together), and their sum of squares as mx_quantize_cols sums it
// (first 32 tokens, plus the next 32, whose zeros beyond N add nothing) into the 64-token partial
__device__ __forceinline__ void emit_col_blocks(const EmitTargets& t, const floatX* tile, int c, int col, int r0) {
    float v[32], sq = 0.0f;
    size_t b = ((size_t)col * t.N + r0) / 32;
    for (int h = 0; h < 2 && r0 + 32 * h < t.N; h++) {
        for (int j = 0; j < 32; j++) { v[j] = (float)tile[(32 * h + j) * EMIT_TILE_STRIDE + c]; }
        if (t.col_sq_part) { float s = mx_sum_squares32(v); sq = h == 0 ? s : sq + s; }
        mx_quantize_store_block(t.col_codes, t.col_scales, b + h, v, t.col_opt);
    }
    if (t.col_sq_part) { t.col_sq_part[(size_t)(r0 / 64) * t.C + col] = sq; }
}

// a lane loads both of its tokens' inputs before producing either where they fit in registers together (up to 96
// bytes a token: GELU's 32 values, a norm's 32 values and channel index); larger inputs (SwiGLU's gate and up, the
// backward producers' two or three tensors) spilled registers at two blocks an SM, so there the second token's
// inputs are loaded after the first token is produced
#define EMIT_PAIRED_LOADS(Producer) (sizeof(typename Producer::Inputs) <= 96)

// the emitter: a block per 64 tokens and `span` channels (all C for a producer with row statistics, which it prepares
// once for its 64 tokens; one chunk otherwise), chunk by chunk. Lane l of warp w produces tokens r0 + l and
// r0 + 32 + l, channels 32 w.. of the chunk (both tokens' loads first where EMIT_PAIRED_LOADS), quantizes each as a
// row block and stages values and codes in shared memory; after a barrier, the block writes the staged BF16 values
// and row codes in whole sectors, and thread t takes channel t's 64 tokens, two blocks of x^T. Traffic: the
// producer's reads, then per element 2 bytes (BF16), 0.53 (MXFP4 rows), 0.53 (x^T) written where asked, + 4 bytes
// per channel and 64 tokens for the column sums.
template <class Producer>
__global__ void __launch_bounds__(EMIT_THREADS, 2) emit_operands_kernel(Producer producer, EmitTargets t, int span) {
    __shared__ __align__(16) EmitStage st;
    __shared__ typename Producer::Stats stats[EMIT_TOKENS];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, r0 = blockIdx.x * EMIT_TOKENS;
    bool second = r0 + 32 < t.N;   // the block's second 32 tokens exist (N is a multiple of 32)
    if (Producer::has_stats) {
        producer.prepare(r0, stats);
        if (second) { producer.prepare(r0 + 32, stats + 32); }
        __syncthreads();
    }
    int c_begin = blockIdx.y * span, c_end = min(t.C, c_begin + span);
    for (int c0 = c_begin; c0 < c_end; c0 += EMIT_CHUNK) {
        int k = c0 + warp * 32;
        if (k < c_end) {
            typename Producer::Inputs in0 = producer.load(r0 + lane, k), in1;
            if (EMIT_PAIRED_LOADS(Producer) && second) { in1 = producer.load(r0 + 32 + lane, k); }
            emit_token_values(producer, t, &st, in0, stats[lane], r0 + lane, lane, k);
            if (second) {
                if (!EMIT_PAIRED_LOADS(Producer)) { in1 = producer.load(r0 + 32 + lane, k); }
                emit_token_values(producer, t, &st, in1, stats[32 + lane], r0 + 32 + lane, 32 + lane, k);
            }
        }
        __syncthreads();
        emit_store_rows(t, &st, r0, second ? 64 : 32, c0, min(EMIT_CHUNK, c_end - c0));
        int col = c0 + threadIdx.x;
        if (t.col_codes && col < c_end) { emit_col_blocks(t, st.tile, threadIdx.x, col, r0); }
        __syncthreads();   // the next chunk reuses the staging
    }
}

// GELU as a producer: the inputs of 32 outputs are the fc output's 32 values, the outputs gelu8 of them
struct GeluProducer : ElementwiseProducer {
    const floatX* inp;   // [N x C]
    int C;
    struct Inputs { x128 v[4]; };
    __device__ Inputs load(int row, int k) const {
        Inputs in;
        for (int i = 0; i < 4; i++) { in.v[i] = load128cs(inp + (size_t)row * C + k + 8 * i); }
        return in;
    }
    __device__ void outputs(const Inputs& in, Stats, int4 out[4]) const {
        for (int i = 0; i < 4; i++) {
            x128 o = gelu8(in.v[i]);
            out[i] = *reinterpret_cast<const int4*>(&o);
        }
    }
};

// SwiGLU as a producer: the inputs of 32 outputs are their 32 gate and 32 up values (row n of inp [N x 2H]: H gate
// values, then H up values), the outputs swiglu8 of them
struct SwigluProducer : ElementwiseProducer {
    const floatX* inp;   // [N x 2H]
    int H;
    struct Inputs { x128 g[4], u[4]; };
    __device__ Inputs load(int row, int k) const {
        Inputs in;
        const floatX* p = inp + (size_t)row * 2 * H + k;
        for (int i = 0; i < 4; i++) { in.g[i] = load128cs(p + 8 * i); in.u[i] = load128cs(p + H + 8 * i); }
        return in;
    }
    __device__ void outputs(const Inputs& in, Stats, int4 out[4]) const {
        for (int i = 0; i < 4; i++) {
            x128 o = swiglu8(in.g[i], in.u[i]);
            out[i] = *reinterpret_cast<const int4*>(&o);
        }
    }
};

// a norm's prepare: warp w reduces tokens r0 + w, r0 + w + 8, ... of the strip, all at once (their loads in flight
// together), at offsets base[] of an N x C tensor
#define EMIT_ROWS_PER_WARP (32 / EMIT_WARPS)
__device__ __forceinline__ void emit_prepare_rows(size_t base[EMIT_ROWS_PER_WARP], int r0, int C) {
    for (int j = 0; j < EMIT_ROWS_PER_WARP; j++) { base[j] = (size_t)(r0 + threadIdx.x / 32 + j * EMIT_WARPS) * C; }
}

// what the norm producers share: their residual-stream input a + b (a when b is NULL), its sum res_out (written by
// the block's prepare, read back with coherent loads: not the read-only path), and the loads of 32 of its values
struct NormProducerInput {
    floatX* res_out;         // [N x C] a + b, with b
    const floatX *a, *b;     // [N x C]
    int C;
    struct Inputs { x128 x[4]; int k; };   // outputs reads channels k.. of the norm's weights (L1 hits: registers kept)
    __device__ Inputs load(int row, int k) const {
        Inputs in;
        const floatX* p = (b ? res_out : a) + (size_t)row * C + k;
        for (int j = 0; j < 4; j++) { in.x[j] = load128cs(p + 8 * j); }
        in.k = k;
        return in;
    }
};

// LayerNorm of a + b (of a when b is NULL) as a producer: prepare reduces the strip's tokens with
// layernorm_rows_stats, a token's sums in layernorm_forward's order (writing res_out = a + b and mean/rstd, which are
// not written when NULL); the inputs of 32 outputs are their residual-stream values, the outputs layernorm_value of
// them with their weights and biases
struct LayerNormProducer : NormProducerInput {
    float *mean, *rstd;           // [N], saved for the backward pass
    const floatX *weight, *bias;  // [C]
    typedef LayerNormStats Stats;
    static constexpr bool has_stats = true;
    __device__ void prepare(int r0, Stats* strip) const {
        size_t base[EMIT_ROWS_PER_WARP];
        emit_prepare_rows(base, r0, C);
        Stats st[EMIT_ROWS_PER_WARP];
        layernorm_rows_stats<EMIT_ROWS_PER_WARP>(st, a, b, res_out, base, C);
        if (threadIdx.x % 32 != 0) { return; }   // lane 0 writes the warp's statistics
        for (int j = 0; j < EMIT_ROWS_PER_WARP; j++) {
            int i = threadIdx.x / 32 + j * EMIT_WARPS;
            strip[i] = st[j];
            if (mean) { mean[r0 + i] = st[j].mean; rstd[r0 + i] = st[j].rstd; }
        }
    }
    __device__ void outputs(const Inputs& in, const Stats& st, int4 out[4]) const {
        for (int j = 0; j < 4; j++) {
            x128 o, w = load128(weight + in.k + 8 * j), bi = load128(bias + in.k + 8 * j);
            for (int i = 0; i < 8; i++) {
                o[i] = (floatX)layernorm_value((float)in.x[j][i], st.mean, st.rstd, (float)w[i], (float)bi[i]);
            }
            out[j] = *reinterpret_cast<const int4*>(&o);
        }
    }
};

// RMSNorm of a + b (of a when b is NULL) as a producer: prepare reduces the strip's tokens with
// rmsnorm_rows_rstd, a token's sum in rmsnorm_forward's order (writing res_out = a + b and rstd, not written when
// NULL); the inputs of 32 outputs are their residual-stream values, the outputs rmsnorm_value of them with their
// weights
struct RmsNormProducer : NormProducerInput {
    float* rstd;             // [N], saved for the backward pass
    const floatX* weight;    // [C]
    float eps;
    struct Stats { float rstd; };
    static constexpr bool has_stats = true;
    __device__ void prepare(int r0, Stats* strip) const {
        size_t base[EMIT_ROWS_PER_WARP];
        emit_prepare_rows(base, r0, C);
        float rs[EMIT_ROWS_PER_WARP];
        rmsnorm_rows_rstd<EMIT_ROWS_PER_WARP>(rs, a, b, res_out, base, C, eps);
        if (threadIdx.x % 32 != 0) { return; }   // lane 0 writes the warp's statistics
        for (int j = 0; j < EMIT_ROWS_PER_WARP; j++) {
            int i = threadIdx.x / 32 + j * EMIT_WARPS;
            strip[i].rstd = rs[j];
            if (rstd) { rstd[r0 + i] = rs[j]; }
        }
    }
    __device__ void outputs(const Inputs& in, const Stats& st, int4 out[4]) const {
        for (int j = 0; j < 4; j++) {
            x128 o, w = load128(weight + in.k + 8 * j);
            for (int i = 0; i < 8; i++) { o[i] = (floatX)rmsnorm_value((float)in.x[j][i], st.rstd, (float)w[i]); }
            out[j] = *reinterpret_cast<const int4*>(&o);
        }
    }
};

// checks the shapes of what e asks for an N x C output (a clear message and exit otherwise)
static inline void emit_check_shapes(const OperandEmit* e, int N, int C) {
    if (N <= 0 || N % 32 != 0 || C <= 0 || C % 32 != 0) {
        die("operand emitter: tokens N=%d and channels C=%d must be positive multiples of 32 (MXFP4 blocks along both)", N, C);
    }
    if (e->rows && (e->rows->rows != N || e->rows->K != C)) {
        die("operand emitter: the E4M3 operand is %d x %d, the output %d x %d", e->rows->rows, e->rows->K, N, C);
    }
    if (e->row_codes && (e->row_codes->rows != N || e->row_codes->K != C)) {
        die("operand emitter: the row-wise MXFP4 operand is %d x %d, the output %d x %d", e->row_codes->rows, e->row_codes->K, N, C);
    }
    if (e->cols && (e->cols->rows != C || e->cols->K != N)) {
        die("operand emitter: the column operand (x^T) is %d x %d, want %d x %d", e->cols->rows, e->cols->K, C, N);
    }
    if (e->col_sq && (!e->cols || !e->col_sq_scratch)) {
        die("operand emitter: the column sums of squares need the column operand (x^T) and their scratch");
    }
}

// the device targets of e for an N x C output, after checking it
static inline EmitTargets emit_targets(const OperandEmit* e, int N, int C) {
    emit_check_shapes(e, N, C);
    if (e->rows && !e->row_codes) {
        die("operand emitter: the E4M3 rows are made from the row-wise MXFP4 codes: give row_codes (scratch where nothing "
            "else reads them)");
    }
    EmitTargets t;
    memset(&t, 0, sizeof(t));
    t.bf16 = e->bf16;
    if (e->row_codes) { t.row_codes = e->row_codes->codes; t.row_scales = e->row_codes->scales; }
    if (e->cols) { t.col_codes = e->cols->codes; t.col_scales = e->cols->scales; }
    t.col_sq_part = e->col_sq ? e->col_sq_scratch : NULL;
    t.row_opt = e->row_opt;
    t.col_opt = e->col_opt;
    t.N = N;
    t.C = C;
    return t;
}

// runs `producer` over an N x C output, writing what e asks for: its kernel, then the column sums from their partials
// and the E4M3 rows from the row codes (a second pass over 0.53 bytes an element: a row's E4M3 needs its largest
// block scale, which no 64 x 256 tile knows)
template <class Producer>
static inline void emit_operands(const Producer& producer, const OperandEmit* e, int N, int C, cudaStream_t s) {
    EmitTargets t = emit_targets(e, N, C);
    int span = Producer::has_stats ? C : EMIT_CHUNK;
    dim3 grid(ceil_div(N, EMIT_TOKENS), ceil_div(C, span));
    emit_operands_kernel<Producer><<<grid, EMIT_THREADS, 0, s>>>(producer, t, span);
    cudaCheckLaunch();
    if (e->col_sq) { mx_col_sq_from_partials(e->col_sq, e->col_sq_scratch, N, C, s); }
    if (e->rows) { mx_to_e4m3(e->rows, e->row_codes, s); }
}

// GELU forward of inp [N x C] emitting what e asks for; e->bf16, when given, is gelu_forward's output
static inline void gelu_forward_emit(const OperandEmit* e, const floatX* inp, int N, int C, cudaStream_t s) {
    GeluProducer producer = {{}, inp, C};
    emit_operands(producer, e, N, C, s);
}

// SwiGLU forward of inp [N x 2H] (out [N x H]) emitting what e asks for; e->bf16, when given, is swiglu_forward's out
static inline void swiglu_forward_emit(const OperandEmit* e, const floatX* inp, int N, int H, cudaStream_t s) {
    SwigluProducer producer = {{}, inp, H};
    emit_operands(producer, e, N, H, s);
}

// ----------------------------------------------------------------------------
// backward producers: the output gradient of the fc / gate-up linear

// GELU backward as a producer: the inputs of 32 outputs are their 32 fc outputs (GELU's input) and 32 gradients of
// GELU's output, the outputs gelu_backward8 of them
struct GeluBackwardProducer : ElementwiseProducer {
    const floatX* inp;   // [N x C] the fc output
    const floatX* d;     // [N x C] the gradient of GELU's output
    int C;
    struct Inputs { x128 x[4], d[4]; };
    __device__ Inputs load(int row, int k) const {
        Inputs in;
        size_t o = (size_t)row * C + k;
        for (int i = 0; i < 4; i++) { in.x[i] = load128cs(inp + o + 8 * i); in.d[i] = load128cs(d + o + 8 * i); }
        return in;
    }
    __device__ void outputs(const Inputs& in, Stats, int4 out[4]) const {
        for (int i = 0; i < 4; i++) {
            x128 o = gelu_backward8(in.x[i], in.d[i]);
            out[i] = *reinterpret_cast<const int4*>(&o);
        }
    }
};

// SwiGLU backward as a producer of d(gate, up) [N x 2H]: output channel j < H is d(gate) of pair j, channel H + j
// d(up) of pair j, from the pair's gate and up values (row n of inp [N x 2H]) and dout [N x H]. 32 outputs may
// straddle H (H a multiple of 16): each 8 of them is all gate or all up. The gate and dout values are read once for
// each half (the second time mostly from L2), the up values once.
struct SwigluBackwardProducer : ElementwiseProducer {
    const floatX* inp;    // [N x 2H] the forward's gate/up values
    const floatX* dout;   // [N x H] the gradient of SwiGLU's output
    int H;
    struct Inputs { x128 g[4], u[4], d[4]; int k; };
    __device__ Inputs load(int row, int k) const {
        Inputs in;
        in.k = k;
        for (int i = 0; i < 4; i++) {
            int j = k + 8 * i, pair = j < H ? j : j - H;
            const floatX* gate = inp + (size_t)row * 2 * H + pair;
            in.g[i] = load128(gate);
            in.d[i] = load128(dout + (size_t)row * H + pair);
            in.u[i] = j < H ? load128cs(gate + H) : in.g[i];   // d(up) reads no up value
        }
        return in;
    }
    __device__ void outputs(const Inputs& in, Stats, int4 out[4]) const {
        for (int i = 0; i < 4; i++) {
            x128 o = in.k + 8 * i < H ? swiglu_dgate8(in.g[i], in.u[i], in.d[i]) : swiglu_dup8(in.g[i], in.d[i]);
            out[i] = *reinterpret_cast<const int4*>(&o);
        }
    }
};

// GELU backward of the gradient d [N x C] through the fc output inp [N x C], emitting what e asks for of the fc
// linear's output gradient dY = d * gelu'(inp); e->bf16, when given, is what gelu_backward leaves in d, and may be d
// itself (in place: a block loads its chunk's d before the barrier after which it writes dY, and no other block
// reads that chunk)
static inline void gelu_backward_emit(const OperandEmit* e, const floatX* d, const floatX* inp, int N, int C,
                                      cudaStream_t s) {
    GeluBackwardProducer producer = {{}, inp, d, C};
    emit_operands(producer, e, N, C, s);
}

// 1 if the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte
static inline int byte_ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + b_bytes && pb < pa + a_bytes;
}

// SwiGLU backward of dout [N x H] through the forward's gate/up values inp [N x 2H], emitting what e asks for of
// the gate/up linear's output gradient d(gate, up) [N x 2H]; e->bf16, when given, is swiglu_backward's dinp. Not in
// place: d(gate) of a pair is written before d(up) reads the pair's gate value.
static inline void swiglu_backward_emit(const OperandEmit* e, const floatX* dout, const floatX* inp, int N, int H,
                                        cudaStream_t s) {
    swiglu_check_shape(N, H);
    size_t out_bytes = (size_t)N * 2 * H * sizeof(floatX);
    if (e->bf16 && (byte_ranges_overlap(e->bf16, out_bytes, inp, out_bytes) ||
                    byte_ranges_overlap(e->bf16, out_bytes, dout, out_bytes / 2))) {
        die("swiglu_backward_emit: the BF16 d(gate, up) overlaps its inputs (gate/up values or dout); it cannot be "
            "written in place (write it elsewhere, or run swiglu_backward in place and quantize separately)");
    }
    SwigluBackwardProducer producer = {{}, inp, dout, H};
    emit_operands(producer, e, N, 2 * H, s);
}

// a norm's residual add writes its sum: b needs res_out
static inline void norm_check_residual(const char* who, const floatX* b, const floatX* res_out) {
    if (b && !res_out) { die("%s: the residual add (b given) needs res_out for the sum a + b", who); }
}

// layernorm_forward emitting what e asks for: e->bf16, when given, is its out; mean, rstd, res_out as there
static inline void layernorm_forward_emit(const OperandEmit* e, float* mean, float* rstd, floatX* res_out,
                                          const floatX* a, const floatX* b, const floatX* weight, const floatX* bias,
                                          int N, int C, cudaStream_t s) {
    layernorm_check_shape(C);
    norm_check_residual("layernorm_forward_emit", b, res_out);
    LayerNormProducer producer = {{res_out, a, b, C}, mean, rstd, weight, bias};
    emit_operands(producer, e, N, C, s);
}

// rmsnorm_forward emitting what e asks for: e->bf16, when given, is its out; rstd, res_out as there
static inline void rmsnorm_forward_emit(const OperandEmit* e, float* rstd, floatX* res_out, const floatX* a,
                                        const floatX* b, const floatX* weight, int N, int C, float eps, cudaStream_t s) {
    rmsnorm_check_shape(N, C);
    norm_check_residual("rmsnorm_forward_emit", b, res_out);
    RmsNormProducer producer = {{res_out, a, b, C}, rstd, weight, eps};
    emit_operands(producer, e, N, C, s);
}


#endif
