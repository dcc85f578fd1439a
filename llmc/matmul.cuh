// Dense GEMMs through cuBLASLt (BF16 operands, FP32 accumulation, BF16 or FP32 output, optional bias
// epilogue, strided batches) and the deterministic column sums used for bias and norm gradients.
#ifndef LLMC_MATMUL_CUH
#define LLMC_MATMUL_CUH

#include <string.h>
#include <cublasLt.h>
#include "cuda_common.cuh"

static cublasLtHandle_t cublaslt_handle;
static void* cublaslt_workspace = NULL;
static const size_t cublaslt_workspace_size = 32 * 1024 * 1024;

// cuBLASLt's first choice per GEMM configuration, asked once: the heuristic query costs more host time than a small
// GEMM takes on the GPU, and its answer does not change (the same algorithm runs either way)
typedef struct {
    int m, n, k, trans_a, trans_b, ab_type, d_type, has_bias, scale_mode, batch_count;
    long stride_a, stride_b, stride_d;
} GemmKey;
#define GEMM_ALGO_CACHE_SIZE 512
static GemmKey gemm_cache_keys[GEMM_ALGO_CACHE_SIZE];
static cublasLtMatmulAlgo_t gemm_cache_algos[GEMM_ALGO_CACHE_SIZE];
static int gemm_cache_used = 0;

static inline void cublas_check_(cublasStatus_t status, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "error: cuBLAS status %d [%s:%d]\n", (int)status, file, line);
        exit(EXIT_FAILURE);
    }
}
#define cublasCheck(status) cublas_check_((status), __FILE__, __LINE__)

static inline void matmul_init(void) {
    cublasCheck(cublasLtCreate(&cublaslt_handle));
    cublaslt_workspace = device_malloc(cublaslt_workspace_size, "cuBLASLt workspace");
}

static inline void matmul_free(void) {
    cudaCheck(cudaFree(cublaslt_workspace));
    cublasCheck(cublasLtDestroy(cublaslt_handle));
    gemm_cache_used = 0;
}

// One GEMM in cuBLAS's column-major terms: D[m x n] = op(A)[m x k] op(B)[k x n] (+ beta * D) (+ bias[m]).
// A is stored k x m when trans_a (else m x k), B is stored n x k when trans_b (else k x n), all packed.
// A row-major matrix X[r x c] is the column-major X^T, so the linear layer y = x W^T over N tokens is
// D = y with A = W (trans_a), B = x, m = OC, n = N, k = C. Scaled low-precision operands (FP8, FP4) set
// scale_mode and the per-operand scale pointers (cuBLASLt's A/B scale attributes).
struct GemmBatch { int count; long stride_a, stride_b, stride_d; };
static const GemmBatch gemm_single = {1, 0, 0, 0};

typedef struct {
    void* d; cudaDataType_t d_type;
    const void* a; const void* b; cudaDataType_t ab_type;
    const void* bias;                    // BF16 [m], or NULL
    int m, n, k;
    bool trans_a, trans_b;
    float beta;
    GemmBatch batch;
    int32_t scale_mode;                  // -1: unscaled; else a cublasLtMatmulMatrixScale_t for A and B
    const void* a_scale; const void* b_scale;
    int algo_rank;                       // which of cuBLASLt's heuristic results runs: 0 (its first choice) unless benchmarking
} GemmSpec;

#define GEMM_MAX_ALGO_RANK 7

static inline GemmKey gemm_key(const GemmSpec* g) {
    GemmKey key;
    memset(&key, 0, sizeof(key));   // padding too: keys are compared with memcmp
    key.m = g->m; key.n = g->n; key.k = g->k; key.trans_a = g->trans_a; key.trans_b = g->trans_b;
    key.ab_type = (int)g->ab_type; key.d_type = (int)g->d_type; key.has_bias = g->bias != NULL;
    key.scale_mode = g->scale_mode; key.batch_count = g->batch.count;
    key.stride_a = g->batch.stride_a; key.stride_b = g->batch.stride_b; key.stride_d = g->batch.stride_d;
    return key;
}

// the cached first-choice algorithm of g's configuration, or NULL
static inline const cublasLtMatmulAlgo_t* gemm_cache_find(const GemmKey* key) {
    for (int i = 0; i < gemm_cache_used; i++) {
        if (memcmp(&gemm_cache_keys[i], key, sizeof(*key)) == 0) { return &gemm_cache_algos[i]; }
    }
    return NULL;
}

// runs the GEMM g; returns false, running nothing, when cuBLASLt has no algorithm for it (or fewer than algo_rank + 1)
static inline bool cublaslt_gemm_try(const GemmSpec* g, cudaStream_t stream) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasOperation_t op_a = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    if (g->bias != NULL) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bias_type = CUDA_R_16BF;
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof(g->bias)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    }
    if (g->scale_mode >= 0) {
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &g->scale_mode, sizeof(int32_t)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &g->scale_mode, sizeof(int32_t)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g->a_scale, sizeof(void*)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g->b_scale, sizeof(void*)));
    }
    int m = g->m, n = g->n, k = g->k;
    cublasCheck(cublasLtMatrixLayoutCreate(&la, g->ab_type, g->trans_a ? k : m, g->trans_a ? m : k, g->trans_a ? k : m));
    cublasCheck(cublasLtMatrixLayoutCreate(&lb, g->ab_type, g->trans_b ? n : k, g->trans_b ? k : n, g->trans_b ? n : k));
    cublasCheck(cublasLtMatrixLayoutCreate(&ld, g->d_type, m, n, m));
    if (g->batch.count > 1) {
        cublasLtMatrixLayout_t layouts[3] = {la, lb, ld};
        long strides[3] = {g->batch.stride_a, g->batch.stride_b, g->batch.stride_d};
        for (int i = 0; i < 3; i++) {
            cublasCheck(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &g->batch.count, sizeof(int)));
            int64_t st = strides[i];
            cublasCheck(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof(st)));
        }
    }
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &cublaslt_workspace_size, sizeof(cublaslt_workspace_size)));
    GemmKey key = gemm_key(g);
    const cublasLtMatmulAlgo_t* algo = g->algo_rank == 0 ? gemm_cache_find(&key) : NULL;
    cublasLtMatmulHeuristicResult_t heur[GEMM_MAX_ALGO_RANK + 1];
    if (algo == NULL) {
        int found = 0, want = min(max(g->algo_rank, 0), GEMM_MAX_ALGO_RANK) + 1;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cublaslt_handle, desc, la, lb, ld, ld, pref, want, heur, &found);
        if (st == CUBLAS_STATUS_SUCCESS && found == want) {
            algo = &heur[want - 1].algo;
            if (want == 1 && gemm_cache_used < GEMM_ALGO_CACHE_SIZE) {
                gemm_cache_keys[gemm_cache_used] = key;
                gemm_cache_algos[gemm_cache_used++] = *algo;
            }
        }
    }
    bool ok = algo != NULL;
    if (ok) {
        const float alpha = 1.0f;
        cublasCheck(cublasLtMatmul(cublaslt_handle, desc, &alpha, g->a, la, g->b, lb, &g->beta, g->d, ld, g->d, ld,
                                   algo, cublaslt_workspace, cublaslt_workspace_size, stream));
    }
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    cublasCheck(cublasLtMatmulDescDestroy(desc));
    cublasCheck(cublasLtMatrixLayoutDestroy(la));
    cublasCheck(cublasLtMatrixLayoutDestroy(lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(ld));
    return ok;
}

// runs the GEMM g, or stops with a message when cuBLASLt has no algorithm for it
static inline void cublaslt_gemm(const GemmSpec* g, cudaStream_t stream) {
    if (!cublaslt_gemm_try(g, stream)) {
        die("cuBLASLt has no algorithm for m=%d n=%d k=%d trans_a=%d trans_b=%d batch=%d, operand type %d, scale mode %d "
            "(low-precision types need a GPU that supports them and sizes that are multiples of 16)",
            g->m, g->n, g->k, (int)g->trans_a, (int)g->trans_b, g->batch.count, (int)g->ab_type, (int)g->scale_mode);
    }
}

// BF16 operands: D (BF16, or FP32 when d_fp32) = op(A) op(B) (+ beta D) (+ bias), see cublaslt_gemm
static inline void matmul(void* d, bool d_fp32, const floatX* a, const floatX* b, const floatX* bias,
                          int m, int n, int k, bool trans_a, bool trans_b, float beta, GemmBatch batch,
                          cudaStream_t stream) {
    GemmSpec g = {d, d_fp32 ? CUDA_R_32F : CUDA_R_16BF, a, b, CUDA_R_16BF, bias, m, n, k, trans_a, trans_b, beta, batch,
                  -1, NULL, NULL};
    cublaslt_gemm(&g, stream);
}

// ----------------------------------------------------------------------------
// Deterministic column sums over the rows of a row-major [N x C] BF16 tensor, in two launches with a
// fixed reduction order: partial sums per row-chunk, then a sum over chunks added into FP32 outputs.
// Mode PLAIN: out0[c] += sum_r x[r,c] (bias gradient). Mode LAYERNORM: with y = the normalized input
// (inp - mean[r]) * rstd[r], out0[c] += sum_r x[r,c] y[r,c] (dweight) and out1[c] += sum_r x[r,c] (dbias).
// Mode SQUARES (outlier statistics): out0[c] += sum_r x[r,c]^2 and out1[c] += sum_r x[r,c].
// Mode RMSNORM: as LAYERNORM with mean 0 (y = inp[r,c] * rstd[r]) and no bias: out0[c] += sum_r x[r,c] y[r,c].

enum ColumnSumMode { COLSUM_PLAIN = 1, COLSUM_LAYERNORM = 2, COLSUM_SQUARES = 3, COLSUM_RMSNORM = 4 };
static const int colsum_rows_per_warp_iter = 8;   // warps of a block take rows in this interleave
static const int colsum_max_chunks = 256;

// partial[chunk][out][c] = sums over this chunk's rows; each thread owns 8 consecutive columns.
// Traffic: reads x (and inp) once; writes outputs * C * chunks floats.
template <int MODE>
struct ColsumOutputs { static constexpr int n = MODE == COLSUM_PLAIN || MODE == COLSUM_RMSNORM ? 1 : 2; };

template <int MODE>
__global__ void column_sums_partial_kernel(float* partial, const floatX* x, const floatX* inp, const float* mean,
                                           const float* rstd, int N, int C, int rows_per_chunk) {
    constexpr int NOUT = ColsumOutputs<MODE>::n;
    __shared__ float smem[NOUT][8][256 + 8];
    int col = (blockIdx.x * 32 + threadIdx.x) * 8;
    int r0 = blockIdx.y * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    float acc[NOUT][8] = {};
    if (col < C) {
        for (int r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
            x128 xv = load128(x + (size_t)r * C + col);
            if (MODE == COLSUM_LAYERNORM || MODE == COLSUM_RMSNORM) {
                x128 iv = load128(inp + (size_t)r * C + col);
                float mu = MODE == COLSUM_LAYERNORM ? mean[r] : 0.0f, rs = rstd[r];
                for (int i = 0; i < 8; i++) {
                    float g = (float)xv[i];
                    acc[0][i] += g * ((float)iv[i] - mu) * rs;
                    if (MODE == COLSUM_LAYERNORM) { acc[NOUT - 1][i] += g; }
                }
            } else if (MODE == COLSUM_SQUARES) {
                for (int i = 0; i < 8; i++) { float g = (float)xv[i]; acc[0][i] += g * g; acc[NOUT - 1][i] += g; }
            } else {
                for (int i = 0; i < 8; i++) { acc[0][i] += (float)xv[i]; }
            }
        }
    }
    for (int o = 0; o < NOUT; o++) {
        for (int i = 0; i < 8; i++) { smem[o][threadIdx.y][threadIdx.x * 8 + i] = acc[o][i]; }
    }
    __syncthreads();
    // the first warp sums the 8 warps' partials in order, 8 columns per thread
    if (threadIdx.y == 0 && col < C) {
        for (int o = 0; o < NOUT; o++) {
            for (int i = 0; i < 8; i++) {
                float s = 0.0f;
                for (int w = 0; w < (int)blockDim.y; w++) { s += smem[o][w][threadIdx.x * 8 + i]; }
                partial[((size_t)blockIdx.y * NOUT + o) * C + col + i] = s;
            }
        }
    }
}

// out_o[c] += sum over chunks of partial[chunk][o][c], chunks in order. Traffic: chunks * outputs * C floats.
template <int MODE>
__global__ void column_sums_final_kernel(float* out0, float* out1, const float* partial, int C, int chunks) {
    constexpr int NOUT = ColsumOutputs<MODE>::n;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    for (int o = 0; o < NOUT; o++) {
        float s = 0.0f;
        for (int ch = 0; ch < chunks; ch++) { s += partial[((size_t)ch * NOUT + o) * C + c]; }
        float* out = (o == 0) ? out0 : out1;
        out[c] += s;
    }
}

// bytes of scratch the column sums need for width C
static inline size_t column_sums_scratch_bytes(int C) { return (size_t)colsum_max_chunks * 2 * C * sizeof(float); }

template <int MODE>
static inline void column_sums(float* out0, float* out1, float* scratch, const floatX* x, const floatX* inp,
                               const float* mean, const float* rstd, int N, int C, cudaStream_t stream) {
    if (C % 8 != 0) { die("column_sums: C=%d must be a multiple of 8", C); }
    int col_blocks = ceil_div(C, 256);
    int chunks = min(colsum_max_chunks, max(1, 132 * 4 / col_blocks));
    int rows_per_chunk = ceil_div(N, chunks);
    chunks = ceil_div(N, rows_per_chunk);
    dim3 grid(col_blocks, chunks), block(32, 8);
    column_sums_partial_kernel<MODE><<<grid, block, 0, stream>>>(scratch, x, inp, mean, rstd, N, C, rows_per_chunk);
    cudaCheckLaunch();
    column_sums_final_kernel<MODE><<<ceil_div(C, 256), 256, 0, stream>>>(out0, out1, scratch, C, chunks);
    cudaCheckLaunch();
}

// dbias[c] += sum over the N rows of dout[r, c]
static inline void bias_backward(float* dbias, float* scratch, const floatX* dout, int N, int C, cudaStream_t stream) {
    column_sums<COLSUM_PLAIN>(dbias, NULL, scratch, dout, NULL, NULL, NULL, N, C, stream);
}

// out = inp W^T + bias: inp [N x IC], W [OC x IC] (nn.Linear layout), out [N x OC]; bias may be NULL
static inline void linear_forward(floatX* out, const floatX* inp, const floatX* weight, const floatX* bias, int N, int IC,
                                  int OC, cudaStream_t s) {
    matmul(out, false, weight, inp, bias, OC, N, IC, true, false, 0.0f, gemm_single, s);
}

// dinp = dout W; dW += dout^T inp; db += column sums of dout. dout [N x OC], inp [N x IC], W [OC x IC].
static inline void linear_backward(floatX* dinp, float* dweight, float* dbias, float* scratch, const floatX* dout,
                                   const floatX* inp, const floatX* weight, int N, int IC, int OC, cudaStream_t s) {
    matmul(dinp, false, weight, dout, NULL, IC, N, OC, false, false, 0.0f, gemm_single, s);
    matmul(dweight, true, inp, dout, NULL, IC, OC, N, false, true, 1.0f, gemm_single, s);
    if (dbias) { bias_backward(dbias, scratch, dout, N, OC, s); }
}

#endif
