"""Independent PyTorch oracle of one AdaHOP linear layer y = x W^T (forward, dX, dW) in MXFP4.

Re-implements with torch tensor ops (no Python loops over elements) the definitions of llmc/mxfp4.h:
OCP / round-up block scale from the float bits, E2M1 round-to-nearest-even (ties to the even code) or
stochastic rounding with mx_uniform(seed, index), the H32 butterfly in the fixed order (strides 1, 2, 4, 8,
16 on float32, then * float32(1/sqrt(32))), packing (element 2i in the low nibble) and E8M0 scale bytes;
NaN/Inf blocks get scale 0xFF and codes 0. Dequantized values (code * 2^e) are exact in float32.

The three GEMMs in NT form, out = A B^T, both operands [rows x K] quantized in 32-blocks along K:
  fwd: A = x    [N x Cin],  B = W   [Cout x Cin]  -> y  [N x Cout]
  dx : A = dY   [N x Cout], B = W^T [Cin x Cout]  -> dX [N x Cin]
  dw : A = dY^T [Cout x N], B = x^T [Cin x N]     -> dW [Cout x Cin]
Strategies: 0 IHT (H32 on both, then MXFP4), 1 IHT + OE on rows of A, 2 IHT + OE on rows of the NT-form B
(= output columns), 3 BF16 (the exact product of the given values, no quantization), 4 plain MXFP4.
OE: k = min(oe_k, rows) rows of largest L2 norm of the untransformed operand (squared norms accumulated in
float64 in column order, as topk_rows_cpu; NaN counts as +Inf; ties -> lower index; indices ascending)
are zeroed before the transform + quantization; the unquantized product of those rows with the other
(unquantized, untransformed) operand overwrites the matching rows (1) or columns (2) of the output.
Products are computed in float64 from the dequantized float32 operands.
Stochastic rounding (--sr), as llmc/adahop_linear.cuh: only the gradient operands (A of dx and dw, i.e. dY)
use SR; GEMM g (0 fwd, 1 dx, 2 dw) has seed s_g = mx_mix64(seed ^ g) (= adahop_seed(step 0, linear 0, g)),
operand A uses s_g, B uses s_g ^ 0xB; the SR index of an element is row * K + k in its [rows x K] NT layout.

Case file (little endian), read by dev/test/adahop_case_file.h:
  int32 header[256]: [0]=20261204 magic, [1]=1 version, [2]=N, [3]=Cin, [4]=Cout, [5..7]=strategies
    fwd/dx/dw, [8]=oe_k, [9]=scale rule (0 OCP, 1 round-up), [10]=stochastic (0/1), [11]=input kind
    (0 gaussian, 1 row outliers, 2 column outliers, 3 heavy tails, 4 extremes; informational),
    [12..13]=seed (int64, low word then high word), [14..16]=number of OE indices k of fwd/dx/dw
    (0 without OE); other slots zero.
  float32 x [N*Cin], W [Cout*Cin], dY [N*Cout]   (bfloat16 values)
  float32 y [N*Cout], dX [N*Cin], dW [Cout*Cin]   (computed in float64, rounded to float32)
  for GEMM g in (fwd, dx, dw), operand in (A, B): uint8 codes [rows*K/2] then uint8 scales [rows*K/32]
    (both empty when the GEMM is BF16)
  for GEMM g in (fwd, dx, dw): int32 OE indices [k_g], ascending (empty without OE)

Example:
  python3 dev/adahop_linear_ref.py --seed 7 --out build/adahop_cases/case7.bin
  python3 dev/adahop_linear_ref.py --seed 3 -N 96 --cin 64 --cout 160 --strategies 1,2,4 \
      --oe-k 8 --kind rows --sr --out build/adahop_cases/c3.bin
Works with torch 1.13 (CPU) and torch 2.x (--device cuda).
"""
import argparse
import random
import struct

import numpy as np
import torch

CASE_MAGIC, CASE_VERSION, CASE_HEADER_INTS = 20261204, 1, 256
STRAT_IHT, STRAT_OE_ROWS_A, STRAT_OE_ROWS_B, STRAT_BF16, STRAT_PLAIN = 0, 1, 2, 3, 4
STRAT_NAMES = {0: "iht", 1: "oe-rows-a", 2: "oe-rows-b", 3: "bf16", 4: "plain"}
RULE_OCP, RULE_ROUNDUP = 0, 1
KINDS = ["gaussian", "rows", "cols", "heavy", "extremes"]
GEMMS = ["fwd", "dx", "dw"]
MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
INV_SQRT32_BITS = 0x3E3504F3          # 0.17677669529663687f as in llmc/mxfp4.h


def f32_from_bits(u):
    """the Python float whose float32 bits are u"""
    return struct.unpack("<f", struct.pack("<I", u))[0]


assert f32_from_bits(INV_SQRT32_BITS) == float(np.float32(0.17677669529663687))


def s64(u):
    """the int64 (two's complement) with the bits of the uint64 u"""
    u &= MASK64
    return u - (1 << 64) if u >= (1 << 63) else u


def mix64_int(z):
    """splitmix64 finaliser on a Python int (exact uint64 arithmetic)"""
    z &= MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def lsr64(z, s):
    """logical right shift of an int64 tensor holding uint64 bits"""
    return (z >> s) & ((1 << (64 - s)) - 1)


def mix64_tensor(z):
    """splitmix64 finaliser on an int64 tensor (uint64 bits; multiplications wrap mod 2^64)"""
    z = (z ^ lsr64(z, 30)) * s64(0xBF58476D1CE4E5B9)
    z = (z ^ lsr64(z, 27)) * s64(0x94D049BB133111EB)
    return z ^ lsr64(z, 31)


def mx_uniform(seed, index):
    """mx_uniform(seed, index) of llmc/mxfp4.h for an int64 tensor of indices -> float32 in [0, 1)"""
    base = s64(mix64_int(seed ^ GOLDEN))
    z = (index + 1) * s64(GOLDEN) + base
    bits24 = lsr64(mix64_tensor(z), 40)
    return bits24.to(torch.float32) * (1.0 / 16777216.0)


def float_bits(x):
    """int32 tensor with the bits of the float32 tensor x"""
    return x.contiguous().view(torch.int32)


def bits_float(u):
    """float32 tensor with the bits of the int32 tensor u"""
    return u.to(torch.int32).contiguous().view(torch.float32)


def pow2(e):
    """float32 2^e for an integer tensor e in [-126, 127] (normal floats, exact)"""
    return bits_float((e.to(torch.int32) + 127) << 23)


def hadamard32(v):
    """H32 along the last axis (length 32) of float32 v: butterflies a+b, a-b at strides 1,2,4,8,16, then
    one multiply by float32(1/sqrt(32)), in exactly mxfp4.h's order"""
    lead = v.shape[:-1]
    for h in (1, 2, 4, 8, 16):
        w = v.reshape(*lead, 32 // (2 * h), 2, h)
        a, b = w[..., 0, :], w[..., 1, :]
        v = torch.stack((a + b, a - b), dim=-2).reshape(*lead, 32)
    return v * torch.tensor(f32_from_bits(INV_SQRT32_BITS), dtype=torch.float32, device=v.device)


def msb32(u):
    """index of the highest set bit of int32 u > 0 (u < 2^31)"""
    p = torch.zeros_like(u)
    for b in range(1, 31):
        p += (u >> b) > 0
    return p


def block_exponent(amax, rule):
    """shared exponent (int32) of the block maxima amax (finite float32 >= 0) under `rule`, clamped at -127"""
    u = float_bits(amax) & 0x7FFFFFFF
    ef = u >> 23
    safe = torch.where(u > 0, u, torch.ones_like(u))
    m = msb32(safe)
    flog = torch.where(ef != 0, ef - 127, m - 149)
    e = flog - 2
    if rule == RULE_ROUNDUP:
        sig = torch.where(ef != 0, (u & 0x7FFFFF) | 0x800000, safe << (23 - m).clamp(min=0))
        e = e + (sig > 0xC00000).to(e.dtype)
    elif rule != RULE_OCP:
        raise ValueError(f"unknown scale rule {rule}")
    e = torch.where(u == 0, torch.full_like(e, -127), e)
    return e.clamp(min=-127)


E2M1_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e2m1_encode_rne(v):
    """E2M1 codes (int32) of float32 v (finite): nearest, ties to the even code, saturating at 6"""
    a = v.abs()
    c = ((a > 0.25).int() + (a >= 0.75).int() + (a > 1.25).int() + (a >= 1.75).int()
         + (a > 2.5).int() + (a >= 3.5).int() + (a > 5.0).int())
    return c | ((float_bits(v) >> 31) & 1) << 3


def e2m1_encode_sr(v, u):
    """E2M1 codes (int32) of float32 v by stochastic rounding with uniforms u: up iff u < (|v|-lo)/(hi-lo)"""
    a = v.abs()
    c = ((a >= 0.5).int() + (a >= 1.0).int() + (a >= 1.5).int() + (a >= 2.0).int()
         + (a >= 3.0).int() + (a >= 4.0).int())
    lo = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=v.device)[c.long()]
    inv_step = torch.tensor([2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 0.5, 0.5], dtype=torch.float32, device=v.device)[c.long()]
    frac = (a - lo) * inv_step                      # exact
    c = torch.where(a < 6.0, c + (u < frac).int(), torch.full_like(c, 7))
    return c | ((float_bits(v) >> 31) & 1) << 3


def e2m1_decode(codes):
    """float32 values of E2M1 codes (int tensor, low 4 bits)"""
    table = torch.tensor(E2M1_VALUES + [-x for x in E2M1_VALUES], dtype=torch.float32, device=codes.device)
    return table[(codes & 15).long()]


def dequantize(codes, scales):
    """float32 [R x K] values of packed codes [R x K/2] and scales [R x K/32]: code * 2^e exactly, NaN blocks"""
    R = codes.shape[0]
    c = codes.to(torch.int32)
    unpacked = torch.stack((c & 15, c >> 4), dim=-1).reshape(R, -1)
    vals = e2m1_decode(unpacked).reshape(R, -1, 32)
    e = scales.to(torch.int32) - 127
    e1 = torch.div(e, 2, rounding_mode="floor")
    e2 = e - e1                                      # both in [-64, 64]: normal factors, the result exact
    out = vals * pow2(e1)[..., None] * pow2(e2)[..., None]
    out = torch.where((scales == 255)[..., None], torch.full_like(out, float("nan")), out)
    return out.reshape(R, -1)


def quantize_rows(x, hadamard=False, rule=RULE_OCP, stochastic=False, seed=0):
    """MXFP4 of float32 x [R x K] in 32-blocks along its rows (after H32 per block if asked) ->
    (codes uint8 [R x K/2], scales uint8 [R x K/32], dequantized float32 [R x K]); as quantize_rows_cpu"""
    R, K = x.shape
    if R <= 0 or K <= 0 or K % 32 != 0:
        raise ValueError(f"quantize_rows: K={K} must be a positive multiple of 32, rows={R} positive")
    v = x.to(torch.float32).contiguous().reshape(R, K // 32, 32)
    if hadamard:
        v = hadamard32(v)
    bad = (~torch.isfinite(v)).any(dim=-1)
    amax = torch.where(bad[..., None], torch.zeros_like(v), v).abs().amax(dim=-1)
    e = block_exponent(amax, rule)
    e = torch.where(bad, torch.zeros_like(e), e)
    scaled = torch.where(bad[..., None], torch.zeros_like(v), v) * pow2(-e)[..., None]   # = ldexpf(x, -e)
    if stochastic:
        index = torch.arange(R * K, dtype=torch.int64, device=x.device).reshape(R, K // 32, 32)
        codes = e2m1_encode_sr(scaled, mx_uniform(seed, index))
    else:
        codes = e2m1_encode_rne(scaled)
    codes = torch.where(bad[..., None], torch.zeros_like(codes), codes).reshape(R, K)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)
    scales = torch.where(bad, torch.full_like(e, 255), e + 127).to(torch.uint8)
    return packed, scales, dequantize(packed, scales)


def quantize_cols(x, hadamard=False, rule=RULE_OCP, stochastic=False, seed=0):
    """MXFP4 of transpose(x) for x [R x C]: the [C x R] operand quantized along R (as quantize_cols_cpu)"""
    return quantize_rows(x.t().contiguous(), hadamard, rule, stochastic, seed)


def topk_rows(x, k):
    """the k rows of x [R x K] of largest L2 norm (float64 squares summed in column order; NaN = +Inf;
    ties -> lower index), as an ascending int64 tensor"""
    R, K = x.shape
    if k <= 0 or k > R:
        raise ValueError(f"topk: k={k} must be in [1, {R}]")
    xd = x.to(torch.float64)
    sq = torch.zeros(R, dtype=torch.float64, device=x.device)
    for c in range(K):                               # sequential order, as topk_rows_cpu
        col = xd[:, c]
        sq = sq + col * col
    sq = torch.where(torch.isnan(sq), torch.full_like(sq, float("inf")), sq)
    order = torch.sort(-sq, stable=True).indices     # ascending -norm; equal keys keep index order
    return torch.sort(order[:k]).values


def gemm_nt(a, b, strategy, oe_k, rule=RULE_OCP, sr_a=False, sr_b=False, seed_a=0, seed_b=0):
    """out [M x N] = the AdaHOP product of a [M x K] and b^T (b [N x K]) under `strategy`, in float64 ->
    (out, OE indices int64 (empty without OE), (codes, scales, deq) of A or None, same of B or None)"""
    M, K = a.shape
    N = b.shape[0]
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    none_idx = torch.zeros(0, dtype=torch.int64, device=a.device)
    if strategy == STRAT_BF16:
        return a64 @ b64.t(), none_idx, None, None
    if strategy not in (STRAT_IHT, STRAT_OE_ROWS_A, STRAT_OE_ROWS_B, STRAT_PLAIN):
        raise ValueError(f"unknown strategy {strategy}")
    had = strategy != STRAT_PLAIN
    a_clean, b_clean, idx = a, b, none_idx
    if strategy == STRAT_OE_ROWS_A:
        idx = topk_rows(a, min(oe_k, M))
        a_clean = a.clone()
        a_clean[idx] = 0.0
    elif strategy == STRAT_OE_ROWS_B:
        idx = topk_rows(b, min(oe_k, N))
        b_clean = b.clone()
        b_clean[idx] = 0.0
    qa = quantize_rows(a_clean, had, rule, sr_a, seed_a)
    qb = quantize_rows(b_clean, had, rule, sr_b, seed_b)
    out = qa[2].to(torch.float64) @ qb[2].to(torch.float64).t()
    if strategy == STRAT_OE_ROWS_A:
        out[idx] = a64[idx] @ b64.t()
    elif strategy == STRAT_OE_ROWS_B:
        out[:, idx] = a64 @ b64[idx].t()
    return out, idx, qa, qb


def gemm_seed(seed, g):
    """seed of GEMM g (0 fwd, 1 dx, 2 dw): adahop_seed(ws, step 0, linear 0, g) of llmc/adahop_linear.cuh"""
    return mix64_int((seed & MASK64) ^ g)


def linear_forward_backward(x, W, dY, strategies, oe_k, rule=RULE_OCP, stochastic=False, seed=0):
    """y = x W^T, dX = dY W, dW = dY^T x of one AdaHOP linear, each GEMM under its strategy (fwd, dx, dw).
    Returns dict: y, dX, dW (float64) and per GEMM name (fwd/dx/dw) a tuple (idx, qa, qb)."""
    operands = {"fwd": (x, W), "dx": (dY, W.t().contiguous()), "dw": (dY.t().contiguous(), x.t().contiguous())}
    res = {}
    outs = []
    for g, name in enumerate(GEMMS):
        a, b = operands[name]
        s = gemm_seed(seed, g)
        sr_a = bool(stochastic) and name in ("dx", "dw")   # A is dY: the gradient operand
        out, idx, qa, qb = gemm_nt(a, b, strategies[g], oe_k, rule, sr_a, False, s, s ^ 0xB)
        res[name] = (idx, qa, qb)
        outs.append(out)
    res["y"], res["dX"], res["dW"] = outs
    return res


def draw_inputs(N, Cin, Cout, kind, gen):
    """x [N x Cin], W [Cout x Cin], dY [N x Cout] (float32 on the CPU) of the given kind, bf16-rounded"""
    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32)

    def pick(n, count):
        return torch.randperm(n, generator=gen)[:count]

    x, W, dY = randn(N, Cin), randn(Cout, Cin) * 0.02, randn(N, Cout) * 1e-3
    if kind == "rows":                       # a few tokens carry large activations and gradients
        for t, scale in ((x, 30.0), (dY, 50.0)):
            r = pick(t.shape[0], max(1, t.shape[0] // 16))
            t[r] *= scale * (1.0 + torch.rand(len(r), 1, generator=gen))
    elif kind == "cols":                     # a few channels of x and W carry outliers
        c = pick(Cin, max(1, Cin // 16))
        x[:, c] *= 40.0 * (1.0 + torch.rand(len(c), generator=gen))
        W[:, pick(Cin, max(1, Cin // 32))] *= 20.0
        dY[:, pick(Cout, max(1, Cout // 16))] *= 30.0
    elif kind == "heavy":                    # Student-t with 3 degrees of freedom
        def student(*shape):
            chi = sum(randn(*shape) ** 2 for _ in range(3)) / 3.0
            return randn(*shape) / chi.sqrt()
        x, W, dY = student(N, Cin), student(Cout, Cin) * 0.02, student(N, Cout) * 1e-3
    elif kind == "extremes":                 # zero blocks, tiny (subnormal-scale) blocks, large blocks, -0
        for t in (x, W, dY):
            blocks = t.view(-1, 32)
            nb = blocks.shape[0]
            blocks[pick(nb, max(1, nb // 8))] = 0.0
            blocks[pick(nb, max(1, nb // 8))] *= 2.0 ** -132
            blocks[pick(nb, max(1, nb // 16))] *= 2.0 ** 20
            blocks[pick(nb, max(1, nb // 16))] *= -0.0
        for t in (x, dY, W.t()):            # equal-norm outlier rows (and W columns): OE ties -> lower index
            r = pick(t.shape[0], min(3, t.shape[0]))
            t[r] = 64.0 * t[r[0]].abs().max().clamp(min=1.0) * torch.sign(randn(t.shape[1]))
        for t in (x, dY):                   # equal-norm outlier columns
            r = pick(t.shape[1], min(3, t.shape[1]))
            t[:, r] = 64.0 * t[:, r[0]].abs().max().clamp(min=1.0) * torch.sign(randn(t.shape[0]))[:, None]
    elif kind != "gaussian":
        raise ValueError(f"unknown input kind {kind}")
    return tuple(t.to(torch.bfloat16).to(torch.float32).contiguous() for t in (x, W, dY))


def write_case(path, hdr, x, W, dY, res, strategies):
    """writes the case file described at the top of this script"""
    h = np.zeros(CASE_HEADER_INTS, dtype="<u4")
    h[0:12] = [CASE_MAGIC, CASE_VERSION, hdr["N"], hdr["Cin"], hdr["Cout"], *strategies, hdr["oe_k"],
               hdr["rule"], int(hdr["stochastic"]), hdr["kind"]]
    seed = hdr["seed"] & MASK64
    h[12], h[13] = seed & 0xFFFFFFFF, seed >> 32
    h[14:17] = [len(res[g][0]) for g in GEMMS]

    def f32(t):
        return t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4").tobytes()

    with open(path, "wb") as f:
        f.write(h.tobytes())
        for t in (x, W, dY, res["y"], res["dX"], res["dW"]):
            f.write(f32(t))
        for g in GEMMS:
            for q in res[g][1:]:
                if q is not None:
                    f.write(q[0].cpu().numpy().tobytes())
                    f.write(q[1].cpu().numpy().tobytes())
        for g in GEMMS:
            f.write(res[g][0].cpu().numpy().astype("<i4").tobytes())


def selftest(device):
    """checks the special blocks of llmc/mxfp4.h's definition on one [1 x 320] tensor; raises on a mismatch"""
    f = f32_from_bits
    blocks = [
        [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0] + [0.0] * 24,            # ties to even, saturation; e = 0
        [float("nan")] + [1.0] * 31,                                      # NaN block
        [float("-inf")] + [1.0] * 31,                                     # Inf block
        [0.0] * 32,                                                       # zero block
        [-0.0] * 32,                                                      # -0 block: codes 8
        [f(1)] * 32,                                                      # smallest subnormal: e clamped, codes 0
        [f(0x00400000)] + [0.0] * 31,                                     # 2^-127 (subnormal amax): e=-127, code 2
        [1.5 * 2.0 ** -125] + [-0.1 * 2.0 ** -127] + [0.0] * 30,        # e=-127: code 7, -tiny -> code 8
        [f(0x7F7FFFFF)] + [0.0] * 31,                                     # largest finite: e = 125
        [-6.5, 6.0] + [0.0] * 30,                                         # 6.5 in [6, 8) clips to 6 under OCP
    ]
    x = torch.tensor([v for b in blocks for v in b], dtype=torch.float32, device=device)[None]
    codes, scales, deq = quantize_rows(x)
    c = codes.cpu().to(torch.int32)
    c = torch.stack((c & 15, c >> 4), dim=-1).reshape(len(blocks), 32)
    sc = scales.cpu().reshape(-1).tolist()
    checks = [
        (c[0, :8].tolist() == [0, 2, 2, 4, 4, 6, 6, 7] and sc[0] == 127, "ties / saturation"),
        (sc[1] == 255 and sc[2] == 255 and c[1:3].abs().sum().item() == 0, "NaN / Inf blocks: scale 0xFF, codes 0"),
        (bool(torch.isnan(deq[0, 32:96]).all()), "NaN / Inf blocks decode to NaN"),
        (sc[3] == 0 and c[3].abs().sum().item() == 0, "zero block"),
        (sc[4] == 0 and bool((c[4] == 8).all()), "-0 block"),
        (sc[5] == 0 and bool((c[5] == 0).all()), "smallest subnormal block"),
        (sc[6] == 0 and c[6, 0].item() == 2, "subnormal amax 2^-127"),
        (sc[7] == 0 and c[7, 0].item() == 7 and c[7, 1].item() == 8, "e clamped at -127"),
        (sc[8] == 125 + 127 and c[8, 0].item() == 7, "largest finite amax"),
        (c[9, :2].tolist() == [15, 7] and sc[9] == 127, "OCP clip of [6, 8)"),
        (bool((deq[0, :32].cpu() == torch.tensor([0.0, 1, 1, 2, 2, 4, 4, 6] + [0.0] * 24)).all()), "dequantized values"),
    ]
    _, sc_up, _ = quantize_rows(x, rule=RULE_ROUNDUP)
    checks.append((sc_up.cpu().reshape(-1).tolist()[9] == 128 and sc_up.cpu().reshape(-1).tolist()[0] == 128, "round-up rule"))
    v = torch.randn(4, 32, generator=torch.Generator().manual_seed(0)).to(device)
    h = torch.tensor([[(-1.0) ** bin(i & j).count("1") for j in range(32)] for i in range(32)], dtype=torch.float64,
                     device=device) / 32 ** 0.5
    checks.append((float((hadamard32(v).double() - v.double() @ h).abs().max()) < 1e-5, "H32 = Sylvester / sqrt(32)"))
    u = mx_uniform(12345, torch.arange(1 << 16, dtype=torch.int64, device=device))
    checks.append((0.49 < float(u.mean()) < 0.51 and float(u.min()) >= 0.0 and float(u.max()) < 1.0, "mx_uniform range"))
    failed = [name for ok, name in checks if not ok]
    for name in failed:
        print(f"selftest FAIL: {name}")
    print(f"selftest: {len(checks) - len(failed)} passed, {len(failed)} failed")
    return not failed


def parse_args():
    """command line"""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1, help="draws the case (sizes, strategies, inputs) and seeds SR")
    ap.add_argument("-N", type=int, help="tokens (multiple of 32; default drawn from the seed)")
    ap.add_argument("--cin", type=int, help="input channels (multiple of 32; default drawn)")
    ap.add_argument("--cout", type=int, help="output channels (multiple of 32; default drawn)")
    ap.add_argument("--strategies", help="fwd,dx,dw strategies, each 0 IHT, 1 OE rows A, 2 OE rows of the NT-form B (columns of B as K x N), 3 BF16, 4 plain")
    ap.add_argument("--oe-k", type=int, help="OE count (default drawn)")
    ap.add_argument("--kind", choices=KINDS, help="input kind (default drawn)")
    ap.add_argument("--rule", type=int, default=RULE_OCP, choices=[RULE_OCP, RULE_ROUNDUP], help="0 OCP, 1 round-up")
    ap.add_argument("--sr", action="store_true", help="stochastic rounding of the gradient operands")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--out", help="case file to write")
    ap.add_argument("--selftest", action="store_true", help="check the special MXFP4 blocks (NaN, Inf, zeros, ties) and exit")
    return ap.parse_args()


def main():
    """draws one case, computes it, writes the case file"""
    args = parse_args()
    if args.selftest:
        raise SystemExit(0 if selftest(torch.device(args.device)) else 1)
    if not args.out:
        raise SystemExit("error: --out FILE is required (or --selftest)")
    rnd = random.Random(args.seed)
    N = args.N if args.N is not None else 32 * rnd.randint(1, 8)
    Cin = args.cin if args.cin is not None else 32 * rnd.randint(1, 8)
    Cout = args.cout if args.cout is not None else 32 * rnd.randint(1, 8)
    strategies = [rnd.randint(0, 4) for _ in range(3)]
    if args.strategies:
        strategies = [int(s) for s in args.strategies.split(",")]
    oe_k = args.oe_k if args.oe_k is not None else rnd.choice([1, 3, 8, 64])
    kind = args.kind if args.kind else rnd.choice(KINDS)
    for name, v in (("N", N), ("cin", Cin), ("cout", Cout)):
        if v <= 0 or v % 32 != 0:
            raise SystemExit(f"error: {name}={v} must be a positive multiple of 32")
    if len(strategies) != 3 or any(s not in STRAT_NAMES for s in strategies):
        raise SystemExit(f"error: --strategies needs three of 0..4, got {args.strategies}")
    if oe_k <= 0:
        raise SystemExit("error: --oe-k must be positive")
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator().manual_seed(args.seed)
    x, W, dY = draw_inputs(N, Cin, Cout, kind, gen)
    dev = torch.device(args.device)
    res = linear_forward_backward(x.to(dev), W.to(dev), dY.to(dev), strategies, oe_k, args.rule, args.sr, args.seed)
    hdr = dict(N=N, Cin=Cin, Cout=Cout, oe_k=oe_k, rule=args.rule, stochastic=args.sr, kind=KINDS.index(kind),
               seed=args.seed)
    write_case(args.out, hdr, x, W, dY, res, strategies)
    print(f"N={N} Cin={Cin} Cout={Cout} strategies={','.join(STRAT_NAMES[s] for s in strategies)} oe_k={oe_k} "
          f"kind={kind} rule={args.rule} sr={int(args.sr)} seed={args.seed} device={args.device} -> {args.out}")


if __name__ == "__main__":
    main()
