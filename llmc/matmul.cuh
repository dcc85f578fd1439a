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

// The algorithm of each GEMM configuration, chosen once: asking cuBLASLt's heuristic costs more host time than a small
// GEMM takes on the GPU, and a configuration must keep its algorithm (another one may round differently). A new
// configuration gets cuBLASLt's first choice, or with GEMM_ALGO_TIMED the fastest of its first GEMM_TIMED_CANDIDATES
// (up to 1.2x faster for single shapes on sm_90, dev/cuda/bench_gemm_algos.cu), timed on the GPU at first use. Timing
// differs between runs, so the timed entries are saved with a training state (gemm_algo_table_save) and a resumed run
// loads them; the others are cuBLASLt's first choices, which a run without them gets again.
typedef struct {
    int m, n, k, trans_a, trans_b, ab_type, d_type, has_bias, scale_mode, batch_count, epilogue;
    long stride_a, stride_b, stride_d;
} GemmKey;
#define GEMM_ALGO_CACHE_SIZE 512
#define GEMM_TIMED_CANDIDATES 8
#define GEMM_TIMED_REPEATS 3
typedef enum { GEMM_ALGO_FIRST, GEMM_ALGO_TIMED } GemmAlgoChoice;
static GemmAlgoChoice gemm_algo_choice = GEMM_ALGO_FIRST;   // for configurations not yet in the table
static GemmKey gemm_cache_keys[GEMM_ALGO_CACHE_SIZE];
static cublasLtMatmulAlgo_t gemm_cache_algos[GEMM_ALGO_CACHE_SIZE];
static bool gemm_cache_timed[GEMM_ALGO_CACHE_SIZE];   // chosen by timing (or loaded: timed by the run that saved it)
static int gemm_cache_used = 0;

// configurations in the table (timed, loaded or first choices)
static inline int gemm_algo_entries(void) { return gemm_cache_used; }

// empties the table; configurations met from now on get `choice`
static inline void gemm_algo_table_clear(GemmAlgoChoice choice) {
    gemm_cache_used = 0;
    gemm_algo_choice = choice;
}

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
    gemm_algo_table_clear(GEMM_ALGO_FIRST);
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

// the algorithm of the configuration key in the table, or NULL
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

// bytes from D's first element to its last (the batches included)
static inline size_t gemm_d_bytes(const GemmSpec* g) {
    size_t elem = g->d_type == CUDA_R_32F ? 4 : 2;
    return ((size_t)(g->batch.count - 1) * g->batch.stride_d + (size_t)g->m * g->n) * elem;
}

// the index of the fastest of candidates[0..count), each run GEMM_TIMED_REPEATS times on `stream` after one warm-up
// run; a candidate that cuBLASLt refuses to run is skipped. The runs overwrite D: when the GEMM reads D (beta != 0,
// or a DGELU whose aux may be D) it is saved first and restored after; without the memory for that copy, 0
static inline int gemm_fastest_candidate(const GemmPlan* p, const GemmSpec* g, const cublasLtMatmulHeuristicResult_t* candidates,
                                         int count, cudaStream_t stream) {
    void* saved = NULL;
    size_t d_bytes = gemm_d_bytes(g);
    bool reads_d = g->beta != 0.0f || g->epilogue == GEMM_EPILOGUE_DGELU;
    if (reads_d) {
        if (cudaMalloc(&saved, d_bytes) != cudaSuccess) { (void)cudaGetLastError(); return 0; }
        cudaCheck(cudaMemcpyAsync(saved, g->d, d_bytes, cudaMemcpyDeviceToDevice, stream));
    }
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    const float alpha = 1.0f;
    int best = 0;
    float best_ms = INFINITY;
    for (int i = 0; i < count; i++) {
        bool ok = true;
        float ms = 0.0f;
        for (int r = 0; r <= GEMM_TIMED_REPEATS && ok; r++) {
            if (r == 1) { cudaCheck(cudaEventRecord(start, stream)); }
            ok = cublasLtMatmul(cublaslt_handle, p->desc, &alpha, g->a, p->la, g->b, p->lb, &g->beta, g->d, p->ld, g->d, p->ld,
                                &candidates[i].algo, cublaslt_workspace, cublaslt_workspace_size, stream) == CUBLAS_STATUS_SUCCESS;
        }
        cudaCheck(cudaEventRecord(stop, stream));
        cudaCheck(cudaEventSynchronize(stop));
        if (ok) { cudaCheck(cudaEventElapsedTime(&ms, start, stop)); }
        if (ok && ms < best_ms) { best = i; best_ms = ms; }
    }
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    if (reads_d) {
        cudaCheck(cudaMemcpyAsync(g->d, saved, d_bytes, cudaMemcpyDeviceToDevice, stream));
        cudaCheck(cudaStreamSynchronize(stream));
        cudaCheck(cudaFree(saved));
    }
    return best;
}

// runs the GEMM g with its configuration's algorithm (chosen at first use, see GemmAlgoChoice); returns false,
// running nothing, when cuBLASLt has no algorithm for it
static inline bool cublaslt_gemm_try(const GemmSpec* g, cudaStream_t stream) {
    GemmPlan p = gemm_plan_create(g);
    GemmKey key = gemm_key(g);
    const cublasLtMatmulAlgo_t* algo = gemm_cache_find(&key);
    cublasLtMatmulHeuristicResult_t candidates[GEMM_TIMED_CANDIDATES];
    if (algo == NULL) {
        int found = gemm_plan_algos(&p, candidates, gemm_algo_choice == GEMM_ALGO_TIMED ? GEMM_TIMED_CANDIDATES : 1);
        int chosen = found > 1 ? gemm_fastest_candidate(&p, g, candidates, found, stream) : 0;
        if (found > 0) { algo = &candidates[chosen].algo; }
        if (found > 0 && gemm_cache_used < GEMM_ALGO_CACHE_SIZE) {
            gemm_cache_keys[gemm_cache_used] = key;
            gemm_cache_timed[gemm_cache_used] = gemm_algo_choice == GEMM_ALGO_TIMED;
            gemm_cache_algos[gemm_cache_used++] = candidates[chosen].algo;
        }
    }
    if (algo != NULL) { gemm_plan_run(&p, g, algo, stream); }
    gemm_plan_destroy(&p);
    return algo != NULL;
}

// The timed entries of the table as int32 words: cuBLASLt's version, the GPU's compute capability (major * 10 + minor),
// the words of an entry, the number of entries, then each entry's GemmKey and algorithm as they lie in memory (keys
// are zero-padded). An algorithm is valid for the cuBLASLt version and GPU that chose it only.
#define GEMM_TABLE_HEADER_WORDS 4
#define GEMM_ENTRY_WORDS ((int)((sizeof(GemmKey) + sizeof(cublasLtMatmulAlgo_t)) / sizeof(int32_t)))
static_assert(sizeof(GemmKey) % sizeof(int32_t) == 0 && sizeof(cublasLtMatmulAlgo_t) % sizeof(int32_t) == 0,
              "GEMM table entries are whole int32 words");

static inline int gemm_device_capability(void) {
    int device, major, minor;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    cudaCheck(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major * 10 + minor;
}

static inline int gemm_timed_entries(void) {
    int timed = 0;
    for (int i = 0; i < gemm_cache_used; i++) { timed += gemm_cache_timed[i]; }
    return timed;
}

static inline size_t gemm_algo_table_words(void) {
    return GEMM_TABLE_HEADER_WORDS + (size_t)gemm_timed_entries() * GEMM_ENTRY_WORDS;
}

// writes the table into words[0 .. gemm_algo_table_words())
static inline void gemm_algo_table_save(int32_t* words) {
    words[0] = (int32_t)cublasLtGetVersion();
    words[1] = gemm_device_capability();
    words[2] = GEMM_ENTRY_WORDS;
    words[3] = gemm_timed_entries();
    int32_t* e = words + GEMM_TABLE_HEADER_WORDS;
    for (int i = 0; i < gemm_cache_used; i++) {
        if (!gemm_cache_timed[i]) { continue; }
        memcpy(e, &gemm_cache_keys[i], sizeof(GemmKey));
        memcpy((char*)e + sizeof(GemmKey), &gemm_cache_algos[i], sizeof(cublasLtMatmulAlgo_t));
        e += GEMM_ENTRY_WORDS;
    }
}

// replaces the table with the one in words[0 .. n); returns 0, or -1 (the table left empty) with why[len] set when
// the words are malformed or were chosen by another cuBLASLt version or GPU
static inline int gemm_algo_table_load(const int32_t* words, size_t n, char* why, size_t len) {
    gemm_cache_used = 0;
    int version = (int)cublasLtGetVersion(), capability = gemm_device_capability();
    if (n < GEMM_TABLE_HEADER_WORDS || words[2] != GEMM_ENTRY_WORDS || words[3] < 0 || words[3] > GEMM_ALGO_CACHE_SIZE ||
        n != GEMM_TABLE_HEADER_WORDS + (size_t)words[3] * GEMM_ENTRY_WORDS) {
        snprintf(why, len, "a malformed table (%zu words)", n);
        return -1;
    }
    if (words[0] != version || words[1] != capability) {
        snprintf(why, len, "chosen with cuBLASLt %d on sm_%d; this run has cuBLASLt %d on sm_%d", words[0], words[1], version,
                 capability);
        return -1;
    }
    for (int i = 0; i < words[3]; i++) {
        const int32_t* e = words + GEMM_TABLE_HEADER_WORDS + (size_t)i * GEMM_ENTRY_WORDS;
        memcpy(&gemm_cache_keys[i], e, sizeof(GemmKey));
        memcpy(&gemm_cache_algos[i], (const char*)e + sizeof(GemmKey), sizeof(cublasLtMatmulAlgo_t));
        gemm_cache_timed[i] = true;
    }
    gemm_cache_used = words[3];
    return 0;
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
    GemmSpec g = {.d = d, .d_type = d_fp32 ? CUDA_R_32F : CUDA_R_16BF, .a = a, .b = b, .ab_type = CUDA_R_16BF, .bias = bias,
                  .m = m, .n = n, .k = k, .trans_a = trans_a, .trans_b = trans_b, .beta = beta, .batch = batch,
                  .scale_mode = -1, .a_scale = NULL, .b_scale = NULL, .epilogue = GEMM_EPILOGUE_NONE, .aux = NULL};
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
