#!/usr/bin/env bash
# Cross-checks the PyTorch AdaHOP linear oracle (dev/adahop_linear_ref.py) against the C reference
# (llmc/adahop_cpu.h): generates case files covering every strategy in every GEMM position, the input kinds,
# round-up scales and stochastic rounding into build/adahop_cases/, and checks each with build/test_adahop_case
# (built here if missing or stale). Skips (exit 0) when $PYTHON (default python3) has no torch, and then appends
# the reason to the file $TEST_SKIP_LOG names (`make test` lists them at its end).
# Usage: dev/test/adahop_cases.sh        (from the repository root; PYTHON=... sets the interpreter)
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
OUTDIR=build/adahop_cases
CHECKER=build/test_adahop_case

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    echo "adahop_cases: SKIP: $PY has no torch (the oracle needs PyTorch)" | tee -a "${TEST_SKIP_LOG:-/dev/null}"
    exit 0
fi
if ! "$PY" -c "import torch; torch.zeros(1).numpy()" >/dev/null 2>&1; then   # the oracle writes its cases through numpy
    echo "adahop_cases: SKIP: $PY's torch cannot use its numpy (a numpy newer than the one torch was built for?)" |
        tee -a "${TEST_SKIP_LOG:-/dev/null}"
    exit 0
fi
mkdir -p "$OUTDIR"
if [ ! -x "$CHECKER" ] || [ dev/test/test_adahop_case.c -nt "$CHECKER" ] || [ dev/test/adahop_case_file.h -nt "$CHECKER" ] \
   || [ llmc/adahop_cpu.h -nt "$CHECKER" ] || [ llmc/mxfp4.h -nt "$CHECKER" ]; then
    gcc -O2 -std=gnu11 -Wall -Wextra -fopenmp -I. dev/test/test_adahop_case.c -o "$CHECKER" -lm || { echo "adahop_cases: cannot build $CHECKER"; exit 1; }
fi

S="-N 96 --cin 64 --cout 160"
# name | arguments of dev/adahop_linear_ref.py
CASES=(
    "iht|--seed 101 $S --strategies 0,0,0 --kind gaussian"
    "oe_rows|--seed 102 $S --strategies 1,1,1 --oe-k 8 --kind rows"
    "oe_cols|--seed 103 $S --strategies 2,2,2 --oe-k 8 --kind cols"
    "bf16|--seed 104 $S --strategies 3,3,3 --kind heavy"
    "plain|--seed 105 $S --strategies 4,4,4 --kind gaussian"
    "mixed_sr|--seed 106 $S --strategies 1,2,4 --oe-k 8 --kind rows --sr"
    "mixed_a|--seed 107 -N 160 --cin 96 --cout 64 --strategies 2,4,1 --oe-k 3 --kind cols"
    "mixed_b|--seed 108 -N 64 --cin 160 --cout 96 --strategies 4,1,2 --oe-k 64 --kind heavy"
    "extremes_a|--seed 109 $S --strategies 3,0,2 --oe-k 2 --kind extremes"
    "extremes_b|--seed 110 $S --strategies 1,3,1 --oe-k 1 --kind extremes"
    "roundup|--seed 111 $S --strategies 0,1,4 --oe-k 8 --kind heavy --rule 1"
    "k_all_rows|--seed 112 -N 32 --cin 32 --cout 64 --strategies 1,2,2 --oe-k 64 --kind rows"
    "sr_plain|--seed 113 -N 128 --cin 64 --cout 96 --strategies 4,0,4 --kind heavy --sr"
    "drawn|--seed 114"
)

passed=0
failed=0
if "$PY" dev/adahop_linear_ref.py --selftest; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL selftest"; fi
for entry in "${CASES[@]}"; do
    name=${entry%%|*}
    args=${entry#*|}
    file="$OUTDIR/$name.bin"
    # shellcheck disable=SC2086
    if ! "$PY" dev/adahop_linear_ref.py $args --out "$file"; then
        echo "FAIL $name: the oracle failed"
        failed=$((failed + 1))
        continue
    fi
    if "$CHECKER" "$file" > "$OUTDIR/$name.log" 2>&1; then
        passed=$((passed + 1))
        echo "ok   $name: $(tail -n 1 "$OUTDIR/$name.log")"
    else
        failed=$((failed + 1))
        echo "FAIL $name:"
        cat "$OUTDIR/$name.log"
    fi
done
echo "adahop_cases: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
