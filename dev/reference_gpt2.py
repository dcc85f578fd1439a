"""Independent PyTorch GPT-2 oracle for the C/CUDA trainer.

Builds a GPT-2 (from a seed with GPT-2 init, or from one of our model files with --load), optionally
writes it in our model format (llmc/checkpoint.h), draws one B x T batch of random tokens from the seed,
runs forward + backward once and writes a reference file (format: dev/test/reference_file.h), then runs
--steps AdamW steps on the same batch and records the loss before each update.

The parameters live as the 16 tensors of llmc/gpt2_config.h (per-layer tensors stacked over layers,
linear weights [out, in]), so gradients come out directly in our layout. Weights are made or loaded in
float32 (exactly what the model file holds) and then cast to --dtype for the computation (--dtype bfloat16: kept in
float32, with the products in BF16 under torch.autocast, as a mixed-precision engine runs them).

Example (the committed fixture, see dev/test/fixtures/README.md):
  python3 dev/reference_gpt2.py --preset tiny -B 2 -T 16 --dtype float64 --seed 1337 \
      --write-model dev/test/fixtures/tiny_model.bin --write-ref dev/test/fixtures/tiny_ref.bin
Works with torch 1.13 (CPU) and torch 2.x (--device cuda).
"""
import argparse
import contextlib
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F

from checkpoint_crc import HEADER_INTS as CKPT_HEADER_INTS, MAGIC as CKPT_MAGIC, VERSION as CKPT_VERSION
from checkpoint_crc import seal
from model_file import FAMILY_GPT2, ModelFileError, num_params, param_shapes, read_model

REF_MAGIC, REF_VERSION = 20261203, 1
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
         "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}
DEPTH_CHANNELS = {6: 384, 12: 768, 24: 1024, 36: 1280, 48: 1600}
PRESETS = {
    "d12": dict(L=12, C=768, NH=12, V=50257, maxT=1024),
    "tiny": dict(L=2, C=64, NH=4, V=100, maxT=32),
}


def round_up(x, m):
    """x rounded up to a multiple of m"""
    return (x + m - 1) // m * m


def init_params(cfg, seed):
    """GPT-2 init in float32 on the CPU: N(0,0.02), residual projections N(0,0.02/sqrt(2L)), zero biases,
    unit norm weights, zero padded wte rows"""
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in param_shapes(cfg):
        if name in ("ln1w", "ln2w", "lnfw"):
            p = torch.ones(shape)
        elif name in DECAYED:
            std = 0.02 / math.sqrt(2 * cfg["L"]) if name in ("attprojw", "fcprojw") else 0.02
            p = torch.randn(shape, generator=gen) * std
        else:
            p = torch.zeros(shape)
        params[name] = p
    params["wte"][cfg["V"]:] = 0.0
    return params


def flatten(tensors, names=NAMES):
    """the named tensors (default: GPT-2's 16) concatenated in our layout, as a float32 numpy array"""
    return np.concatenate([tensors[n].detach().to("cpu", torch.float32).reshape(-1).numpy() for n in names])


def write_model(path, cfg, params, seed):
    """writes the params as one of our model files (contents=1 params, step 0)"""
    h = np.zeros(CKPT_HEADER_INTS, dtype="<u4")
    h[0:10] = [CKPT_MAGIC, CKPT_VERSION, 1, FAMILY_GPT2, cfg["maxT"], cfg["V"], cfg["Vp"], cfg["L"], cfg["NH"], cfg["C"]]
    n = num_params(cfg)
    h[12], h[13] = n & 0xFFFFFFFF, n >> 32
    h[14], h[15] = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    payload = flatten(params).astype("<f4").tobytes()
    seal(h, [payload, b"", b""])
    with open(path, "wb") as f:
        f.write(h.tobytes())
        f.write(payload)


def load_model(path):
    """reads a GPT-2 model or training-state file with dev/model_file.py (params only) -> (cfg, params as tensors)"""
    try:
        cfg, params, _ = read_model(path)
    except ModelFileError as e:
        raise SystemExit(f"error: {e}")
    if cfg["family"] != FAMILY_GPT2:
        raise SystemExit(f"error: '{path}': model family {cfg['family']} is not GPT-2")
    return cfg, {name: torch.from_numpy(p.copy()) for name, p in params.items()}


def gelu(x):
    """GELU, tanh approximation"""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attention(qkv, NH):
    """causal multi-head self-attention of qkv [B,T,3C] -> [B,T,C]"""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // NH
    q, k, v = (t.reshape(B, T, NH, hs).transpose(1, 2) for t in qkv.split(C, dim=-1))
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    mask = torch.ones(T, T, dtype=torch.bool, device=qkv.device).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)


def forward(p, cfg, inputs, targets):
    """logits [B,T,Vp] and the mean cross-entropy over the real vocab"""
    B, T = inputs.shape
    C, V = cfg["C"], cfg["V"]
    x = p["wte"][inputs] + p["wpe"][:T]
    for l in range(cfg["L"]):
        h = F.layer_norm(x, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        h = F.linear(h, p["qkvw"][l], p["qkvb"][l])
        x = x + F.linear(attention(h, cfg["NH"]), p["attprojw"][l], p["attprojb"][l])
        h = F.layer_norm(x, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        h = gelu(F.linear(h, p["fcw"][l], p["fcb"][l]))
        x = x + F.linear(h, p["fcprojw"][l], p["fcprojb"][l])
    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    logits = x @ p["wte"].t()
    loss = F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))
    return logits, loss


def grad_norm(p):
    """global L2 norm over all gradients"""
    return torch.sqrt(sum((t.grad.double() ** 2).sum() for t in p.values())).item()


def train_losses(p, cfg, inputs, targets, args, forward_fn=forward, decayed=DECAYED):
    """runs args.steps AdamW steps (global-norm clipping first, weight decay on the `decayed` tensors) of the model
    forward_fn (default GPT-2) on one batch; returns the loss before each"""
    groups = [{"params": [t for n, t in p.items() if n in decayed], "weight_decay": args.wd},
              {"params": [t for n, t in p.items() if n not in decayed], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=False)
        _, loss = forward_fn(p, cfg, inputs, targets)
        loss.backward()
        losses.append(loss.item())
        norm = grad_norm(p)
        if args.grad_clip > 0 and norm > args.grad_clip:
            for t in p.values():
                t.grad.mul_(args.grad_clip / norm)
        opt.step()
    return losses


def f32_bits(x):
    """the uint32 whose bits are the float32 x"""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def write_reference(path, cfg, args, inputs, targets, logits, loss, norm, grads, losses, names=NAMES, family=(), params=None):
    """writes the reference file described in dev/test/reference_file.h; for another model family, `family` gives
    header slots 11.. (family id, then its shape) and `params` the weights appended after the losses"""
    B, T = inputs.shape
    h = np.zeros(256, dtype="<u4")
    h[0:11] = [REF_MAGIC, REF_VERSION, B, T, len(losses), cfg["V"], cfg["Vp"], cfg["L"], cfg["NH"], cfg["C"], cfg["maxT"]]
    h[11:11 + len(family)] = family
    h[16:22] = [f32_bits(v) for v in (args.lr, args.beta1, args.beta2, args.eps, args.wd, args.grad_clip)]
    with open(path, "wb") as f:
        f.write(h.tobytes())
        f.write(inputs.cpu().numpy().astype("<i4").tobytes())
        f.write(targets.cpu().numpy().astype("<i4").tobytes())
        f.write(logits[..., :cfg["V"]].detach().to("cpu", torch.float32).numpy().astype("<f4").tobytes())
        f.write(np.array([loss, norm], dtype="<f4").tobytes())
        f.write(flatten(grads, names).astype("<f4").tobytes())
        f.write(np.array(losses, dtype="<f4").tobytes())
        if params is not None:
            f.write(flatten(params, names).astype("<f4").tobytes())


def run_reference(args, cfg, weights, desc, forward_fn=forward, decayed=DECAYED, **write_kw):
    """runs the model forward_fn with `weights` (float32, left unchanged) in args.dtype on a batch drawn from
    args.seed + 1: forward + backward, then args.steps AdamW steps (weight decay on `decayed`); writes the reference
    file args.write_ref (write_kw: write_reference's names, family, params) and prints desc (the model), the run and
    the losses"""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    mixed = args.dtype == "bfloat16"   # FP32 weights and AdamW, BF16 products under torch.autocast
    dtype = torch.float32 if mixed else getattr(torch, args.dtype)
    p = {n: t.to(args.device, dtype, copy=True).requires_grad_(True) for n, t in weights.items()}
    with (torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16) if mixed else contextlib.nullcontext()):
        run_steps(args, cfg, p, desc, forward_fn, decayed, write_kw)


def run_steps(args, cfg, p, desc, forward_fn, decayed, write_kw):
    """run_reference's computation on the parameters p"""
    gen = torch.Generator().manual_seed(args.seed + 1)
    tokens = torch.randint(0, cfg["V"], (args.B, args.T + 1), generator=gen)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    x, y = inputs.to(args.device), targets.to(args.device)

    logits, loss = forward_fn(p, cfg, x, y)
    loss.backward()
    norm = grad_norm(p)
    logits_cpu = logits.detach().cpu()
    grads_cpu = {n: t.grad.detach().cpu().clone() for n, t in p.items()}
    losses = train_losses(p, cfg, x, y, args, forward_fn=forward_fn, decayed=decayed)
    write_reference(args.write_ref, cfg, args, inputs, targets, logits_cpu, loss.item(), norm, grads_cpu, losses, **write_kw)
    print(f"{desc} B={args.B} T={args.T} dtype={args.dtype} device={args.device}")
    print(f"loss {loss.item():.6f} grad_norm {norm:.6f}")
    print("losses " + " ".join(f"{v:.6f}" for v in losses))


def make_config(args):
    """model shape from --preset / --depth, overridden by the explicit size flags"""
    cfg = dict(PRESETS[args.preset]) if args.preset else dict(PRESETS["d12"])
    if args.depth is not None:
        if args.depth not in DEPTH_CHANNELS:
            raise SystemExit(f"error: unknown depth {args.depth}; known: {sorted(DEPTH_CHANNELS)}")
        cfg.update(L=args.depth, C=DEPTH_CHANNELS[args.depth], NH=DEPTH_CHANNELS[args.depth] // 64)
    for key, val in (("L", args.layers), ("C", args.channels), ("NH", args.heads), ("V", args.vocab), ("maxT", args.max_seq_len)):
        if val is not None:
            cfg[key] = val
    cfg["Vp"] = round_up(cfg["V"], 128)
    cfg["family"] = FAMILY_GPT2
    if cfg["C"] % cfg["NH"] != 0:
        raise SystemExit("error: channels must be a multiple of heads")
    return cfg


def add_run_args(ap):
    """the command-line flags of a reference run shared by both model families: seed, batch, device, dtype, AdamW"""
    ap.add_argument("--seed", type=int, default=1337, help="init and batch seed")
    ap.add_argument("-B", type=int, default=2)
    ap.add_argument("-T", type=int, default=16)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64", "bfloat16"],
                    help="compute dtype of the oracle; bfloat16: mixed precision (FP32 weights and AdamW, BF16 products "
                         "under torch.autocast), the trajectory a BF16 engine follows, for test_gpt2cu -s")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="global norm clip, 0 = none")
    ap.add_argument("--steps", type=int, default=10)


def parse_args():
    """command line"""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), help="d12 or tiny (default d12 shape)")
    ap.add_argument("--depth", type=int, help="GPT-2 depth preset: 6, 12, 24, 36, 48 (C = 64 * heads)")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--channels", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--vocab", type=int, help="real vocab V; Vp = V rounded up to 128")
    ap.add_argument("--max-seq-len", type=int)
    ap.add_argument("--load", help="build the model from this model file instead of --seed init")
    ap.add_argument("--write-model", help="write the (initial) model here in our format")
    ap.add_argument("--write-ref", help="write the reference file here")
    add_run_args(ap)
    return ap.parse_args()


def main():
    """builds the model, writes the requested files"""
    args = parse_args()
    if args.load:
        cfg, params = load_model(args.load)
    else:
        cfg = make_config(args)
        params = init_params(cfg, args.seed)
    if args.T > cfg["maxT"]:
        raise SystemExit(f"error: T={args.T} exceeds max_seq_len {cfg['maxT']}")
    if args.write_model:
        write_model(args.write_model, cfg, params, args.seed)
    if not args.write_ref:
        return
    desc = (f"L={cfg['L']} C={cfg['C']} NH={cfg['NH']} V={cfg['V']} Vp={cfg['Vp']} maxT={cfg['maxT']} "
            f"params={num_params(cfg)}")
    run_reference(args, cfg, params, desc)


if __name__ == "__main__":
    main()
