// Token + position embedding (GPT-2), or the token embedding alone (LLaMA: wpe NULL), forward and a deterministic
// backward. The backward groups the positions
// of each token on the host (the tokens are there anyway), so dwte is a gather-sum, not atomics.
#ifndef LLMC_ENCODER_CUH
#define LLMC_ENCODER_CUH

#include "cuda_common.cuh"
#include "token_groups.h"

// out[b,t,:] = wte[inp[b,t],:] + wpe[t,:] (wte alone when wpe is NULL); each thread 8 channels. Traffic: reads BT*C
// of wte and wpe, writes BT*C.
__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, const floatX* wpe,
                                       int B, int T, int C) {
    long idx = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (idx >= (long)B * T * C) { return; }
    long bt = idx / C;
    int c = (int)(idx % C), t = (int)(bt % T);
    x128 e = load128(wte + (size_t)inp[bt] * C + c);
    if (wpe) {
        x128 p = load128(wpe + (size_t)t * C + c);
        for (int i = 0; i < 8; i++) { e[i] = (floatX)((float)e[i] + (float)p[i]); }
    }
    store128(out + idx, e);
}

// dwpe[t,c] += sum_b dout[b,t,c]; each thread 8 channels of one position. Traffic: reads BT*C, r/w T*C floats.
__global__ void wpe_backward_kernel(float* dwpe, const floatX* dout, int B, int T, int C) {
    long idx = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (idx >= (long)T * C) { return; }
    float acc[8] = {};
    for (int b = 0; b < B; b++) {
        x128 d = load128(dout + (size_t)b * T * C + idx);
        for (int i = 0; i < 8; i++) { acc[i] += (float)d[i]; }
    }
    for (int i = 0; i < 8; i++) { dwpe[idx + i] += acc[i]; }
}

// dwte[tok,c] += sum of dout over the positions holding tok, in a fixed order; one block per distinct token.
// Traffic: reads BT*C, r/w (distinct tokens)*C floats.
__global__ void wte_backward_kernel(float* dwte, const floatX* dout, const int* tokens, const int* offsets,
                                    const int* positions, int C) {
    int tok = tokens[blockIdx.x], begin = offsets[blockIdx.x], end = offsets[blockIdx.x + 1];
    for (int c = threadIdx.x * 8; c < C; c += blockDim.x * 8) {
        float acc[8] = {};
        for (int p = begin; p < end; p++) {
            x128 d = load128(dout + (size_t)positions[p] * C + c);
            for (int i = 0; i < 8; i++) { acc[i] += (float)d[i]; }
        }
        float* row = dwte + (size_t)tok * C + c;
        for (int i = 0; i < 8; i++) { row[i] += acc[i]; }
    }
}

static inline void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T,
                                   int C, cudaStream_t stream) {
    const int block = 256;
    encoder_forward_kernel<<<ceil_div((long)B * T * C / 8, block), block, 0, stream>>>(out, inp, wte, wpe, B, T, C);
    cudaCheckLaunch();
}

// dwte (and dwpe, unless NULL) += the gradient dout of the embedding output
static inline void encoder_backward(float* dwte, float* dwpe, const floatX* dout, const int* tokens, const int* offsets,
                                    const int* positions, int num_distinct, int B, int T, int C, cudaStream_t stream) {
    const int block = 256;
    if (dwpe) {
        wpe_backward_kernel<<<ceil_div((long)T * C / 8, block), block, 0, stream>>>(dwpe, dout, B, T, C);
        cudaCheckLaunch();
    }
    wte_backward_kernel<<<num_distinct, 128, 0, stream>>>(dwte, dout, tokens, offsets, positions, C);
    cudaCheckLaunch();
}

#endif
