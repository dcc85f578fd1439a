// The data-parallel layer (llmc/nccl_dp.cuh) on the GPU: all-reduce, reduce-scatter, all-gather and broadcast
// against the CPU arithmetic of llmc/zero.h, the per-layer bucket all-reduce on the comm stream, the checkpoint
// gather, and ZeRO-1 AdamW over shards against the unsharded adamw_update of llmc/adamw.cuh, bit for bit.
// Every rank contributes small integers, so sums over the ranks are exact in any order.
// World size 1 by default, through a rendezvous file in a fresh temporary folder. W processes on one node:
//   ./build/test_nccl_dp --rank R --world W --rendezvous FILE   (one per GPU)   or   mpirun -np W ./build/test_nccl_dp
#include "llmc/cli.h"
#include "llmc/nccl_dp.cuh"
#include "llmc/gpt2_config.h"
#include "dev/test/test_common.h"
#include "dev/cuda/test_transfer.cuh"

static DataParallel dp;
static cudaStream_t stream;
static const GPT2Config tiny = {8, 100, 128, 1, 1, 4};      // 796 parameters: most shards at W = 16 are padding
static const GPT2Config small = {64, 300, 384, 2, 4, 64};   // tensors split across shard boundaries

// rank r's value at element i: a small integer
static float contribution(size_t i, int r) { return (float)((int)((i * 7 + (size_t)r * 13) % 17) - 8); }

// the sum of contribution(i, r) over the ranks, exact
static float contribution_sum(size_t i) {
    float s = 0.0f;
    for (int r = 0; r < dp.world_size; r++) { s += contribution(i, r); }
    return s;
}

// host vector of `alloc` floats: rank r's contributions below n, zero above
static float* contributions(size_t n, size_t alloc, int r) {
    float* h = (float*)calloc_check(alloc, sizeof(float));
    for (size_t i = 0; i < n; i++) { h[i] = contribution(i, r); }
    return h;
}

static void test_all_reduce(size_t n) {
    float* h = contributions(n, n, dp.rank);
    float* d = to_device_f32(h, n);
    dp_all_reduce(&dp, d, n, stream);
    float* got = from_device_f32(d, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) { bad += got[i] != contribution_sum(i); }
    CHECK(bad == 0, "all-reduce of %zu floats: %zu elements differ from the CPU sum", n, bad);
    free(h); free(got); cudaCheck(cudaFree(d));
}

static void test_reduce_scatter(size_t n) {
    ZeroShard sh = zero_shard(n, dp.world_size, dp.rank);
    float* h = contributions(n, sh.padded, dp.rank);
    float* d = to_device_f32(h, sh.padded);
    dp_reduce_scatter(&dp, d, &sh, stream);
    float* got = from_device_f32(d, sh.padded);
    size_t bad = 0;
    for (size_t j = 0; j < sh.size; j++) {
        size_t i = sh.start + j;
        bad += got[i] != (i < n ? contribution_sum(i) : 0.0f);
    }
    CHECK(bad == 0, "reduce-scatter of %zu floats: %zu elements of this rank's shard differ from the CPU sum", n, bad);
    free(h); free(got); cudaCheck(cudaFree(d));
}

// the padded BF16 vector starts with only this rank's shard set (the rest poisoned); afterwards it is whole
static void test_all_gather(size_t n) {
    ZeroShard sh = zero_shard(n, dp.world_size, dp.rank);
    float* want = contributions(n, sh.padded, 0);
    floatX* d = to_device_bf16(want, sh.padded);
    cudaCheck(cudaMemset(d, 0xff, sh.start * sizeof(floatX)));
    cudaCheck(cudaMemset(d + sh.start + sh.size, 0xff, (sh.padded - sh.start - sh.size) * sizeof(floatX)));
    dp_all_gather(&dp, d, d + sh.start, &sh, ncclBfloat16, stream);
    float* got = from_device_bf16(d, sh.padded);
    CHECK(memcmp(got, want, sh.padded * sizeof(float)) == 0, "in-place BF16 all-gather of %zu elements", n);
    free(want); free(got); cudaCheck(cudaFree(d));
}

static void test_broadcast(size_t bytes) {
    unsigned char* h = (unsigned char*)malloc_check(bytes);
    for (size_t i = 0; i < bytes; i++) { h[i] = dp.rank == 0 ? (unsigned char)(i * 31 + 7) : 0; }
    unsigned char* d = (unsigned char*)device_malloc(bytes, "broadcast buffer");
    cudaCheck(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    dp_broadcast(&dp, d, bytes, stream);
    unsigned char* got = (unsigned char*)download(d, bytes);
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i++) { bad += got[i] != (unsigned char)(i * 31 + 7); }
    CHECK(bad == 0, "broadcast of %zu bytes from rank 0: %zu differ", bytes, bad);
    free(h); free(got); cudaCheck(cudaFree(d));
}

// a value is the same on all ranks exactly when every rank passes the same one
static void test_same_on_all_ranks(void) {
    uint32_t* d = (uint32_t*)device_malloc(2 * sizeof(uint32_t), "agreement scratch");
    CHECK(dp_same_on_all_ranks(&dp, 0x9e3779b9u, d, stream), "the same value on every rank agrees");
    CHECK(dp_same_on_all_ranks(&dp, 0u, d, stream) && dp_same_on_all_ranks(&dp, 0xffffffffu, d, stream), "0 and ~0 agree");
    if (dp.world_size > 1) {
        CHECK(!dp_same_on_all_ranks(&dp, (uint32_t)dp.rank, d, stream), "one value per rank does not agree");
        CHECK(!dp_same_on_all_ranks(&dp, dp.rank == 1 ? 5u : 7u, d, stream), "one rank apart does not agree");
    }
    cudaCheck(cudaFree(d));
}

// the trainer's backward in miniature: gradients appear bucket by bucket on the compute stream (blocks L-1 .. 0,
// then wte/wpe/lnf), each bucket is reduced on the comm stream right away; two steps reuse the events
static void test_bucket_overlap(const GPT2Config* c) {
    size_t n = gpt2_num_params(c);
    ParamTable t;
    gpt2_param_table(c, &t);
    float* h = contributions(n, n, dp.rank);
    float* produced = to_device_f32(h, n);
    float* grads = (float*)device_malloc(n * sizeof(float), "gradients");
    int L = c->num_layers;
    for (int step = 0; step < 2; step++) {
        cudaCheck(cudaMemsetAsync(grads, 0x7f, n * sizeof(float), stream));   // stale values must never be reduced
        for (int i = 0; i <= L; i++) {
            int bucket = i < L ? L - 1 - i : L;
            FlatRange r[MAX_PARAM_TENSORS];
            int k = bucket_ranges(&t, bucket, r);
            for (int j = 0; j < k; j++) {
                cudaCheck(cudaMemcpyAsync(grads + r[j].offset, produced + r[j].offset, r[j].count * sizeof(float),
                                          cudaMemcpyDeviceToDevice, stream));
            }
            dp_reduce_bucket_async(&dp, grads, &t, bucket, stream);
        }
        dp_wait_reductions(&dp, stream);
        float* got = from_device_f32(grads, n);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) { bad += got[i] != contribution_sum(i); }
        CHECK(bad == 0, "bucketed all-reduce on the comm stream, step %d, %zu params: %zu differ", step, n, bad);
        free(got);
    }
    free(h); cudaCheck(cudaFree(produced)); cudaCheck(cudaFree(grads));
}

// the optimizer state of one test: FP32 master, gradients, m, v on the host, the same on every rank
typedef struct { float *master, *grads, *m, *v; size_t n; } HostState;

static HostState random_state(const GPT2Config* c, uint64_t seed) {
    HostState s;
    s.n = gpt2_num_params(c);
    float** vecs[4] = {&s.master, &s.grads, &s.m, &s.v};
    const float scales[4] = {0.05f, 0.3f, 0.01f, 1e-3f};
    Rng rng;
    rng_seed(&rng, seed);
    for (int k = 0; k < 4; k++) {
        *vecs[k] = (float*)malloc_check(s.n * sizeof(float));
        for (size_t i = 0; i < s.n; i++) {
            float x = scales[k] * rng_normal(&rng);
            (*vecs[k])[i] = k == 3 ? x * x : x;   // v is a mean of squares
        }
    }
    return s;
}

static void free_state(HostState* s) { free(s->master); free(s->grads); free(s->m); free(s->v); }

// the reference: the trainer's unsharded update, adamw_update on every tensor of the whole vector, on the device
typedef struct { uint16_t* params; float *master, *m, *v; float norm; } Reference;

static Reference reference_step(const GPT2Config* c, const HostState* s, const AdamWConfig* a) {
    size_t n = s->n, sizes[NUM_PARAMETER_TENSORS], off = 0;
    gpt2_param_sizes(c, sizes);
    floatX* params = to_device_bf16(s->master, n);
    float *master = to_device_f32(s->master, n), *grads = to_device_f32(s->grads, n);
    float *m = to_device_f32(s->m, n), *v = to_device_f32(s->v, n);
    float* scratch = (float*)device_malloc((norm_blocks + 1) * sizeof(float), "norm scratch");
    Reference ref;
    global_norm(scratch, grads, n, stream);
    cudaCheck(cudaMemcpyAsync(&ref.norm, scratch + norm_blocks, sizeof(float), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    float scale = (a->grad_clip > 0.0f && ref.norm > a->grad_clip) ? a->grad_clip / ref.norm : 1.0f;
    for (int t = 0; t < NUM_PARAMETER_TENSORS; t++) {
        float wd = gpt2_param_decays(t) ? a->weight_decay : 0.0f;
        adamw_update(params + off, master + off, grads + off, m + off, v + off, sizes[t], a->lr, a->beta1, a->beta2,
                     a->step, a->eps, wd, scale, stream);
        off += sizes[t];
    }
    ref.params = (uint16_t*)download(params, n * sizeof(floatX));
    ref.master = from_device_f32(master, n);
    ref.m = from_device_f32(m, n);
    ref.v = from_device_f32(v, n);
    void* bufs[] = {params, master, grads, m, v, scratch};
    for (int i = 0; i < 6; i++) { cudaCheck(cudaFree(bufs[i])); }
    return ref;
}

static void free_reference(Reference* r) { free(r->params); free(r->master); free(r->m); free(r->v); }

// the device buffers of one rank under ZeRO-1: padded BF16 params (poisoned) and gradients, shards of master, m, v
typedef struct { floatX* params; float *grads, *master, *m, *v; } ShardBuffers;

static ShardBuffers upload_shards(const HostState* s, const ZeroShard* sh) {
    ShardBuffers b;
    b.params = (floatX*)device_malloc(sh->padded * sizeof(floatX), "params");
    cudaCheck(cudaMemset(b.params, 0xff, sh->padded * sizeof(floatX)));
    float* g = (float*)calloc_check(sh->padded, sizeof(float));
    memcpy(g, s->grads, s->n * sizeof(float));
    b.grads = to_device_f32(g, sh->padded);
    free(g);
    float** shards[3] = {&b.master, &b.m, &b.v};
    const float* full[3] = {s->master, s->m, s->v};
    for (int k = 0; k < 3; k++) {
        *shards[k] = (float*)device_malloc(sh->size * sizeof(float), "optimizer shard");
        zero_upload_shard(*shards[k], full[k], sh);
    }
    return b;
}

static void free_shards(ShardBuffers* b) {
    void* bufs[] = {b->params, b->grads, b->master, b->m, b->v};
    for (int i = 0; i < 5; i++) { cudaCheck(cudaFree(bufs[i])); }
}

// 1 when the shard's master, m, v equal the reference bit for bit
static int shard_state_matches(const ShardBuffers* b, const ZeroShard* sh, const Reference* ref) {
    const float* dev[3] = {b->master, b->m, b->v};
    const float* want[3] = {ref->master, ref->m, ref->v};
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        float* got = from_device_f32(dev[k], sh->size);
        ok = ok && memcmp(got, want[k] + sh->start, sh->valid * sizeof(float)) == 0;
        free(got);
    }
    return ok;
}

// zero_adamw_update on every shard of virtual world sizes, one shard at a time: each equals its slice of the
// unsharded update, and leaves the BF16 parameters outside its shard alone
static void test_zero_adamw_shards(const GPT2Config* c) {
    HostState s = random_state(c, 11);
    AdamWConfig a = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.0f, 3};
    Reference ref = reference_step(c, &s, &a);
    ParamTable t;
    gpt2_param_table(c, &t);
    const int worlds[] = {1, 2, 3, 5, 16};
    for (int w = 0; w < 5; w++) {
        int ok = 1;
        for (int r = 0; r < worlds[w]; r++) {
            ZeroShard sh = zero_shard(s.n, worlds[w], r);
            ShardBuffers b = upload_shards(&s, &sh);
            zero_adamw_update(&sh, &t, b.params, b.master, b.grads, b.m, b.v, &a, 1.0f, stream);   // no clipping (grad_clip 0), as in the reference
            uint16_t* p = (uint16_t*)download(b.params, sh.padded * sizeof(floatX));
            for (size_t i = 0; i < sh.padded; i++) {
                int inside = i >= sh.start && i < sh.start + sh.valid;
                ok = ok && (inside ? p[i] == ref.params[i] : p[i] == 0xffff);
            }
            ok = ok && shard_state_matches(&b, &sh, &ref);
            free(p);
            free_shards(&b);
        }
        CHECK(ok, "ZeRO AdamW over the %d shards of %zu params equals the unsharded update bit for bit", worlds[w], s.n);
    }
    free_reference(&ref);
    free_state(&s);
}

// dp_zero_step at the real world size vs global_norm + the unsharded update. Bit for bit whenever the clip scale
// is the same (world size 1, or no clipping); otherwise the norm agrees to 1e-5. Then the checkpoint gather of
// master, m and v through the idle gradient buffer gives rank 0 the full reference vectors.
static void test_zero_step(const GPT2Config* c, float grad_clip) {
    HostState s = random_state(c, 23);
    AdamWConfig a = {6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, grad_clip, 7};
    Reference ref = reference_step(c, &s, &a);
    ParamTable t;
    gpt2_param_table(c, &t);
    ZeroShard sh = zero_shard(s.n, dp.world_size, dp.rank);
    ShardBuffers b = upload_shards(&s, &sh);
    float* scratch = (float*)device_malloc((norm_blocks + 1) * sizeof(float), "norm scratch");
    float norm = dp_zero_step(&dp, &sh, &t, b.params, b.master, b.grads, b.m, b.v, scratch, &a, stream);
    int exact = dp.world_size == 1 || grad_clip == 0.0f;
    CHECK(exact ? norm == ref.norm : fabsf(norm - ref.norm) <= 1e-5f * ref.norm, "grad norm %.9g, reference %.9g", norm, ref.norm);
    if (exact) {
        uint16_t* p = (uint16_t*)download(b.params, s.n * sizeof(floatX));
        CHECK(memcmp(p, ref.params, s.n * sizeof(floatX)) == 0, "ZeRO step (clip %g) + all-gather: BF16 params bit for bit", grad_clip);
        free(p);
        float* full = dp.rank == 0 ? (float*)malloc_check(s.n * sizeof(float)) : NULL;
        const float* shards[3] = {b.master, b.m, b.v};
        const float* want[3] = {ref.master, ref.m, ref.v};
        int ok = 1;
        for (int k = 0; k < 3; k++) {
            dp_download_full(&dp, full, shards[k], b.grads, &sh, stream);
            ok = ok && (dp.rank != 0 || memcmp(full, want[k], s.n * sizeof(float)) == 0);
        }
        CHECK(ok, "master, m and v gathered for a checkpoint equal the unsharded update bit for bit");
        free(full);
    }
    cudaCheck(cudaFree(scratch));
    free_shards(&b);
    free_reference(&ref);
    free_state(&s);
}

int main(int argc, char** argv) {
    DPOptions o = {-1, -1, NULL, RENDEZVOUS_TIMEOUT_S};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) { die("flag %s needs a value", argv[i]); }
        if (strcmp(argv[i], "--rank") == 0) { o.rank = (int)parse_int(argv[i], argv[i + 1], 0, 1 << 20); }
        else if (strcmp(argv[i], "--world") == 0) { o.world_size = (int)parse_int(argv[i], argv[i + 1], 1, 1 << 20); }
        else if (strcmp(argv[i], "--rendezvous") == 0) { o.rendezvous = argv[i + 1]; }
        else { die("unknown flag %s (usage: %s [--rank R --world W --rendezvous FILE])", argv[i], argv[0]); }
    }
    char dir[] = "/tmp/test_nccl_dp_XXXXXX", file[64];
    int own_file = o.rendezvous == NULL && o.world_size <= 1 && rendezvous_mpirun_world() == 0;
    if (own_file) {
        if (mkdtemp(dir) == NULL) { die("cannot create a temporary directory"); }
        snprintf(file, sizeof(file), "%s/nccl_id", dir);
        o.rendezvous = file;
    }
    dp_init(&dp, &o);
    if (own_file && rmdir(dir) != 0) { printf("warning: could not remove %s\n", dir); }
    printf("rank %d of %d on GPU %d%s\n", dp.rank, dp.world_size, dp.local_rank, dp.use_mpi ? " (MPI)" : "");
    cudaCheck(cudaStreamCreate(&stream));
    const size_t sizes[] = {1, 1000, 3 * 1024 * 1024 + 5};
    for (int i = 0; i < 3; i++) {
        test_all_reduce(sizes[i]);
        test_reduce_scatter(sizes[i]);
        test_all_gather(sizes[i]);
    }
    test_broadcast(4097);
    test_same_on_all_ranks();
    test_bucket_overlap(&tiny);
    test_bucket_overlap(&small);
    test_zero_adamw_shards(&tiny);
    test_zero_adamw_shards(&small);
    test_zero_step(&small, 0.0f);
    test_zero_step(&small, 0.5f);
    cudaCheck(cudaStreamDestroy(stream));
    dp_free(&dp);
    return test_summary("test_nccl_dp");
}
