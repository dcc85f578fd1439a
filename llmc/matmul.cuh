// Dense GEMMs through cuBLASLt (BF16 or scaled low-precision operands, FP32 accumulation, BF16 or FP32 output,
// optional bias and GELU epilogues, strided batches) and the BF16 linear layer built on them.
#ifndef LLMC_MATMUL_CUH
#define LLMC_MATMUL_CUH

#include <string.h>
#include <cublasLt.h>
#include "cuda_common.cuh"
#include "column_sums.cuh"

static cublasLtHandle_t cublaslt_handle;
static void* cublaslt_workspace = NULL;
static const size_t cublaslt_workspace_size = 32 * 1024 * 1024;

// cuBLASLt's first choice per GEMM configuration, asked once: the heuristic query costs more host time than a small
// GEMM takes on the GPU, and its answer does not change (the same algorithm runs either way)
typedef struct {
    int m, n, k, trans_a, trans_b, ab_type, d_type, has_bias, scale_mode, batch_count, epilogue;
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

// what cuBLASLt applies to the product P = op(A) op(B) before writing D; aux is BF16 [m x n] with leading dimension m,
// like a BF16 D. cuBLASLt's GELU is the tanh approximation, computed in FP32 (not bit for bit llmc/gelu.cuh's).
typedef enum {
    GEMM_EPILOGUE_NONE,    // D = P (+ bias)
    GEMM_EPILOGUE_GELU,    // D = gelu(P + bias), and aux = P + bias (the pre-activation, for the backward)
    GEMM_EPILOGUE_DGELU,   // D = P * gelu'(aux): the backward through a GELU whose pre-activation is aux
} GemmEpilogue;

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
    GemmEpilogue epilogue;               // GELU / DGELU: BF16 D, no beta, no batches; DGELU: no bias
    void* aux;                           // the epilogue's pre-activation (written by GELU, read by DGELU)
} GemmSpec;

static inline GemmKey gemm_key(const GemmSpec* g) {
    GemmKey key;
    memset(&key, 0, sizeof(key));   // padding too: keys are compared with memcmp
    key.m = g->m; key.n = g->n; key.k = g->k; key.trans_a = g->trans_a; key.trans_b = g->trans_b;
    key.ab_type = (int)g->ab_type; key.d_type = (int)g->d_type; key.has_bias = g->bias != NULL;
    key.scale_mode = g->scale_mode; key.batch_count = g->batch.count;
    key.stride_a = g->batch.stride_a; key.stride_b = g->batch.stride_b; key.stride_d = g->batch.stride_d;
    key.epilogue = (int)g->epilogue;
    return key;
}

// the cached first-choice algorithm of g's configuration, or NULL
static inline const cublasLtMatmulAlgo_t* gemm_cache_find(const GemmKey* key) {
    for (int i = 0; i < gemm_cache_used; i++) {
        if (memcmp(&gemm_cache_keys[i], key, sizeof(*key)) == 0) { return &gemm_cache_algos[i]; }
    }
    return NULL;
}

// cuBLASLt's descriptors of one GEMM configuration
typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
} GemmPlan;

static inline GemmPlan gemm_plan_create(const GemmSpec* g) {
    GemmPlan p;
    cublasOperation_t op_a = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    cublasLtEpilogue_t epi = g->bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (g->epilogue == GEMM_EPILOGUE_GELU) { epi = g->bias != NULL ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX; }
    if (g->epilogue == GEMM_EPILOGUE_DGELU) { epi = CUBLASLT_EPILOGUE_DGELU; }
    if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    }
    if (g->bias != NULL) {
        cudaDataType_t bias_type = CUDA_R_16BF;
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof(g->bias)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    }
    if (g->epilogue != GEMM_EPILOGUE_NONE) {
        int64_t aux_ld = g->m;
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux, sizeof(g->aux)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }
    if (g->scale_mode >= 0) {
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &g->scale_mode, sizeof(int32_t)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &g->scale_mode, sizeof(int32_t)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g->a_scale, sizeof(void*)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g->b_scale, sizeof(void*)));
    }
    int m = g->m, n = g->n, k = g->k;
    cublasCheck(cublasLtMatrixLayoutCreate(&p.la, g->ab_type, g->trans_a ? k : m, g->trans_a ? m : k, g->trans_a ? k : m));
    cublasCheck(cublasLtMatrixLayoutCreate(&p.lb, g->ab_type, g->trans_b ? n : k, g->trans_b ? k : n, g->trans_b ? n : k));
    cublasCheck(cublasLtMatrixLayoutCreate(&p.ld, g->d_type, m, n, m));
    if (g->batch.count > 1) {
        cublasLtMatrixLayout_t layouts[3] = {p.la, p.lb, p.ld};
        long strides[3] = {g->batch.stride_a, g->batch.stride_b, g->batch.stride_d};
        for (int i = 0; i < 3; i++) {
            cublasCheck(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &g->batch.count, sizeof(int)));
            int64_t st = strides[i];
            cublasCheck(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof(st)));
        }
    }
    return p;
}

static inline void gemm_plan_destroy(GemmPlan* p) {
    cublasCheck(cublasLtMatmulDescDestroy(p->desc));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->la));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->ld));
}

// up to max_algos of cuBLASLt's heuristic algorithms for the plan, best first, into algos; returns how many
static inline int gemm_plan_algos(const GemmPlan* p, cublasLtMatmulHeuristicResult_t* algos, int max_algos) {
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &cublaslt_workspace_size, sizeof(cublaslt_workspace_size)));
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cublaslt_handle, p->desc, p->la, p->lb, p->ld, p->ld, pref, max_algos,
                                                       algos, &found);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    return st == CUBLAS_STATUS_SUCCESS ? found : 0;
}

// D = op(A) op(B) (+ beta D) (+ bias) of g with the plan's descriptors and the given algorithm
static inline void gemm_plan_run(const GemmPlan* p, const GemmSpec* g, const cublasLtMatmulAlgo_t* algo, cudaStream_t stream) {
    const float alpha = 1.0f;
    cublasCheck(cublasLtMatmul(cublaslt_handle, p->desc, &alpha, g->a, p->la, g->b, p->lb, &g->beta, g->d, p->ld, g->d, p->ld,
                               algo, cublaslt_workspace, cublaslt_workspace_size, stream));
}

// runs the GEMM g with cuBLASLt's first choice (cached per configuration); returns false, running nothing, when
// cuBLASLt has no algorithm for it
static inline bool cublaslt_gemm_try(const GemmSpec* g, cudaStream_t stream) {
    GemmPlan p = gemm_plan_create(g);
    GemmKey key = gemm_key(g);
    const cublasLtMatmulAlgo_t* algo = gemm_cache_find(&key);
    cublasLtMatmulHeuristicResult_t first;
    if (algo == NULL && gemm_plan_algos(&p, &first, 1) == 1) {
        algo = &first.algo;
        if (gemm_cache_used < GEMM_ALGO_CACHE_SIZE) {
            gemm_cache_keys[gemm_cache_used] = key;
            gemm_cache_algos[gemm_cache_used++] = first.algo;
        }
    }
    if (algo != NULL) { gemm_plan_run(&p, g, algo, stream); }
    gemm_plan_destroy(&p);
    return algo != NULL;
}

// runs the GEMM g, or stops with a message when cuBLASLt has no algorithm for it
static inline void cublaslt_gemm(const GemmSpec* g, cudaStream_t stream) {
    if (g->epilogue != GEMM_EPILOGUE_NONE &&
        (g->d_type != CUDA_R_16BF || g->beta != 0.0f || g->batch.count != 1 || g->m % 8 != 0 || g->aux == NULL ||
         (g->epilogue == GEMM_EPILOGUE_DGELU && g->bias != NULL))) {
        die("GEMM with a GELU epilogue: needs a BF16 output, beta 0, one batch, m (%d) a multiple of 8, an aux buffer and, "
            "for the backward, no bias", g->m);
    }
    if (!cublaslt_gemm_try(g, stream)) {
        die("cuBLASLt has no algorithm for m=%d n=%d k=%d trans_a=%d trans_b=%d batch=%d, operand type %d, scale mode %d "
            "(low-precision types need a GPU that supports them and sizes that are multiples of 16)",
            g->m, g->n, g->k, (int)g->trans_a, (int)g->trans_b, g->batch.count, (int)g->ab_type, (int)g->scale_mode);
    }
}

// BF16 operands: D (BF16, or FP32 when d_fp32) = op(A) op(B) (+ beta D) (+ bias), see cublaslt_gemm
static inline GemmSpec matmul_spec(void* d, bool d_fp32, const floatX* a, const floatX* b, const floatX* bias,
                                   int m, int n, int k, bool trans_a, bool trans_b, float beta, GemmBatch batch) {
    GemmSpec g = {d, d_fp32 ? CUDA_R_32F : CUDA_R_16BF, a, b, CUDA_R_16BF, bias, m, n, k, trans_a, trans_b, beta, batch,
                  -1, NULL, NULL, GEMM_EPILOGUE_NONE, NULL};
    return g;
}

static inline void matmul(void* d, bool d_fp32, const floatX* a, const floatX* b, const floatX* bias,
                          int m, int n, int k, bool trans_a, bool trans_b, float beta, GemmBatch batch,
                          cudaStream_t stream) {
    GemmSpec g = matmul_spec(d, d_fp32, a, b, bias, m, n, k, trans_a, trans_b, beta, batch);
    cublaslt_gemm(&g, stream);
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
