// Hopper's tensor memory accelerator (TMA, sm_90) and the shared-memory barriers that track it: tensor maps of
// BF16 / FP32 arrays (encoded on the host through the driver's cuTensorMapEncodeTiled, found at run time so that
// nothing links libcuda), tile loads global -> shared that complete on an mbarrier, and the mbarrier operations a
// producer warp and its consumer warps use to hand ring slots back and forth. Tiles of 64 BF16 columns land with the
// 128-byte swizzle, the layout llmc/wgmma.cuh reads.
#ifndef LLMC_TMA_CUH
#define LLMC_TMA_CUH

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include "cuda_common.cuh"

// ----------------------------------------------------------------------------
// device side

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// an mbarrier that completes a phase when `count` arrivals (and the transactions announced with them) are in
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// makes the initialized barriers visible to the async proxy (TMA) before any load signals them
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// one arrival that also announces `bytes` of TMA transactions the phase must wait for
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// waits until the phase with this parity (0, 1, 0, ... for the barrier's first, second, third phase) has completed
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
    asm volatile("{\n.reg .pred done;\nwait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n}\n" ::"r"(smem_u32(bar)), "r"(parity) : "memory");
}

// the box of a 3-D tensor map at coordinates (c0 innermost, c1, c2) into shared memory at dst; completes on bar.
// Coordinates past the array's extent read as zeros.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 ::"r"(smem_u32(dst)), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar)) : "memory");
}

// the box of a 2-D tensor map at coordinates (c0 innermost, c1) into shared memory at dst; completes on bar
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(smem_u32(dst)), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_u32(bar)) : "memory");
}

// A ring of SLOTS shared-memory slots that TMA loads fill and `consumers` warps drain, step after step (step n in
// slot n % SLOTS): full[i] completes a phase when slot i's bytes have landed, empty[i] when every consumer warp has
// released it, so the fill for step n waits for the release of step n - SLOTS.
template <int SLOTS> struct TmaRing {
    uint64_t full[SLOTS], empty[SLOTS];
    __device__ __forceinline__ void init(int consumers) {
        for (int i = 0; i < SLOTS; i++) { mbar_init(&full[i], 1); mbar_init(&empty[i], consumers); }
    }
    // the loading thread, before it fills step's slot with `bytes`: waits for the slot's release, announces the bytes,
    // returns the barrier the loads complete on
    __device__ __forceinline__ uint64_t* acquire(int step, uint32_t bytes) {
        int slot = step % SLOTS;
        if (step >= SLOTS) { mbar_wait(&empty[slot], (step / SLOTS - 1) & 1); }
        mbar_arrive_expect_tx(&full[slot], bytes);
        return &full[slot];
    }
    // a consumer warp (all lanes): waits until step's slot has landed; the lanes leave together (for .aligned instructions)
    __device__ __forceinline__ void wait(int step) {
        mbar_wait(&full[step % SLOTS], (step / SLOTS) & 1);
        __syncwarp();
    }
    // a consumer warp (all lanes): done reading step's slot
    __device__ __forceinline__ void release(int step) {
        __syncwarp();
        if (threadIdx.x % 32 == 0) { mbar_arrive(&empty[step % SLOTS]); }
    }
};

// ----------------------------------------------------------------------------
// host side

// the driver's cuTensorMapEncodeTiled (asked once)
static inline PFN_cuTensorMapEncodeTiled_v12000 tma_encode_function(void) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    if (encode == NULL) {
        void* fn = NULL;
        cudaDriverEntryPointQueryResult found;
        cudaCheck(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
        if (found != cudaDriverEntryPointSuccess || fn == NULL) { die("TMA: the CUDA driver has no cuTensorMapEncodeTiled (needs CUDA 12+)"); }
        encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    }
    return encode;
}

// a map of the BF16 array [d2][d1][d0] (d0 contiguous; row stride `stride1` elements, plane stride `stride2`) read
// in boxes of 64 x rows x 1 elements with the 128-byte swizzle
static inline CUtensorMap tma_map_bf16_3d(const floatX* base, long d0, long d1, long d2, long stride1, long stride2, int rows) {
    CUtensorMap map;
    cuuint64_t dims[3] = {(cuuint64_t)d0, (cuuint64_t)d1, (cuuint64_t)d2};
    cuuint64_t strides[2] = {(cuuint64_t)stride1 * sizeof(floatX), (cuuint64_t)stride2 * sizeof(floatX)};
    cuuint32_t box[3] = {64, (cuuint32_t)rows, 1}, elem_strides[3] = {1, 1, 1};
    CUresult r = tma_encode_function()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void*)base, dims, strides, box, elem_strides,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { die("TMA: cuTensorMapEncodeTiled failed (%d) for a [%ld][%ld][%ld] BF16 array", (int)r, d2, d1, d0); }
    return map;
}

// a map of the FP32 array [d1][d0] (d0 contiguous, rows `stride1` elements apart) read in boxes of `cols` x 1
static inline CUtensorMap tma_map_f32_2d(const float* base, long d0, long d1, long stride1, int cols) {
    CUtensorMap map;
    cuuint64_t dims[2] = {(cuuint64_t)d0, (cuuint64_t)d1}, strides[1] = {(cuuint64_t)stride1 * sizeof(float)};
    cuuint32_t box[2] = {(cuuint32_t)cols, 1}, elem_strides[2] = {1, 1};
    CUresult r = tma_encode_function()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void*)base, dims, strides, box, elem_strides,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { die("TMA: cuTensorMapEncodeTiled failed (%d) for a [%ld][%ld] FP32 array", (int)r, d1, d0); }
    return map;
}

#endif
