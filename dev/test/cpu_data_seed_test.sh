#!/usr/bin/env bash
# The CPU trainer's seeds (needs no GPU): from one model file (so -r does not change the init), runs with the same
# data seed -D and other init seeds -r train on the same batches (the same losses at every step: nothing else draws
# from -r in bf16 without samples), another -D gives other batches (other losses), and without -D the data order
# follows -r. A resumed run refuses another -D.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=build/cpu_data_seed
rm -rf "$out" && mkdir -p "$out"
pass=0 fail=0
result() { if [ "$2" -eq 0 ]; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
losses() { ./train_gpt2 -e "$out/init/state_00000001.bin" -x 6 -v 0 -g 0 "$@" | sed -n 's/.*train loss \([-0-9.naif]*\).*/\1/p' | tr '\n' ' '; }
./train_gpt2 -x 1 -v 0 -g 0 -n 1 -o "$out/init" > /dev/null || { echo "cpu_data_seed_test: cannot write the model file"; exit 1; }
a=$(losses -r 1 -D 5) b=$(losses -r 2 -D 5) c=$(losses -r 1 -D 6) d=$(losses -r 5) e=$(losses -r 6)
echo "-r 1 -D 5: $a"; echo "-r 2 -D 5: $b"; echo "-r 1 -D 6: $c"
[ -n "$a" ] && [ "$a" = "$b" ]; result "the same -D with another -r: the same losses at every step" $?
[ -n "$c" ] && [ "$a" != "$c" ]; result "another -D: other losses" $?
[ "$d" = "$a" ] && [ "$e" != "$a" ]; result "without -D the data order is -r's (-r 5 = -D 5)" $?
./train_gpt2 -x 4 -v 0 -g 0 -n 2 -D 5 -o "$out/resume" > /dev/null
msg=$(./train_gpt2 -x 6 -v 0 -g 0 -n 2 -D 6 -y 1 -o "$out/resume" 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && [[ $msg == *"data seed = 5, this loader has 6"* ]]; result "resume with another -D is refused: $msg" $?
echo "cpu_data_seed_test: $pass passed, $fail failed"
[ $fail -eq 0 ]
