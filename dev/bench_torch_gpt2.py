"""
Strong PyTorch reference for GPT-2 training throughput.

Own GPT-2 module (pre-LN, flash SDPA, tied head, padded vocab), BF16 autocast with
FP32 master weights, torch.compile, fused AdamW, grad clipping, random tokens on GPU.
--recipe also runs torchao's float8 training (what a Hopper user would pick for low precision): the block
linears (qkv, attention projection, fc, fc projection) as torchao Float8Linear with its tensorwise or rowwise
recipe, the tied LM head in BF16; a float8 recipe without torchao is reported as skipped.

Example:
  python dev/bench_torch_gpt2.py --depth 12 24 48 --steps 20 --recipe bf16 float8_tensorwise float8_rowwise --json out.jsonl
"""
import argparse, contextlib, gc, importlib, itertools, json, sys, time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("error: PyTorch is not installed (pip install torch); this benchmark needs it.")

try:
    from torch.nn.attention import sdpa_kernel, SDPBackend
    def flash_ctx(): return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
except ImportError:  # older torch: let SDPA pick (flash is preferred anyway)
    def flash_ctx(): return contextlib.nullcontext()

RECIPES = ("bf16", "float8_tensorwise", "float8_rowwise")   # float8_<torchao Float8LinearRecipeName value>
VOCAB, VOCAB_PADDED = 50257, 50304
SHAPES = {12: (768, 12), 24: (1024, 16), 36: (1280, 20), 48: (1600, 25)}  # depth -> (C, heads)
DEFAULT_BATCH = {12: 64, 24: 32, 36: 32, 48: 16}


class Block(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, depth, max_T=1024):
        super().__init__()
        C, H = SHAPES[depth]
        self.wte, self.wpe = nn.Embedding(VOCAB_PADDED, C), nn.Embedding(max_T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(depth))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, VOCAB_PADDED, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for name, p in self.named_parameters():  # GPT-2 init (not needed for speed, but realistic)
            if p.dim() == 2:
                std = 0.02 / (2 * depth) ** 0.5 if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def float8_convert(model, recipe):
    """the block linears of model as torchao Float8Linear with the recipe's configuration (the LM head, tied to the
    token embedding, stays BF16); returns the number of linears converted"""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    config = Float8LinearConfig.from_recipe_name(recipe[len("float8_"):])
    convert_to_float8_training(model, config=config, module_filter_fn=lambda mod, fqn: fqn.startswith("blocks."))
    return sum(type(m).__name__ == "Float8Linear" for m in model.modules())


def torchao_missing():
    """why torchao's float8 training cannot run here, or None"""
    try:
        importlib.import_module("torchao.float8")
    except Exception as e:  # an ImportError, or a torchao built for another torch
        return f"torchao not importable ({type(e).__name__}: {e})"
    return None


def bench(depth, B, T, args, recipe="bf16"):
    dev = "cuda"
    torch.cuda.reset_peak_memory_stats()
    model = GPT(depth, max_T=T).to(dev)
    if recipe != "bf16":
        converted = float8_convert(model, recipe)
        if converted != 4 * depth:
            raise RuntimeError(f"{recipe}: {converted} linears converted to float8, expected {4 * depth}")
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = model if args.no_compile else torch.compile(model)
    x = torch.randint(0, VOCAB, (B, T), device=dev)
    y = torch.randint(0, VOCAB, (B, T), device=dev)

    def step():
        with flash_ctx(), torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.time()
    for _ in range(args.warmup):
        loss = step()
    torch.cuda.synchronize()
    warm_s = time.time() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.steps):
        loss = step()
    end.record()
    torch.cuda.synchronize()
    sec = start.elapsed_time(end) / 1e3
    return dict(status="ok", params_M=round(n_params / 1e6, 1), loss=round(loss.item(), 4),
                tok_s=args.steps * B * T / sec, ms_step=1e3 * sec / args.steps,
                peak_GiB=torch.cuda.max_memory_allocated() / 2**30, warmup_s=round(warm_s, 1))


def main():
    ap = argparse.ArgumentParser(description="PyTorch GPT-2 training-throughput reference benchmark")
    ap.add_argument("--depth", type=int, nargs="+", default=[12], choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, nargs="+", default=None,
                    help="batch per depth (one value, or one per depth); default 64/32/32/16 for d12/24/36/48")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps (torch.compile happens here)")
    ap.add_argument("--steps", type=int, default=20, help="timed optimizer steps")
    ap.add_argument("--no-compile", action="store_true", help="run eager (no torch.compile)")
    ap.add_argument("--recipe", nargs="+", default=["bf16"], choices=RECIPES,
                    help="training recipes, each at every depth: bf16 autocast, or torchao float8 on the block linears")
    ap.add_argument("--json", metavar="OUT", help="append results as JSON lines to OUT")
    args = ap.parse_args()
    if args.batch is None:
        args.batch = [DEFAULT_BATCH[d] for d in args.depth]
    elif len(args.batch) == 1:
        args.batch = args.batch * len(args.depth)
    elif len(args.batch) != len(args.depth):
        ap.error("--batch needs one value or exactly one per --depth")
    if args.warmup < 1 or args.steps < 1:
        ap.error("--warmup and --steps must be >= 1")
    if not torch.cuda.is_available():
        sys.exit("error: CUDA is not available (torch %s); this benchmark needs an NVIDIA GPU." % torch.__version__)

    torch.set_float32_matmul_precision("high")  # allow TF32 for any fp32 matmuls
    print(f"torch {torch.__version__} | CUDA {torch.version.cuda} | {torch.cuda.get_device_name()} | "
          f"compile={not args.no_compile} warmup={args.warmup} steps={args.steps}", flush=True)
    results = []
    missing = torchao_missing() if any(r != "bf16" for r in args.recipe) else None
    for recipe, (depth, B) in itertools.product(args.recipe, list(zip(args.depth, args.batch))):
        T = args.seq
        if recipe != "bf16" and missing:
            r = dict(status="skipped", reason=missing)
        else:
            try:
                r = bench(depth, B, T, args, recipe)
            except (torch.cuda.OutOfMemoryError, RuntimeError) as e:  # compile may wrap the OOM
                if not isinstance(e, torch.cuda.OutOfMemoryError) and "out of memory" not in str(e):
                    raise
                r = dict(status="OOM", peak_GiB=torch.cuda.max_memory_allocated() / 2**30)
        r = dict(recipe=recipe, depth=depth, B=B, T=T, compile=not args.no_compile, **r)
        results.append(r)
        if r["status"] == "ok":
            print(f"{recipe} d{depth} B={B} T={T}: {r['tok_s']:,.0f} tok/s  {r['ms_step']:.1f} ms/step  "
                  f"peak {r['peak_GiB']:.2f} GiB  ({r['params_M']}M params, loss {r['loss']}, "
                  f"warmup {r['warmup_s']}s)", flush=True)
        else:
            print(f"{recipe} d{depth} B={B} T={T}: {r['status']}{': ' + r['reason'] if 'reason' in r else ''}", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(r) + "\n")
        gc.collect()  # free the model/optimizer (and any OOM traceback refs) before the next config
        if hasattr(torch, "_dynamo"):
            torch._dynamo.reset()
        torch.cuda.empty_cache()

    print(f"\n{'recipe':>17} {'depth':>5} {'B':>4} {'T':>5} {'tok/s':>12} {'ms/step':>9} {'peak_GiB':>9}")
    for r in results:
        head = f"{r['recipe']:>17} {r['depth']:>5} {r['B']:>4} {r['T']:>5}"
        if r["status"] == "ok":
            print(f"{head} {r['tok_s']:>12,.0f} {r['ms_step']:>9.1f} {r['peak_GiB']:>9.2f}")
        else:
            print(f"{head} {r['status']:>12} {'-':>9} {'-':>9}")

if __name__ == "__main__":
    main()
