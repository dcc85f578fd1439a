// The baseline that flash attention (llmc/flash_attention.cuh) is tested and timed against: causal multi-head
// self-attention from the fused qkv activation through batched cuBLASLt GEMMs, scores = q k^T,
// att = softmax(scale * scores) with the causal mask, y = att v, the T x T probabilities kept for the backward pass.
// Used by test_kernels (vs the CPU reference), test_flash_attention and bench_attention; not by the trainer.
#ifndef DEV_CUDA_ATTENTION_CUBLASLT_CUH
#define DEV_CUDA_ATTENTION_CUBLASLT_CUH

#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"

// Moves between the token-major layout [B, T, S, NH, HS] (S slices: 3 for qkv, 1 for y) and the head-major
// layout S x [B, NH, T, HS]; to_heads selects the direction. 8 elements per thread. Traffic: one read, one write.
__global__ void heads_transpose_kernel(floatX* token_major, floatX* head_major, int B, int T, int S, int NH, int HS,
                                       bool to_heads) {
    long idx = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    long per_slice = (long)B * NH * T * HS;
    if (idx >= S * per_slice) { return; }
    int s = (int)(idx / per_slice);
    long r = idx % per_slice;
    int d = (int)(r % HS); r /= HS;
    int t = (int)(r % T);  r /= T;
    int h = (int)(r % NH);
    int b = (int)(r / NH);
    floatX* tm = token_major + ((((long)b * T + t) * S + s) * NH + h) * HS + d;
    if (to_heads) { store128(head_major + idx, load128(tm)); }
    else          { store128(tm, load128(head_major + idx)); }
}

// the softmax row of this warp (one warp per row of the B*NH*T rows), or -1 past the last; *t = its query position
__device__ __forceinline__ int softmax_warp_row(int rows, int T, int* t) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    *t = row % T;
    return row < rows ? row : -1;
}

// att[row, j] = softmax_j(scale * scores[row, j]) for j <= t, 0 for j > t (row = (b*NH+h)*T + t).
// One warp per row. Traffic: reads the causal half of the FP32 scores, writes the full BF16 row.
__global__ void softmax_causal_forward_kernel(floatX* att, const float* scores, int rows, int T, float scale) {
    int t, lane = threadIdx.x % 32, row = softmax_warp_row(rows, T, &t);
    if (row < 0) { return; }
    const float* in = scores + (size_t)row * T;
    float mx = -INFINITY;
    for (int j = lane; j <= t; j += 32) { mx = fmaxf(mx, (float)in[j]); }
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32) { sum += expf(scale * ((float)in[j] - mx)); }
    float inv = 1.0f / warp_sum(sum);
    floatX* out = att + (size_t)row * T;
    for (int j = lane; j < T; j += 32) {
        out[j] = (floatX)(j <= t ? expf(scale * ((float)in[j] - mx)) * inv : 0.0f);
    }
}

// dscores[row, j] = scale * att[j] * (datt[j] - sum_k att[k] datt[k]) for j <= t, 0 above; in place on datt.
// One warp per row. Traffic: reads att and datt, writes dscores.
__global__ void softmax_causal_backward_kernel(floatX* datt, const floatX* att, int rows, int T, float scale) {
    int t, lane = threadIdx.x % 32, row = softmax_warp_row(rows, T, &t);
    if (row < 0) { return; }
    const floatX* a = att + (size_t)row * T;
    floatX* d = datt + (size_t)row * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) { dot += (float)a[j] * (float)d[j]; }
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += 32) {
        d[j] = (floatX)(j <= t ? scale * (float)a[j] * ((float)d[j] - dot) : 0.0f);
    }
}

static inline void heads_transpose(floatX* token_major, floatX* head_major, int B, int T, int S, int NH, int HS,
                                   bool to_heads, cudaStream_t stream) {
    long n = (long)S * B * NH * T * HS;
    heads_transpose_kernel<<<ceil_div(n / 8, 256), 256, 0, stream>>>(token_major, head_major, B, T, S, NH, HS, to_heads);
    cudaCheckLaunch();
}

static inline void attention_check_shape(int T, int C, int NH) {
    if (C % NH != 0 || (C / NH) % 8 != 0) { die("attention: head size C/NH = %d/%d must be a multiple of 8", C, NH); }
    if (T % 8 != 0) { die("attention: sequence length T=%d must be a multiple of 8", T); }
}

// out [B,T,C] from qkv [B,T,3C]. Scratch: qkvr (3*B*T*C), scores (B*NH*T*T floats: FP32 so that large scores
// keep their precision before the exponential), yr (B*T*C). Keeps att (B*NH*T*T).
static inline void attention_forward(floatX* out, floatX* att, floatX* qkvr, float* scores, floatX* yr,
                                     const floatX* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
    attention_check_shape(T, C, NH);
    int HS = C / NH;
    long th = (long)T * HS, tt = (long)T * T, bthd = (long)B * T * C;
    floatX *q = qkvr, *k = qkvr + bthd, *v = qkvr + 2 * bthd;
    heads_transpose((floatX*)qkv, qkvr, B, T, 3, NH, HS, true, stream);
    GemmBatch qk = {B * NH, th, th, tt};
    matmul(scores, true, k, q, NULL, T, T, HS, true, false, 0.0f, qk, stream);
    int rows = B * NH * T;
    softmax_causal_forward_kernel<<<ceil_div(rows, 8), 256, 0, stream>>>(att, scores, rows, T, 1.0f / sqrtf((float)HS));
    cudaCheckLaunch();
    GemmBatch av = {B * NH, th, tt, th};
    matmul(yr, false, v, att, NULL, HS, T, T, false, false, 0.0f, av, stream);
    heads_transpose(out, yr, B, T, 1, NH, HS, false, stream);
}

// dqkv [B,T,3C] from dout [B,T,C], qkv and att of the forward pass. Scratch: qkvr, dqkvr (3*B*T*C each),
// datt (B*NH*T*T), dyr (B*T*C).
static inline void attention_backward(floatX* dqkv, floatX* qkvr, floatX* dqkvr, floatX* datt, floatX* dyr,
                                      const floatX* dout, const floatX* qkv, const floatX* att, int B, int T, int C,
                                      int NH, cudaStream_t stream) {
    int HS = C / NH;
    long th = (long)T * HS, tt = (long)T * T, bthd = (long)B * T * C;
    floatX *q = qkvr, *k = qkvr + bthd, *v = qkvr + 2 * bthd;
    floatX *dq = dqkvr, *dk = dqkvr + bthd, *dv = dqkvr + 2 * bthd;
    heads_transpose((floatX*)dout, dyr, B, T, 1, NH, HS, true, stream);
    heads_transpose((floatX*)qkv, qkvr, B, T, 3, NH, HS, true, stream);
    GemmBatch b_tt = {B * NH, th, th, tt};                                  // [T x T] = [T x HS] [HS x T]
    matmul(datt, false, v, dyr, NULL, T, T, HS, true, false, 0.0f, b_tt, stream);
    GemmBatch b_th = {B * NH, th, tt, th};                                  // [T x HS] = [T x T] [T x HS]
    matmul(dv, false, dyr, att, NULL, HS, T, T, false, true, 0.0f, b_th, stream);
    int rows = B * NH * T;
    softmax_causal_backward_kernel<<<ceil_div(rows, 8), 256, 0, stream>>>(datt, att, rows, T, 1.0f / sqrtf((float)HS));
    cudaCheckLaunch();
    matmul(dq, false, k, datt, NULL, HS, T, T, false, false, 0.0f, b_th, stream);
    matmul(dk, false, q, datt, NULL, HS, T, T, false, true, 0.0f, b_th, stream);
    heads_transpose(dqkv, dqkvr, B, T, 3, NH, HS, false, stream);
}

#endif
