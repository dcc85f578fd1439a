#!/usr/bin/env bash
# dev/ab_trainers.sh with fake trainers (shell scripts that print the trainer's step lines): the mean tok/s of
# steps 6..15 and the ratios to the first binary, the flags each run gets (a BIN's own flags too), a trainer without
# step lines (exit 1), and bad usage (exit 2).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0; failed=0
check() {   # check WHAT CONDITION...
    local what=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what"; fi
}
# fake_trainer NAME MS_FROM_STEP6: steps 1-5 take 1000 ms (excluded), steps 6-15 MS each; records its arguments
fake_trainer() {
    cat > "$work/$1" <<EOT
#!/usr/bin/env bash
echo "\$*" >> "$work/$1.args"
for s in \$(seq 1 15); do
    ms=\$([ \$s -lt 6 ] && echo 1000.0 || echo $2)
    echo "step \$(printf %5d \$s)/15 | loss 5.0 | lr 1.000e-04 | norm 1.0 | \$ms ms | 1 tok/s | MFU 1.0%"
done
EOT
    chmod +x "$work/$1"
}
fake_trainer slow 100.0
fake_trainer fast 50.0
printf '#!/usr/bin/env bash\necho "error: no GPU"; exit 1\n' > "$work/broken"; chmod +x "$work/broken"

out=$(REPS=2 dev/ab_trainers.sh "$work/slow" "$work/fast" -- d12:64 2>&1); rc=$?
check "two fake trainers: exit 0 (got $rc)" [ $rc -eq 0 ]
# 64 x 1024 tokens in 100 ms = 655360 tok/s, in 50 ms twice that
check "each round's tok/s" [ "$(grep -c "round [12]: $work/slow 655360 $work/fast 1310720" <<< "$out")" -eq 2 ]
check "the mean line with the ratios to the first binary" \
    grep -q "d12 B=64 mean: $work/slow 655360 (1.000) $work/fast 1310720 (2.000)" <<< "$out"
check "every run's flags" [ "$(sort -u "$work/fast.args")" = "-e d12 -b 64 -t 1024 -x 15 -u 0 -v 0 -s 0 -w 3 -R 0 -p bf16" ]
check "REPS rounds of each binary" [ "$(wc -l < "$work/slow.args")" -eq 2 ]

out=$(PREC=adahop REPS=1 dev/ab_trainers.sh "$work/slow" "$work/fast" -- llama:d24:32 2>&1); rc=$?
check "MODEL with a colon and PREC: exit 0 (got $rc)" [ $rc -eq 0 ]
check "llama:d24 at B=32 in adahop" grep -q -- "-e llama:d24 -b 32 .* -p adahop" "$work/fast.args"

rm -f "$work/fast.args"
out=$(REPS=1 dev/ab_trainers.sh "$work/fast -a 0" "$work/fast -a 1" -- d12:64 2>&1); rc=$?
check "one binary with two flag sets: exit 0 (got $rc)" [ $rc -eq 0 ]
check "each run gets its own flags after the common ones" \
    [ "$(cat "$work/fast.args")" = "$(printf -- '-e d12 -b 64 -t 1024 -x 15 -u 0 -v 0 -s 0 -w 3 -R 0 -p bf16 -a %s\n' 0 1)" ]

out=$(REPS=1 dev/ab_trainers.sh "$work/slow" "$work/broken" -- d12:8 2>&1); rc=$?
check "a trainer without step lines: exit 1 (got $rc)" [ $rc -eq 1 ]
check "and its output shown" grep -q "error: no GPU" <<< "$out"

for args in "$work/slow -- d12:64" "$work/slow $work/fast --" "$work/slow $work/fast -- d12" \
            "$work/slow $work/missing -- d12:64"; do
    # shellcheck disable=SC2086
    dev/ab_trainers.sh $args > /dev/null 2>&1; rc=$?
    check "bad usage '$args': exit 2 (got $rc)" [ $rc -eq 2 ]
done
REPS=0 dev/ab_trainers.sh "$work/slow" "$work/fast" -- d12:64 > /dev/null 2>&1; rc=$?
check "REPS=0: exit 2 (got $rc)" [ $rc -eq 2 ]
check "-h prints the usage" grep -q "Usage:" <<< "$(dev/ab_trainers.sh -h)"

echo "ab_trainers_test: $passed passed, $failed failed"
[ $failed -eq 0 ]
