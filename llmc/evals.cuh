// The GPU side of the downstream evals (llmc/evals.h): greedy-argmax flags of the targets from the logits that a
// forward pass without a gradient (dloss 0) leaves in place.
#ifndef LLMC_EVALS_CUH
#define LLMC_EVALS_CUH

#include "cuda_common.cuh"
#include "classifier.cuh"

#define EVAL_ROW_ALIGN 32   // eval batch rows are padded to a multiple of this many positions (MXFP4 blocks of 32)

// One block per row: flags[row] = 1 when logits[row, targets[row]] is the largest of the V real columns (ties
// count), else 0
__global__ void eval_argmax_flags_kernel(float* flags, const floatX* logits, const int* targets, int V, int Vp) {
    const floatX* row = logits + (size_t)blockIdx.x * Vp;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) { mx = fmaxf(mx, (float)row[j]); }
    mx = block_reduce(mx, 1);
    if (threadIdx.x == 0) { flags[blockIdx.x] = (float)row[targets[blockIdx.x]] >= mx ? 1.0f : 0.0f; }
}

static inline void eval_argmax_flags(float* flags, const floatX* logits, const int* targets, int N, int V, int Vp,
                                     cudaStream_t stream) {
    eval_argmax_flags_kernel<<<N, 256, 0, stream>>>(flags, logits, targets, V, Vp);
    cudaCheckLaunch();
}

#endif
