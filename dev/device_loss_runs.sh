#!/usr/bin/env bash
# Issue 5 on the project's GPU machine, whose calls carry at most 64 MiB: the Gutenberg token shards (made here
# with dev/data/tokenize_text.py --val-tokens 5000000 --shard-tokens 10000000, then xz -9) arrive in
# carry/gtok_*/ over consecutive calls and are unpacked into build/gutenberg/; once SHARDS of them are there,
# scripts/run_modes.sh trains the comparison runs for MINUTES and the runs' logs are copied to $OUT/runs/.
# Call it again (machine still warm) until run_modes.sh reports every run finished.
# Usage: [SHARDS=12] [MINUTES=9] [MODES=bf16,adahop,hadamard,mxfp4] [SEED2=42, empty = none]
#        [ROOT=build/runs/gutenberg_d12] [MODEL="-e d12 -b 64 -d 524288 -x 200"] [EXTRA="more trainer flags, e.g. -C iht"]
#        bash dev/device_loss_runs.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/out}; export OUT
SHARDS=${SHARDS:-12}; MINUTES=${MINUTES:-9}; MODES=${MODES:-bf16,adahop,hadamard,mxfp4}
SEED2=${SEED2-42}; ROOT=${ROOT:-build/runs/gutenberg_d12}; EXTRA=${EXTRA:-}
MODEL=${MODEL:-"-e d12 -b 64 -d 524288 -x 200"}
mkdir -p "$OUT" build/gutenberg
for f in carry/gtok_*/*.bin.xz; do
    [ -e "$f" ] || continue
    xz -d -c "$f" > "build/gutenberg/$(basename "$f" .xz)" &
done
wait
have=$(ls build/gutenberg/*.bin 2>/dev/null | wc -l)
echo "token shards here: $have of $SHARDS"
[ "$have" -lt "$SHARDS" ] && exit 0
source dev/test/nccl_path.sh ./train_gpt2_adahop
scripts/run_modes.sh --root "$ROOT" --modes "$MODES" --seed 1337 ${SEED2:+--seed2 "$SEED2"} --minutes "$MINUTES" -- \
    $MODEL -t 1024 -l 6e-4 -u 20 -q 0.1 -v 25 -m -1 -n 50 -s 0 \
    -i "build/gutenberg/gutenberg_train_*.bin" -j "build/gutenberg/gutenberg_val_*.bin" $EXTRA
rc=$?
for d in "$ROOT"/*/; do
    name=$(basename "$d"); mkdir -p "$OUT/runs/$(basename "$ROOT")/$name"
    cp "$d/main.log" "$OUT/runs/$(basename "$ROOT")/$name/" 2>/dev/null
    echo "$name: $(grep -c ' tl:' "$d/main.log" 2>/dev/null) train lines, last: $(grep ' vl:' "$d/main.log" 2>/dev/null | tail -1)"
done
echo "run_modes.sh exit status $rc (0 all finished, 3 runs remain)"
