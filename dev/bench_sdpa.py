"""
PyTorch's flash attention (scaled_dot_product_attention, FLASH_ATTENTION backend, causal, BF16) at the shapes of
build/test_flash_wgmma's bench, timed like it (CUDA events, median of --reps after a warm-up): forward, backward
(the gradients of q, k, v from a saved forward), and both. TFLOP/s count the causal half, the backward as 2.5
forwards (as test_flash_wgmma does). With --ours BIN it first runs `BIN bench-only` (our mma.sync and wgmma
kernels, --rounds times, medians) and prints one table of all three with the ratios, all on the same GPU.

Examples:
  python dev/bench_sdpa.py --reps 20
  python dev/bench_sdpa.py --ours build/test_flash_wgmma --rounds 3
"""
import argparse, statistics, subprocess, sys

# (B, NH, HS) at T = 1024: GPT-2 d12 B64, d24 B32, d48 B16, then head size 128 at C = 1024 and 2048
SHAPES = [(64, 12, 64), (32, 16, 64), (16, 25, 64), (32, 8, 128), (16, 16, 128)]
PASSES = ("forward", "backward", "forward + backward")


def import_torch():
    """torch, F and the SDPA backend selector, or exit with a clear message"""
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import sdpa_kernel, SDPBackend
    except ImportError:
        sys.exit("error: PyTorch 2.3 or newer is not installed (pip install torch); this benchmark needs it.")
    return torch, F, sdpa_kernel, SDPBackend


def parse_bench(text):
    """{(shape, pass): (mma.sync ms, wgmma ms)} from test_flash_wgmma's bench table rows
    '| B, T, NH, HS | pass | mma.sync ms | TFLOP/s | wgmma ms | TFLOP/s | speed-up |'"""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0][:1].isdigit() and cells[1] in PASSES:
            try:
                rows[(cells[0], cells[1])] = (float(cells[2]), float(cells[4]))
            except ValueError:
                continue
    return rows


def run_ours(binary, rounds):
    """medians over `rounds` runs of `binary bench-only`: {(shape, pass): (mma.sync ms, wgmma ms)}"""
    tables = []
    for _ in range(rounds):
        try:
            done = subprocess.run([binary, "bench-only"], capture_output=True, text=True)
        except OSError as e:
            sys.exit(f"error: cannot run {binary}: {e}")
        rows = parse_bench(done.stdout)
        if done.returncode != 0 or not rows:
            sys.exit(f"error: {binary} bench-only failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-2000:]}")
        tables.append(rows)
    return {k: tuple(statistics.median(t[k][i] for t in tables if k in t) for i in range(2)) for k in tables[0]}


def combined_table(ours, sdpa):
    """markdown lines: per shape and pass our mma.sync and wgmma ms, SDPA's, and wgmma's speed-ups over both;
    sdpa: {(shape, pass): ms}"""
    lines = ["| B, T, NH, HS | pass | mma.sync ms | wgmma ms | SDPA flash ms | wgmma / mma.sync | wgmma / SDPA |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for key, (mma, wg) in ours.items():
        if key not in sdpa:
            continue
        sd = sdpa[key]
        lines.append(f"| {key[0]} | {key[1]} | {mma:.3f} | {wg:.3f} | {sd:.3f} | {mma / wg:.2f}x | {sd / wg:.2f}x |")
    return lines


def median_ms(torch, fn, reps):
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
    torch, F, sdpa_kernel, SDPBackend = import_torch()
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(B, NH, T, HS, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
               for _ in range(3))
    dout = torch.randn(B, NH, T, HS, device="cuda", dtype=torch.bfloat16, generator=gen)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        fwd = median_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        bwd = median_ms(torch, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), reps)
    return fwd, bwd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions per pass (median) (default 20)")
    ap.add_argument("--T", type=int, default=1024, help="sequence length (default 1024; --ours needs 1024)")
    ap.add_argument("--ours", metavar="BIN", help="also run BIN bench-only (build/test_flash_wgmma) and print one table")
    ap.add_argument("--rounds", type=int, default=3, help="runs of BIN bench-only, medians (default 3)")
    args = ap.parse_args()
    if args.reps < 1 or args.T < 1 or args.rounds < 1:
        sys.exit("error: --reps, --T and --rounds must be positive")
    if args.ours and args.T != 1024:
        sys.exit("error: --ours compares at T = 1024 (test_flash_wgmma's bench shapes); leave --T out")
    torch = import_torch()[0]
    if not torch.cuda.is_available():
        sys.exit("error: no CUDA GPU: this benchmark times PyTorch's flash attention on one")
    ours = run_ours(args.ours, args.rounds) if args.ours else None
    print(f"PyTorch {torch.__version__}, {torch.cuda.get_device_name()}, SDPA flash, causal, BF16, T={args.T}, "
          f"median of {args.reps}")
    sdpa = {}
    print("\n| B, T, NH, HS | pass | SDPA ms | TFLOP/s |\n|---|---|---:|---:|")
    for B, NH, HS in SHAPES:
        fwd_ms, bwd_ms = bench_shape(B, NH, HS, args.T, args.reps)
        flops = 4.0 * B * NH * args.T * args.T * HS / 2
        shape = f"{B}, {args.T}, {NH}, {HS}"
        sdpa.update({(shape, "forward"): fwd_ms, (shape, "backward"): bwd_ms, (shape, "forward + backward"): fwd_ms + bwd_ms})
        print(f"| {shape} | forward | {fwd_ms:.3f} | {flops / fwd_ms / 1e9:.0f} |")
        print(f"| {shape} | backward | {bwd_ms:.3f} | {2.5 * flops / bwd_ms / 1e9:.0f} |")
        print(f"| {shape} | forward + backward | {fwd_ms + bwd_ms:.3f} | |")
    if ours:
        print(f"\n{args.ours} bench-only (median of {args.rounds} runs, each a median of 20) against SDPA flash:\n")
        print("\n".join(combined_table(ours, sdpa)))


if __name__ == "__main__":
    main()
