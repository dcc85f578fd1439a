#!/usr/bin/env bash
# -M (the classifier in chunks of M tokens: the LM head's forward, loss, logits gradient and backward a chunk at a
# time) against -M 0 (the whole micro-batch at once): 10 steps of a small model (B=8, T=256: 2048 tokens; -M 256 is
# 8 chunks) in bf16 and adahop. Checks: a chunked run repeats bit for bit; it allocates (2048 - 256) x 50304 BF16
# logits less (within 2 MiB: main.log rounds to 1 MiB); its losses stay near -M 0's, where only the summation order
# of the head's weight gradient differs: in bf16 every train and val loss within the BF16 engine's loss tolerance of
# test_gpt2cu (5e-3 relative); in adahop the first step's loss (same weights) within 1e-4 and the last one within
# 5e-3, not every step: a last-bit change of a weight can move its MXFP4 code, and the loss transient after the
# strategy votes (steps 3 and 4) amplifies that (up to 1.3% at step 6 in a measured d6 run).
# usage: head_chunk_test.sh [INIT]   INIT is the trainer's -e: d6 (GPT-2, the default) or e.g. llama:d8
set -uo pipefail
cd "$(dirname "$0")/../.."
source dev/test/nccl_path.sh ./train_gpt2_adahop
source dev/test/run_checks.sh
start_checks head_chunk_test "${1:-}"
losses() { sed -n 's/^s:\([0-9]*\) \(tl\|vl\):\([-0-9.naif]*\).*/\1 \2 \3/p' "$1/main.log"; }
for mode in bf16 adahop; do
    for run in M0 M256 M256b; do
        m=${run#M}; m=${m%b}
        timeout 200 ./train_gpt2_adahop -e "$init" -b 8 -t 256 -x 10 -u 2 -v 5 -m 4 -s 0 -w 3 -R 4 -W 2 -p $mode -M $m -a 0 \
            -o "$out/${mode}_$run" > "$out/${mode}_$run.txt" 2>&1 || { tail -3 "$out/${mode}_$run.txt"; }
    done
    grep -q "logits of 256 tokens at a time" "$out/${mode}_M256.txt"
    result "$init $mode: -M 256 runs the classifier in 256-token chunks" $?
    cmp -s <(log_numbers "$out/${mode}_M256") <(log_numbers "$out/${mode}_M256b") && [ -s "$out/${mode}_M256/main.log" ]
    result "$init $mode: two -M 256 runs log the same numbers bit for bit" $?
    n=$(losses "$out/${mode}_M0" | wc -l)
    paste <(losses "$out/${mode}_M0") <(losses "$out/${mode}_M256") |
        awk -v n="$n" -v every=$([ $mode = bf16 ] && echo 1 || echo 0) '
            { d = $3 - $6; if (d < 0) d = -d; tl += $2 == "tl"; last = $2 == "tl" && $1 == 10
              checked = every || (tl == 1 && $2 == "tl") || last; tol = !every && tl == 1 ? 1e-4 : 5e-3
              if ($1 != $4 || $2 != $5 || $3 !~ /^[0-9.]+$/ || $6 !~ /^[0-9.]+$/) bad++
              else if (checked && d > tol * $3) { bad++; printf "  step %d %s: %s vs %s\n", $1, $2, $3, $6 }
              k++ }
            END { if (k != n || n < 11 || bad) { printf "  %d of %d losses outside the tolerance\n", bad, k; exit 1 } }'
    result "$init $mode: -M 256's losses near -M 0's ($([ $mode = bf16 ] && echo "all $n" || echo "first and last train"))" $?
    a=$(alloc_gib "$out/${mode}_M0"); b=$(alloc_gib "$out/${mode}_M256")
    awk -v a="$a" -v b="$b" 'BEGIN { want = (2048 - 256) * 50304 * 2 / 1073741824; d = a - b;
                                     exit !(a > 0 && b > 0 && d > want - 2 / 1024 && d < want + 2 / 1024) }'
    result "$init $mode: -M 256 allocates $a - $b GiB, the logits of 1792 tokens less" $?
done
finish_checks head_chunk_test
