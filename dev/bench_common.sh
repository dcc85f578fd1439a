# shellcheck shell=bash
# Sourced by the benchmarks (dev/bench_modes.sh, dev/bench_gpt2.sh, dev/ab_trainers.sh).

# bench_stamp CMD...: the line under a table's title that says what produced it: the command, the commit, the GPU
# and the date. A checkout whose files differ from HEAD (tracked or untracked, outside dev/results) is marked
# "+changes"; COMMIT names the commit of a tree that has no .git (a copy of a checkout), unchecked.
bench_stamp() {
    local commit gpu
    commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
    if [ -z "${COMMIT:-}" ] && [ -n "$(git status --porcelain -- . ':!dev/results' 2>/dev/null)" ]; then
        commit="$commit+changes"
    fi
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    echo "\`$*\`, commit $commit, ${gpu:-unknown GPU}, $(date -u +%Y-%m-%d)"
}

# bench_mfu LOG TOK_S: the MFU of TOK_S tokens a second for the model of a trainer log, from its line "model FLOPs
# per token F (...); MFU against P TFLOP/s per GPU", as e.g. "44.1%"; "-" when the log or TOK_S lacks it
bench_mfu() {
    sed -n 's/^model FLOPs per token \([0-9.e+]*\) .*MFU against \([0-9.]*\) TFLOP\/s.*/\1 \2/p' "$1" 2>/dev/null |
        awk -v t="${2:-0}" 'NR == 1 && t > 0 && $1 > 0 && $2 > 0 { printf "%.1f%%", 100 * t * $1 / ($2 * 1e12); found = 1 }
                            END { if (!found) print "-" }'
}

# bench_tok_mean LOG TOKENS: a trainer log's mean tok/s over its step lines from step 6 on (after AdaHOP's 3
# calibration steps and the first steps' warm-up), TOKENS per step; prints nothing when LOG has no such step
bench_tok_mean() {
    awk -v tokens="$2" '/^step +[0-9]+\/[0-9]+ \| loss/ { split($2, s, "/"); if (s[1] + 0 >= 6) {
            for (i = 1; i <= NF; i++) if ($(i + 1) == "ms") { ms += $i; n++ } } }
        END { if (n > 0) printf "%.0f", tokens * n / (ms / 1000) }' "$1"
}

# bench_train LOG BIN MODEL B STEPS [FLAGS...]: one timed training run of trainer BIN into LOG (T=1024, nothing
# saved or evaluated, 3 calibration steps, re-classification off, FLAGS after), the runs every throughput figure uses
bench_train() {
    local log=$1 bin=$2 model=$3 b=$4 steps=$5
    shift 5
    "$bin" -e "$model" -b "$b" -t 1024 -x "$steps" -u 0 -v 0 -s 0 -w 3 -R 0 "$@" > "$log" 2>&1
}
