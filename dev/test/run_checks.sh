# Shared by the trainer's test scripts (source it, then start_checks): counting checks and reading a run's
# main.log.

# start_checks NAME [INIT]: init = INIT (the trainer's -e; d6 when empty), out = build/NAME_INIT emptied, counters zeroed
start_checks() {
    init=${2:-d6}
    out=build/$1_${init//:/_}
    rm -rf "$out"; mkdir -p "$out"
    pass=0; fail=0
}

# finish_checks NAME: prints the counts; the status is non-zero when a check failed
finish_checks() {
    echo "$1 $init: $pass passed, $fail failed"
    [ $fail -eq 0 ]
}

# result NAME STATUS: counts and prints one check
result() {
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok   $1"; else fail=$((fail + 1)); echo "FAIL $1"; fi
}

# log_numbers DIR: DIR/main.log without throughput and memory, the figures that differ between identical runs
log_numbers() { sed 's/ tok\/s:[0-9]*//; s/ mem_gib:[0-9.]*//' "$1/main.log"; }

# alloc_gib DIR: the GiB the run allocated (the last mem_gib of DIR/main.log)
alloc_gib() { sed -n 's/.*mem_gib:\([0-9.]*\).*/\1/p' "$1/main.log" | tail -1; }
