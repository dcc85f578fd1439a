// Causal grouped-query attention, FlashAttention-2 style, for BF16 on tensor cores (mma.sync m16n8k16 with FP32
// accumulation, ldmatrix, cp.async): the T x T scores never reach global memory. The forward keeps the
// log-sum-exp of every query row; the backward recomputes the probabilities tile by tile. q, k, v are read in
// place from the token-major qkv [B, T, (NH + 2 NKV) HS]: NH query heads, then NKV key heads, then NKV value
// heads; query head h uses key/value head h / (NH / NKV) (GPT-2: NKV = NH). Head size 64 or 128, T a multiple
// of 8 (the last tile is masked). Deterministic: no atomics, each output element has one writer and a fixed
// summation order.
//
// Tiles live in shared memory as [rows][HS] BF16 with the 16-byte chunks of row r XOR-swizzled by r % 8, so
// that ldmatrix reads of 8 rows at one column hit 8 different bank groups. A warp owns 16-row MMA tiles; an
// accumulator acc[m][n][e] holds row 16 m + lane / 4 + 8 (e / 2) and column 8 n + 2 (lane % 4) + e % 2.
//
// On Hopper (sm_90a code only) the kernels are others: their products run on the warpgroup MMA (llmc/wgmma.cuh)
// and their tiles arrive through the TMA (llmc/tma.cuh): 64-row tiles (head size 128: two 64-column blocks, as
// llmc/wgmma.cuh lays them out), the 4 MMA warps one warpgroup; the accumulator layout is the same, so the step of
// each kernel (forward_tile, dkdv_tile, dq_tile: WG = true) is shared with the mma.sync kernels.
// flash_attention_forward / _backward run the wgmma kernels when the binary holds sm_90a code
// (flash_wgmma_available), else the mma.sync ones; dev/cuda/test_flash_wgmma.cu tests and times both
// (flash_attention_*_hs<HS, WG>).
#ifndef LLMC_FLASH_ATTENTION_CUH
#define LLMC_FLASH_ATTENTION_CUH

#include "cuda_common.cuh"
#include "wgmma.cuh"
#include "tma.cuh"

#define FLASH_WARPS 4
#define FLASH_THREADS (FLASH_WARPS * 32)

#define FLASH_BWD_TILE 64   // rows of both tiles of the backward kernels
#define FLASH_TMA_SLOTS 2                    // ring slots of the TMA kernels' streamed tiles
#define FLASH_TMA_FWD_THREADS (FLASH_THREADS + 32)   // the TMA forward's consumer warpgroup and its producer warp

// the mma.sync forward's tiles per head size (the fastest on Hopper that fit in 255 registers, build/bench_attention):
// 16-row MMA tiles per warp (the query tile has 64 fwd_mt rows) and rows of the key tile
template <int HS> struct FlashConfig {
    static constexpr int fwd_mt = HS == 64 ? 2 : 1;
    static constexpr int fwd_bn = HS == 64 ? 128 : 64;
};

extern __shared__ __align__(1024) unsigned char flash_smem[];   // 1024: wgmma's swizzle pattern repeats every 8 rows

// ----------------------------------------------------------------------------
// PTX wrappers

// 16 bytes global -> shared, asynchronously; zero-fills the destination when !valid (src is then not read)
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// 2^x on the special function unit, subnormal results flushed to zero (exp2f without the subnormal handling)
__device__ __forceinline__ float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// d += a b for one m16n8k16 tile: a the 16 x 16 A fragment, (b0, b1) the 16 x 8 B fragment
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// element offset of (row, col) in a swizzled [rows][HS] tile; col is a multiple of 8
template <int HS> __device__ __forceinline__ int swz(int row, int col) { return row * HS + (((col >> 3) ^ (row & 7)) << 3); }

// four 8x8 matrices of a swizzled tile; matrix i = lane / 8 starts at (row0 + 8 (i % 2), col0 + 8 (i / 2)) when
// a_order, else at (row0 + 8 (i / 2), col0 + 8 (i % 2)). a_order: the A fragment of rows row0.. (k = col0..), or with
// trans the B fragments of the n8 tiles col0, col0 + 8 of a [k][n] tile; !a_order: those of the n8 tiles row0,
// row0 + 8 of an [n][k] tile.
template <int HS, bool a_order, bool trans>
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const floatX* tile, int row0, int col0) {
    int lane = threadIdx.x % 32, i = lane / 8;
    int row = row0 + lane % 8 + 8 * (a_order ? (i & 1) : (i >> 1));
    int col = col0 + 8 * (a_order ? (i >> 1) : (i & 1));
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(tile + swz<HS>(row, col));
    if (trans) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
    }
}

// ----------------------------------------------------------------------------
// block- and warp-level pieces shared by the kernels

// cp.async of rows t0 .. t0 + ROWS of one head (row t at src + t * stride) into a swizzled tile; rows >= T are zeros
template <int HS, int ROWS>
__device__ __forceinline__ void load_tile(floatX* tile, const floatX* src, long stride, int t0, int T) {
    for (int i = threadIdx.x; i < ROWS * HS / 8; i += FLASH_THREADS) {
        int r = i / (HS / 8), c = i % (HS / 8) * 8, t = t0 + r;
        cp_async16(tile + swz<HS>(r, c), src + (long)min(t, T - 1) * stride + c, t < T);
    }
}

// cp.async of v[t0 .. t0 + N) into shared memory; zeros at and past T (t0 and T are multiples of 4)
template <int N>
__device__ __forceinline__ void load_row_values(float* dst, const float* v, int t0, int T) {
    for (int i = threadIdx.x; i < N / 4; i += FLASH_THREADS) {
        int t = t0 + 4 * i;
        cp_async16(dst + 4 * i, v + min(t, T - 4), t < T);
    }
}

// acc (MT 16-row tiles x N columns) += A[a_row0 .. a_row0 + 16 MT) B[0 .. N)^T, contracting the HS columns of two
// swizzled tiles: the scores q k^T and the probability gradients dO v^T
template <int HS, int MT, int N>
__device__ __forceinline__ void mma_abt(float (&acc)[MT][N / 8][4], const floatX* a, int a_row0, const floatX* b) {
    #pragma unroll
    for (int k = 0; k < HS; k += 16) {
        uint32_t af[MT][4];
        #pragma unroll
        for (int m = 0; m < MT; m++) { ldsm4<HS, true, false>(af[m], a, a_row0 + 16 * m, k); }
        #pragma unroll
        for (int n = 0; n < N; n += 16) {
            uint32_t bf[4];
            ldsm4<HS, false, false>(bf, b, n, k);
            #pragma unroll
            for (int m = 0; m < MT; m++) {
                mma_16816(acc[m][n / 8], af[m], bf[0], bf[1]);
                mma_16816(acc[m][n / 8 + 1], af[m], bf[2], bf[3]);
            }
        }
    }
}

// acc (MT 16-row tiles x HS columns) += P B: P as BF16 A fragments (K columns), B the first K rows of a swizzled
// [K][HS] tile: the outputs P v and the gradients P^T dO, dS^T q, dS k
template <int HS, int MT, int K>
__device__ __forceinline__ void mma_pb(float (&acc)[MT][HS / 8][4], const uint32_t (&p)[MT][K / 16][4], const floatX* b) {
    #pragma unroll
    for (int k = 0; k < K; k += 16) {
        #pragma unroll
        for (int n = 0; n < HS; n += 16) {
            uint32_t bf[4];
            ldsm4<HS, true, true>(bf, b, k, n);
            #pragma unroll
            for (int m = 0; m < MT; m++) {
                mma_16816(acc[m][n / 8], p[m][k / 16], bf[0], bf[1]);
                mma_16816(acc[m][n / 8 + 1], p[m][k / 16], bf[2], bf[3]);
            }
        }
    }
}

// the products on mma.sync (rows a_row0.. of tile a: this warp's) or on wgmma (WG: the warpgroup's 64 rows of tile a,
// HS = N = K = 64, MT = 1). The wgmma ones run asynchronously: their accumulators and P fragments are read or written
// only after flash_wait; several issued products overlap.
template <int HS, int MT, int N, bool WG>
__device__ __forceinline__ void flash_abt(float (&acc)[MT][N / 8][4], const floatX* a, int a_row0, const floatX* b) {
    if constexpr (WG) { static_assert(MT == 1 && N == 64, "wgmma score tiles are 64 x 64"); wgmma_abt_issue<HS>(acc, a, b); }
    else { mma_abt<HS, MT, N>(acc, a, a_row0, b); }
}
template <int HS, int MT, int K, bool WG>
__device__ __forceinline__ void flash_pb(float (&acc)[MT][HS / 8][4], uint32_t (&p)[MT][K / 16][4], const floatX* b) {
    if constexpr (WG) { static_assert(MT == 1 && K == 64, "wgmma products take 64 x 64 P tiles"); wgmma_pb_issue<HS>(acc, p, b); }
    else { mma_pb<HS, MT, K>(acc, p, b); }
}
// waits for the issued wgmma products (WG); the registers they write or read, `regs`, are pinned after the wait
template <bool WG, class... Regs> __device__ __forceinline__ void flash_wait(Regs&... regs) {
    if constexpr (WG) { wgmma_wait_all(); (wgmma_fence_operand(regs), ...); }
}
// pins accumulators (WG) before the first of several products is issued: their zeroing then precedes it, and no
// register write sits between two wgmma issues (which would make the compiler wait for the first)
template <bool WG, class... Regs> __device__ __forceinline__ void flash_pin(Regs&... regs) {
    if constexpr (WG) { (wgmma_fence_operand(regs), ...); }
}

// the BF16 A fragments of an accumulator (the C layout of n8 tiles 2j, 2j + 1 is the A layout of k16 step j)
template <int MT, int N>
__device__ __forceinline__ void to_a_fragments(uint32_t (&p)[MT][N / 16][4], const float (&s)[MT][N / 8][4]) {
    #pragma unroll
    for (int m = 0; m < MT; m++) {
        #pragma unroll
        for (int j = 0; j < N / 16; j++) {
            #pragma unroll
            for (int i = 0; i < 4; i++) {
                const float* c = &s[m][2 * j + i / 2][2 * (i % 2)];
                __nv_bfloat162 v = __floats2bfloat162_rn(c[0], c[1]);
                p[m][j][i] = *reinterpret_cast<uint32_t*>(&v);
            }
        }
    }
}

// causal mask: -inf where the key comes after the query; rows start at row0, columns at col0, and the rows are
// the queries (forward, dq) or the keys (dk, dv)
template <int MT, int N, bool keys_are_rows>
__device__ __forceinline__ void causal_mask(float (&s)[MT][N / 8][4], int row0, int col0) {
    int lane = threadIdx.x % 32;
    #pragma unroll
    for (int m = 0; m < MT; m++) {
        #pragma unroll
        for (int n = 0; n < N / 8; n++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = row0 + 16 * m + lane / 4 + 8 * (e / 2), c = col0 + 8 * n + 2 * (lane % 4) + e % 2;
                if (keys_are_rows ? r > c : c > r) { s[m][n][e] = -INFINITY; }
            }
        }
    }
}

// writes acc * mul as BF16 rows t = t0 + row (t < T) of one head (row t at dst + t * stride)
template <int HS, int MT>
__device__ __forceinline__ void store_rows(floatX* dst, long stride, const float (&acc)[MT][HS / 8][4], float mul, int t0, int T) {
    int lane = threadIdx.x % 32;
    #pragma unroll
    for (int m = 0; m < MT; m++) {
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            int t = t0 + 16 * m + lane / 4 + 8 * half;
            if (t >= T) { continue; }
            #pragma unroll
            for (int n = 0; n < HS / 8; n++) {
                *reinterpret_cast<__nv_bfloat162*>(dst + (long)t * stride + 8 * n + 2 * (lane % 4)) =
                    __floats2bfloat162_rn(acc[m][n][2 * half] * mul, acc[m][n][2 * half + 1] * mul);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// kernels; grid (tiles, NH, B), (tiles, NKV, B) for dk, dv. GQA: NKV < NH. The NKV = NH instances (GPT-2) find their
// heads without the integer divisions by NH / NKV, whose registers the HS 64 forward lacks (with GQA it spills 12 bytes)

// out and lse of one query tile of one (b, h): online softmax over the key tiles of kv head h / (NH / NKV) up to
// the diagonal, K/V double-buffered. Traffic: reads the tile's q rows once and k, v up to the diagonal (mostly
// from L2), writes out, lse.
// where query head h of sequence b and its key/value head kvh sit in qkv [B, T, (NH + 2 nkv) HS]: q at `q` = qkv +
// off, k and v at k = q + koff and v = q + voff, rows `stride` apart (the same offsets address dqkv)
struct FlashHeads { const floatX *q, *k, *v; long stride, off; int koff, voff; };
template <int HS>
__device__ __forceinline__ FlashHeads flash_heads(const floatX* qkv, int b, int h, int kvh, int T, int NH, int nkv) {
    FlashHeads f;
    f.stride = (long)(NH + 2 * nkv) * HS;
    f.off = (long)b * T * f.stride + h * HS;
    f.q = qkv + f.off;
    f.koff = (NH + kvh - h) * HS;
    f.voff = f.koff + nkv * HS;
    f.k = f.q + f.koff;
    f.v = f.q + f.voff;
    return f;
}

// key/value tile j of the heads f into the double buffers sk, sv (buffer j % 2), as one cp.async group
template <int HS, int BN>
__device__ __forceinline__ void load_kv_tile(floatX* sk, floatX* sv, const FlashHeads& f, int j, int T) {
    load_tile<HS, BN>(sk + j % 2 * BN * HS, f.k, f.stride, j * BN, T);
    load_tile<HS, BN>(sv + j % 2 * BN * HS, f.v, f.stride, j * BN, T);
    cp_async_commit();
}

// one key tile's step of the forward for this warp's rows (from wq0; wgmma: the warpgroup's 64 rows of sq): the scores
// q k^T of the tile at sk (key rows from k0), the causal mask, the online softmax (row max mrow in log2 units, this
// thread's partial row sums lrow, o rescaled) and o += P v with the tile at sv
template <int HS, int MT, int BN, bool WG>
__device__ __forceinline__ void forward_tile(float (&o)[MT][HS / 8][4], float (&mrow)[MT][2], float (&lrow)[MT][2], const floatX* sq,
                                             const floatX* sk, const floatX* sv, int wq0, int k0, float scale_log2) {
    int warp = threadIdx.x / 32 % FLASH_WARPS;
    float s[MT][BN / 8][4] = {};
    flash_abt<HS, MT, BN, WG>(s, sq, warp * 16 * MT, sk);
    flash_wait<WG>(s);
    if (k0 + BN - 1 > wq0) { causal_mask<MT, BN, false>(s, wq0, k0); }
    // tile 0 holds key 0, visible to every row: the row max is finite from the first tile on
    #pragma unroll
    for (int m = 0; m < MT; m++) {
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            float mx = -INFINITY;
            #pragma unroll
            for (int n = 0; n < BN / 8; n++) { mx = fmaxf(mx, fmaxf(s[m][n][2 * half], s[m][n][2 * half + 1])); }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float mnew = fmaxf(mrow[m][half], mx * scale_log2);
            float alpha = exp2_ftz(mrow[m][half] - mnew);
            mrow[m][half] = mnew;
            float sum = 0.0f;
            #pragma unroll
            for (int n = 0; n < BN / 8; n++) {
                for (int e = 2 * half; e < 2 * half + 2; e++) {
                    s[m][n][e] = exp2_ftz(fmaf(s[m][n][e], scale_log2, -mnew));
                    sum += s[m][n][e];
                }
            }
            lrow[m][half] = lrow[m][half] * alpha + sum;
            #pragma unroll
            for (int n = 0; n < HS / 8; n++) { o[m][n][2 * half] *= alpha; o[m][n][2 * half + 1] *= alpha; }
        }
    }
    uint32_t p[MT][BN / 16][4];
    to_a_fragments<MT, BN>(p, s);
    flash_pb<HS, MT, BN, WG>(o, p, sv);
    flash_wait<WG>(o, p);
}

// the forward's end for this warp's rows t = wq0.. (t < T) of one (b, h): out rows (row t at out + t * stride) = o / (row
// sum), lse[t] = the rows' natural log-sum-exp
template <int HS, int MT>
__device__ __forceinline__ void forward_epilogue(floatX* out, long stride, float* lse, float (&o)[MT][HS / 8][4],
                                                 const float (&mrow)[MT][2], const float (&lrow)[MT][2], int wq0, int T) {
    int lane = threadIdx.x % 32;
    #pragma unroll
    for (int m = 0; m < MT; m++) {
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            float l = lrow[m][half];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            float inv = 1.0f / l;
            #pragma unroll
            for (int n = 0; n < HS / 8; n++) { o[m][n][2 * half] *= inv; o[m][n][2 * half + 1] *= inv; }
            int t = wq0 + 16 * m + lane / 4 + 8 * half;
            if (t < T && lane % 4 == 0) { lse[t] = (mrow[m][half] + log2f(l)) / LOG2E_F; }
        }
    }
    store_rows<HS, MT>(out, stride, o, 1.0f, wq0, T);
}

template <int HS, int MT, bool GQA>
__global__ void __launch_bounds__(FLASH_THREADS) flash_forward_kernel(floatX* out, float* lse, const floatX* qkv, int T, int NH,
                                                                      int NKV, float scale_log2) {
    constexpr int BM = FLASH_WARPS * 16 * MT, BN = FlashConfig<HS>::fwd_bn;
    floatX* sq = (floatX*)flash_smem;
    floatX* sk = sq + BM * HS;            // 2 buffers
    floatX* sv = sk + 2 * BN * HS;        // 2 buffers
    int warp = threadIdx.x / 32, h = blockIdx.y, b = blockIdx.z, C = NH * HS;
    int q0 = (gridDim.x - 1 - blockIdx.x) * BM;   // the longest tiles start first
    int wq0 = q0 + warp * 16 * MT;                // this warp's first query row
    int nkv = GQA ? NKV : NH;
    FlashHeads f = flash_heads<HS>(qkv, b, h, GQA ? h / (NH / NKV) : h, T, NH, nkv);
    int ntiles = (min(q0 + BM, T) - 1) / BN + 1;
    load_tile<HS, BM>(sq, f.q, f.stride, q0, T);
    load_kv_tile<HS, BN>(sk, sv, f, 0, T);
    float o[MT][HS / 8][4] = {}, mrow[MT][2], lrow[MT][2];   // row max (log2 units) and this thread's partial row sum
    for (int m = 0; m < MT; m++) { mrow[m][0] = mrow[m][1] = -INFINITY; lrow[m][0] = lrow[m][1] = 0.0f; }
    for (int j = 0; j < ntiles; j++) {
        if (j + 1 < ntiles) { load_kv_tile<HS, BN>(sk, sv, f, j + 1, T); cp_async_wait<1>(); } else { cp_async_wait<0>(); }
        __syncthreads();
        int k0 = j * BN;
        if (k0 <= wq0 + 16 * MT - 1) {   // some key of the tile is visible to this warp
            forward_tile<HS, MT, BN, false>(o, mrow, lrow, sq, sk + j % 2 * BN * HS, sv + j % 2 * BN * HS, wq0, k0, scale_log2);
        }
        __syncthreads();
    }
    forward_epilogue<HS, MT>(out + (long)b * T * C + h * HS, C, lse + ((long)b * NH + h) * T, o, mrow, lrow, wq0, T);
}

// thread 0 initializes the ring (drained by `consumers` warps, the CTA's first) and `once`, the barrier of the tiles
// loaded once; then the whole CTA syncs
template <int SLOTS> __device__ __forceinline__ void flash_tma_init(TmaRing<SLOTS>* ring, uint64_t* once, int consumers) {
    if (threadIdx.x == 0) { ring->init(consumers); mbar_init(once, 1); mbar_init_fence(); }
    __syncthreads();
}
// The TMA kernels' loads: load_once() (the tiles read by every step) and load_step(i) for steps 0 .. nsteps through a
// TmaRing of FLASH_TMA_SLOTS slots, issued by a producer warp (PRODUCER_WARP: the warp after the `consumers` warps; it
// issues them all, then leaves: returns false) or by thread 0, which issues the first slots here and each later one
// in flash_tma_refill. Returns true in the consumer warps.
template <bool PRODUCER_WARP, class Once, class Step>
__device__ __forceinline__ bool flash_tma_start(int nsteps, int consumers, Once load_once, Step load_step) {
    if (PRODUCER_WARP) {
        if (threadIdx.x / 32 == consumers) {
            if (threadIdx.x % 32 == 0) { load_once(); for (int i = 0; i < nsteps; i++) { load_step(i); } }
            return false;
        }
    } else if (threadIdx.x == 0) {
        load_once();
        for (int i = 0; i < min(FLASH_TMA_SLOTS, nsteps); i++) { load_step(i); }
    }
    return true;
}
// after a consumer warp released step i (kernels without a producer warp): thread 0 loads step i + SLOTS into the slot
// once every warp has released it
template <class Step> __device__ __forceinline__ void flash_tma_refill(int i, int nsteps, Step load_step) {
    if (threadIdx.x == 0 && i + FLASH_TMA_SLOTS < nsteps) { load_step(i + FLASH_TMA_SLOTS); }
    __syncwarp();   // lane 0 may have waited for the slot: the warp's next wgmma needs all lanes
}
// rows r0 .. r0 + 64 of one head (columns col .. col + HS of sequence b; a tma_map_bf16_3d map in boxes of 64 rows) into
// the tile at dst in llmc/wgmma.cuh's layout (HS / 64 swizzled [64][64] column blocks); completes on bar
template <int HS>
__device__ __forceinline__ void flash_tma_head_tile(floatX* dst, const CUtensorMap* map, uint64_t* bar, int col, int r0, int b) {
    for (int blk = 0; blk < HS / 64; blk++) { tma_load_3d(dst + blk * 64 * 64, map, bar, col + 64 * blk, r0, b); }
}
// key/value tile j (key rows from j BN) of the heads at columns kcol, vcol of sequence b into slot j % SLOTS of sk, sv
template <int HS, int BN, int SLOTS>
__device__ __forceinline__ void flash_tma_kv_tile(TmaRing<SLOTS>* ring, floatX* sk, floatX* sv, const CUtensorMap* map, int j, int kcol,
                                                  int vcol, int b) {
    static_assert(BN == 64, "the maps' boxes are 64 rows");
    uint64_t* bar = ring->acquire(j, 2 * BN * HS * (int)sizeof(floatX));
    int slot = j % SLOTS;
    flash_tma_head_tile<HS>(sk + slot * BN * HS, map, bar, kcol, j * BN, b);
    flash_tma_head_tile<HS>(sv + slot * BN * HS, map, bar, vcol, j * BN, b);
}

// The wgmma forward with its loads on the TMA (sm_90a): the 64 q rows once, the K/V tiles up to the diagonal through
// a TmaRing of FLASH_TMA_SLOTS slots, issued by a producer warp (the CTA's last); the consumer warpgroup runs
// forward_tile over the tiles without CTA barriers in its loop. qkv_map: tma_map_bf16_3d of qkv as
// [B][T][(NH + 2 NKV) HS] in boxes of 64 rows; rows past T load as zeros. Traffic: reads the tile's q once and k, v up
// to the diagonal (mostly from L2); writes out and lse.
template <int HS, bool GQA>
__global__ void __launch_bounds__(FLASH_TMA_FWD_THREADS) flash_forward_tma_kernel(const __grid_constant__ CUtensorMap qkv_map, floatX* out,
                                                                                 float* lse, int T, int NH, int NKV, float scale_log2) {
    constexpr int BM = 64, BN = 64, SLOTS = FLASH_TMA_SLOTS;
    floatX* sq = (floatX*)flash_smem;
    floatX* sk = sq + BM * HS;                       // SLOTS buffers
    floatX* sv = sk + SLOTS * BN * HS;               // SLOTS buffers
    TmaRing<SLOTS>* ring = (TmaRing<SLOTS>*)(sv + SLOTS * BN * HS);
    uint64_t* q_full = (uint64_t*)(ring + 1);
    int warp = threadIdx.x / 32, h = blockIdx.y, b = blockIdx.z, C = NH * HS;
    int q0 = (gridDim.x - 1 - blockIdx.x) * BM;   // the longest tiles start first
    int nkv = GQA ? NKV : NH, kvh = GQA ? h / (NH / NKV) : h;
    int ntiles = (min(q0 + BM, T) - 1) / BN + 1;
    flash_tma_init(ring, q_full, FLASH_WARPS);
    auto load_q = [&]() {
        mbar_arrive_expect_tx(q_full, BM * HS * (int)sizeof(floatX));
        flash_tma_head_tile<HS>(sq, &qkv_map, q_full, h * HS, q0, b);
    };
    auto load_kv = [&](int j) { flash_tma_kv_tile<HS, BN>(ring, sk, sv, &qkv_map, j, (NH + kvh) * HS, (NH + nkv + kvh) * HS, b); };
    if (!flash_tma_start<true>(ntiles, FLASH_WARPS, load_q, load_kv)) { return; }
    int wq0 = q0 + warp * 16;   // this warp's first query row
    float o[1][HS / 8][4] = {}, mrow[1][2] = {{-INFINITY, -INFINITY}}, lrow[1][2] = {};
    mbar_wait(q_full, 0);
    for (int j = 0; j < ntiles; j++) {
        int slot = j % SLOTS;
        ring->wait(j);
        forward_tile<HS, 1, BN, true>(o, mrow, lrow, sq, sk + slot * BN * HS, sv + slot * BN * HS, wq0, j * BN, scale_log2);
        ring->release(j);
    }
    forward_epilogue<HS, 1>(out + (long)b * T * C + h * HS, C, lse + ((long)b * NH + h) * T, o, mrow, lrow, wq0, T);
}

// delta[b, h, t] = sum_d dout[b, t, h, d] out[b, t, h, d], the row term of the softmax backward; HS / 8 lanes per
// row, 16 bytes each. Traffic: reads dout and out once, writes B NH T floats.
template <int HS>
__global__ void flash_backward_delta_kernel(float* delta, const floatX* dout, const floatX* out, int B, int T, int NH) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x, row = i / (HS / 8);   // row = (b T + t) NH + h
    bool valid = row < (long)B * T * NH;
    float sum = 0.0f;
    if (valid) {
        x128 d = load128cs(dout + i * 8), o = load128cs(out + i * 8);
        for (int k = 0; k < 8; k++) { sum += (float)d[k] * (float)o[k]; }
    }
    for (int off = HS / 16; off > 0; off >>= 1) { sum += __shfl_xor_sync(0xffffffffu, sum, off); }
    if (valid && i % (HS / 8) == 0) {
        int h = (int)(row % NH), t = (int)(row / NH % T);
        long b = row / NH / T;
        delta[(b * NH + h) * T + t] = sum;
    }
}

// one query tile's step of dk, dv for this warp's key rows (from wk0; wgmma: the warpgroup's 64 rows of sk, sv):
// P^T = exp2(scale k q^T - lse) and dS^T = P^T (v dO^T - delta) for the query tile at sq, sdo (rows from q0; their lse
// and delta at slse, sdelta), then dv += P^T dO and dk += dS^T q. Rows past T have q = dO = lse = delta = 0: P = 1
// there but dS = 0 and P dO = 0.
template <int HS, int BN, bool WG>
__device__ __forceinline__ void dkdv_tile(float (&dk)[1][HS / 8][4], float (&dv)[1][HS / 8][4], const floatX* sk, const floatX* sv,
                                          const floatX* sq, const floatX* sdo, const float* slse, const float* sdelta, int wk0, int q0,
                                          float scale_log2) {
    int warp = threadIdx.x / 32 % FLASH_WARPS, lane = threadIdx.x % 32;
    float s[1][BN / 8][4] = {}, dp[1][BN / 8][4] = {};
    flash_pin<WG>(s, dp);
    flash_abt<HS, 1, BN, WG>(s, sk, warp * 16, sq);
    flash_abt<HS, 1, BN, WG>(dp, sv, warp * 16, sdo);
    flash_wait<WG>(s, dp);
    if (q0 < wk0 + 15) { causal_mask<1, BN, true>(s, wk0, q0); }
    #pragma unroll
    for (int n = 0; n < BN / 8; n++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            int c = 8 * n + 2 * (lane % 4) + e % 2;
            float p = exp2_ftz(fmaf(s[0][n][e], scale_log2, -slse[c] * LOG2E_F));
            s[0][n][e] = p;
            dp[0][n][e] = p * (dp[0][n][e] - sdelta[c]);
        }
    }
    uint32_t fp[1][BN / 16][4], fds[1][BN / 16][4];
    to_a_fragments<1, BN>(fp, s);
    to_a_fragments<1, BN>(fds, dp);
    flash_pb<HS, 1, BN, WG>(dv, fp, sdo);
    flash_pb<HS, 1, BN, WG>(dk, fds, sq);
    flash_wait<WG>(dv, dk, fp, fds);
}

// one key tile's step of dq for this warp's query rows (from wq0; wgmma: the warpgroup's 64 rows of sq, sdo): P =
// exp2(scale q k^T - lse) and dS = P (dO v^T - delta) for the key tile at sk, sv (rows from k0), then dq += dS k.
// nlse, dlt: this thread's two rows' -lse in log2 units and delta (dq_row_terms)
template <int HS, int BN, bool WG>
__device__ __forceinline__ void dq_tile(float (&dq)[1][HS / 8][4], const floatX* sq, const floatX* sdo, const floatX* sk, const floatX* sv,
                                        const float (&nlse)[2], const float (&dlt)[2], int wq0, int k0, float scale_log2) {
    int warp = threadIdx.x / 32 % FLASH_WARPS;
    float s[1][BN / 8][4] = {}, dp[1][BN / 8][4] = {};
    flash_pin<WG>(s, dp);
    flash_abt<HS, 1, BN, WG>(s, sq, warp * 16, sk);
    flash_abt<HS, 1, BN, WG>(dp, sdo, warp * 16, sv);
    flash_wait<WG>(s, dp);
    if (k0 + BN - 1 > wq0) { causal_mask<1, BN, false>(s, wq0, k0); }
    #pragma unroll
    for (int n = 0; n < BN / 8; n++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            float p = exp2_ftz(fmaf(s[0][n][e], scale_log2, nlse[e / 2]));
            dp[0][n][e] = p * (dp[0][n][e] - dlt[e / 2]);
        }
    }
    uint32_t f[1][BN / 16][4];
    to_a_fragments<1, BN>(f, dp);
    flash_pb<HS, 1, BN, WG>(dq, f, sk);
    flash_wait<WG>(dq, f);
}

// this thread's two query rows of a dq tile (from wq0): -lse in log2 units and delta (0 past T, where nothing is written);
// lse, delta point at the (b, h) rows
__device__ __forceinline__ void dq_row_terms(float (&nlse)[2], float (&dlt)[2], const float* lse, const float* delta, int wq0, int T) {
    int lane = threadIdx.x % 32;
    for (int half = 0; half < 2; half++) {
        int t = wq0 + lane / 4 + 8 * half;
        nlse[half] = t < T ? -lse[t] * LOG2E_F : 0.0f;
        dlt[half] = t < T ? delta[t] : 0.0f;
    }
}

// dk, dv of one 64-key tile of one (b, kv head g): loops over the NH / NKV query heads of g in order and, for each,
// over the query tiles from the diagonal to T (q, dO, lse, delta double-buffered), recomputing P^T = exp(scale
// k q^T - lse) and dS^T = P^T (v dO^T - delta). Traffic: reads the tile's k, v once and the group's q, dO, lse,
// delta from the diagonal on (mostly from L2); writes the k, v slices of dqkv.
template <int HS, bool GQA>
__global__ void __launch_bounds__(FLASH_THREADS) flash_backward_dkdv_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv,
                                                                            const float* lse, const float* delta, int T, int NH,
                                                                            int NKV, float scale_log2) {
    constexpr int BM = FLASH_WARPS * 16, BN = FLASH_BWD_TILE;
    floatX* sk = (floatX*)flash_smem;
    floatX* sv = sk + BM * HS;
    floatX* sq = sv + BM * HS;                   // 2 buffers
    floatX* sdo = sq + 2 * BN * HS;              // 2 buffers
    float* slse = (float*)(sdo + 2 * BN * HS);   // 2 buffers
    float* sdelta = slse + 2 * BN;               // 2 buffers
    int warp = threadIdx.x / 32, g = blockIdx.y, b = blockIdx.z, C = NH * HS;
    int nkv = GQA ? NKV : NH, group = GQA ? NH / NKV : 1, h = g * group;   // the group's query heads h .. h + group
    int k0 = blockIdx.x * BM, wk0 = k0 + warp * 16;   // the longest tiles (first keys) start first
    long rows = ((long)b * NH + h) * T;
    FlashHeads f = flash_heads<HS>(qkv, b, h, g, T, NH, nkv);   // k, v of kv head g
    const floatX* dob = dout + (long)b * T * C + h * HS;
    int i0 = k0 / BN, ntiles = (T + BN - 1) / BN - i0;
    auto load_q = [&](int i) {   // step i: query tile i0 + i % ntiles of query head h + i / ntiles, into buffer i % 2
        int hg = GQA ? i / ntiles : 0, t0 = (i0 + i - hg * ntiles) * BN, buf = i % 2;
        load_tile<HS, BN>(sq + buf * BN * HS, f.q + hg * HS, f.stride, t0, T);
        load_tile<HS, BN>(sdo + buf * BN * HS, dob + hg * HS, C, t0, T);
        load_row_values<BN>(slse + buf * BN, lse + rows + (long)hg * T, t0, T);
        load_row_values<BN>(sdelta + buf * BN, delta + rows + (long)hg * T, t0, T);
        cp_async_commit();
    };
    load_tile<HS, BM>(sk, f.k, f.stride, k0, T);
    load_tile<HS, BM>(sv, f.v, f.stride, k0, T);
    load_q(0);
    float dk[1][HS / 8][4] = {}, dv[1][HS / 8][4] = {};
    for (int i = 0; i < group * ntiles; i++) {   // head-major: the fixed summation order of dk, dv over the group
        if (i + 1 < group * ntiles) { load_q(i + 1); cp_async_wait<1>(); } else { cp_async_wait<0>(); }
        __syncthreads();
        int q0 = (i0 + (GQA ? i % ntiles : i)) * BN;
        if (q0 + BN - 1 >= wk0) {   // some query of the tile sees a key of this warp
            dkdv_tile<HS, BN, false>(dk, dv, sk, sv, sq + i % 2 * BN * HS, sdo + i % 2 * BN * HS, slse + i % 2 * BN,
                                  sdelta + i % 2 * BN, wk0, q0, scale_log2);
        }
        __syncthreads();
    }
    floatX* dkb = dqkv + f.off + f.koff;
    store_rows<HS, 1>(dkb, f.stride, dk, scale_log2 / LOG2E_F, wk0, T);
    store_rows<HS, 1>(dkb + nkv * HS, f.stride, dv, 1.0f, wk0, T);
}

// dq of one 64-query tile of one (b, h): loops over the key tiles of kv head h / (NH / NKV) up to the diagonal
// (k, v double-buffered), recomputing P = exp(scale q k^T - lse) and dS = P (dO v^T - delta). Traffic: reads the
// tile's q, dO, lse, delta once and k, v up to the diagonal (mostly from L2); writes the q slice of dqkv.
template <int HS, bool GQA>
__global__ void __launch_bounds__(FLASH_THREADS) flash_backward_dq_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv,
                                                                          const float* lse, const float* delta, int T, int NH,
                                                                          int NKV, float scale_log2) {
    constexpr int BM = FLASH_WARPS * 16, BN = FLASH_BWD_TILE;
    floatX* sq = (floatX*)flash_smem;
    floatX* sdo = sq + BM * HS;
    floatX* sk = sdo + BM * HS;       // 2 buffers
    floatX* sv = sk + 2 * BN * HS;    // 2 buffers
    int warp = threadIdx.x / 32, h = blockIdx.y, b = blockIdx.z, C = NH * HS;
    int q0 = (gridDim.x - 1 - blockIdx.x) * BM, wq0 = q0 + warp * 16;   // the longest tiles start first
    int nkv = GQA ? NKV : NH;
    long rows = ((long)b * NH + h) * T;
    FlashHeads f = flash_heads<HS>(qkv, b, h, GQA ? h / (NH / NKV) : h, T, NH, nkv);
    int ntiles = (min(q0 + BM, T) - 1) / BN + 1;
    load_tile<HS, BM>(sq, f.q, f.stride, q0, T);
    load_tile<HS, BM>(sdo, dout + (long)b * T * C + h * HS, C, q0, T);
    load_kv_tile<HS, BN>(sk, sv, f, 0, T);
    float nlse[2], dlt[2];
    dq_row_terms(nlse, dlt, lse + rows, delta + rows, wq0, T);
    float dq[1][HS / 8][4] = {};
    for (int j = 0; j < ntiles; j++) {
        if (j + 1 < ntiles) { load_kv_tile<HS, BN>(sk, sv, f, j + 1, T); cp_async_wait<1>(); } else { cp_async_wait<0>(); }
        __syncthreads();
        int k0 = j * BN;
        if (k0 <= wq0 + 15) {   // some key of the tile is visible to this warp
            dq_tile<HS, BN, false>(dq, sq, sdo, sk + j % 2 * BN * HS, sv + j % 2 * BN * HS, nlse, dlt, wq0, k0, scale_log2);
        }
        __syncthreads();
    }
    store_rows<HS, 1>(dqkv + f.off, f.stride, dq, scale_log2 / LOG2E_F, wq0, T);
}

// The wgmma dk, dv with its loads on the TMA (sm_90a): the k, v tiles once, each step's q, dO tiles and lse, delta
// rows through a TmaRing, issued by thread 0 (flash_tma_start, flash_tma_refill: a producer warp beside the head-size-128
// warpgroup would leave it too few registers); the warpgroup runs dkdv_tile in
// flash_backward_dkdv_kernel's order (bit for bit the same dk, dv). Maps: qkv_map and dout_map (tma_map_bf16_3d,
// [B][T][row] in boxes of 64 rows), lse_map and delta_map (tma_map_f32_2d, [B NH][T] in boxes of 64); rows past T load
// as zeros. Traffic: as flash_backward_dkdv_kernel's.
template <int HS, bool GQA>
__global__ void __launch_bounds__(FLASH_THREADS) flash_backward_dkdv_tma_kernel(
    const __grid_constant__ CUtensorMap qkv_map, const __grid_constant__ CUtensorMap dout_map, const __grid_constant__ CUtensorMap lse_map,
    const __grid_constant__ CUtensorMap delta_map, floatX* dqkv, int T, int NH, int NKV, float scale_log2) {
    constexpr int BM = 64, BN = FLASH_BWD_TILE, SLOTS = FLASH_TMA_SLOTS, TILE_BYTES = 64 * HS * (int)sizeof(floatX);
    floatX* sk = (floatX*)flash_smem;
    floatX* sv = sk + BM * HS;
    floatX* sq = sv + BM * HS;                       // SLOTS buffers
    floatX* sdo = sq + SLOTS * BN * HS;              // SLOTS buffers
    float* slse = (float*)(sdo + SLOTS * BN * HS);   // SLOTS buffers
    float* sdelta = slse + SLOTS * BN;               // SLOTS buffers
    TmaRing<SLOTS>* ring = (TmaRing<SLOTS>*)(sdelta + SLOTS * BN);
    uint64_t* kv_full = (uint64_t*)(ring + 1);
    int warp = threadIdx.x / 32, g = blockIdx.y, b = blockIdx.z;
    int nkv = GQA ? NKV : NH, group = GQA ? NH / NKV : 1, h = g * group;   // the group's query heads h .. h + group
    int k0 = blockIdx.x * BM;   // the longest tiles (first keys) start first
    int i0 = k0 / BN, ntiles = (T + BN - 1) / BN - i0, nsteps = group * ntiles;
    flash_tma_init(ring, kv_full, FLASH_WARPS);
    auto load_kv = [&]() {
        mbar_arrive_expect_tx(kv_full, 2 * TILE_BYTES);
        flash_tma_head_tile<HS>(sk, &qkv_map, kv_full, (NH + g) * HS, k0, b);
        flash_tma_head_tile<HS>(sv, &qkv_map, kv_full, (NH + nkv + g) * HS, k0, b);
    };
    auto load_q = [&](int i) {   // step i: query tile i0 + i % ntiles of query head h + i / ntiles
        uint64_t* bar = ring->acquire(i, 2 * TILE_BYTES + 2 * BN * (int)sizeof(float));
        int slot = i % SLOTS, hg = GQA ? i / ntiles : 0, t0 = (i0 + i - hg * ntiles) * BN;
        flash_tma_head_tile<HS>(sq + slot * BN * HS, &qkv_map, bar, (h + hg) * HS, t0, b);
        flash_tma_head_tile<HS>(sdo + slot * BN * HS, &dout_map, bar, (h + hg) * HS, t0, b);
        tma_load_2d(slse + slot * BN, &lse_map, bar, t0, b * NH + h + hg);
        tma_load_2d(sdelta + slot * BN, &delta_map, bar, t0, b * NH + h + hg);
    };
    flash_tma_start<false>(nsteps, FLASH_WARPS, load_kv, load_q);
    int wk0 = k0 + warp * 16;   // this warp's first key row
    float dk[1][HS / 8][4] = {}, dv[1][HS / 8][4] = {};
    mbar_wait(kv_full, 0);
    for (int i = 0; i < nsteps; i++) {   // head-major: the fixed summation order of dk, dv over the group
        int slot = i % SLOTS, q0 = (i0 + (GQA ? i % ntiles : i)) * BN;
        ring->wait(i);
        dkdv_tile<HS, BN, true>(dk, dv, sk, sv, sq + slot * BN * HS, sdo + slot * BN * HS, slse + slot * BN, sdelta + slot * BN, wk0,
                                q0, scale_log2);
        ring->release(i);
        flash_tma_refill(i, nsteps, load_q);
    }
    long stride = (long)(NH + 2 * nkv) * HS;
    floatX* dkb = dqkv + (long)b * T * stride + (NH + g) * HS;
    store_rows<HS, 1>(dkb, stride, dk, scale_log2 / LOG2E_F, wk0, T);
    store_rows<HS, 1>(dkb + nkv * HS, stride, dv, 1.0f, wk0, T);
}

// The wgmma dq with its loads on the TMA (sm_90a): the q, dO tiles once, the K/V tiles up to the diagonal through a
// TmaRing, issued by thread 0 as in flash_backward_dkdv_tma_kernel; the warpgroup runs dq_tile in flash_backward_dq_kernel's
// order (bit for bit the same dq). Maps as flash_backward_dkdv_tma_kernel's. Traffic: as flash_backward_dq_kernel's.
template <int HS, bool GQA>
__global__ void __launch_bounds__(FLASH_THREADS) flash_backward_dq_tma_kernel(
    const __grid_constant__ CUtensorMap qkv_map, const __grid_constant__ CUtensorMap dout_map, floatX* dqkv, const float* lse,
    const float* delta, int T, int NH, int NKV, float scale_log2) {
    constexpr int BM = 64, BN = FLASH_BWD_TILE, SLOTS = FLASH_TMA_SLOTS, TILE_BYTES = 64 * HS * (int)sizeof(floatX);
    floatX* sq = (floatX*)flash_smem;
    floatX* sdo = sq + BM * HS;
    floatX* sk = sdo + BM * HS;           // SLOTS buffers
    floatX* sv = sk + SLOTS * BN * HS;    // SLOTS buffers
    TmaRing<SLOTS>* ring = (TmaRing<SLOTS>*)(sv + SLOTS * BN * HS);
    uint64_t* q_full = (uint64_t*)(ring + 1);
    int warp = threadIdx.x / 32, h = blockIdx.y, b = blockIdx.z;
    int q0 = (gridDim.x - 1 - blockIdx.x) * BM;   // the longest tiles start first
    int nkv = GQA ? NKV : NH, kvh = GQA ? h / (NH / NKV) : h;
    int ntiles = (min(q0 + BM, T) - 1) / BN + 1;
    flash_tma_init(ring, q_full, FLASH_WARPS);
    auto load_q = [&]() {
        mbar_arrive_expect_tx(q_full, 2 * TILE_BYTES);
        flash_tma_head_tile<HS>(sq, &qkv_map, q_full, h * HS, q0, b);
        flash_tma_head_tile<HS>(sdo, &dout_map, q_full, h * HS, q0, b);
    };
    auto load_kv = [&](int j) { flash_tma_kv_tile<HS, BN>(ring, sk, sv, &qkv_map, j, (NH + kvh) * HS, (NH + nkv + kvh) * HS, b); };
    flash_tma_start<false>(ntiles, FLASH_WARPS, load_q, load_kv);
    int wq0 = q0 + warp * 16;   // this warp's first query row
    long rows = ((long)b * NH + h) * T;
    float nlse[2], dlt[2];
    dq_row_terms(nlse, dlt, lse + rows, delta + rows, wq0, T);
    float dq[1][HS / 8][4] = {};
    mbar_wait(q_full, 0);
    for (int j = 0; j < ntiles; j++) {
        int slot = j % SLOTS;
        ring->wait(j);
        dq_tile<HS, BN, true>(dq, sq, sdo, sk + slot * BN * HS, sv + slot * BN * HS, nlse, dlt, wq0, j * BN, scale_log2);
        ring->release(j);
        flash_tma_refill(j, ntiles, load_kv);
    }
    long stride = (long)(NH + 2 * nkv) * HS;
    store_rows<HS, 1>(dqkv + (long)b * T * stride + h * HS, stride, dq, scale_log2 / LOG2E_F, wq0, T);
}

// ----------------------------------------------------------------------------
// host side

// why a shape (T, NH query heads, NKV key/value heads, head size HS) is not supported, or NULL
static inline const char* flash_attention_unsupported(int T, int NH, int NKV, int HS) {
    if (NH <= 0 || NKV <= 0 || NH % NKV != 0) { return "the key/value heads NKV must divide the query heads NH"; }
    if (HS != 64 && HS != 128) { return "head size HS must be 64 or 128"; }
    if (T <= 0 || T % 8 != 0) { return "sequence length T must be a positive multiple of 8"; }
    return NULL;
}

static inline void flash_attention_check_shape(int T, int NH, int NKV, int HS) {
    const char* why = flash_attention_unsupported(T, NH, NKV, HS);
    if (why != NULL) { die("flash attention: %s (T=%d, NH=%d, NKV=%d, HS=%d)", why, T, NH, NKV, HS); }
}

// writes 1 into *out when this device code is sm_90a (wgmma), else 0
__global__ void flash_sm90a_probe_kernel(int* out) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
    *out = 1;
#else
    *out = 0;
#endif
}

// whether the wgmma kernels can run: the device code of this binary for the current GPU is sm_90a (asked once, with
// a synchronizing probe kernel)
static inline bool flash_wgmma_available(void) {
    static int available = -1;
    if (available < 0) {
        int* d;
        cudaCheck(cudaMalloc(&d, sizeof(int)));
        flash_sm90a_probe_kernel<<<1, 1>>>(d);
        cudaCheckLaunch();
        cudaCheck(cudaMemcpy(&available, d, sizeof(int), cudaMemcpyDeviceToHost));
        cudaCheck(cudaFree(d));
    }
    return available == 1;
}

// floats of the backward's scratch_delta: one per (b, h, t)
static inline size_t flash_attention_delta_floats(int B, int T, int NH) { return (size_t)B * NH * T; }

// allows `kernel` its dynamic shared memory (a fixed size per kernel), once per kernel and process
template <class Kernel>
static inline void flash_set_smem(Kernel kernel, int bytes) {
    static const void* done[16];
    static int ndone = 0;
    for (int i = 0; i < ndone; i++) { if (done[i] == (const void*)kernel) { return; } }
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    if (ndone < 16) { done[ndone++] = (const void*)kernel; }
}

template <int HS, bool WG>
static inline void flash_attention_forward_hs(floatX* out, float* lse, const floatX* qkv, int B, int T, int NH, int NKV,
                                              cudaStream_t stream) {
    float scale_log2 = LOG2E_F / sqrtf((float)HS);
    if constexpr (WG) {
        long row = (long)(NH + 2 * NKV) * HS;   // qkv as [B][T][row]
        CUtensorMap map = tma_map_bf16_3d(qkv, row, T, B, row, (long)T * row, 64);
        int smem = (64 + 2 * FLASH_TMA_SLOTS * 64) * HS * (int)sizeof(floatX) + (int)(sizeof(TmaRing<FLASH_TMA_SLOTS>) + sizeof(uint64_t));
        auto kernel = NKV == NH ? flash_forward_tma_kernel<HS, false> : flash_forward_tma_kernel<HS, true>;
        flash_set_smem(kernel, smem);
        kernel<<<dim3(ceil_div(T, 64), NH, B), FLASH_TMA_FWD_THREADS, smem, stream>>>(map, out, lse, T, NH, NKV, scale_log2);
    } else {
        constexpr int MT = FlashConfig<HS>::fwd_mt, BM = FLASH_WARPS * 16 * MT, BN = FlashConfig<HS>::fwd_bn;
        int smem = (BM + 4 * BN) * HS * (int)sizeof(floatX);
        auto kernel = NKV == NH ? flash_forward_kernel<HS, MT, false> : flash_forward_kernel<HS, MT, true>;
        flash_set_smem(kernel, smem);
        kernel<<<dim3(ceil_div(T, BM), NH, B), FLASH_THREADS, smem, stream>>>(out, lse, qkv, T, NH, NKV, scale_log2);
    }
    cudaCheckLaunch();
}

template <int HS, bool WG>
static inline void flash_attention_backward_hs(floatX* dqkv, float* delta, const floatX* dout, const floatX* qkv, const floatX* out,
                                               const float* lse, int B, int T, int NH, int NKV, cudaStream_t stream) {
    constexpr int BM = FLASH_WARPS * 16, BN = FLASH_BWD_TILE;
    float scale_log2 = LOG2E_F / sqrtf((float)HS);
    flash_backward_delta_kernel<HS><<<ceil_div((long)B * T * NH * HS / 8, 256), 256, 0, stream>>>(delta, dout, out, B, T, NH);
    cudaCheckLaunch();
    dim3 grid_kv(ceil_div(T, BM), NKV, B), grid_q(ceil_div(T, BM), NH, B);
    if constexpr (WG) {
        long row = (long)(NH + 2 * NKV) * HS;
        CUtensorMap qkv_map = tma_map_bf16_3d(qkv, row, T, B, row, (long)T * row, 64);
        CUtensorMap dout_map = tma_map_bf16_3d(dout, (long)NH * HS, T, B, (long)NH * HS, (long)T * NH * HS, 64);
        CUtensorMap lse_map = tma_map_f32_2d(lse, T, (long)B * NH, T, BN), delta_map = tma_map_f32_2d(delta, T, (long)B * NH, T, BN);
        int barriers = (int)(sizeof(TmaRing<FLASH_TMA_SLOTS>) + sizeof(uint64_t));
        int smem_kv = (2 * BM + 2 * FLASH_TMA_SLOTS * BN) * HS * (int)sizeof(floatX) + 2 * FLASH_TMA_SLOTS * BN * (int)sizeof(float) + barriers;
        auto dkdv = NKV == NH ? flash_backward_dkdv_tma_kernel<HS, false> : flash_backward_dkdv_tma_kernel<HS, true>;
        flash_set_smem(dkdv, smem_kv);
        dkdv<<<grid_kv, FLASH_THREADS, smem_kv, stream>>>(qkv_map, dout_map, lse_map, delta_map, dqkv, T, NH, NKV, scale_log2);
        cudaCheckLaunch();
        int smem_q = (2 * BM + 2 * FLASH_TMA_SLOTS * BN) * HS * (int)sizeof(floatX) + barriers;
        auto dq = NKV == NH ? flash_backward_dq_tma_kernel<HS, false> : flash_backward_dq_tma_kernel<HS, true>;
        flash_set_smem(dq, smem_q);
        dq<<<grid_q, FLASH_THREADS, smem_q, stream>>>(qkv_map, dout_map, dqkv, lse, delta, T, NH, NKV, scale_log2);
    } else {
        int smem_kv = (2 * BM + 4 * BN) * HS * (int)sizeof(floatX) + 4 * BN * (int)sizeof(float);
        auto dkdv = NKV == NH ? flash_backward_dkdv_kernel<HS, false> : flash_backward_dkdv_kernel<HS, true>;
        flash_set_smem(dkdv, smem_kv);
        dkdv<<<grid_kv, FLASH_THREADS, smem_kv, stream>>>(dqkv, dout, qkv, lse, delta, T, NH, NKV, scale_log2);
        cudaCheckLaunch();
        int smem_q = (2 * BM + 4 * BN) * HS * (int)sizeof(floatX);
        auto dq = NKV == NH ? flash_backward_dq_kernel<HS, false> : flash_backward_dq_kernel<HS, true>;
        flash_set_smem(dq, smem_q);
        dq<<<grid_q, FLASH_THREADS, smem_q, stream>>>(dqkv, dout, qkv, lse, delta, T, NH, NKV, scale_log2);
    }
    cudaCheckLaunch();
}

// out [B, T, NH HS] and lse [B, NH, T] (FP32, natural log-sum-exp of the scaled scores of each query row) from
// qkv [B, T, (NH + 2 NKV) HS]. No scratch.
static inline void flash_attention_forward(floatX* out, float* lse, const floatX* qkv, int B, int T, int NH, int NKV, int HS,
                                           cudaStream_t stream) {
    flash_attention_check_shape(T, NH, NKV, HS);
    bool wg = flash_wgmma_available();
    if (HS == 128) {
        if (wg) { flash_attention_forward_hs<128, true>(out, lse, qkv, B, T, NH, NKV, stream); }
        else { flash_attention_forward_hs<128, false>(out, lse, qkv, B, T, NH, NKV, stream); }
    } else if (wg) { flash_attention_forward_hs<64, true>(out, lse, qkv, B, T, NH, NKV, stream); }
    else { flash_attention_forward_hs<64, false>(out, lse, qkv, B, T, NH, NKV, stream); }
}

// dqkv [B, T, (NH + 2 NKV) HS] (overwritten; dk, dv of a kv head summed over its NH / NKV query heads) from dout
// [B, T, NH HS] and the forward's qkv, out, lse. Scratch: scratch_delta, flash_attention_delta_floats(B, T, NH) FP32
// values (rowsum(dout * out) per (b, h, t)).
static inline void flash_attention_backward(floatX* dqkv, float* scratch_delta, const floatX* dout, const floatX* qkv,
                                            const floatX* out, const float* lse, int B, int T, int NH, int NKV, int HS,
                                            cudaStream_t stream) {
    flash_attention_check_shape(T, NH, NKV, HS);
    bool wg = flash_wgmma_available();
    if (HS == 128) {
        if (wg) { flash_attention_backward_hs<128, true>(dqkv, scratch_delta, dout, qkv, out, lse, B, T, NH, NKV, stream); }
        else { flash_attention_backward_hs<128, false>(dqkv, scratch_delta, dout, qkv, out, lse, B, T, NH, NKV, stream); }
    } else if (wg) { flash_attention_backward_hs<64, true>(dqkv, scratch_delta, dout, qkv, out, lse, B, T, NH, NKV, stream); }
    else { flash_attention_backward_hs<64, false>(dqkv, scratch_delta, dout, qkv, out, lse, B, T, NH, NKV, stream); }
}

#endif
