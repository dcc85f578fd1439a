#!/usr/bin/env bash
# Where the time of a training step goes, per GPU kernel: profiles a few steps of the trainer under Nsight Systems
# and prints the kernels that take the most GPU time, grouped (GEMMs, MXFP4 quantization, attention, other).
# Needs nsys (CUDA toolkit); says so and exits 0 when it is missing.
# Usage: dev/profile_step.sh [precision] [trainer flags...]   (default: adahop -e d12 -b 64 -t 1024)
set -uo pipefail
cd "$(dirname "$0")/.."
NSYS=${NSYS:-$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)}
if [ -z "$NSYS" ] || [ ! -x "$NSYS" ]; then echo "profile_step.sh: nsys not found: no profile"; exit 0; fi
source dev/test/nccl_path.sh ./train_gpt2_adahop
precision=${1:-adahop}; shift || true
flags=("$@"); [ ${#flags[@]} -eq 0 ] && flags=(-e d12 -b 64 -t 1024)
out=${OUT:-build}/profile_$precision
mkdir -p "$(dirname "$out")"
"$NSYS" profile -o "$out" --force-overwrite true -t cuda ./train_gpt2_adahop "${flags[@]}" -p "$precision" -x 6 -u 0 -v 0 -s 0 \
    -w 3 -R 0 > "$out.train.log" 2>&1 || { echo "profile_step.sh: the profiled run failed:"; tail -5 "$out.train.log"; exit 1; }
"$NSYS" stats --report cuda_gpu_kern_sum --format csv --output "$out" "$out.nsys-rep" > /dev/null 2>&1
csv=$(ls "$out"*cuda_gpu_kern_sum*.csv 2>/dev/null | head -1)
[ -n "$csv" ] || { echo "profile_step.sh: nsys stats wrote no kernel summary"; exit 1; }
# columns: Time (%), Total Time (ns), Instances, Avg, Med, Min, Max, StdDev, Name
python3 - "$csv" "$precision" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
ti, ni = head.index("Total Time (ns)"), head.index("Name")
def group(name):
    n = name.lower()
    if any(k in n for k in ("gemm", "sm90_xmma", "cutlass", "cublas", "matmul")): return "GEMM (cuBLASLt)"
    if any(k in n for k in ("mx_", "e4m3", "zero_rows", "sum_tile")): return "MXFP4 quantization / E4M3"
    if "flash" in n: return "attention"
    if any(k in n for k in ("topk", "row_stats", "column_sums", "gather", "scatter", "outlier", "classif")): return "statistics / OE"
    return "other (norms, GELU, embeddings, loss, AdamW, ...)"
total = sum(float(r[ti]) for r in body)
groups = {}
for r in body: groups[group(r[ni])] = groups.get(group(r[ni]), 0.0) + float(r[ti])
print(f"GPU kernel time by group ({sys.argv[2]}, 6 steps):")
for g, t in sorted(groups.items(), key=lambda x: -x[1]): print(f"  {g:<52} {100 * t / total:5.1f}%")
print("top kernels:")
for r in sorted(body, key=lambda r: -float(r[ti]))[:15]: print(f"  {100 * float(r[ti]) / total:5.1f}%  {r[ni][:110]}")
EOF
