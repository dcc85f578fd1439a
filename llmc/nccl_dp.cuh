// Data-parallel training over NCCL, one process per GPU: the communicator (set up through MPI under mpirun,
// otherwise through a rendezvous file on one node, llmc/rendezvous.h), in-place collectives, the per-layer
// gradient all-reduce on a side stream that overlaps the backward pass, and the ZeRO-1 optimizer step: AdamW m,
// v and the FP32 master weights are sharded (llmc/zero.h), each rank updates its shard, then the BF16
// parameters are all-gathered. World size 1 runs through the same code: a one-rank communicator turns every
// collective into a copy, and the step equals the unsharded AdamW bit for bit.
// MPI is compiled in only with -DUSE_MPI (the Makefile sets it when mpicc works).
#ifndef LLMC_NCCL_DP_CUH
#define LLMC_NCCL_DP_CUH

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

// dies with NCCL's message when r is an error
static inline void nccl_check_(ncclResult_t r, const char* file, int line) {
    if (r != ncclSuccess) {
        fprintf(stderr, "error: NCCL: %s (%s) [%s:%d]\n", ncclGetErrorString(r), ncclGetLastError(NULL), file, line);
        exit(EXIT_FAILURE);
    }
}
#define ncclCheck(r) nccl_check_((r), __FILE__, __LINE__)

#ifdef USE_MPI
// dies with MPI's message when err is an error
static inline void mpi_check_(int err, const char* file, int line) {
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        fprintf(stderr, "error: MPI: %s [%s:%d]\n", msg, file, line);
        exit(EXIT_FAILURE);
    }
}
#define mpiCheck(err) mpi_check_((err), __FILE__, __LINE__)
#endif

typedef struct {
    int rank, world_size;       // from the command line, -1 = not given
    const char* rendezvous;     // file for the communicator id when started without mpirun, or NULL
    double timeout_s;           // how long ranks > 0 wait for rank 0 to write it
} DPOptions;

typedef struct {
    int rank, world_size, local_rank;   // local_rank: index among this node's processes = its GPU
    int use_mpi;                        // set up through MPI, finalized by dp_free
    ncclComm_t comm;
    cudaStream_t comm_stream;           // gradient buckets are reduced here, overlapping the backward pass
    cudaEvent_t grads_ready;            // recorded on the compute stream when a bucket is final
    cudaEvent_t comm_done;              // recorded on the comm stream after the last bucket
} DataParallel;

typedef struct { float lr, beta1, beta2, eps, weight_decay, grad_clip; int step; } AdamWConfig;

#ifdef USE_MPI
// starts MPI; fills the MPI rank and size, and this process's rank and the process count on its node
static inline void dp_mpi_start(int* rank, int* world, int* local_rank, int* local_world) {
    mpiCheck(MPI_Init(NULL, NULL));
    mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, rank));
    mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, world));
    MPI_Comm node;
    mpiCheck(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL, &node));
    mpiCheck(MPI_Comm_rank(node, local_rank));
    mpiCheck(MPI_Comm_size(node, local_world));
    mpiCheck(MPI_Comm_free(&node));
}
#endif

// rank 0 creates the communicator id; the other ranks get it through MPI or the rendezvous file
static inline ncclUniqueId dp_share_id(const DataParallel* dp, const DPOptions* o) {
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (dp->rank == 0) { ncclCheck(ncclGetUniqueId(&id)); }
#ifdef USE_MPI
    if (dp->use_mpi) {
        mpiCheck(MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
        return id;
    }
#endif
    if (o->rendezvous == NULL) { return id; }   // world size 1 without a file
    if (dp->rank == 0) {
        rendezvous_publish(o->rendezvous, dp->world_size, &id, (int)sizeof(id));
        rendezvous_wait_joined(o->rendezvous, dp->world_size, o->timeout_s);
    } else {
        rendezvous_wait(o->rendezvous, dp->world_size, &id, (int)sizeof(id), o->timeout_s);
        rendezvous_join(o->rendezvous, dp->rank);
    }
    return id;
}

// Joins the run: rank and world size (MPI or flags), the GPU of this local rank, the NCCL communicator, the comm
// stream and its events. Every problem (flags, GPUs, rendezvous, NCCL) is a clear error and exit(1).
static inline void dp_init(DataParallel* dp, const DPOptions* o) {
    memset(dp, 0, sizeof(*dp));
    int mpi_rank = 0, mpi_world = 0, local_world = 0;
    int under_mpirun = rendezvous_mpirun_world() > 0;
#ifdef USE_MPI
    if (under_mpirun) {
        dp_mpi_start(&mpi_rank, &mpi_world, &dp->local_rank, &local_world);
        dp->use_mpi = 1;
    }
#else
    if (under_mpirun) {
        die("started by mpirun, but this build has no MPI: install OpenMPI and rebuild, or start one process per GPU "
            "with the rank, world size and rendezvous flags");
    }
#endif
    rendezvous_resolve(o->rank, o->world_size, o->rendezvous, mpi_rank, mpi_world, &dp->rank, &dp->world_size);
    if (!dp->use_mpi) {   // one node: the rank is the local rank
        dp->local_rank = dp->rank;
        local_world = dp->world_size;
    }
    int visible = 0;
    if (cudaGetDeviceCount(&visible) != cudaSuccess) { visible = 0; }
    rendezvous_check_devices(dp->local_rank, local_world, visible);
    cudaCheck(cudaSetDevice(dp->local_rank));
    ncclUniqueId id = dp_share_id(dp, o);
    ncclCheck(ncclCommInitRank(&dp->comm, dp->world_size, id, dp->rank));
    if (dp->rank == 0 && o->rendezvous != NULL) { rendezvous_remove(o->rendezvous, dp->world_size); }   // every rank has joined
    cudaCheck(cudaStreamCreateWithFlags(&dp->comm_stream, cudaStreamNonBlocking));
    cudaCheck(cudaEventCreateWithFlags(&dp->grads_ready, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&dp->comm_done, cudaEventDisableTiming));
}

// waits for the comm stream, then releases the communicator, the stream, the events and MPI
static inline void dp_free(DataParallel* dp) {
    cudaCheck(cudaStreamSynchronize(dp->comm_stream));
    ncclCheck(ncclCommDestroy(dp->comm));
    cudaCheck(cudaStreamDestroy(dp->comm_stream));
    cudaCheck(cudaEventDestroy(dp->grads_ready));
    cudaCheck(cudaEventDestroy(dp->comm_done));
#ifdef USE_MPI
    if (dp->use_mpi) { mpiCheck(MPI_Finalize()); }
#endif
    memset(dp, 0, sizeof(*dp));
}

// ----------------------------------------------------------------------------
// collectives, all in place, ordered on stream s

// buf[0 .. n) = its sum over the ranks
static inline void dp_all_reduce(const DataParallel* dp, float* buf, size_t n, cudaStream_t s) {
    ncclCheck(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, dp->comm, s));
}

// this rank's shard of the padded flat vector buf = its sum over the ranks (the rest of buf is left undefined)
static inline void dp_reduce_scatter(const DataParallel* dp, float* buf, const ZeroShard* sh, cudaStream_t s) {
    ncclCheck(ncclReduceScatter(buf, buf + sh->start, sh->size, ncclFloat, ncclSum, dp->comm, s));
}

// the padded flat vector full = every rank's shard; shard is this rank's part, in place when it is inside full
static inline void dp_all_gather(const DataParallel* dp, void* full, const void* shard, const ZeroShard* sh,
                                 ncclDataType_t type, cudaStream_t s) {
    ncclCheck(ncclAllGather(shard, full, sh->size, type, dp->comm, s));
}

// buf[0 .. bytes) = rank 0's bytes on every rank (e.g. state that rank 0 decided, such as the AdaHOP strategies)
static inline void dp_broadcast(const DataParallel* dp, void* buf, size_t bytes, cudaStream_t s) {
    ncclCheck(ncclBroadcast(buf, buf, bytes, ncclUint8, 0, dp->comm, s));
}

// 1 if every rank passed the same v (waits for the GPU); dev2 is device scratch for 2 uint32
static inline int dp_same_on_all_ranks(const DataParallel* dp, uint32_t v, uint32_t* dev2, cudaStream_t s) {
    uint32_t h[2] = {v, ~v};
    cudaCheck(cudaMemcpyAsync(dev2, h, sizeof(h), cudaMemcpyHostToDevice, s));
    ncclCheck(ncclAllReduce(dev2, dev2, 2, ncclUint32, ncclMax, dp->comm, s));
    cudaCheck(cudaMemcpyAsync(h, dev2, sizeof(h), cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaStreamSynchronize(s));
    return h[0] == v && h[1] == ~v;   // the largest v and the largest ~v (= ~ the smallest v) are both v
}

// ----------------------------------------------------------------------------
// gradient all-reduce overlapped with the backward pass

// Sums gradient bucket b (llmc/zero.h: block b, or bucket L = the tensors outside the blocks) of the model's
// tensors t over the ranks on the comm stream, as soon as the compute stream has finished it. Call right after the
// backward pass wrote the bucket's last gradient.
static inline void dp_reduce_bucket_async(const DataParallel* dp, float* grads, const ParamTable* t, int bucket,
                                          cudaStream_t compute) {
    FlatRange r[MAX_PARAM_TENSORS];
    int n = bucket_ranges(t, bucket, r);
    cudaCheck(cudaEventRecord(dp->grads_ready, compute));
    cudaCheck(cudaStreamWaitEvent(dp->comm_stream, dp->grads_ready, 0));
    ncclCheck(ncclGroupStart());
    for (int i = 0; i < n; i++) { dp_all_reduce(dp, grads + r[i].offset, r[i].count, dp->comm_stream); }
    ncclCheck(ncclGroupEnd());
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
static inline void dp_download_full(const DataParallel* dp, float* host_full, const float* dev_shard, float* staging,
                                    const ZeroShard* sh, cudaStream_t s) {
    dp_all_gather(dp, staging, dev_shard, sh, ncclFloat, s);
    if (dp->rank == 0) { cudaCheck(cudaMemcpyAsync(host_full, staging, sh->n * sizeof(float), cudaMemcpyDeviceToHost, s)); }
    cudaCheck(cudaStreamSynchronize(s));
}

// Global gradient norm from each rank's shard of the reduced gradients: the per-block sums of squares of the shard
// (llmc/adamw.cuh) are summed over the ranks, then added up in a fixed order; at world size 1 this is global_norm
// bit for bit. scratch needs norm_blocks + 1 floats. Returns the norm (waits for the GPU).
static inline float dp_grad_norm(const DataParallel* dp, float* scratch, const float* grads, const ZeroShard* sh, cudaStream_t s) {
    sum_squares_partial_kernel<<<norm_blocks, 512, 0, s>>>(scratch, grads + sh->start, sh->valid);
    cudaCheckLaunch();
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
static inline float dp_zero_step(const DataParallel* dp, const ZeroShard* sh, const ParamTable* t, floatX* params,
                                 float* master, const float* grads, float* m, float* v, float* scratch,
                                 const AdamWConfig* a, cudaStream_t s) {
    float norm = dp_grad_norm(dp, scratch, grads, sh, s);
    float scale = (a->grad_clip > 0.0f && norm > a->grad_clip) ? a->grad_clip / norm : 1.0f;
    zero_adamw_update(sh, t, params, master, grads, m, v, a, scale, s);
    dp_all_gather(dp, params, params + sh->start, sh, ncclBfloat16, s);
    return norm;
}

#endif
