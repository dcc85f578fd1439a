"""Independent PyTorch oracle for the LLaMA-style model of llmc/llama_config.h and llmc/llama_cpu.h.

RMSNorm (eps 1e-5, weight only), rotary position embeddings (theta 10000, HF LLaMA rotate-half on the pairs
(i, i + HS/2)), grouped-query attention (key/value head j serves query heads j*G .. j*G+G-1, G = NH/NKV, as HF's
repeat_kv), SwiGLU MLP (silu(gate) * up, then down), no biases, untied embedding and LM head, final RMSNorm.

Builds the model from a seed (N(0, 0.02) matrices, residual projections N(0, 0.02/sqrt(2L)), unit norm weights,
zero padded vocab rows), draws one B x T batch of random tokens from the seed, runs forward + backward once, then
--steps AdamW steps on the same batch, and writes a reference file (format: dev/test/reference_file.h, model family
1): batch, logits, loss, gradient norm, all gradients, the loss before each step and, after them, the weights.
The parameters live as the 9 tensors of llmc/llama_config.h (per-layer tensors stacked over layers, fused qkv and
gate+up, linear weights [out, in]), so gradients come out in our layout. Weights are made in float32 and then cast
to --dtype for the computation (--dtype bfloat16: kept in float32, with the products in BF16 under torch.autocast,
as a mixed-precision engine runs them).

Example (the committed fixture, see dev/test/fixtures/README.md):
  python3 dev/reference_llama.py --preset tiny -B 2 -T 16 --dtype float64 --seed 1337 \\
      --write-ref dev/test/fixtures/llama_tiny_ref.bin
Works with torch 1.13 (CPU) and torch 2.x (--device cuda).
"""
import argparse
import math

import torch
import torch.nn.functional as F

from model_file import FAMILY_LLAMA, num_params, param_shapes
from reference_gpt2 import add_run_args, round_up, run_reference

NAMES = ["wte", "rms1w", "qkvw", "attprojw", "rms2w", "gateupw", "downw", "rmsfw", "lmheadw"]
NORMS = {"rms1w", "rms2w", "rmsfw"}
DECAYED = set(NAMES) - NORMS
RMS_EPS, ROPE_THETA = 1e-5, 10000.0
PRESETS = {   # llama_config_from_depth in llmc/llama_config.h, and the test fixture's shape
    "tiny": dict(L=2, C=64, NH=4, NKV=2, H=192, V=100, maxT=32),
    "d8": dict(L=8, C=448, NH=7, NKV=7, H=1216, V=50257, maxT=1024),
    "d12": dict(L=12, C=640, NH=10, NKV=5, H=1728, V=50257, maxT=1024),
    "d24": dict(L=24, C=1024, NH=16, NKV=4, H=2752, V=50257, maxT=1024),
}


def init_params(cfg, seed):
    """init in float32 on the CPU: N(0,0.02), residual projections N(0,0.02/sqrt(2L)), unit norm weights, zero padded
    vocab rows of the embedding and the LM head"""
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in param_shapes(cfg):
        if name in NORMS:
            params[name] = torch.ones(shape)
        else:
            std = 0.02 / math.sqrt(2 * cfg["L"]) if name in ("attprojw", "downw") else 0.02
            params[name] = torch.randn(shape, generator=gen) * std
    params["wte"][cfg["V"]:] = 0.0
    params["lmheadw"][cfg["V"]:] = 0.0
    return params


def rmsnorm(x, w):
    """x / sqrt(mean(x^2) + eps) * w over the last axis"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * w


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) on the two halves of the last axis"""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x):
    """rotary embedding of x [B, heads, T, HS] by position, HF LLaMA convention"""
    T, HS = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HS, 2, dtype=torch.float64) / HS))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1).to(x.device, x.dtype)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def attention(qkv, cfg):
    """causal grouped-query attention with RoPE on q and k: qkv [B,T,(NH+2NKV)HS] -> [B,T,C]"""
    B, T, _ = qkv.shape
    NH, NKV, C = cfg["NH"], cfg["NKV"], cfg["C"]
    HS = C // NH
    q, k, v = qkv.split([NH * HS, NKV * HS, NKV * HS], dim=-1)
    q = rope(q.reshape(B, T, NH, HS).transpose(1, 2))
    k = rope(k.reshape(B, T, NKV, HS).transpose(1, 2)).repeat_interleave(NH // NKV, dim=1)
    v = v.reshape(B, T, NKV, HS).transpose(1, 2).repeat_interleave(NH // NKV, dim=1)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
    mask = torch.ones(T, T, dtype=torch.bool, device=qkv.device).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)


def forward(p, cfg, inputs, targets):
    """logits [B,T,Vp] and the mean cross-entropy over the real vocab"""
    V, H = cfg["V"], cfg["H"]
    x = p["wte"][inputs]
    for l in range(cfg["L"]):
        x = x + F.linear(attention(F.linear(rmsnorm(x, p["rms1w"][l]), p["qkvw"][l]), cfg), p["attprojw"][l])
        gate, up = F.linear(rmsnorm(x, p["rms2w"][l]), p["gateupw"][l]).split(H, dim=-1)
        x = x + F.linear(F.silu(gate) * up, p["downw"][l])
    logits = F.linear(rmsnorm(x, p["rmsfw"]), p["lmheadw"])
    loss = F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))
    return logits, loss


def make_config(args):
    """model shape from --preset, overridden by the explicit size flags"""
    cfg = dict(PRESETS[args.preset])
    for key, val in (("L", args.layers), ("C", args.channels), ("NH", args.heads), ("NKV", args.kv_heads),
                     ("H", args.hidden), ("V", args.vocab), ("maxT", args.max_seq_len)):
        if val is not None:
            cfg[key] = val
    cfg["Vp"] = round_up(cfg["V"], 128)
    cfg["family"] = FAMILY_LLAMA
    if cfg["C"] % cfg["NH"] != 0 or (cfg["C"] // cfg["NH"]) % 2 != 0:
        raise SystemExit("error: channels must be a multiple of heads, with an even head size")
    if cfg["NH"] % cfg["NKV"] != 0 or cfg["H"] % 32 != 0:
        raise SystemExit("error: kv heads must divide heads and hidden must be a multiple of 32")
    return cfg


def parse_args():
    """command line"""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny", help="model shape (default tiny)")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--channels", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--vocab", type=int, help="real vocab V; Vp = V rounded up to 128")
    ap.add_argument("--max-seq-len", type=int)
    ap.add_argument("--write-ref", required=True, help="write the reference file here")
    add_run_args(ap)
    return ap.parse_args()


def main():
    """builds the model, runs it and writes the reference file"""
    args = parse_args()
    cfg = make_config(args)
    if args.T > cfg["maxT"]:
        raise SystemExit(f"error: T={args.T} exceeds max_seq_len {cfg['maxT']}")
    params = init_params(cfg, args.seed)
    desc = (f"L={cfg['L']} C={cfg['C']} NH={cfg['NH']} NKV={cfg['NKV']} H={cfg['H']} V={cfg['V']} Vp={cfg['Vp']} "
            f"maxT={cfg['maxT']} params={num_params(cfg)}")
    run_reference(args, cfg, params, desc, forward_fn=forward, decayed=DECAYED, names=NAMES,
                  family=[FAMILY_LLAMA, cfg["NKV"], cfg["H"]], params=params)


if __name__ == "__main__":
    main()
