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

#endif
