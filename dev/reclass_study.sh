#!/usr/bin/env bash
# How AdaHOP's strategies move under periodic re-classification, and what the pattern statistics cost: trains
# d12 in adahop precision with a short interval (-R) and window (-W), then reports per re-classification point
# how many GEMMs changed strategy (by linear kind and GEMM), the final strategy counts, and the mean step time
# of steps that record statistics against those that do not. Used to choose the defaults of -R and -W.
# Usage: dev/reclass_study.sh TRAIN_PATTERN VAL_PATTERN [STEPS=1000] [R=100] [W=10]   (needs a GPU)
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/test/nccl_path.sh ./train_gpt2_adahop   # NCCL may live only in PyTorch's wheels
[ $# -ge 2 ] || { echo "usage: $0 TRAIN_PATTERN VAL_PATTERN [STEPS] [R] [W]" >&2; exit 1; }
train=$1; val=$2; steps=${3:-1000}; R=${4:-100}; W=${5:-10}
calib=30
out=${OUT:-build}/reclass
rm -rf "$out/run"; mkdir -p "$out"
./train_gpt2_adahop -i "$train" -j "$val" -e d12 -b 16 -t 1024 -x "$steps" -u 100 -l 6e-4 -v 250 -m 20 -s 0 \
    -p adahop -w "$calib" -R "$R" -W "$W" -o "$out/run" > "$out/train.txt" 2>&1 || { echo "training failed:"; tail -5 "$out/train.txt"; exit 1; }
log="$out/run/main.log"
echo "d12 B=16 T=1024, $steps steps, calibration $calib steps, re-classification every $R steps over $W steps"
echo "changes per vote (step: number of GEMMs whose strategy changed):"
awk '/^adahop step/ { n[$3]++ } END { for (s in n) print s, n[s] }' "$log" | sort -n | tr '\n' ';'; echo
echo "changes by linear and GEMM after calibration (kind gemm: count):"
awk -v c="$calib" '/^adahop step/ && $3 > c { n[$6 " " substr($7, 1, length($7) - 1)]++ } END { for (k in n) print "  " k ": " n[k] }' "$log" | sort
echo "strategy transitions after calibration (old -> new: count):"
awk -v c="$calib" '/^adahop step/ && $3 > c { n[$8 " -> " $10]++ } END { for (k in n) print "  " k ": " n[k] }' "$log" | sort
echo "final: $(grep '^counts:' "$out/train.txt" | tail -n 1)"
awk -v c="$calib" -v R="$R" -v W="$W" '/^step +[0-9]+\/[0-9]+ \| loss/ { split($2, s, "/"); k = s[1] - 1;
        for (i = 1; i <= NF; i++) if ($(i + 1) == "ms") ms = $i;
        if (k <= c + 1) next; nxt = (int(k / R) + 1) * R; if (nxt - k <= W) { a += ms; na++ } else { b += ms; nb++ } }
     END { if (na > 0 && nb > 0) printf "step time: %.1f ms with statistics (%d steps), %.1f ms without (%d steps): +%.0f%%\n", a / na, na, b / nb, nb, 100 * (a / na / (b / nb) - 1) }' "$out/train.txt"
grep "val loss" "$out/train.txt" | tail -n 2
