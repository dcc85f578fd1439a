# Sourced by the benchmarks that write a table to dev/results/: bench_stamp prints the line under a table's title
# that says what produced it (the command, the commit, the GPU). COMMIT overrides `git rev-parse` where the tree
# is a copy without .git (a remote machine); a tree with uncommitted changes is marked "+changes".
bench_stamp() {
    local commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
    if [ -z "${COMMIT:-}" ] && ! git diff --quiet HEAD -- . 2>/dev/null; then commit="$commit+changes"; fi
    local gpu
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    echo "\`$*\`, commit $commit, ${gpu:-unknown GPU}, $(date -u +%Y-%m-%d)"
}
