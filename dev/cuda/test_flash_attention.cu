// Flash attention (llmc/flash_attention.cuh) against the FP32 CPU reference (dev/cuda/attention_reference.cuh) and,
// for NKV = NH, against the cuBLASLt baseline (attention_cublaslt.cuh), on fresh random inputs rounded to BF16 before
// both sides see them: multi-head (GPT-2) and grouped-query (NKV < NH, down to one kv head), head sizes 64 and 128,
// T not a multiple of the tiles, large-magnitude and all-zero inputs.
// Tolerance per element: |got - want| <= atol + rtol |want|, with atol relative to the largest |want| of the
// tensor: out 1e-2 (rtol 1/64), dqkv 2e-2 (rtol 1/32), lse 2e-5 (FP32, rtol 0); against the cuBLASLt attention,
// whose BF16 probabilities carry their own rounding, out 1e-2 and dqkv 2e-2 with rtol 1/32. Also: the forward and
// the backward run twice give identical bits, and unsupported shapes are refused. Needs a GPU.
#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"
#include "dev/cuda/attention_cublaslt.cuh"
#include "llmc/flash_attention.cuh"
#include "dev/cuda/attention_reference.cuh"

// out and dqkv of the cuBLASLt baseline, downloaded
static void gpu_reference(float** out, float** dqkv, const floatX* d_qkv, const floatX* d_dout, int B, int T, int C, int NH) {
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    floatX *d_out = (floatX*)device_malloc(nout * 2, "out"), *d_att = (floatX*)device_malloc(natt * 2, "att");
    floatX *d_qkvr = (floatX*)device_malloc(nqkv * 2, "qkvr"), *d_dqkvr = (floatX*)device_malloc(nqkv * 2, "dqkvr");
    floatX *d_yr = (floatX*)device_malloc(nout * 2, "yr"), *d_dqkv = (floatX*)device_malloc(nqkv * 2, "dqkv");
    float* d_scores = (float*)device_malloc(natt * 4, "scores");
    attention_forward(d_out, d_att, d_qkvr, d_scores, d_yr, d_qkv, B, T, C, NH, 0);
    attention_backward(d_dqkv, d_qkvr, d_dqkvr, (floatX*)d_scores, d_yr, d_dout, d_qkv, d_att, B, T, C, NH, 0);
    *out = from_device_bf16(d_out, nout);
    *dqkv = from_device_bf16(d_dqkv, nqkv);
    void* bufs[] = {d_out, d_att, d_qkvr, d_dqkvr, d_yr, d_dqkv, d_scores};
    for (int i = 0; i < 7; i++) { cudaCheck(cudaFree(bufs[i])); }
}

static void test_flash(int B, int T, int NH, int NKV, int HS, float scale) {
    int C = NH * HS;
    printf("flash attention B=%d T=%d NH=%d NKV=%d HS=%d input scale %g\n", B, T, NH, NKV, HS, scale);
    AttentionReference ref = attention_reference(B, T, NH, NKV, HS, scale);
    size_t nqkv = ref.nqkv, nout = ref.nout, nlse = ref.nlse;
    const float *out = ref.out, *lse = ref.lse, *dqkv = ref.dqkv;
    floatX *d_qkv = ref.d_qkv, *d_dout = ref.d_dout;

    floatX *d_out = (floatX*)device_malloc(nout * 2, "out"), *d_out2 = (floatX*)device_malloc(nout * 2, "out2");
    floatX *d_dqkv = (floatX*)device_malloc(nqkv * 2, "dqkv"), *d_dqkv2 = (floatX*)device_malloc(nqkv * 2, "dqkv2");
    float *d_lse = (float*)device_malloc(nlse * 4, "lse"), *d_lse2 = (float*)device_malloc(nlse * 4, "lse2");
    float* d_delta = (float*)device_malloc(flash_attention_delta_floats(B, T, NH) * 4, "delta");
    void* poisoned[] = {d_out, d_out2, d_dqkv, d_dqkv2, d_lse, d_lse2};   // every element must be written
    size_t bytes[] = {nout * 2, nout * 2, nqkv * 2, nqkv * 2, nlse * 4, nlse * 4};
    for (int i = 0; i < 6; i++) { cudaCheck(cudaMemset(poisoned[i], 0xff, bytes[i])); }

    flash_attention_forward(d_out, d_lse, d_qkv, B, T, NH, NKV, HS, 0);
    flash_attention_backward(d_dqkv, d_delta, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS, 0);
    flash_attention_forward(d_out2, d_lse2, d_qkv, B, T, NH, NKV, HS, 0);
    flash_attention_backward(d_dqkv2, d_delta, d_dout, d_qkv, d_out2, d_lse2, B, T, NH, NKV, HS, 0);
    void *o1 = download(d_out, nout * 2), *o2 = download(d_out2, nout * 2), *l1 = download(d_lse, nlse * 4), *l2 = download(d_lse2, nlse * 4);
    void *g1 = download(d_dqkv, nqkv * 2), *g2 = download(d_dqkv2, nqkv * 2);
    CHECK(memcmp(o1, o2, nout * 2) == 0 && memcmp(l1, l2, nlse * 4) == 0, "forward: two runs give different bits");
    CHECK(memcmp(g1, g2, nqkv * 2) == 0, "backward: two runs give different bits");
    free(o1); free(o2); free(l1); free(l2); free(g1); free(g2);

    compare("flash forward out vs CPU", from_device_bf16(d_out, nout), out, nout, 1e-2f, 1.0f / 64);
    compare("flash forward lse vs CPU", from_device_f32(d_lse, nlse), lse, nlse, 2e-5f, 0.0f);
    compare("flash backward dqkv vs CPU", from_device_bf16(d_dqkv, nqkv), dqkv, nqkv, 2e-2f, 1.0f / 32);
    if (NKV == NH) {   // the cuBLASLt attention is multi-head only
        float *ref_out, *ref_dqkv;
        gpu_reference(&ref_out, &ref_dqkv, d_qkv, d_dout, B, T, C, NH);
        compare("flash out vs cuBLASLt attention", from_device_bf16(d_out, nout), ref_out, nout, 1e-2f, 1.0f / 32);
        compare("flash dqkv vs cuBLASLt attention", from_device_bf16(d_dqkv, nqkv), ref_dqkv, nqkv, 2e-2f, 1.0f / 32);
        free(ref_out); free(ref_dqkv);
    }

    attention_reference_free(&ref);
    void* bufs[] = {d_out, d_out2, d_dqkv, d_dqkv2, d_lse, d_lse2, d_delta};
    for (int i = 0; i < 7; i++) { cudaCheck(cudaFree(bufs[i])); }
}

static void forward_head_size_96(void) { flash_attention_forward(NULL, NULL, NULL, 1, 64, 1, 1, 96, 0); }
static void backward_t_60(void) { flash_attention_backward(NULL, NULL, NULL, NULL, NULL, NULL, 1, 60, 12, 12, 64, 0); }
static void forward_kv_heads_5_of_12(void) { flash_attention_forward(NULL, NULL, NULL, 1, 64, 12, 5, 64, 0); }

static void test_unsupported_shapes(void) {
    printf("unsupported shapes are refused\n");
    // {T, NH, NKV, HS}
    int ok[][4] = {{8, 1, 1, 64}, {64, 2, 2, 64}, {200, 4, 4, 64}, {1024, 12, 12, 64}, {1024, 25, 25, 64}, {136, 2, 2, 128},
                   {200, 10, 5, 64}, {256, 16, 4, 64}, {136, 8, 1, 128}, {1024, 32, 8, 128}};
    int bad[][4] = {{64, 24, 24, 32}, {64, 1, 1, 96}, {64, 1, 1, 192}, {64, 12, 12, 0}, {60, 12, 12, 64}, {100, 12, 12, 64},
                    {0, 12, 12, 64}, {64, 0, 0, 64}, {64, 12, 5, 64}, {64, 8, 16, 64}, {64, 8, 0, 64}, {64, 8, -2, 64}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int* s = ok[i];
        CHECK(flash_attention_unsupported(s[0], s[1], s[2], s[3]) == NULL, "T=%d NH=%d NKV=%d HS=%d is supported", s[0], s[1], s[2], s[3]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int* s = bad[i];
        CHECK(flash_attention_unsupported(s[0], s[1], s[2], s[3]) != NULL, "T=%d NH=%d NKV=%d HS=%d is refused", s[0], s[1], s[2], s[3]);
    }
    // the public entry points die before touching the GPU (run before CUDA is initialized, so forking is safe)
    CHECK(child_fails_with(forward_head_size_96, "flash attention: head size HS must be 64 or 128"), "head size 96 dies");
    CHECK(child_fails_with(backward_t_60, "flash attention: sequence length T must be a positive multiple of 8"), "T=60 dies");
    CHECK(child_fails_with(forward_kv_heads_5_of_12, "flash attention: the key/value heads NKV must divide the query heads NH"),
          "NKV=5 of NH=12 dies");
}

int main(void) {
    test_unsupported_shapes();
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: the flash attention tests need one"); }
    seed_fresh_rng();
    matmul_init();
    printf("flash_attention_forward / _backward run the %s kernels\n", flash_wgmma_available() ? "wgmma" : "mma.sync");
    // multi-head (GPT-2): B, T, NH, NKV = NH, HS, input scale
    test_flash(2, 64, 2, 2, 64, 1.0f);
    test_flash(1, 200, 4, 4, 64, 1.0f);       // T not a multiple of the tiles
    test_flash(1, 8, 1, 1, 64, 1.0f);         // the smallest T
    test_flash(2, 1024, 12, 12, 64, 1.0f);
    test_flash(2, 136, 2, 2, 128, 1.0f);      // head size 128, T not a multiple of the tiles
    test_flash(1, 512, 4, 4, 128, 1.0f);      // head size 128
    test_flash(2, 256, 12, 12, 64, 8.0f);     // large magnitudes: nearly one-hot probabilities
    test_flash(1, 128, 2, 2, 128, 8.0f);
    test_flash(2, 192, 2, 2, 64, 0.0f);       // all-zero qkv: uniform probabilities, dq = dk = 0
    // grouped-query: dk, dv of a kv head sum over its NH / NKV query heads
    test_flash(2, 200, 10, 5, 64, 1.0f);      // groups of 2, T not a multiple of the tiles
    test_flash(1, 256, 16, 4, 64, 1.0f);      // groups of 4
    test_flash(2, 136, 8, 1, 128, 1.0f);      // one kv head (multi-query), head size 128
    test_flash(1, 128, 4, 2, 64, 8.0f);       // large magnitudes
    test_flash(1, 64, 6, 2, 128, 0.0f);       // all-zero qkv, groups of 3
    matmul_free();
    return test_summary("test_flash_attention");
}
