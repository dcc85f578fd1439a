#!/usr/bin/env bash
# Where the time of a training step goes, per GPU kernel: runs the trainer twice under our CUPTI kernel profiler
# (build/libkernel_profile.so, dev/cuda/kernel_profile.c), for 5 and for 15 steps with the same flags, and subtracts
# the per-kernel totals, so that exactly steps 6..15 remain (start-up, calibration and tear-down cancel out). Prints GPU
# ms per step by group (GEMMs, MXFP4 quantization, attention, other), the top 20 kernels, and the trainer's own ms/step.
# Needs libcupti.so.13 (CUDA toolkit, or the CUPTI wheel of nvidia's Python packages); says so and exits 0 without it.
# Usage: dev/profile_step.sh [precision] [trainer flags...]   (default: adahop -e d12 -b 64 -t 1024)
set -uo pipefail
cd "$(dirname "$0")/.."
find_cupti() {   # the folder of libcupti.so.13: the loader's cache, the CUDA toolkit, then nvidia's Python packages
    local lib
    lib=$(ldconfig -p 2>/dev/null | awk '/libcupti\.so\.13 / { print $NF; exit }')
    [ -n "$lib" ] || lib=$(ls /usr/local/cuda/lib64/libcupti.so.13* /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13* \
                              /usr/local/cuda*/lib/libcupti.so.13* /usr/local/cuda*/lib64/libcupti.so.13* 2>/dev/null | head -1)
    [ -n "$lib" ] || lib=$(${PYTHON:-python3} -c "import nvidia; print('\n'.join(nvidia.__path__))" 2>/dev/null |
                           while read -r d; do find "$d" -name 'libcupti.so.13*' 2>/dev/null; done | head -1)
    [ -n "$lib" ] && dirname "$lib"
}
cupti_dir=$(find_cupti)
[ -n "$cupti_dir" ] || { echo "profile_step.sh: libcupti.so.13 not found (ldconfig, /usr/local/cuda*, python nvidia packages): no profile"; exit 0; }
export LD_LIBRARY_PATH="$cupti_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -f build/libkernel_profile.so ] || make -s build/libkernel_profile.so > /dev/null ||
    { echo "profile_step.sh: could not build build/libkernel_profile.so"; exit 1; }
source dev/test/nccl_path.sh ./train_gpt2_adahop
precision=${1:-adahop}; shift || true
flags=("$@"); [ ${#flags[@]} -eq 0 ] && flags=(-e d12 -b 64 -t 1024)
out=${OUT:-build}/profile_$precision
mkdir -p "$(dirname "$out")"
for steps in 5 15; do
    rm -f "$out.x$steps.tsv"
    CUDA_INJECTION64_PATH="$PWD/build/libkernel_profile.so" KERNEL_PROFILE_OUT="$out.x$steps.tsv" ./train_gpt2_adahop \
        "${flags[@]}" -p "$precision" -x $steps -u 0 -v 0 -s 0 -w 3 -R 0 > "$out.x$steps.log" 2>&1 ||
        { echo "profile_step.sh: the profiled run (-x $steps) failed:"; tail -5 "$out.x$steps.log"; exit 1; }
    grep "^kernel_profile:" "$out.x$steps.log"   # CUPTI errors or dropped records: the table is incomplete
    [ -s "$out.x$steps.tsv" ] || { echo "profile_step.sh: the profiler wrote no table for -x $steps (see $out.x$steps.log)"; exit 1; }
done
${PYTHON:-python3} - "$out.x5.tsv" "$out.x15.tsv" "$out.x15.log" "$precision ${flags[*]}" <<'EOF'
import re, shutil, subprocess, sys
STEPS = 10   # steps 6..15: the 15-step run minus the 5-step run
def table(path):   # total_ns, count, name per line
    t = {}
    for line in open(path):
        ns, n, name = line.rstrip("\n").split("\t", 2)
        t[name] = (int(ns), int(n))
    return t
first, second = table(sys.argv[1]), table(sys.argv[2])
rows = []   # (ns, count) of steps 6..15, name
for name, (ns, n) in second.items():
    ns0, n0 = first.get(name, (0, 0))
    if n > n0 and ns < ns0:   # start-up work (e.g. the weights' upload) took longer in the 5-step run than steps 6..15 add
        print(f"warning: {name[:60]}: {n - n0} more calls but {(ns0 - ns) / 1e6:.1f} ms less in total (start-up noise); counted as 0")
        ns = ns0
    if n > n0: rows.append((ns - ns0, n - n0, name))
gone = [name for name, (ns, n) in first.items() if n > second.get(name, (0, 0))[1]]
if gone: print(f"warning: {len(gone)} kernels ran more often in the 5-step run, e.g. {gone[0][:80]}")
if not rows: sys.exit("profile_step.sh: no kernel ran in steps 6..15")
names = [r[2] for r in rows]
if shutil.which("c++filt"):
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True).stdout.split("\n")
    if len(out) > len(names): names = out[:len(names)]
rows = [(ns, n, name) for (ns, n, _), name in zip(rows, names)]
def group(name):
    n = name.lower()
    if any(k in n for k in ("gemm", "sm90", "xmma", "nvjet", "cutlass", "cublas", "matmul")): return "GEMM (cuBLASLt)"
    if any(k in n for k in ("mx_", "e4m3", "zero_rows", "sum_tile", "outer_scale")): return "MXFP4 quantization / E4M3 / scales"
    if "flash" in n: return "attention"
    if any(k in n for k in ("topk", "row_stats", "column_sums", "gather", "scatter", "outlier", "classif")): return "statistics / OE"
    if n.startswith(("memcpy", "memset")): return "memcpy / memset"
    return "other (norms, GELU, embeddings, loss, AdamW, ...)"
total = sum(r[0] for r in rows)
groups = {}
for ns, n, name in rows: groups[group(name)] = groups.get(group(name), 0) + ns
ms = lambda ns: ns / STEPS / 1e6
print(f"GPU time per step by group ({sys.argv[4]}; steps 6..15):")
for g, t in sorted(groups.items(), key=lambda x: -x[1]): print(f"  {g:<52} {ms(t):9.2f} ms  {100 * t / total:5.1f}%")
print(f"  {'all GPU kernels, memcpy and memset':<52} {ms(total):9.2f} ms")
wall = [float(m.group(2)) for m in (re.match(r"step +(\d+)/\d+ \| loss .*\| ([0-9.]+) ms \|", l) for l in open(sys.argv[3]))
        if m and int(m.group(1)) >= 6]
if wall: print(f"  {'trainer step time (wall, under the profiler)':<52} {sum(wall) / len(wall):9.2f} ms  ({len(wall)} steps)")
else: print("  (no step lines in the trainer's log)")
print("top 20 kernels:    ms/step       %   calls/step  name")
for ns, n, name in sorted(rows, key=lambda r: -r[0])[:20]:
    print(f"              {ms(ns):9.3f}  {100 * ns / total:5.1f}%  {n / STEPS:11.1f}  {name[:110]}")
EOF
