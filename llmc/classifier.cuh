// Fused softmax cross-entropy over the real vocabulary V of padded [N x Vp] logits: per-row loss, and,
// when dloss != 0, the logits overwritten in place by their gradient dloss * (softmax - onehot(target)).
#ifndef LLMC_CLASSIFIER_CUH
#define LLMC_CLASSIFIER_CUH

#include "cuda_common.cuh"

#define CE_THREADS 512
#define CE_UNROLL 4   // 16-byte loads in flight per thread in the first pass

// block-wide reduction of one float; op 0 = sum, 1 = max. Result valid in every thread.
__device__ float block_reduce(float x, int op) {
    __shared__ float buf[32];
    x = op ? warp_max(x) : warp_sum(x);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) { buf[warp] = x; }
    __syncthreads();
    x = lane < nwarps ? buf[lane] : (op ? -INFINITY : 0.0f);
    return op ? warp_max(x) : warp_sum(x);
}

// the 8 logits of a 16-byte vector at column j0, times log2(e); columns at or past V are -inf
__device__ __forceinline__ void ce_load_log2(float x[8], const floatX* row, int j0, int V) {
    x128 v = load128(row + j0);
    #pragma unroll
    for (int k = 0; k < 8; k++) { x[k] = j0 + k < V ? (float)v[k] * LOG2E_F : -INFINITY; }
}

// One block per row: losses[row] += logsumexp(logits[row, :V]) - logits[row, target], from a running max and sum
// of exponentials over the row's 16-byte vectors; then, when dloss != 0, the row overwritten by dloss * (softmax -
// onehot(target)), padding columns by 0. Exponentials in base 2 (exp2f). Traffic: reads the row twice (the second
// time mostly from L2, a few microseconds later) and writes it once, in 16-byte accesses.
__global__ void __launch_bounds__(CE_THREADS) softmax_crossentropy_kernel(floatX* logits, float* losses,
                                                                          const int* targets, int V, int Vp, float dloss) {
    floatX* row = logits + (size_t)blockIdx.x * Vp;
    int target = targets[blockIdx.x], nvalid = (V + 7) / 8;   // vectors holding a real column
    float target_logit = threadIdx.x == 0 ? (float)row[target] : 0.0f;   // read before the barriers of block_reduce
    float m = -INFINITY, sum = 0.0f;   // this thread's max of x log2(e) and sum of 2^(x log2(e) - m)
    for (int base = threadIdx.x; base < nvalid; base += CE_THREADS * CE_UNROLL) {
        float x[CE_UNROLL][8];
        #pragma unroll
        for (int u = 0; u < CE_UNROLL; u++) {
            int i = base + u * CE_THREADS;
            if (i < nvalid) { ce_load_log2(x[u], row, 8 * i, V); }
        }
        #pragma unroll
        for (int u = 0; u < CE_UNROLL; u++) {
            if (base + u * CE_THREADS >= nvalid) { break; }
            float mv = m;   // the vector's first column is real, so the new max is finite unless a logit is +inf
            #pragma unroll
            for (int k = 0; k < 8; k++) { mv = fmaxf(mv, x[u][k]); }
            float s = 0.0f;   // a NaN logit makes s, and so the row's loss, NaN (fmaxf skips it)
            #pragma unroll
            for (int k = 0; k < 8; k++) { s += exp2f(x[u][k] - mv); }
            sum = fmaf(sum, exp2f(m - mv), s);
            m = mv;
        }
    }
    float row_max = block_reduce(m, 1);
    float total = block_reduce(m == -INFINITY ? 0.0f : sum * exp2f(m - row_max), 0);
    if (threadIdx.x == 0) { losses[blockIdx.x] += logf(total) + row_max * LN2_F - target_logit; }
    if (dloss == 0.0f) { return; }
    float scale = dloss / total;
    for (int i = threadIdx.x; i < Vp / 8; i += CE_THREADS) {
        x128 g;
        if (i < nvalid) {
            float x[8];
            ce_load_log2(x, row, 8 * i, V);
            #pragma unroll
            for (int k = 0; k < 8; k++) {
                g[k] = (floatX)(exp2f(x[k] - row_max) * scale - (8 * i + k == target ? dloss : 0.0f));
            }
        } else {
            #pragma unroll
            for (int k = 0; k < 8; k++) { g[k] = (floatX)0.0f; }
        }
        store128(row + 8 * i, g);
    }
}

static inline void softmax_crossentropy(floatX* logits, float* losses, const int* targets, int N, int V, int Vp,
                                        float dloss, cudaStream_t stream) {
    if (Vp % 8 != 0 || V > Vp || V <= 0) { die("softmax_crossentropy: V=%d, Vp=%d (Vp a multiple of 8, 0 < V <= Vp)", V, Vp); }
    softmax_crossentropy_kernel<<<N, CE_THREADS, 0, stream>>>(logits, losses, targets, V, Vp, dloss);
    cudaCheckLaunch();
}

#endif
