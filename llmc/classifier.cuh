// Fused softmax cross-entropy over the real vocabulary V of padded [N x Vp] logits: per-row loss, and,
// when dloss != 0, the logits overwritten in place by their gradient dloss * (softmax - onehot(target)).
#ifndef LLMC_CLASSIFIER_CUH
#define LLMC_CLASSIFIER_CUH

#include "cuda_common.cuh"

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

// One block per row. losses[row] += logsumexp(logits[row, :V]) - logits[row, target]. Traffic: reads the row
// twice (the second time from L2), writes it once when the gradient is wanted.
__global__ void softmax_crossentropy_kernel(floatX* logits, float* losses, const int* targets, int V, int Vp,
                                            float dloss) {
    floatX* row = logits + (size_t)blockIdx.x * Vp;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) { mx = fmaxf(mx, (float)row[j]); }
    mx = block_reduce(mx, 1);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) { sum += expf((float)row[j] - mx); }
    sum = block_reduce(sum, 0);
    int target = targets[blockIdx.x];
    float target_logit = (float)row[target];
    __syncthreads();   // every thread has read the target logit before anyone overwrites it
    if (threadIdx.x == 0) { losses[blockIdx.x] += logf(sum) + mx - target_logit; }
    if (dloss == 0.0f) { return; }
    float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
        float g = j < V ? expf((float)row[j] - mx) * inv - (j == target ? 1.0f : 0.0f) : 0.0f;
        row[j] = (floatX)(dloss * g);
    }
}

static inline void softmax_crossentropy(floatX* logits, float* losses, const int* targets, int N, int V, int Vp,
                                        float dloss, cudaStream_t stream) {
    softmax_crossentropy_kernel<<<N, 1024, 0, stream>>>(logits, losses, targets, V, Vp, dloss);
    cudaCheckLaunch();
}

#endif
