#!/usr/bin/env bash
# Checks the GPU build on a machine with an NVIDIA GPU: builds the CUDA programs, runs the chosen parts and ends
# with one summary table (each part's status and figures, and where its log is). Every log and benchmark output
# goes to the output directory.
# Usage: dev/gpu_check.sh [-o DIR] [part ...]
#   -o DIR    output directory (default: $GPU_CHECK_OUT, else build/gpu_check)
#   parts     tests    dev/test/run_gpu_tests.sh (every GPU test)
#             train    the default training run (d6 on the embedded data, as `make train`)
#             kbench   build/bench_mxfp4, build/bench_fused_operands, build/bench_fp8_scaling, build/bench_attention
#             modes    dev/bench_modes.sh (tok/s and memory per precision mode; configs in MODES_CONFIGS,
#                      modes in MODES, e.g. MODES="bf16 adahop adahop+A")
#             bench    dev/bench_gpt2.sh (ours vs PyTorch; needs PyTorch)
#             profile  dev/profile_step.sh for bf16 and adahop (trainer flags in PROFILE_FLAGS, e.g. "-e d24 -b 32 -t 1024")
#             all      every part above
#   default: tests train kbench
# Exit status: 0 when every part that ran passed, 1 otherwise, 2 on bad usage.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
out=${GPU_CHECK_OUT:-build/gpu_check}
parts=()
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        -o) [ $# -ge 2 ] || { echo "gpu_check.sh: -o needs a directory" >&2; exit 2; }; out=$2; shift 2 ;;
        tests|train|kbench|modes|bench|profile) parts+=("$1"); shift ;;
        all) parts+=(tests train kbench modes bench profile); shift ;;
        *) echo "gpu_check.sh: unknown part '$1' (parts: tests train kbench modes bench profile all; -h for help)" >&2; exit 2 ;;
    esac
done
[ ${#parts[@]} -eq 0 ] && parts=(tests train kbench)
want() { [[ " ${parts[*]} " == *" $1 "* ]]; }
nvidia-smi -L > /dev/null 2>&1 || { echo "gpu_check.sh: no NVIDIA GPU here (nvidia-smi -L failed)" >&2; exit 1; }
mkdir -p "$out" || { echo "gpu_check.sh: cannot create $out" >&2; exit 2; }
export OUT=$out   # the benchmark scripts write their files under $OUT

gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "unknown")
echo "GPU: $gpu; commit $commit; logs in $out"
echo "building the CUDA programs (log: $out/build.log)"
make -j"$(nproc)" cuda > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; echo "gpu_check.sh: build failed" >&2; exit 1; }
source dev/test/nccl_path.sh ./train_gpt2_adahop   # NCCL may live only in PyTorch's wheels

rows=()     # summary rows: "part|status|figures|log"
failed=0
# run_part NAME LOG COMMAND...: runs the command into LOG, records PASS or FAIL
run_part() {
    local name=$1 log=$2; shift 2
    echo "== $name (log: $log)"
    if "$@" > "$log" 2>&1; then status=PASS; else status=FAIL; failed=1; fi
}

if want tests; then
    run_part "GPU tests" "$out/gpu_tests.log" bash dev/test/run_gpu_tests.sh
    counts=$(grep -hE ': [0-9]+ passed, [0-9]+ failed' "$out/gpu_tests.log" | sed 's/ passed, /\//; s/ failed//' | tr '\n' ';' | sed 's/;$//; s/;/; /g')
    rows+=("GPU tests|$status|${counts:-no counts}|$out/gpu_tests.log")
fi
if want train; then
    run_part "default training run" "$out/train_default.log" ./train_gpt2_adahop -o "$out/default_run" -y 2   # replaces the last check's
    losses=$(grep -E '^step +[0-9]+/' "$out/train_default.log" | sed -n '1p;$p' | awk '{print $5}' | tr '\n' ' ')
    val=$(grep "val loss" "$out/train_default.log" | tail -1)
    rows+=("default training run (d6)|$status|train loss first/last: ${losses:-?}; ${val:-no val loss}|$out/train_default.log")
fi
if want kbench; then
    for b in bench_mxfp4 bench_fused_operands bench_fp8_scaling bench_attention; do
        run_part "$b" "$out/$b.log" "./build/$b"
        rows+=("$b|$status|tables below|$out/$b.log")
    done
fi
if want modes; then
    run_part "precision modes" "$out/bench_modes.log" env RESULTS="$out" bash dev/bench_modes.sh ${MODES_CONFIGS:-}
    grep -q FAILED "$out/bench_modes.log" && { status=FAIL; failed=1; }
    rows+=("dev/bench_modes.sh|$status|table below|$out/bench_modes.log")
fi
if want bench; then
    run_part "ours vs PyTorch" "$out/bench_gpt2.log" env RESULTS="$out" bash dev/bench_gpt2.sh
    rows+=("dev/bench_gpt2.sh|$status|table below|$out/bench_gpt2.log")
fi
if want profile; then
    for p in bf16 adahop; do
        run_part "profile $p" "$out/profile_$p.log" bash dev/profile_step.sh "$p" ${PROFILE_FLAGS:-}
        total=$(grep "all GPU kernels" "$out/profile_$p.log" | awk '{print $(NF-1), $NF}')
        rows+=("dev/profile_step.sh $p|$status|GPU time per step: ${total:-?}|$out/profile_$p.log")
    done
fi

echo
echo "## gpu_check.sh summary: $gpu, commit $commit"
echo
echo "| part | result | figures | log |"
echo "|---|---|---|---|"
for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done
for f in bench_mxfp4 bench_fused_operands bench_fp8_scaling bench_attention bench_modes bench_gpt2; do
    [ -f "$out/$f.log" ] || continue
    echo; echo "### $f"; grep '^|' "$out/$f.log"
done
for p in bf16 adahop; do
    [ -f "$out/profile_$p.log" ] || continue
    echo; echo "### profile_step.sh $p"; sed -n '/^GPU time per step/,/^top 20/p' "$out/profile_$p.log" | sed '$d'
done
exit $failed
