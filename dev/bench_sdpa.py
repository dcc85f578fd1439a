"""
PyTorch's flash attention (scaled_dot_product_attention, FLASH_ATTENTION backend, causal, BF16) at the shapes of
build/test_flash_wgmma's bench, timed like it (CUDA events, median of --reps after a warm-up), so that the two
tables sit side by side: forward, backward (the gradients of q, k, v from a saved forward), and both. TFLOP/s count
the causal half, the backward as 2.5 forwards (as test_flash_wgmma does).

Example:
  python dev/bench_sdpa.py --reps 20
"""
import argparse, statistics, sys

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel, SDPBackend
except ImportError:
    sys.exit("error: PyTorch 2.3 or newer is not installed (pip install torch); this benchmark needs it.")

# (B, NH, HS) at T = 1024: GPT-2 d12 B64, d24 B32, d48 B16, then head size 128 at C = 1024 and 2048
SHAPES = [(64, 12, 64), (32, 16, 64), (16, 25, 64), (32, 8, 128), (16, 16, 128)]


def median_ms(fn, reps):
    """median of reps timings of fn() in milliseconds, after two warm-up calls"""
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def bench_shape(B, NH, HS, T, reps):
    """(forward ms, backward ms) of SDPA flash for q, k, v [B, NH, T, HS]"""
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(B, NH, T, HS, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
               for _ in range(3))
    dout = torch.randn(B, NH, T, HS, device="cuda", dtype=torch.bfloat16, generator=gen)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        bwd = median_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), reps)
    return fwd, bwd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions per pass (median) (default 20)")
    ap.add_argument("--T", type=int, default=1024, help="sequence length (default 1024)")
    args = ap.parse_args()
    if args.reps < 1 or args.T < 1:
        sys.exit("error: --reps and --T must be positive")
    if not torch.cuda.is_available():
        sys.exit("error: no CUDA GPU: this benchmark times PyTorch's flash attention on one")
    print(f"PyTorch {torch.__version__}, {torch.cuda.get_device_name()}, SDPA flash, causal, BF16, T={args.T}, "
          f"median of {args.reps}")
    print("\n| B, T, NH, HS | pass | SDPA ms | TFLOP/s |\n|---|---|---:|---:|")
    for B, NH, HS in SHAPES:
        fwd_ms, bwd_ms = bench_shape(B, NH, HS, args.T, args.reps)
        flops = 4.0 * B * NH * args.T * args.T * HS / 2
        shape = f"{B}, {args.T}, {NH}, {HS}"
        print(f"| {shape} | forward | {fwd_ms:.3f} | {flops / fwd_ms / 1e9:.0f} |")
        print(f"| {shape} | backward | {bwd_ms:.3f} | {2.5 * flops / bwd_ms / 1e9:.0f} |")
        print(f"| {shape} | forward + backward | {fwd_ms + bwd_ms:.3f} | |")


if __name__ == "__main__":
    main()
