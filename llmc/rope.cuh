// Rotary position embeddings (HF LLaMA rotate-half, as llmc/llama_cpu.h) applied in place to the query and key
// heads of the fused qkv activation [B, T, (NH + 2 NKV) HS]: rows hold NH query heads, NKV key heads, NKV value
// heads of HS channels. Channel i < HS/2 of a head pairs with channel i + HS/2 and both rotate by the angle
// t theta^(-2i/HS) of the row's position t. The cos/sin values come from a precomputed FP32 table [maxT, HS/2],
// computed once on the device in FP64 with the formula of rope_table_cpu. The backward applies the inverse
// (transposed) rotation to dq and dk in place.
#ifndef LLMC_ROPE_CUH
#define LLMC_ROPE_CUH

#include "cuda_common.cuh"

typedef struct {
    float* cos;   // [max_T, HS/2]
    float* sin;
    int max_T, HS;
} RopeTable;

// cos[t, i], sin[t, i] of the angle t theta^(-2i/HS), in FP64 rounded to FP32. Traffic: writes the table.
__global__ void rope_table_kernel(float* cos_t, float* sin_t, int max_T, int HS, double theta) {
    int e = blockIdx.x * blockDim.x + threadIdx.x, half = HS / 2;
    if (e >= max_T * half) { return; }
    int t = e / half, i = e % half;
    double s, c;
    sincos(t * pow(theta, -2.0 * i / HS), &s, &c);
    cos_t[e] = (float)c;
    sin_t[e] = (float)s;
}

// Rotates in place the first nh heads of every row of x [BT rows of `stride` elements] by the angles of the row's
// position row % T: (x_i, x_{i+HS/2}) -> (x_i cos - x_{i+HS/2} sin, x_{i+HS/2} cos + x_i sin); sign -1 rotates by
// the opposite angles. 8 pairs per thread. Traffic: reads and writes the nh heads once; the table stays in L2.
__global__ void rope_rotate_kernel(floatX* x, const float* cos_t, const float* sin_t, int BT, int T, int nh, int HS,
                                   int stride, float sign) {
    int half = HS / 2, groups = half / 8;
    long e = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long)BT * nh * groups) { return; }
    int row = (int)(e / ((long)nh * groups)), h = (int)(e / groups % nh), i = (int)(e % groups) * 8;
    floatX* v = x + (size_t)row * stride + (size_t)h * HS + i;
    size_t ti = (size_t)(row % T) * half + i;
    f128 c[2] = {load128(cos_t + ti), load128(cos_t + ti + 4)}, s[2] = {load128(sin_t + ti), load128(sin_t + ti + 4)};
    x128 lo = load128(v), hi = load128(v + half);
    for (int k = 0; k < 8; k++) {
        float a = (float)lo[k], b = (float)hi[k], cs = c[k / 4][k % 4], sn = sign * s[k / 4][k % 4];
        lo[k] = (floatX)(a * cs - b * sn);
        hi[k] = (floatX)(b * cs + a * sn);
    }
    store128(v, lo);
    store128(v + half, hi);
}

static inline void rope_check_head_size(int HS) {
    if (HS <= 0 || HS % 16 != 0) { die("rope: head size HS=%d must be a positive multiple of 16", HS); }
}

// allocates and fills the table for positions < max_T and head size HS (theta: LLAMA_ROPE_THETA for the model)
static inline RopeTable rope_table_create(int max_T, int HS, double theta, cudaStream_t stream) {
    rope_check_head_size(HS);
    if (max_T <= 0) { die("rope: max_T=%d must be positive", max_T); }
    size_t n = (size_t)max_T * (HS / 2);
    RopeTable r = {(float*)device_malloc(n * sizeof(float), "RoPE cos table"),
                   (float*)device_malloc(n * sizeof(float), "RoPE sin table"), max_T, HS};
    rope_table_kernel<<<ceil_div((long)n, 256), 256, 0, stream>>>(r.cos, r.sin, max_T, HS, theta);
    cudaCheckLaunch();
    return r;
}

static inline void rope_table_free(RopeTable* r) {
    cudaCheck(cudaFree(r->cos));
    cudaCheck(cudaFree(r->sin));
    r->cos = r->sin = NULL;
}

static inline void rope_rotate(floatX* qkv, const RopeTable* r, int B, int T, int NH, int NKV, float sign, cudaStream_t stream) {
    rope_check_head_size(r->HS);
    if (T <= 0 || T > r->max_T) { die("rope: sequence length T=%d must be in [1, %d] (the table's max_T)", T, r->max_T); }
    if (B <= 0 || NH <= 0 || NKV <= 0) { die("rope: B=%d, NH=%d, NKV=%d must be positive", B, NH, NKV); }
    long work = (long)B * T * (NH + NKV) * (r->HS / 16);
    rope_rotate_kernel<<<ceil_div(work, 256), 256, 0, stream>>>(qkv, r->cos, r->sin, B * T, T, NH + NKV, r->HS,
                                                                 (NH + 2 * NKV) * r->HS, sign);
    cudaCheckLaunch();
}

// rotates the q and k heads of qkv [B, T, (NH + 2 NKV) HS] in place by their positions' angles
static inline void rope_forward(floatX* qkv, const RopeTable* r, int B, int T, int NH, int NKV, cudaStream_t stream) {
    rope_rotate(qkv, r, B, T, NH, NKV, 1.0f, stream);
}

// dqkv holds d(rotated qkv) on entry and d(qkv before RoPE) on exit: the transposed rotation of dq and dk; dv untouched
static inline void rope_backward(floatX* dqkv, const RopeTable* r, int B, int T, int NH, int NKV, cudaStream_t stream) {
    rope_rotate(dqkv, r, B, T, NH, NKV, -1.0f, stream);
}

#endif
