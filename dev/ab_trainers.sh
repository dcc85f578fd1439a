#!/usr/bin/env bash
# Same-run throughput of trainer binaries, e.g. HEAD's build against a change's: for each MODEL:B, REPS rounds in
# which every binary trains STEPS steps in turn (T=1024, -p PREC, re-classification off, nothing saved), so that
# drifts of the machine fall on all of them alike. Prints each run's mean tok/s of steps 6..STEPS and, per model,
# each binary's mean over the rounds and its ratio to the first binary's.
# Usage: [PREC=bf16] [REPS=2] [STEPS=15] dev/ab_trainers.sh BIN1 BIN2 [BIN ...] -- MODEL:B [MODEL:B ...]
#   e.g. dev/ab_trainers.sh build/old/train_gpt2_adahop ./train_gpt2_adahop -- d12:64 d24:32 llama:d24:32
#   A BIN may carry flags for its runs: dev/ab_trainers.sh "./train_gpt2_adahop -a 0" "./train_gpt2_adahop -a 1" -- d12:64
# Exit status: 0 when every run gave step times, 1 otherwise, 2 on bad usage.
set -uo pipefail
DEV_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$DEV_DIR/bench_common.sh"
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] && { [ "$1" = -h ] || [ "$1" = --help ]; } && { usage; exit 0; }
bins=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do bins+=("$1"); shift; done
[ $# -gt 0 ] && shift
models=("$@")
if [ ${#bins[@]} -lt 2 ] || [ ${#models[@]} -lt 1 ]; then usage >&2; exit 2; fi
for bin in "${bins[@]}"; do
    exe=${bin%% *}
    [ -x "$exe" ] || { echo "ab_trainers.sh: '$exe' is not an executable file" >&2; exit 2; }
done
for mb in "${models[@]}"; do
    [[ $mb =~ ^.+:[0-9]+$ ]] || { echo "ab_trainers.sh: '$mb' is not MODEL:B (e.g. d12:64)" >&2; exit 2; }
done
prec=${PREC:-bf16}; reps=${REPS:-2}; steps=${STEPS:-15}
if ! [[ $reps =~ ^[1-9][0-9]*$ && $steps =~ ^[0-9]+$ ]] || [ "$steps" -lt 6 ]; then
    echo "ab_trainers.sh: REPS must be >= 1 and STEPS >= 6 (got '$reps', '$steps')" >&2; exit 2
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
for mb in "${models[@]}"; do
    model=${mb%:*}; b=${mb##*:}
    declare -A total=()
    for ((rep = 1; rep <= reps; rep++)); do
        line="$model B=$b round $rep:"
        for i in "${!bins[@]}"; do
            read -r -a run <<< "${bins[$i]}"   # the executable, then its own flags (after the common ones)
            bench_train "$log" "${run[0]}" "$model" "$b" "$steps" -p "$prec" "${run[@]:1}"
            tok=$(bench_tok_mean "$log" $((b * 1024)))
            if [ -z "$tok" ]; then
                echo "$model B=$b: ${bins[$i]} gave no step times:"; tail -n 3 "$log"; failed=1; tok=0
            fi
            total[$i]=$(( ${total[$i]:-0} + tok ))
            line="$line ${bins[$i]} $tok"
        done
        echo "$line"
    done
    summary="$model B=$b mean:"
    for i in "${!bins[@]}"; do
        summary="$summary ${bins[$i]} $(awk -v t="${total[$i]}" -v t0="${total[0]}" -v r="$reps" \
                                           'BEGIN { printf "%.0f (%s)", t / r, (t0 > 0 ? sprintf("%.3f", t / t0) : "-") }')"
    done
    echo "$summary"
    unset total
done
exit $failed
