#!/usr/bin/env bash
# -A 1 (the MLP's pre-activation recomputed in the backward pass) and -A 2 (the qkv output too) change nothing but
# memory: 10 steps of a small model in bf16 and adahop (calibration vote at step 3, re-classification at 4 and 8)
# with -A 0, 1 and 2 log the same losses, norms, val losses and strategy checksums bit for bit, and each level
# allocates less than the one below. -a 0: the runs take cuBLASLt's first GEMM algorithms (by timing, two runs may
# choose differently).
# usage: recompute_test.sh [INIT]   INIT is the trainer's -e: d6 (GPT-2, the default) or e.g. llama:d8
set -uo pipefail
cd "$(dirname "$0")/../.."
source dev/test/nccl_path.sh ./train_gpt2_adahop
source dev/test/run_checks.sh
start_checks recompute_test "${1:-}"
for mode in bf16 adahop; do
    for a in 0 1 2; do
        timeout 200 ./train_gpt2_adahop -e "$init" -b 8 -t 256 -x 10 -u 2 -v 5 -m 4 -s 0 -w 3 -R 4 -W 2 -p $mode -A $a -a 0 \
            -o "$out/${mode}_A$a" > "$out/${mode}_A$a.txt" 2>&1 || { tail -3 "$out/${mode}_A$a.txt"; }
    done
    for a in 1 2; do
        cmp -s <(log_numbers "$out/${mode}_A0") <(log_numbers "$out/${mode}_A$a") && [ -s "$out/${mode}_A0/main.log" ]
        result "$init $mode: -A $a logs the same numbers bit for bit as -A 0 ($(grep -c ' tl:' "$out/${mode}_A$a/main.log" 2>/dev/null) steps)" $?
        m_below=$(alloc_gib "$out/${mode}_A$((a - 1))"); m=$(alloc_gib "$out/${mode}_A$a")
        awk -v a="$m_below" -v b="$m" 'BEGIN { exit !(b > 0 && b < a) }'
        result "$init $mode: -A $a allocates less than -A $((a - 1)) ($m GiB vs $m_below GiB)" $?
    done
done
finish_checks recompute_test
