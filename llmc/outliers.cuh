// AdaHOP outlier machinery on BF16 tensors: row and column statistics (variances for the Row / Column / None
// classification, squared norms for outlier extraction), a deterministic top-k of rows, and the gather and
// scatter steps of outlier extraction (OE). Zeroing the extracted rows of a quantized operand is llmc/mxfp4.cuh's.
#ifndef LLMC_OUTLIERS_CUH
#define LLMC_OUTLIERS_CUH

#include "cuda_common.cuh"
#include "column_sums.cuh"

// row_var[r] (population variance, two passes over the row in L1) and row_sq[r] = sum x^2; one warp per row.
// Traffic: reads x once from DRAM.
__global__ void row_stats_kernel(float* row_var, float* row_sq, const floatX* x, int R, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= R) { return; }
    const floatX* xr = x + (size_t)row * C;
    float sum = 0.0f, sq = 0.0f;
    for (int c = lane * 8; c < C; c += 256) {
        x128 v = load128(xr + c);
        for (int i = 0; i < 8; i++) { float f = (float)v[i]; sum += f; sq += f * f; }
    }
    float mean = warp_sum(sum) / C;
    float dev = 0.0f;
    for (int c = lane * 8; c < C; c += 256) {
        x128 v = load128(xr + c);
        for (int i = 0; i < 8; i++) { float d = (float)v[i] - mean; dev += d * d; }
    }
    dev = warp_sum(dev);
    sq = warp_sum(sq);
    if (lane == 0) { row_var[row] = dev / C; row_sq[row] = sq; }
}

// col_var[c] = E[x^2] - E[x]^2 (clamped at 0) from the column sums; col_sq[c] = sum x^2. Traffic: 3 * C floats.
__global__ void col_var_kernel(float* col_var, const float* col_sq, const float* col_sum, int R, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    float mean = col_sum[c] / R;
    col_var[c] = fmaxf(0.0f, col_sq[c] / R - mean * mean);
}

// Statistics of x [R x C]: row_var/row_sq [R], col_var/col_sq [C]. col_sum [C] and scratch
// (column_sums_scratch_bytes(C)) are work space. Row stats are exact two-pass; column variances use
// E[x^2] - E[x]^2 in FP32 (enough for the classification, whose threshold is a factor of 2).
static inline void outlier_stats(float* row_var, float* row_sq, float* col_var, float* col_sq, float* col_sum,
                                 float* scratch, const floatX* x, int R, int C, cudaStream_t s) {
    if (C % 8 != 0) { die("outlier_stats: C=%d must be a multiple of 8", C); }
    row_stats_kernel<<<ceil_div(R, 8), 256, 0, s>>>(row_var, row_sq, x, R, C);
    cudaCheckLaunch();
    cudaCheck(cudaMemsetAsync(col_sq, 0, C * sizeof(float), s));
    cudaCheck(cudaMemsetAsync(col_sum, 0, C * sizeof(float), s));
    ColsumRows rows = {};
    column_sums<COLSUM_SQUARES>({{col_sq, col_sum, NULL}}, scratch, x, rows, R, C, s);
    col_var_kernel<<<ceil_div(C, 256), 256, 0, s>>>(col_var, col_sq, col_sum, R, C);
    cudaCheckLaunch();
}

// idx[0..k) = the k rows with the largest score (ties to the lower index; NaN counts as largest), in
// ascending index order. One block: a bisection on the float bit patterns finds the k-th largest score,
// then an ordered compaction. Deterministic. Traffic: about 33 reads of the n scores (n is small: rows).
__global__ void topk_rows_kernel(int* idx, const float* score, int n, int k) {
    __shared__ int warp_counts[32];
    __shared__ int total;
    auto key = [](float v) -> uint32_t { return isnan(v) ? 0x7F800001u : __float_as_uint(fabsf(v)); };
    auto count_at_least = [&](uint32_t t) -> int {
        int c = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) { c += key(score[i]) >= t; }
        c = __reduce_add_sync(0xffffffffu, c);
        if (threadIdx.x % 32 == 0) { warp_counts[threadIdx.x / 32] = c; }
        __syncthreads();
        if (threadIdx.x == 0) { int s = 0; for (int w = 0; w < (int)blockDim.x / 32; w++) { s += warp_counts[w]; } total = s; }
        __syncthreads();
        int r = total;
        __syncthreads();
        return r;
    };
    uint32_t lo = 0, hi = 0x7F800001u;   // invariant: count(>= lo) >= k, count(>= hi + 1) < k
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (count_at_least(mid) >= k) { lo = mid; } else { hi = mid - 1; }
    }
    int need_equal = k - count_at_least(lo + 1);   // how many of the ties at the threshold to take
    // ordered compaction: chunk by chunk, each thread's flag gets its rank from a block-wide prefix count
    __shared__ int base_out, base_eq;
    if (threadIdx.x == 0) { base_out = 0; base_eq = 0; }
    __syncthreads();
    for (int start = 0; start < n; start += blockDim.x) {
        int i = start + threadIdx.x;
        uint32_t kk = i < n ? key(score[i]) : 0u;
        int is_eq = i < n && kk == lo, is_gt = i < n && kk > lo;
        unsigned eq_mask = __ballot_sync(0xffffffffu, is_eq);
        int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        if (lane == 0) { warp_counts[warp] = __popc(eq_mask); }
        __syncthreads();
        int eq_rank = base_eq + __popc(eq_mask & ((1u << lane) - 1));
        for (int w = 0; w < warp; w++) { eq_rank += warp_counts[w]; }
        int take = is_gt || (is_eq && eq_rank < need_equal);
        __syncthreads();
        unsigned take_mask = __ballot_sync(0xffffffffu, take);
        if (lane == 0) { warp_counts[warp] = __popc(take_mask); }
        __syncthreads();
        int out_rank = base_out + __popc(take_mask & ((1u << lane) - 1));
        for (int w = 0; w < warp; w++) { out_rank += warp_counts[w]; }
        if (take) { idx[out_rank] = i; }
        __syncthreads();
        if (threadIdx.x == 0) {
            int t = 0;
            for (int w = 0; w < (int)blockDim.x / 32; w++) { t += warp_counts[w]; }
            base_out += t;
        }
        if (threadIdx.x == blockDim.x - 1) { base_eq = eq_rank + is_eq; }
        __syncthreads();
    }
}

// out[i, :] = x[idx[i], :] for a row-major x [R x C]; 8 elements per thread. Traffic: k * C reads and writes.
__global__ void gather_rows_kernel(floatX* out, const floatX* x, const int* idx, int k, int C) {
    long t = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (t >= (long)k * C) { return; }
    int i = (int)(t / C), c = (int)(t % C);
    store128(out + t, load128(x + (size_t)idx[i] * C + c));
}

// out[i, r] = x[r, idx[i]] for x [R x C]: the extracted columns, K-major. Traffic: k * R strided reads.
__global__ void gather_cols_kernel(floatX* out, const floatX* x, const int* idx, int k, int R, int C) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)k * R) { return; }
    int i = (int)(t / R), r = (int)(t % R);
    out[t] = x[(size_t)r * C + idx[i]];
}

// out[idx[i], :] += part[i, :] (rows_of_out) or out[:, idx[i]] += part[:, i]; out is [M x N] row-major FP32
// or BF16 (OUT_T), part [k x N] or [M x k] FP32. Traffic: reads part, r/w k lines of out.
template <class OUT_T>
__global__ void scatter_add_kernel(OUT_T* out, const float* part, const int* idx, int k, int M, int N, bool rows_of_out) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long total = rows_of_out ? (long)k * N : (long)M * k;
    if (t >= total) { return; }
    size_t o;
    if (rows_of_out) { o = (size_t)idx[t / N] * N + t % N; }
    else { o = (size_t)(t / k) * N + idx[t % k]; }
    out[o] = (OUT_T)((float)out[o] + part[t]);
}

static inline void topk_rows(int* idx, const float* score, int n, int k, cudaStream_t s) {
    if (k <= 0 || k > n) { die("topk_rows: k=%d must be in [1, %d]", k, n); }
    topk_rows_kernel<<<1, 1024, 0, s>>>(idx, score, n, k);
    cudaCheckLaunch();
}

#endif
