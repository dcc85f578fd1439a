// Data-parallel training over NCCL, one process per GPU: the launch (rank, world size and GPU, from mpirun, or
// flags and a rendezvous file on one node, llmc/rendezvous.h), the check that all ranks agree on the run
// (llmc/agreement.h), the communicator, in-place collectives, the per-layer gradient all-reduce on a side stream
// that overlaps the backward pass, and the ZeRO-1 optimizer step: AdamW m, v and the FP32 master weights are
// sharded (llmc/zero.h), each rank updates its shard, then the BF16 parameters are all-gathered. World size 1 runs
// through the same code: a one-rank communicator turns every collective into a copy, and the step equals the
// unsharded AdamW bit for bit.
// Failures reach every rank: the communicator is non-blocking; its creation waits at most the rendezvous timeout,
// and from then on a watchdog thread polls NCCL's asynchronous error and, without MPI, the rendezvous channel (a
// rank that stopped, a rank process that is gone, a rank whose heartbeat has not advanced for RENDEZVOUS_SILENT_S)
// every DP_WATCHDOG_POLL_US; on a failure it prints the cause, tells the other ranks when the cause is its own
// finding, aborts the communicator and exits non-zero, within DP_ABORT_GRACE_S at most. die() on a rank reaches the
// others through the rendezvous error file, or MPI_Abort under mpirun (mpirun also ends the job when a rank exits
// non-zero). So every rank stops with the cause within about DP_ABORT_GRACE_S of a known failure on one rank, and
// without MPI within RENDEZVOUS_SILENT_S + DP_ABORT_GRACE_S of a rank that stopped running (SIGSTOP, a debugger).
// MPI is compiled in only with -DUSE_MPI (the Makefile sets it when mpicc works).
#ifndef LLMC_NCCL_DP_CUH
#define LLMC_NCCL_DP_CUH

#include <pthread.h>
#include <nccl.h>
#ifdef USE_MPI
#define OMPI_SKIP_MPICXX 1    // the C API only, without the deprecated C++ bindings
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
#include "cuda_common.cuh"
#include "adamw.cuh"
#include "param_table.h"
#include "zero.h"
#include "rendezvous.h"
#include "agreement.h"

#define DP_WATCHDOG_POLL_US 100000   // 0.1 s
#define DP_ABORT_GRACE_S 10          // the longest a failing rank spends aborting its communicator before exiting

// dies with NCCL's message when r is an error
static inline void nccl_check_(ncclResult_t r, const char* file, int line) {
    if (r != ncclSuccess) { die("NCCL: %s (%s) [%s:%d]", ncclGetErrorString(r), ncclGetLastError(NULL), file, line); }
}
#define ncclCheck(r) nccl_check_((r), __FILE__, __LINE__)

#ifdef USE_MPI
// dies with MPI's message when err is an error
static inline void mpi_check_(int err, const char* file, int line) {
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        die("MPI: %s [%s:%d]", msg, file, line);
    }
}
#define mpiCheck(err) mpi_check_((err), __FILE__, __LINE__)

// under mpirun, die() ends the whole job: every rank stops at once
static inline void dp_mpi_die_hook(const char* message) {
    (void)message;
    MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
}
#endif

typedef struct {
    int rank, world_size;       // from the command line, -1 = not given
    const char* rendezvous;     // file for the communicator id when started without mpirun, or NULL
    double timeout_s;           // how long ranks wait for each other at the rendezvous and for the communicator
} DPOptions;

typedef struct {
    int rank, world_size, local_rank;   // local_rank: index among this node's processes = its GPU
    int use_mpi;                        // launched through MPI, finalized by dp_free
    int use_file;                       // ranks meet through the rendezvous file rz
    Rendezvous rz;
    double timeout_s;
    ncclComm_t comm;
    cudaStream_t comm_stream;           // gradient buckets are reduced here, overlapping the backward pass
    cudaEvent_t grads_ready;            // recorded on the compute stream when a bucket is final
    cudaEvent_t comm_done;              // recorded on the comm stream after the last bucket
    float* barrier_buf;                 // one float for the final barrier
    cudaEvent_t finished;               // recorded after the final barrier: peers that exit after it are no failure
    volatile int finishing;             // dp_free started the final barrier
    volatile int finished_recorded;     // ... and recorded `finished` after it
    volatile int watchdog_stop;
    pthread_t watchdog;
} DataParallel;

typedef struct { float lr, beta1, beta2, eps, weight_decay, grad_clip; int step; } AdamWConfig;

// Waits while the non-blocking communicator works on the last call (r == ncclInProgress) and returns its final
// state. Creation waits at most timeout_s (< 0: no bound; the watchdog guards the later calls) and polls the
// rendezvous for failed ranks; on timeout the communicator is aborted and this rank dies.
static inline ncclResult_t dp_settle(DataParallel* dp, ncclResult_t r, double timeout_s) {
    double t0 = rendezvous_now();
    while (r == ncclInProgress) {
        if (ncclCommGetAsyncError(dp->comm, &r) != ncclSuccess) { break; }
        if (r != ncclInProgress || timeout_s < 0.0) { continue; }
        if (dp->use_file) { rendezvous_check_peers(&dp->rz); }
        if (rendezvous_now() - t0 > timeout_s) {
            ncclCommAbort(dp->comm);
            die("rank %d of %d: the NCCL communicator was not ready after %.1f s: is every rank running, and can they "
                "reach each other?", dp->rank, dp->world_size, timeout_s);
        }
        usleep(1000);
    }
    return r;
}

// every NCCL call on the communicator: waits when it is in progress, dies on an error
static inline void dp_check_(DataParallel* dp, ncclResult_t r, const char* file, int line) {
    nccl_check_(dp_settle(dp, r, -1.0), file, line);
}
#define dpCheck(dp, r) dp_check_((dp), (r), __FILE__, __LINE__)

// the watchdog's end of the run: prints the cause, tells the other ranks when it is this rank's (report), aborts
// the communicator (bounded by an alarm) and exits non-zero
static inline void dp_watchdog_fail(DataParallel* dp, const char* cause, int report) {
    fprintf(stderr, "error: rank %d of %d stops: %s\n", dp->rank, dp->world_size, cause);
    if (dp->use_file) {   // a cause from another rank is not reported again, nor what the abort makes the main thread say
        if (report) { rendezvous_report(&dp->rz, cause); }
        dp->rz.reported = 1;
    }
    alarm(DP_ABORT_GRACE_S);   // SIGALRM ends the process if the abort hangs
    ncclCommAbort(dp->comm);
    _exit(EXIT_FAILURE);
}

// 1 once every rank passed the final barrier (waits up to DP_ABORT_GRACE_S for it when dp_free started it): a peer
// that exits then has finished, not failed
static inline int dp_peers_finished(DataParallel* dp) {
    double t0 = rendezvous_now();
    while (dp->finishing && rendezvous_now() - t0 < DP_ABORT_GRACE_S) {
        if (dp->finished_recorded && cudaEventQuery(dp->finished) == cudaSuccess) { return 1; }
        usleep(10000);
    }
    return 0;
}

// polls NCCL's asynchronous error and (without MPI) the rendezvous channel until dp_free stops it
static inline void* dp_watchdog_main(void* arg) {
    DataParallel* dp = (DataParallel*)arg;
    char msg[RENDEZVOUS_ERROR_MAX + 64];
    if (cudaSetDevice(dp->local_rank) != cudaSuccess) { dp_watchdog_fail(dp, "the watchdog cannot select this rank's GPU", 1); }
    while (!dp->watchdog_stop) {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(dp->comm, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
            snprintf(msg, sizeof(msg), "NCCL reported an error: %s (%s)", ncclGetErrorString(state), ncclGetLastError(dp->comm));
            dp_watchdog_fail(dp, msg, 1);
        }
        int problem = dp->use_file ? rendezvous_peer_problem(&dp->rz, msg) : RDZ_NO_PROBLEM;
        if (problem != RDZ_NO_PROBLEM) {
            if (dp_peers_finished(dp)) { return NULL; }
            dp_watchdog_fail(dp, msg, problem == RDZ_OBSERVED);   // another rank's report is not repeated
        }
        usleep(DP_WATCHDOG_POLL_US);
    }
    return NULL;
}

#ifdef USE_MPI
// starts MPI; fills the MPI rank and size, and this process's rank and the process count on its node
static inline void dp_mpi_start(int* rank, int* world, int* local_rank, int* local_world) {
    mpiCheck(MPI_Init(NULL, NULL));
    die_hook = dp_mpi_die_hook;
    mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, rank));
    mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, world));
    MPI_Comm node;
    mpiCheck(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL, &node));
    mpiCheck(MPI_Comm_rank(node, local_rank));
    mpiCheck(MPI_Comm_size(node, local_world));
    mpiCheck(MPI_Comm_free(&node));
}
#endif

// the number of GPUs this process sees
static inline int dp_visible_devices(void) {
    int visible = 0;
    if (cudaGetDeviceCount(&visible) != cudaSuccess) { visible = 0; }
    return visible;
}

// Starts MPI when a launcher started this process (mpirun; with MPI also srun and PMIx launchers), on the GPU of
// the launcher's local rank chosen before MPI_Init (a CUDA-aware MPI would otherwise put a context on GPU 0 for
// every local rank); checks that MPI sees the launch; sets the rank, world size and local rank (the launcher's,
// else the rank in MPI's node communicator).
static inline void dp_mpi_launch(DataParallel* dp, int* local_world) {
#ifdef USE_MPI
    int launcher_world = rendezvous_launcher_world(), env_local = rendezvous_launcher_local_rank();
    if (rendezvous_mpirun_world() == 0 && launcher_world <= 1 && getenv("PMIX_RANK") == NULL) { return; }   // no launcher
    if (env_local >= 0 && env_local < dp_visible_devices()) { cudaCheck(cudaSetDevice(env_local)); }
    dp_mpi_start(&dp->rank, &dp->world_size, &dp->local_rank, local_world);
    dp->use_mpi = 1;
    if (launcher_world > 0 && dp->world_size != launcher_world) {
        die("the launcher started %d processes but MPI sees %d (each a rank 0?): launch with mpirun, or srun --mpi=pmix",
            launcher_world, dp->world_size);
    }
    if (env_local >= 0) { dp->local_rank = env_local; }   // the GPU chosen before MPI_Init stays this rank's
#else
    (void)dp; (void)local_world;
    if (rendezvous_mpirun_world() > 0) {
        die("started by mpirun, but this build has no MPI: install OpenMPI and rebuild, or start one process per GPU "
            "with the rank, world size and rendezvous flags");
    }
#endif
}

// Joins the run without NCCL: rank and world size (MPI or flags), the GPU of this local rank and, without MPI,
// the rendezvous file (every rank waits there for all the others). Every problem is a clear error and exit(1).
static inline void dp_launch(DataParallel* dp, const DPOptions* o) {
    memset(dp, 0, sizeof(*dp));
    dp->timeout_s = o->timeout_s;
#ifdef USE_MPI
    const int have_mpi = 1;
#else
    const int have_mpi = 0;
#endif
    rendezvous_refuse_unknown_launch(have_mpi, o->rank != -1 || o->world_size != -1 || o->rendezvous != NULL);
    int local_world = 0;
    dp_mpi_launch(dp, &local_world);
    int mpi_rank = dp->rank, mpi_world = dp->use_mpi ? dp->world_size : 0;
    rendezvous_resolve(o->rank, o->world_size, o->rendezvous, mpi_rank, mpi_world, &dp->rank, &dp->world_size);
    if (!dp->use_mpi) {   // one node: the rank is the local rank
        dp->local_rank = dp->rank;
        local_world = dp->world_size;
    }
    rendezvous_check_devices(dp->local_rank, local_world, dp_visible_devices());
    cudaCheck(cudaSetDevice(dp->local_rank));
    if (!dp->use_mpi && o->rendezvous != NULL) {
        rendezvous_open(&dp->rz, o->rendezvous, dp->rank, dp->world_size, o->timeout_s, RENDEZVOUS_SILENT_S);
        dp->use_file = 1;
    }
}

// every rank's record `mine` against all the others' (MPI, or the rendezvous file); dies naming the first field
// that differs and the ranks that disagree (llmc/agreement.h). Call before any NCCL work.
static inline void dp_agree(DataParallel* dp, const RunAgreement* mine) {
    RunAgreement* all = (RunAgreement*)malloc_check((size_t)dp->world_size * sizeof(RunAgreement));
    all[0] = *mine;
#ifdef USE_MPI
    if (dp->use_mpi) {
        mpiCheck(MPI_Allgather(mine, (int)sizeof(*mine), MPI_BYTE, all, (int)sizeof(*mine), MPI_BYTE, MPI_COMM_WORLD));
    }
#endif
    if (dp->use_file) { rendezvous_allgather(&dp->rz, RDZ_AGREE, mine, all, sizeof(*mine)); }
    run_agreement_check(all, dp->world_size);
    free(all);
}

// rank 0 creates the communicator id; the other ranks get it through MPI or the rendezvous file
static inline ncclUniqueId dp_share_id(DataParallel* dp) {
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (dp->rank == 0) { ncclCheck(ncclGetUniqueId(&id)); }
#ifdef USE_MPI
    if (dp->use_mpi) { mpiCheck(MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD)); }
#endif
    if (dp->use_file) { rendezvous_broadcast(&dp->rz, RDZ_ID, &id, sizeof(id)); }
    return id;
}

// The non-blocking NCCL communicator (creation bounded by the rendezvous timeout), the comm stream and its events,
// and the watchdog. After dp_launch (and dp_agree).
static inline void dp_connect(DataParallel* dp) {
    ncclUniqueId id = dp_share_id(dp);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&dp->comm, dp->world_size, id, dp->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) { nccl_check_(r, __FILE__, __LINE__); }
    nccl_check_(dp_settle(dp, ncclInProgress, dp->timeout_s), __FILE__, __LINE__);
    if (dp->use_file) { rendezvous_remove_rounds(&dp->rz); }   // every rank has read every round
    cudaCheck(cudaStreamCreateWithFlags(&dp->comm_stream, cudaStreamNonBlocking));
    cudaCheck(cudaEventCreateWithFlags(&dp->grads_ready, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&dp->comm_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&dp->finished, cudaEventDisableTiming));
    cudaCheck(cudaMalloc((void**)&dp->barrier_buf, sizeof(float)));
    cudaCheck(cudaMemset(dp->barrier_buf, 0, sizeof(float)));
    if (pthread_create(&dp->watchdog, NULL, dp_watchdog_main, dp) != 0) { die("cannot start the NCCL watchdog thread"); }
}

// dp_launch and dp_connect, for programs whose ranks need no agreement check (tests)
static inline void dp_init(DataParallel* dp, const DPOptions* o) {
    dp_launch(dp, o);
    dp_connect(dp);
}

// the end of the run on every rank: a final barrier (after it a peer that exits has finished, not failed), then
// the watchdog stops and the communicator, the stream, the events and MPI are released
static inline void dp_free(DataParallel* dp) {
    dp->finishing = 1;
    dpCheck(dp, ncclAllReduce(dp->barrier_buf, dp->barrier_buf, 1, ncclFloat, ncclSum, dp->comm, dp->comm_stream));
    cudaCheck(cudaEventRecord(dp->finished, dp->comm_stream));
    dp->finished_recorded = 1;
    cudaCheck(cudaStreamSynchronize(dp->comm_stream));
    dp->watchdog_stop = 1;
    if (pthread_join(dp->watchdog, NULL) != 0) { die("cannot stop the NCCL watchdog thread"); }
    if (dp->use_file) { rendezvous_close(&dp->rz); }
    dpCheck(dp, ncclCommFinalize(dp->comm));
    ncclCheck(ncclCommDestroy(dp->comm));
    cudaCheck(cudaStreamDestroy(dp->comm_stream));
    cudaCheck(cudaEventDestroy(dp->grads_ready));
    cudaCheck(cudaEventDestroy(dp->comm_done));
    cudaCheck(cudaEventDestroy(dp->finished));
    cudaCheck(cudaFree(dp->barrier_buf));
#ifdef USE_MPI
    if (dp->use_mpi) {
        die_hook = NULL;
        mpiCheck(MPI_Finalize());
    }
#endif
    memset(dp, 0, sizeof(*dp));
}

// ----------------------------------------------------------------------------
// collectives, all in place, ordered on stream s

// buf[0 .. n) = its sum over the ranks
static inline void dp_all_reduce(DataParallel* dp, float* buf, size_t n, cudaStream_t s) {
    dpCheck(dp, ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, dp->comm, s));
}

// this rank's shard of the padded flat vector buf = its sum over the ranks (the rest of buf is left undefined)
static inline void dp_reduce_scatter(DataParallel* dp, float* buf, const ZeroShard* sh, cudaStream_t s) {
    dpCheck(dp, ncclReduceScatter(buf, buf + sh->start, sh->size, ncclFloat, ncclSum, dp->comm, s));
}

// the padded flat vector full = every rank's shard; shard is this rank's part, in place when it is inside full
static inline void dp_all_gather(DataParallel* dp, void* full, const void* shard, const ZeroShard* sh,
                                 ncclDataType_t type, cudaStream_t s) {
    dpCheck(dp, ncclAllGather(shard, full, sh->size, type, dp->comm, s));
}

// buf[0 .. bytes) = rank 0's bytes on every rank (e.g. state that rank 0 decided, such as the AdaHOP strategies)
static inline void dp_broadcast(DataParallel* dp, void* buf, size_t bytes, cudaStream_t s) {
    dpCheck(dp, ncclBroadcast(buf, buf, bytes, ncclUint8, 0, dp->comm, s));
}

// 1 if every rank passed the same v (waits for the GPU); dev2 is device scratch for 2 uint32
static inline int dp_same_on_all_ranks(DataParallel* dp, uint32_t v, uint32_t* dev2, cudaStream_t s) {
    uint32_t h[2] = {v, ~v};
    cudaCheck(cudaMemcpyAsync(dev2, h, sizeof(h), cudaMemcpyHostToDevice, s));
    dpCheck(dp, ncclAllReduce(dev2, dev2, 2, ncclUint32, ncclMax, dp->comm, s));
    cudaCheck(cudaMemcpyAsync(h, dev2, sizeof(h), cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaStreamSynchronize(s));
    return h[0] == v && h[1] == ~v;   // the largest v and the largest ~v (= ~ the smallest v) are both v
}

// ----------------------------------------------------------------------------
// gradient all-reduce overlapped with the backward pass

// Sums gradient bucket b (llmc/zero.h: block b, or bucket L = the tensors outside the blocks) of the model's
// tensors t over the ranks on the comm stream, as soon as the compute stream has finished it. Call right after the
// backward pass wrote the bucket's last gradient.
static inline void dp_reduce_bucket_async(DataParallel* dp, float* grads, const ParamTable* t, int bucket,
                                          cudaStream_t compute) {
    FlatRange r[MAX_PARAM_TENSORS];
    int n = bucket_ranges(t, bucket, r);
    cudaCheck(cudaEventRecord(dp->grads_ready, compute));
    cudaCheck(cudaStreamWaitEvent(dp->comm_stream, dp->grads_ready, 0));
    dpCheck(dp, ncclGroupStart());
    for (int i = 0; i < n; i++) { dp_all_reduce(dp, grads + r[i].offset, r[i].count, dp->comm_stream); }
    dpCheck(dp, ncclGroupEnd());
}

// the compute stream waits for every bucket reduction issued so far
static inline void dp_wait_reductions(const DataParallel* dp, cudaStream_t compute) {
    cudaCheck(cudaEventRecord(dp->comm_done, dp->comm_stream));
    cudaCheck(cudaStreamWaitEvent(compute, dp->comm_done, 0));
}

// ----------------------------------------------------------------------------
// ZeRO-1: sharded AdamW, and moving sharded vectors to and from full host vectors (init, checkpoints)

// this rank's device shard (sh->size floats, padding zeroed) from the full host vector of sh->n floats
static inline void zero_upload_shard(float* dev_shard, const float* host_full, const ZeroShard* sh) {
    float* tmp = (float*)malloc_check(sh->size * sizeof(float));
    zero_take_shard(tmp, host_full, sh);
    cudaCheck(cudaMemcpy(dev_shard, tmp, sh->size * sizeof(float), cudaMemcpyHostToDevice));
    free(tmp);
}

// Rank 0's host_full[0 .. sh->n) = the vector whose shards the ranks hold in dev_shard, gathered through the
// device buffer staging (sh->padded floats on every rank, e.g. the idle gradients between steps). A collective:
// every rank calls it; host_full is used on rank 0 only (NULL elsewhere is fine). Waits for the GPU.
static inline void dp_download_full(DataParallel* dp, float* host_full, const float* dev_shard, float* staging,
                                    const ZeroShard* sh, cudaStream_t s) {
    dp_all_gather(dp, staging, dev_shard, sh, ncclFloat, s);
    if (dp->rank == 0) { cudaCheck(cudaMemcpyAsync(host_full, staging, sh->n * sizeof(float), cudaMemcpyDeviceToHost, s)); }
    cudaCheck(cudaStreamSynchronize(s));
}

// Global gradient norm from each rank's shard of the reduced gradients: the per-block sums of squares of the shard
// (llmc/adamw.cuh) are summed over the ranks, then added up in a fixed order; at world size 1 this is global_norm
// bit for bit. scratch needs norm_blocks + 1 floats. Returns the norm (waits for the GPU).
static inline float dp_grad_norm(DataParallel* dp, float* scratch, const float* grads, const ZeroShard* sh, cudaStream_t s) {
    sum_squares_partials(scratch, grads + sh->start, sh->valid, s);
    dp_all_reduce(dp, scratch, norm_blocks, s);
    sum_partials_sqrt_kernel<<<1, 1, 0, s>>>(scratch + norm_blocks, scratch, norm_blocks);
    cudaCheckLaunch();
    float norm;
    cudaCheck(cudaMemcpyAsync(&norm, scratch + norm_blocks, sizeof(float), cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaStreamSynchronize(s));
    return norm;
}

// AdamW on this rank's shard: the part of every tensor of t inside it, with that tensor's weight decay. params and
// grads are the full padded vectors (flat indices); master, m and v hold the shard only. The element-wise kernel is
// the unsharded one, so the shards together equal adamw_update on the whole vector bit for bit.
static inline void zero_adamw_update(const ZeroShard* sh, const ParamTable* t, floatX* params, float* master,
                                     const float* grads, float* m, float* v, const AdamWConfig* a, float grad_scale,
                                     cudaStream_t s) {
    size_t off = 0;
    for (int i = 0; i < t->num_tensors; i++) {
        size_t lo, len;
        if (zero_slice(sh, off, t->sizes[i], &lo, &len)) {
            size_t local = lo - sh->start;
            float wd = t->decays[i] ? a->weight_decay : 0.0f;
            adamw_update(params + lo, master + local, grads + lo, m + local, v + local, len, a->lr, a->beta1, a->beta2,
                         a->step, a->eps, wd, grad_scale, s);
        }
        off += t->sizes[i];
    }
}

// One ZeRO-1 optimizer step once the gradients are reduced (buckets + dp_wait_reductions, or dp_reduce_scatter):
// the global norm, clipping to a->grad_clip when > 0, AdamW on this rank's shard, then every rank's new BF16 shard
// to all ranks. Returns the gradient norm before clipping.
static inline float dp_zero_step(DataParallel* dp, const ZeroShard* sh, const ParamTable* t, floatX* params,
                                 float* master, const float* grads, float* m, float* v, float* scratch,
                                 const AdamWConfig* a, cudaStream_t s) {
    float norm = dp_grad_norm(dp, scratch, grads, sh, s);
    float scale = (a->grad_clip > 0.0f && norm > a->grad_clip) ? a->grad_clip / norm : 1.0f;
    zero_adamw_update(sh, t, params, master, grads, m, v, a, scale, s);
    dp_all_gather(dp, params, params + sh->start, sh, ncclBfloat16, s);
    return norm;
}

#endif
