// The LLaMA layer kernels (llmc/rmsnorm.cuh, llmc/rope.cuh, llmc/swiglu.cuh) against the FP32 CPU reference
// (llmc/llama_cpu.h) on fresh random inputs rounded to BF16 before both sides see them, and on adversarial ones:
// odd N, all-zero rows and tiny (eps-dominated) and large magnitudes for RMSNorm, long positions and GQA head
// counts for RoPE, gate values past expf's overflow for SwiGLU. Tolerance per element: |got - want| <= atol_rel
// max|want| + rtol |want| (dev/cuda/test_compare.cuh):
//   BF16 outputs (rmsnorm out, rope q/k, swiglu out / dgate / dup): atol_rel 1e-5, rtol 1/128 (one BF16 ulp);
//   rmsnorm dinp (accumulated into a BF16 buffer): atol_rel 1e-4, rtol 1/128;  rstd (FP32): rtol 1e-4;
//   rmsnorm dweight (FP32 accumulator, deterministic column sums): atol_rel 1e-4, rtol 1e-4;
//   RoPE table (FP32 of FP64 values) vs rope_table_cpu: atol 2.5e-7 (two FP32 ulps of 1).
// Exact: the fused residual; the plain forward vs the fused one; RoPE leaves the v heads alone; the channel
// recomputations vs the gathered forward output; in-place vs out-of-place SwiGLU backward; every kernel run twice
// (identical bits). Unsupported shapes die with a clear message. Needs a GPU.
#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"
#include "llmc/outliers.cuh"
#include "llmc/rmsnorm.cuh"
#include "llmc/rope.cuh"
#include "llmc/swiglu.cuh"
#include "llmc/llama_cpu.h"
#include "dev/cuda/test_compare.cuh"

static float* scratch;   // column sums scratch on the device

// RMSNorm fused with the residual add (and plain), forward and backward; scale sets the input magnitude
static void test_rmsnorm(int N, int C, float scale, bool zero_rows) {
    printf("rmsnorm N=%d C=%d scale=%g%s\n", N, C, scale, zero_rows ? " (first two rows all zero)" : "");
    size_t n = (size_t)N * C, nz = zero_rows ? 2 * (size_t)C : 0;
    float *a = host_random(n, scale), *b = host_random(n, scale), *w = host_random(C, 1.0f);
    memset(a, 0, nz * sizeof(float));
    memset(b, 0, nz * sizeof(float));
    float *res = host_zeros(n), *out = host_zeros(n), *rstd = host_zeros(N);
    for (size_t i = 0; i < n; i++) { res[i] = __bfloat162float(__float2bfloat16(a[i] + b[i])); }   // residual stream is BF16
    rmsnorm_forward_cpu(out, rstd, res, w, 1, N, C);
    floatX *d_a = to_device_bf16(a, n), *d_b = to_device_bf16(b, n), *d_w = to_device_bf16(w, C);
    floatX *d_out = (floatX*)device_malloc(n * 2, "out"), *d_res = (floatX*)device_malloc(n * 2, "res");
    floatX* d_out2 = (floatX*)device_malloc(n * 2, "out2");
    float *d_rstd = (float*)device_malloc(N * 4, "rstd"), *d_rstd2 = (float*)device_malloc(N * 4, "rstd2");
    cudaCheck(cudaMemset(d_out, 0xff, n * 2));   // poison: every element must be written
    cudaCheck(cudaMemset(d_res, 0xff, n * 2));
    cudaCheck(cudaMemset(d_rstd, 0xff, N * 4));
    rmsnorm_forward(d_out, d_rstd, d_res, d_a, d_b, d_w, N, C, LLAMA_RMS_EPS, 0);
    compare("residual + rmsnorm: residual (exact)", from_device_bf16(d_res, n), res, n, 0.0f, 0.0f);
    compare("residual + rmsnorm: out", from_device_bf16(d_out, n), out, n, 1e-5f, 1.0f / 128);
    compare("residual + rmsnorm: rstd", from_device_f32(d_rstd, N), rstd, N, 0.0f, 1e-4f);
    rmsnorm_forward(d_out2, d_rstd2, NULL, d_res, NULL, d_w, N, C, LLAMA_RMS_EPS, 0);
    compare_bits("plain rmsnorm = fused: out", d_out2, d_out, n * 2);
    compare_bits("plain rmsnorm = fused: rstd", d_rstd2, d_rstd, N * 4);

    // backward: dinp accumulates into a BF16 buffer (prior of the size of the increments), dweight into FP32;
    // the dinp of all-zero rows (rstd = 1 / sqrt(eps)) is ~300x larger, so it is compared on its own
    float *dout = host_random(n, 1.0f), *dinp = host_random(n, 1.0f / scale), *dw = host_random(C, 1.0f);
    floatX *d_dout = to_device_bf16(dout, n), *d_dinp = to_device_bf16(dinp, n);
    float* d_dw = to_device_f32(dw, C);
    rmsnorm_backward_cpu(dinp, dw, dout, res, w, rstd, 1, N, C);
    rmsnorm_backward(d_dinp, d_dw, scratch, d_dout, d_res, d_rstd, d_w, N, C, 0);
    if (zero_rows) { compare("rmsnorm backward dinp, zero rows", from_device_bf16(d_dinp, nz), dinp, nz, 1e-4f, 1.0f / 128); }
    compare("rmsnorm backward dinp", from_device_bf16(d_dinp + nz, n - nz), dinp + nz, n - nz, 1e-4f, 1.0f / 128);
    compare("rmsnorm backward dweight", from_device_f32(d_dw, C), dw, C, 1e-4f, 1e-4f);
    free(a); free(b); free(w); free(res); free(out); free(rstd); free(dout); free(dinp); free(dw);
    void* bufs[] = {d_a, d_b, d_w, d_out, d_res, d_out2, d_rstd, d_rstd2, d_dout, d_dinp, d_dw};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

// elements of the v heads of qkv [N, (NH + 2 NKV) HS] where got differs from want
static size_t v_heads_changed(const float* got, const float* want, int N, int NH, int NKV, int HS) {
    size_t changed = 0, QKV = (size_t)(NH + 2 * NKV) * HS;
    for (size_t r = 0; r < (size_t)N; r++) {
        for (size_t c = (size_t)(NH + NKV) * HS; c < QKV; c++) { changed += got[r * QKV + c] != want[r * QKV + c]; }
    }
    return changed;
}

// RoPE table, forward and backward on the fused qkv; the table covers more positions than T
static void test_rope(int B, int T, int NH, int NKV, int HS, float scale) {
    printf("rope B=%d T=%d NH=%d NKV=%d HS=%d scale=%g\n", B, T, NH, NKV, HS, scale);
    int N = B * T, QKV = (NH + 2 * NKV) * HS, max_T = T + 13;
    size_t n = (size_t)N * QKV, nt = (size_t)max_T * (HS / 2);
    float *cos_t = host_zeros(nt), *sin_t = host_zeros(nt);
    rope_table_cpu(cos_t, sin_t, max_T, HS, LLAMA_ROPE_THETA);
    RopeTable rope = rope_table_create(max_T, HS, LLAMA_ROPE_THETA, 0);
    compare("rope table cos", from_device_f32(rope.cos, nt), cos_t, nt, 2.5e-7f, 0.0f);
    compare("rope table sin", from_device_f32(rope.sin, nt), sin_t, nt, 2.5e-7f, 0.0f);

    const char* names[2][2] = {{"rope forward q, k", "rope forward: v heads untouched"},
                               {"rope backward dq, dk", "rope backward: dv heads untouched"}};
    for (int dir = 0; dir < 2; dir++) {
        float *x = host_random(n, scale), *want = (float*)malloc_check(n * sizeof(float));
        memcpy(want, x, n * sizeof(float));
        floatX* d_x = to_device_bf16(x, n);
        if (dir == 0) {
            rope_forward_cpu(want, cos_t, sin_t, B, T, NH + NKV, HS, QKV);
            rope_forward(d_x, &rope, B, T, NH, NKV, 0);
        } else {
            rope_backward_cpu(want, cos_t, sin_t, B, T, NH + NKV, HS, QKV);
            rope_backward(d_x, &rope, B, T, NH, NKV, 0);
        }
        float* got = from_device_bf16(d_x, n);
        size_t changed = v_heads_changed(got, x, N, NH, NKV, HS);
        printf("  %-38s %zu changed\n", names[dir][1], changed);
        CHECK(changed == 0, "%s: %zu elements changed", names[dir][1], changed);
        compare(names[dir][0], got, want, n, 1e-5f, 1.0f / 128);
        free(x); free(want);
        cudaCheck(cudaFree(d_x));
    }
    free(cos_t); free(sin_t);
    rope_table_free(&rope);
}

// SwiGLU forward and backward (out of place and in place) on the fused gate/up activation
static void test_swiglu(int N, int H, float scale) {
    printf("swiglu N=%d H=%d scale=%g\n", N, H, scale);
    size_t n = (size_t)N * H;
    float *inp = host_random(2 * n, scale), *out = host_zeros(n), *dout = host_random(n, 1.0f), *dinp = host_zeros(2 * n);
    swiglu_forward_cpu(out, inp, N, H);
    swiglu_backward_cpu(dinp, inp, dout, N, H);
    floatX *d_inp = to_device_bf16(inp, 2 * n), *d_dout = to_device_bf16(dout, n), *d_inplace = to_device_bf16(inp, 2 * n);
    floatX *d_out = (floatX*)device_malloc(n * 2, "out"), *d_dinp = (floatX*)device_malloc(4 * n, "dinp");
    cudaCheck(cudaMemset(d_out, 0xff, n * 2));
    cudaCheck(cudaMemset(d_dinp, 0xff, 4 * n));
    swiglu_forward(d_out, d_inp, N, H, 0);
    swiglu_backward(d_dinp, d_dout, d_inp, N, H, 0);
    swiglu_backward(d_inplace, d_dout, d_inplace, N, H, 0);
    compare("swiglu forward", from_device_bf16(d_out, n), out, n, 1e-5f, 1.0f / 128);
    compare("swiglu backward (dgate, dup)", from_device_bf16(d_dinp, 2 * n), dinp, 2 * n, 1e-5f, 1.0f / 128);
    compare_bits("swiglu backward in place = out of place", d_inplace, d_dinp, 4 * n);
    free(inp); free(out); free(dout); free(dinp);
    void* bufs[] = {d_inp, d_dout, d_inplace, d_out, d_dinp};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

// the channel recomputations of the AdaHOP backward (k channels of an RMSNorm / SwiGLU output, channel-major)
// against the full forward output gathered at the same channels: bit for bit, on random channel indices
static void test_channel_recompute(int N, int C, int H, int k) {
    printf("channel recompute N=%d C=%d H=%d k=%d\n", N, C, H, k);
    float *x = host_random((size_t)N * C, 4.0f), *w = host_random(C, 1.0f), *gu = host_random((size_t)N * 2 * H, 4.0f);
    int* idx = (int*)malloc_check(k * sizeof(int));
    floatX *d_x = to_device_bf16(x, (size_t)N * C), *d_w = to_device_bf16(w, C), *d_gu = to_device_bf16(gu, (size_t)N * 2 * H);
    floatX* d_full = (floatX*)device_malloc((size_t)N * (C > H ? C : H) * sizeof(floatX), "full");
    floatX *d_ch = (floatX*)device_malloc((size_t)k * N * sizeof(floatX), "channels");
    floatX* d_want = (floatX*)device_malloc((size_t)k * N * sizeof(floatX), "gathered");
    float* d_rstd = (float*)device_malloc(N * sizeof(float), "rstd");
    int* d_idx = (int*)device_malloc(k * sizeof(int), "idx");
    const char* names[2] = {"rmsnorm channels (bit for bit)", "swiglu channels (bit for bit)"};
    for (int op = 0; op < 2; op++) {
        int width = op == 0 ? C : H;
        for (int j = 0; j < k; j++) { idx[j] = (int)rng_below(&rng, (uint64_t)width); }
        cudaCheck(cudaMemcpy(d_idx, idx, k * sizeof(int), cudaMemcpyHostToDevice));
        if (op == 0) {
            rmsnorm_forward(d_full, d_rstd, NULL, d_x, NULL, d_w, N, C, LLAMA_RMS_EPS, 0);
            rmsnorm_forward_channels(d_ch, d_x, d_rstd, d_w, d_idx, k, N, C, 0);
        } else {
            swiglu_forward(d_full, d_gu, N, H, 0);
            swiglu_forward_channels(d_ch, d_gu, d_idx, k, N, H, 0);
        }
        gather_cols_kernel<<<ceil_div((long)k * N, 256), 256>>>(d_want, d_full, d_idx, k, N, width);
        cudaCheckLaunch();
        compare_bits(names[op], d_ch, d_want, (size_t)k * N * sizeof(floatX));
    }
    free(x); free(w); free(gu); free(idx);
    void* bufs[] = {d_x, d_w, d_gu, d_full, d_ch, d_want, d_rstd, d_idx};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

// every kernel run twice on the same inputs gives identical bits (the dweight column sums span many row chunks)
static void test_determinism(int B, int T, int NH, int NKV, int HS, int H) {
    int N = B * T, C = NH * HS, QKV = (NH + 2 * NKV) * HS;
    printf("determinism N=%d C=%d QKV=%d H=%d\n", N, C, QKV, H);
    size_t nc = (size_t)N * C, nq = (size_t)N * QKV, nh = (size_t)N * H;
    float *a = host_random(nc, 1.0f), *b = host_random(nc, 1.0f), *w = host_random(C, 1.0f), *dout = host_random(nc, 1.0f);
    float *dinp0 = host_random(nc, 1.0f), *dw0 = host_random(C, 1.0f), *qkv = host_random(nq, 1.0f);
    float *gu = host_random(2 * nh, 2.0f), *dsw = host_random(nh, 1.0f);
    floatX *d_a = to_device_bf16(a, nc), *d_b = to_device_bf16(b, nc), *d_w = to_device_bf16(w, C);
    floatX *d_dout = to_device_bf16(dout, nc), *d_gu = to_device_bf16(gu, 2 * nh), *d_dsw = to_device_bf16(dsw, nh);
    RopeTable rope = rope_table_create(T, HS, LLAMA_ROPE_THETA, 0);
    floatX *out[2], *res[2], *dinp[2], *q[2], *sw[2], *dgu[2];
    float *rstd[2], *dw[2];
    for (int run = 0; run < 2; run++) {
        out[run] = (floatX*)device_malloc(nc * 2, "out");
        res[run] = (floatX*)device_malloc(nc * 2, "res");
        rstd[run] = (float*)device_malloc(N * 4, "rstd");
        dinp[run] = to_device_bf16(dinp0, nc);
        dw[run] = to_device_f32(dw0, C);
        q[run] = to_device_bf16(qkv, nq);
        sw[run] = (floatX*)device_malloc(nh * 2, "swiglu");
        dgu[run] = (floatX*)device_malloc(nh * 4, "dgateup");
        rmsnorm_forward(out[run], rstd[run], res[run], d_a, d_b, d_w, N, C, LLAMA_RMS_EPS, 0);
        rmsnorm_backward(dinp[run], dw[run], scratch, d_dout, res[run], rstd[run], d_w, N, C, 0);
        rope_forward(q[run], &rope, B, T, NH, NKV, 0);
        swiglu_forward(sw[run], d_gu, N, H, 0);
        swiglu_backward(dgu[run], d_dsw, d_gu, N, H, 0);
    }
    compare_bits("rmsnorm forward out", out[0], out[1], nc * 2);
    compare_bits("rmsnorm forward rstd", rstd[0], rstd[1], N * 4);
    compare_bits("rmsnorm backward dinp", dinp[0], dinp[1], nc * 2);
    compare_bits("rmsnorm backward dweight", dw[0], dw[1], C * 4);
    compare_bits("rope forward", q[0], q[1], nq * 2);
    compare_bits("swiglu forward", sw[0], sw[1], nh * 2);
    compare_bits("swiglu backward", dgu[0], dgu[1], nh * 4);
    free(a); free(b); free(w); free(dout); free(dinp0); free(dw0); free(qkv); free(gu); free(dsw);
    rope_table_free(&rope);
    void* bufs[] = {d_a, d_b, d_w, d_dout, d_gu, d_dsw, out[0], out[1], res[0], res[1], rstd[0], rstd[1], dinp[0], dinp[1],
                    dw[0], dw[1], q[0], q[1], sw[0], sw[1], dgu[0], dgu[1]};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

static void rmsnorm_c12(void) { rmsnorm_forward(NULL, NULL, NULL, NULL, NULL, NULL, 4, 12, LLAMA_RMS_EPS, 0); }
static void rmsnorm_backward_c100(void) { rmsnorm_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 4, 100, 0); }
static void rope_hs40(void) { RopeTable r = {NULL, NULL, 64, 40}; rope_forward(NULL, &r, 1, 64, 2, 2, 0); }
static void rope_t_past_table(void) { RopeTable r = {NULL, NULL, 64, 64}; rope_backward(NULL, &r, 1, 65, 2, 2, 0); }
static void swiglu_h100(void) { swiglu_forward(NULL, NULL, 4, 100, 0); }
static void swiglu_no_rows(void) { swiglu_backward(NULL, NULL, NULL, 0, 64, 0); }

// the public entry points die before touching the GPU (run before CUDA is initialized, so forking is safe)
static void test_unsupported_shapes(void) {
    printf("unsupported shapes are refused\n");
    CHECK(child_fails_with(rmsnorm_c12, "rmsnorm: channels C=12 must be a positive multiple of 8"), "rmsnorm C=12 dies");
    CHECK(child_fails_with(rmsnorm_backward_c100, "rmsnorm: channels C=100 must be a positive multiple of 8"), "rmsnorm backward C=100 dies");
    CHECK(child_fails_with(rope_hs40, "rope: head size HS=40 must be a positive multiple of 16"), "rope HS=40 dies");
    CHECK(child_fails_with(rope_t_past_table, "rope: sequence length T=65 must be in [1, 64]"), "rope T past the table dies");
    CHECK(child_fails_with(swiglu_h100, "swiglu: hidden size H=100 must be a positive multiple of 8"), "swiglu H=100 dies");
    CHECK(child_fails_with(swiglu_no_rows, "swiglu: rows N=0 must be positive"), "swiglu N=0 dies");
}

int main(void) {
    test_unsupported_shapes();
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: the LLaMA kernel tests need one"); }
    seed_fresh_rng();
    scratch = (float*)device_malloc(column_sums_scratch_bytes(1024), "scratch");
    test_rmsnorm(37, 448, 1.0f, false);     // odd N, the d8 width
    test_rmsnorm(3, 8, 1.0f, false);        // the narrowest row
    test_rmsnorm(256, 640, 1.0f, true);     // all-zero rows: rstd = 1 / sqrt(eps), out = 0
    test_rmsnorm(101, 1024, 300.0f, true);  // large magnitudes
    test_rmsnorm(64, 448, 1e-3f, false);    // tiny magnitudes: eps dominates mean(x^2)
    test_rope(2, 64, 4, 4, 64, 1.0f);       // multi-head
    test_rope(3, 37, 10, 5, 64, 1.0f);      // d12 heads (GQA), odd T
    test_rope(1, 1024, 16, 4, 64, 1000.0f); // d24 heads, long positions, large magnitudes
    test_rope(2, 200, 4, 2, 128, 1.0f);     // head size 128
    test_rope(1, 5, 1, 1, 16, 1.0f);        // the smallest head
    test_swiglu(37, 64, 1.0f);
    test_swiglu(256, 1216, 3.0f);           // the d8 hidden size
    test_swiglu(33, 1728, 40.0f);           // gates past +-88: expf overflows to inf, silu -> 0 without NaN
    test_channel_recompute(96, 640, 1728, 64);
    test_channel_recompute(200, 1024, 2752, 7);
    test_determinism(4, 1024, 16, 4, 64, 2752);
    cudaCheck(cudaFree(scratch));
    return test_summary("test_llama_kernels");
}
