// Native MXFP4 GEMM for Blackwell (sm_100) through cuBLASLt: CUDA_R_4F_E2M1 operands with
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 block scales. Our MXOperand codes are already in cuBLASLt's
// packing (two E2M1 per byte, the lower-index element in the low nibble); the E8M0 scales must be rearranged
// into cuBLASLt's tiled layout: 128 rows x 4 blocks per 512-byte tile, tiles ordered row-tile major,
// offset (r % 32) * 16 + ((r % 128) / 32) * 4 + (b % 4) inside a tile.
// Status: compiled and linked, never run: dev/cuda/test_mxfp4_gpu.cu compares it with the exact path on sm_100 or
// newer and skips it elsewhere, and the project's GPUs are Hopper (sm_90, no FP4 tensor cores). The trainer does not
// call it. llmc/sm100/ holds the code for Blackwell only.
#ifndef LLMC_SM100_MXFP4_GEMM_CUH
#define LLMC_SM100_MXFP4_GEMM_CUH

#include "../mxfp4.cuh"

// bytes of the tiled scale array for rows x K (rows padded to 128, blocks to 4)
static inline size_t mx_tiled_scales_bytes(int rows, int K) {
    return (size_t)ceil_div(rows, 128) * 128 * ceil_div(K / 32, 4) * 4;
}

// tiled[...] = scales[r * nblocks + b] at cuBLASLt's VEC32 layout; padding entries get 0 (2^-127).
// Traffic: one read and one write per scale byte.
__global__ void mx_tile_scales_kernel(uint8_t* tiled, const uint8_t* scales, int rows, int nblocks) {
    int tiles_k = (nblocks + 3) / 4;
    long padded = (long)((rows + 127) / 128) * 128 * tiles_k * 4;
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= padded) { return; }
    int r = (int)(t / (tiles_k * 4)), b = (int)(t % (tiles_k * 4));
    size_t tile = (size_t)(r / 128) * tiles_k + b / 4;
    size_t off = tile * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + (b % 4);
    tiled[off] = (r < rows && b < nblocks) ? scales[(size_t)r * nblocks + b] : 0;
}

// out [M x N] (row-major BF16) = deq(A) deq(B)^T on FP4 tensor cores; tiled_a / tiled_b hold
// mx_tiled_scales_bytes of each operand. Dies with a clear message where cuBLASLt has no such kernel.
static inline void mx_gemm_native_sm100(floatX* out, const MXOperand* a, const MXOperand* b, uint8_t* tiled_a,
                                        uint8_t* tiled_b, cudaStream_t stream) {
    int device, major;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 10) { die("the native MXFP4 GEMM needs a Blackwell GPU (sm_100); this one is sm_%d0", major); }
    if (a->K != b->K) { die("mx_gemm_native_sm100: inner dimensions %d and %d differ", a->K, b->K); }
    mx_tile_scales_kernel<<<ceil_div((long)mx_tiled_scales_bytes(a->rows, a->K), 256), 256, 0, stream>>>(tiled_a, a->scales, a->rows, a->K / 32);
    mx_tile_scales_kernel<<<ceil_div((long)mx_tiled_scales_bytes(b->rows, b->K), 256), 256, 0, stream>>>(tiled_b, b->scales, b->rows, b->K / 32);
    cudaCheckLaunch();
    GemmSpec g = {.d = out, .d_type = CUDA_R_16BF, .a = b->codes, .b = a->codes, .ab_type = CUDA_R_4F_E2M1, .bias = NULL,
                  .m = b->rows, .n = a->rows, .k = a->K, .trans_a = true, .trans_b = false, .beta = 0.0f, .batch = gemm_single,
                  .scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0, .a_scale = tiled_b, .b_scale = tiled_a,
                  .epilogue = GEMM_EPILOGUE_NONE};
    cublaslt_gemm(&g, stream);
}

#endif
