// The wgmma flash attention kernels (llmc/flash_attention.cuh: TMA loads, warpgroup MMA; flash_attention_*_hs<HS,
// true>, head sizes 64 and 128) against the FP32 CPU reference (dev/cuda/attention_reference.cuh) and against the
// mma.sync kernels, on fresh random BF16 inputs: multi-head and grouped-query, T not a multiple of the tiles, large
// magnitudes, all-zero input; two runs give identical bits. Tolerances as test_flash_attention: out 1e-2 of the largest
// |want| + 1/64 relative, dqkv 2e-2 + 1/32, lse 2e-5. With the argument "bench" it then prints the forward and backward
// times of both kernel sets at T = 1024: the GPT-2 shapes and head size 128 at C = 1024 and 2048 (median of 20);
// "bench-only" prints those times without the tests (dev/ab_flash.sh); "profile" runs only the d24 shape's wgmma
// kernels, twice, for a profiler; "digest" prints hashes of the wgmma kernels' outputs on fixed inputs (to compare two
// builds bit for bit). Needs an sm_90 GPU; built for sm_90a (Makefile).
#include "llmc/cuda_common.cuh"
#include "llmc/flash_attention.cuh"
#include "dev/cuda/attention_reference.cuh"
#include "dev/cuda/bench_common.cuh"

// out, lse, dqkv of one instance (wgmma or mma.sync), run twice: the two runs must give identical bits
template <int HS, bool WG>
static void run_instance(floatX* d_out, float* d_lse, floatX* d_dqkv, const floatX* d_qkv, const floatX* d_dout, float* d_delta,
                         int B, int T, int NH, int NKV, size_t nout, size_t nlse, size_t nqkv) {
    floatX *out2 = (floatX*)device_malloc(nout * 2, "out2"), *dqkv2 = (floatX*)device_malloc(nqkv * 2, "dqkv2");
    float* lse2 = (float*)device_malloc(nlse * 4, "lse2");
    void* poisoned[] = {d_out, d_dqkv, d_lse};   // every element must be written
    size_t bytes[] = {nout * 2, nqkv * 2, nlse * 4};
    for (int i = 0; i < 3; i++) { cudaCheck(cudaMemset(poisoned[i], 0xff, bytes[i])); }
    flash_attention_forward_hs<HS, WG>(d_out, d_lse, d_qkv, B, T, NH, NKV, 0);
    flash_attention_backward_hs<HS, WG>(d_dqkv, d_delta, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, 0);
    flash_attention_forward_hs<HS, WG>(out2, lse2, d_qkv, B, T, NH, NKV, 0);
    flash_attention_backward_hs<HS, WG>(dqkv2, d_delta, d_dout, d_qkv, out2, lse2, B, T, NH, NKV, 0);
    const char* name = WG ? "wgmma" : "mma.sync";
    char what[64];
    snprintf(what, sizeof(what), "%s out: two runs", name);
    compare_bits(what, d_out, out2, nout * 2);
    snprintf(what, sizeof(what), "%s dqkv: two runs", name);
    compare_bits(what, d_dqkv, dqkv2, nqkv * 2);
    cudaCheck(cudaFree(out2)); cudaCheck(cudaFree(dqkv2)); cudaCheck(cudaFree(lse2));
}

template <int HS>
static void test_wgmma(int B, int T, int NH, int NKV, float scale) {
    printf("wgmma attention B=%d T=%d NH=%d NKV=%d HS=%d input scale %g\n", B, T, NH, NKV, HS, scale);
    AttentionReference cpu = attention_reference(B, T, NH, NKV, HS, scale);
    size_t nqkv = cpu.nqkv, nout = cpu.nout, nlse = cpu.nlse;
    // the instances' outputs: [0] wgmma, [1] mma.sync
    floatX *d_out[2], *d_dqkv[2];
    float* d_lse[2];
    for (int i = 0; i < 2; i++) {
        d_out[i] = (floatX*)device_malloc(nout * 2, "out");
        d_dqkv[i] = (floatX*)device_malloc(nqkv * 2, "dqkv");
        d_lse[i] = (float*)device_malloc(nlse * 4, "lse");
    }
    float* d_delta = (float*)device_malloc(flash_attention_delta_floats(B, T, NH) * 4, "delta");
    run_instance<HS, true>(d_out[0], d_lse[0], d_dqkv[0], cpu.d_qkv, cpu.d_dout, d_delta, B, T, NH, NKV, nout, nlse, nqkv);
    run_instance<HS, false>(d_out[1], d_lse[1], d_dqkv[1], cpu.d_qkv, cpu.d_dout, d_delta, B, T, NH, NKV, nout, nlse, nqkv);
    compare("wgmma out vs CPU", from_device_bf16(d_out[0], nout), cpu.out, nout, 1e-2f, 1.0f / 64);
    compare("wgmma lse vs CPU", from_device_f32(d_lse[0], nlse), cpu.lse, nlse, 2e-5f, 0.0f);
    compare("wgmma dqkv vs CPU", from_device_bf16(d_dqkv[0], nqkv), cpu.dqkv, nqkv, 2e-2f, 1.0f / 32);
    float *ref = from_device_bf16(d_out[1], nout), *ref_dqkv = from_device_bf16(d_dqkv[1], nqkv);
    compare("wgmma out vs mma.sync", from_device_bf16(d_out[0], nout), ref, nout, 1e-2f, 1.0f / 64);
    compare("wgmma dqkv vs mma.sync", from_device_bf16(d_dqkv[0], nqkv), ref_dqkv, nqkv, 2e-2f, 1.0f / 32);
    void *a = download(d_dqkv[0], nqkv * 2), *r = download(d_dqkv[1], nqkv * 2);
    void *ao = download(d_out[0], nout * 2), *ro = download(d_out[1], nout * 2);
    printf("  bits: forward wgmma %s mma.sync, backward wgmma %s mma.sync\n", memcmp(ao, ro, nout * 2) == 0 ? "==" : "!=",
           memcmp(a, r, nqkv * 2) == 0 ? "==" : "!=");
    free(a); free(r); free(ao); free(ro); free(ref); free(ref_dqkv);
    attention_reference_free(&cpu);
    for (int i = 0; i < 2; i++) { cudaCheck(cudaFree(d_out[i])); cudaCheck(cudaFree(d_dqkv[i])); cudaCheck(cudaFree(d_lse[i])); }
    cudaCheck(cudaFree(d_delta));
}

// one attention call's device buffers at (B, T, NH, NKV, HS): qkv and dout random BF16 from the given seeds and
// scales, out, dqkv, lse and delta for the kernels to write
struct AttentionBuffers {
    floatX *qkv, *dout, *out, *dqkv;
    float *lse, *delta;
    size_t nqkv, nout, nlse;
};

static AttentionBuffers attention_buffers(int B, int T, int NH, int NKV, int HS, uint32_t qkv_seed, float qkv_scale,
                                          uint32_t dout_seed, float dout_scale) {
    AttentionBuffers a;
    a.nqkv = (size_t)B * T * (NH + 2 * NKV) * HS, a.nout = (size_t)B * T * NH * HS, a.nlse = (size_t)B * NH * T;
    a.qkv = random_bf16(a.nqkv, qkv_seed, qkv_scale), a.dout = random_bf16(a.nout, dout_seed, dout_scale);
    a.out = (floatX*)device_malloc(a.nout * 2, "out"), a.dqkv = (floatX*)device_malloc(a.nqkv * 2, "dqkv");
    a.lse = (float*)device_malloc(a.nlse * 4, "lse");
    a.delta = (float*)device_malloc(flash_attention_delta_floats(B, T, NH) * 4, "delta");
    return a;
}

static void attention_buffers_free(AttentionBuffers* a) {
    void* bufs[] = {a->qkv, a->dout, a->out, a->dqkv, a->lse, a->delta};
    for (int k = 0; k < 6; k++) { cudaCheck(cudaFree(bufs[k])); }
}

// forward and backward ms of both instances at T = 1024 for B, NH and head size HS (multi-head); TFLOP/s of the causal
// half (the backward's counted as 2.5 forwards); speed-ups of wgmma against mma.sync
template <int HS>
static void bench_shape(int B, int NH, int reps) {
    int T = 1024;
    AttentionBuffers a = attention_buffers(B, T, NH, NH, HS, 1, 2.0f, 2, 2.0f);
    double fwd = 4.0 * B * NH * (double)T * T * HS / 2, bwd = 2.5 * fwd;
    float f0 = time_ms([&] { flash_attention_forward_hs<HS, false>(a.out, a.lse, a.qkv, B, T, NH, NH, 0); }, reps);
    float b0 = time_ms([&] { flash_attention_backward_hs<HS, false>(a.dqkv, a.delta, a.dout, a.qkv, a.out, a.lse, B, T, NH, NH, 0); }, reps);
    float f1 = time_ms([&] { flash_attention_forward_hs<HS, true>(a.out, a.lse, a.qkv, B, T, NH, NH, 0); }, reps);
    float b1 = time_ms([&] { flash_attention_backward_hs<HS, true>(a.dqkv, a.delta, a.dout, a.qkv, a.out, a.lse, B, T, NH, NH, 0); }, reps);
    char shape[48];
    snprintf(shape, sizeof(shape), "%d, %d, %d, %d", B, T, NH, HS);
    printf("| %s | forward | %.3f | %.0f | %.3f | %.0f | %.2fx |\n", shape, f0, fwd / f0 / 1e9, f1, fwd / f1 / 1e9, f0 / f1);
    printf("| %s | backward | %.3f | %.0f | %.3f | %.0f | %.2fx |\n", shape, b0, bwd / b0 / 1e9, b1, bwd / b1 / 1e9, b0 / b1);
    printf("| %s | forward + backward | %.3f | | %.3f | | %.2fx |\n", shape, f0 + b0, f1 + b1, (f0 + b0) / (f1 + b1));
    attention_buffers_free(&a);
}

// the d24 shape's wgmma forward and backward, twice, and nothing else: a clean target for ncu / nsys
// (ncu -k regex:"flash_(forward|backward_dkdv|backward_dq)" --launch-skip 3 ./build/test_flash_wgmma profile)
static void profile_d24(void) {
    int B = 32, T = 1024, NH = 16;
    AttentionBuffers a = attention_buffers(B, T, NH, NH, 64, 1, 2.0f, 2, 2.0f);
    for (int i = 0; i < 2; i++) {
        flash_attention_forward_hs<64, true>(a.out, a.lse, a.qkv, B, T, NH, NH, 0);
        flash_attention_backward_hs<64, true>(a.dqkv, a.delta, a.dout, a.qkv, a.out, a.lse, B, T, NH, NH, 0);
    }
    cudaCheck(cudaDeviceSynchronize());
    attention_buffers_free(&a);
}

// 64-bit FNV-1a of n bytes of device memory
static uint64_t device_fnv1a(const void* d, size_t n) {
    unsigned char* h = (unsigned char*)download(d, n);
    uint64_t x = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { x = (x ^ h[i]) * 1099511628211ull; }
    free(h);
    return x;
}

// the wgmma kernels' out, lse and dqkv at T = 1024 and an odd T, multi-head and grouped-query, on fixed inputs, as
// hashes: two builds whose kernels should agree bit for bit print the same lines
template <int HS>
static void digest_shape(int B, int T, int NH, int NKV) {
    AttentionBuffers a = attention_buffers(B, T, NH, NKV, HS, 11, 4.0f, 12, 1.0f);
    flash_attention_forward_hs<HS, true>(a.out, a.lse, a.qkv, B, T, NH, NKV, 0);
    flash_attention_backward_hs<HS, true>(a.dqkv, a.delta, a.dout, a.qkv, a.out, a.lse, B, T, NH, NKV, 0);
    cudaCheck(cudaDeviceSynchronize());
    printf("digest B=%d T=%d NH=%d NKV=%d HS=%d: out %016llx lse %016llx dqkv %016llx\n", B, T, NH, NKV, HS,
           (unsigned long long)device_fnv1a(a.out, a.nout * 2), (unsigned long long)device_fnv1a(a.lse, a.nlse * 4),
           (unsigned long long)device_fnv1a(a.dqkv, a.nqkv * 2));
    attention_buffers_free(&a);
}

static void digest(void) {
    digest_shape<64>(2, 1024, 12, 12);
    digest_shape<64>(1, 200, 8, 2);
    digest_shape<128>(2, 1024, 8, 2);
    digest_shape<128>(1, 200, 4, 4);
}

static void bench(int reps) {
    printf("\n| B, T, NH, HS | pass | mma.sync ms | TFLOP/s | wgmma ms | TFLOP/s | speed-up |\n|---|---|---:|---:|---:|---:|---:|\n");
    bench_shape<64>(64, 12, reps);    // d12 B64
    bench_shape<64>(32, 16, reps);    // d24 B32
    bench_shape<64>(16, 25, reps);    // d48 B16
    bench_shape<128>(32, 8, reps);    // C = 1024 in heads of 128
    bench_shape<128>(16, 16, reps);   // C = 2048
}

int main(int argc, char** argv) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: the wgmma attention test needs one"); }
    seed_fresh_rng();
    if (argc > 1 && strcmp(argv[1], "profile") == 0) { profile_d24(); return 0; }
    if (argc > 1 && strcmp(argv[1], "bench-only") == 0) { bench(20); return 0; }
    if (argc > 1 && strcmp(argv[1], "digest") == 0) { digest(); return 0; }
    test_wgmma<64>(2, 64, 2, 2, 1.0f);
    test_wgmma<64>(1, 200, 4, 4, 1.0f);      // T not a multiple of the tiles
    test_wgmma<64>(1, 8, 1, 1, 1.0f);        // the smallest T
    test_wgmma<64>(2, 1024, 12, 12, 1.0f);
    test_wgmma<64>(2, 256, 12, 12, 8.0f);    // large magnitudes: nearly one-hot probabilities
    test_wgmma<64>(2, 192, 2, 2, 0.0f);      // all-zero qkv: uniform probabilities, dq = dk = 0
    test_wgmma<64>(2, 200, 10, 5, 1.0f);     // grouped-query, groups of 2
    test_wgmma<64>(1, 256, 16, 4, 1.0f);     // groups of 4
    test_wgmma<64>(1, 136, 8, 1, 8.0f);      // one kv head, large magnitudes
    test_wgmma<128>(2, 136, 2, 2, 1.0f);     // head size 128, T not a multiple of the tiles
    test_wgmma<128>(1, 1024, 8, 8, 1.0f);
    test_wgmma<128>(1, 128, 2, 2, 8.0f);     // large magnitudes
    test_wgmma<128>(2, 136, 8, 1, 1.0f);     // one kv head
    test_wgmma<128>(1, 200, 8, 2, 1.0f);     // groups of 4
    test_wgmma<128>(1, 64, 6, 2, 0.0f);      // all-zero qkv, groups of 3
    if (argc > 1 && strcmp(argv[1], "bench") == 0) { bench(20); }
    return test_summary("test_flash_wgmma");
}
