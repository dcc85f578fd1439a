// Hopper warpgroup MMA (wgmma, sm_90a) for BF16 tiles of 64-element (128-byte) rows in shared memory: the matrix
// descriptor of such a tile, the fences and waits, and the m64n64k16 products with A in shared memory or in
// registers. The tiles are [rows][64] BF16 with the 16-byte chunks of row r XOR-swizzled by r % 8 on a 1024-byte
// aligned base, which is wgmma's 128-byte swizzle (llmc/flash_attention.cuh loads them so). The instructions exist
// only in sm_90a code: built for another target the wrappers trap, so a kernel using them runs only from a binary
// built for sm_90a (the Makefile builds every CUDA program so; flash_wgmma_available asks at run time).
#ifndef LLMC_WGMMA_CUH
#define LLMC_WGMMA_CUH

#include <stdint.h>

// shared-memory matrix descriptor of a tile at `tile` (128-byte swizzle): lbo / sbo are the byte strides between
// 8-row core-matrix groups along K / along M or N for K-major tiles, and the other way round for N-major tiles
__device__ __forceinline__ uint64_t wgmma_desc(const void* tile, uint32_t lbo, uint32_t sbo) {
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(tile);
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

#ifdef __CUDA_ARCH_FEAT_SM90_ALL
#define WGMMA_ASM(text) asm volatile(text ::: "memory")
#else
#define WGMMA_ASM(text) __trap()
#endif
// orders this thread's register writes (accumulators, A fragments) before the wgmma that reads them
__device__ __forceinline__ void wgmma_fence() { WGMMA_ASM("wgmma.fence.sync.aligned;\n"); }
__device__ __forceinline__ void wgmma_commit() { WGMMA_ASM("wgmma.commit_group.sync.aligned;\n"); }
__device__ __forceinline__ void wgmma_wait_all() { WGMMA_ASM("wgmma.wait_group.sync.aligned 0;\n"); }
#undef WGMMA_ASM

// pins the registers of an accumulator or of A fragments at this point: the compiler moves no read or write of them
// across it (before wgmma_fence, so that their last writes precede the wgmma; after a wait, so that their reads follow it)
template <int N> __device__ __forceinline__ void wgmma_fence_operand(float (&acc)[1][N][4]) {
    float* d = &acc[0][0][0];
    #pragma unroll
    for (int i = 0; i < 4 * N; i++) { asm volatile("" : "+f"(d[i])::"memory"); }
}
template <int K> __device__ __forceinline__ void wgmma_fence_operand(uint32_t (&p)[1][K][4]) {
    uint32_t* r = &p[0][0][0];
    #pragma unroll
    for (int i = 0; i < 4 * K; i++) { asm volatile("" : "+r"(r[i])::"memory"); }
}

// d[32] += A B^T, m64n64k16: A [64 x 16] and B [64 x 16], both K-major tiles in shared memory (descriptors)
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(1));
#else
    __trap();
#endif
}
// d[32] += A B, m64n64k16: A [64 x 16] as BF16 fragments in registers (per warp the mma.sync m16n8k16 A layout of its
// 16 rows), B [16 x 64] an N-major [k][n] tile in shared memory (descriptor), transposed by the instruction
__device__ __forceinline__ void wgmma_m64n64k16_rs_nmajor(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
#else
    __trap();
#endif
}

// A 64-row tile of HS columns (HS = 64 or 128) is HS / 64 column blocks [64][64] one after the other (8 KB, 512
// descriptor units, apart): the 128-byte swizzle spans 64 BF16 columns.

// issues acc [64 x 64] += A B^T with K = HS as one wgmma group: A the 64 rows of tile a, B the 64 rows of tile b (both
// [64][HS], K-major; the accumulator of warp w holds rows 16 w .. 16 w + 15 in the mma.sync C layout). acc is
// written asynchronously: untouched until wgmma_wait_all.
template <int HS>
__device__ __forceinline__ void wgmma_abt_issue(float (&acc)[1][8][4], const void* a, const void* b) {
    uint64_t da = wgmma_desc(a, 16, 1024), db = wgmma_desc(b, 16, 1024);
    float(&d)[32] = *reinterpret_cast<float(*)[32]>(&acc[0][0][0]);
    wgmma_fence_operand(acc);
    wgmma_fence();
    #pragma unroll
    for (int k = 0; k < HS / 16; k++) {   // 16 columns (32 bytes) of a 64-column block a step
        wgmma_m64n64k16_ss(d, da + 512 * (k / 4) + 2 * (k % 4), db + 512 * (k / 4) + 2 * (k % 4));
    }
    wgmma_commit();
}

// issues acc [64 x HS] += P B with K = 64 as one wgmma group: P as BF16 A fragments of 64 columns, B tile b [64][HS]
// (k rows, N-major; one m64n64 product per 64-column block). acc and p: untouched until wgmma_wait_all.
template <int HS>
__device__ __forceinline__ void wgmma_pb_issue(float (&acc)[1][HS / 8][4], uint32_t (&p)[1][4][4], const void* b) {
    uint64_t db = wgmma_desc(b, 1024, 1024);
    wgmma_fence_operand(acc);
    wgmma_fence_operand(p);
    wgmma_fence();
    #pragma unroll
    for (int k = 0; k < 4; k++) {
        #pragma unroll
        for (int blk = 0; blk < HS / 64; blk++) {
            float(&d)[32] = *reinterpret_cast<float(*)[32]>(&acc[0][8 * blk][0]);
            wgmma_m64n64k16_rs_nmajor(d, p[0][k], db + 512 * blk + 128 * k);   // 16 rows = 2048 bytes a step
        }
    }
    wgmma_commit();
}

#endif
