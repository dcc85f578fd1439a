// The fused softmax cross-entropy in three passes of 2-byte loads (one block of 1024 threads a row), kept beside
// llmc/classifier.cuh's 16-byte-vector kernel as the comparison for dev/cuda/bench_classifier.cu and
// dev/cuda/test_kernels.cu: same interface, results within float rounding.
#ifndef DEV_CUDA_CLASSIFIER_SCALAR_CUH
#define DEV_CUDA_CLASSIFIER_SCALAR_CUH

#include "llmc/classifier.cuh"

// One block per row. losses[row] += logsumexp(logits[row, :V]) - logits[row, target]: the row's max, then its sum of
// exponentials, then the gradient. Traffic: reads the row three times (the later ones from L2), writes it once when
// the gradient is wanted.
__global__ void softmax_crossentropy_scalar_kernel(floatX* logits, float* losses, const int* targets, int V, int Vp,
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

static inline void softmax_crossentropy_scalar(floatX* logits, float* losses, const int* targets, int N, int V, int Vp,
                                               float dloss, cudaStream_t stream) {
    softmax_crossentropy_scalar_kernel<<<N, 1024, 0, stream>>>(logits, losses, targets, V, Vp, dloss);
    cudaCheckLaunch();
}

#endif
