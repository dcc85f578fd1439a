#!/usr/bin/env bash
# Trains the same model and token budget in every precision mode of the block linears (bf16, mxfp4, hadamard,
# adahop) at one or more init seeds, every run on one data order (-D), one output directory per run:
# <root>/<mode>_s<seed>. So the runs of a set are paired by construction: the same data, batch shape, total batch,
# deterministic GEMM algorithms (-a 0 unless the flags say otherwise) and trainer. Long runs are cut into pieces:
# each invocation trains for at most --steps steps per run or --minutes of wall-clock in all, stopping a run right
# after one of its checkpoints, and the next invocation resumes it with -y 1. Repeated invocations add up to exactly
# one run per mode and seed; finished runs (final train, val and eval lines in main.log) are skipped. See
# scripts/README.md.
set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ALL_MODES=(bf16 mxfp4 hadamard adahop)

usage() {
    cat <<EOF
Usage: scripts/run_modes.sh --root DIR [options] [-- trainer flags]

Trains one run per precision mode and init seed with identical trainer flags, data order and token budget, in
DIR/<mode>_s<seed>; resumable: call it again until it reports every run finished.

  --root DIR      parent of the run directories (required)
  --modes LIST    comma-separated subset of bf16,mxfp4,hadamard,adahop (default: all four, in that order)
  --seeds LIST    comma-separated init seeds (trainer -r), every mode at each, seed by seed in this order (default 1337)
  --seed N        the same as --seeds N
  --data-seed N   the data order of every run (trainer -D; default 1337), whatever its init seed
  --steps N       per run and invocation: train at most N more steps; a run stops at its last checkpoint
                  within that budget (N >= the checkpoint interval -n)
  --minutes M     for the whole invocation: at most M minutes of wall-clock (decimals allowed); a run stops
                  after the last checkpoint it can finish in time, or is killed at the deadline (then it
                  resumes from its newest checkpoint and the steps after it are trained again)
  --keep K        keep the newest K checkpoints of each run, delete older ones (default 2, 0 = keep all)
  --trainer PATH  trainer binary (default \$ADAHOP_TRAINER, else $SCRIPT_DIR/../train_gpt2_adahop relative
                  to the repository: build it with 'make train_gpt2_adahop')
  --poll S        seconds between checks of a running trainer (default 2)
  --gpus LIST     train the runs side by side, one a GPU: comma-separated device numbers (e.g. 0,1,2,3); each run
                  goes to a run_modes.sh of its own with CUDA_VISIBLE_DEVICES set to its GPU, its output to
                  DIR/<mode>_s<seed>.run_modes.log (shown when it ends); runs wait for a free GPU; --minutes
                  still bounds the whole invocation
  --dry-run       print what would run, run nothing
  -h, --help      this help

Trainer flags after '--' go to every run unchanged (see ./train_gpt2_adahop -h), except -o, -p, -r, -D and -y,
which this script sets (-o DIR/<mode>_s<seed> -p <mode> -r <seed> -D <data seed> -y 1); without an -a among them
every run gets -a 0 (cuBLASLt's first GEMM algorithms: two runs of the same flags match bit for bit). --steps and
--minutes need checkpoints: pass -n N. The flags of a run are recorded in its run_modes.args; a later invocation
with other flags stops with an error for that run instead of mixing two configurations in one curve. The trainer
records its build commit and GPU in each piece's main.jsonl; scripts/plot_losses.py refuses to compare runs of
other commits, GPUs, batch shapes or data seeds.

Exit status: 0 every run finished, 3 no error but runs remain (call again), 1 a trainer failed,
2 bad usage (flags, missing trainer) or a run that another run_modes.sh is training.

Example (GPT-2 124M, three init seeds, 10-minute pieces):
  scripts/run_modes.sh --root runs/gutenberg_d12 --seeds 1337,42,7 --minutes 9 -- -e d12 -b 64 -t 1024 \\
      -d 524288 -x 5000 -l 6e-4 -u 700 -v 250 -m -1 -n 250 -s 0 \\
      -i "data/gutenberg/gutenberg_train_*.bin" -j "data/gutenberg/gutenberg_val_*.bin"
EOF
}

die_usage() { echo "run_modes.sh: error: $*" >&2; echo "run_modes.sh: see scripts/run_modes.sh -h" >&2; exit 2; }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
now_ms() { local t=${EPOCHREALTIME:-}; if [ -n "$t" ]; then t=${t/./}; echo $((10#$t / 1000)); else date +%s%3N; fi; }

# ---- flags
root="" modes_csv="" seeds_csv=1337 data_seed=1337 steps="" minutes="" keep=2 poll=2 dry=0 gpus_csv="" gpus_given=0
trainer=${ADAHOP_TRAINER:-$SCRIPT_DIR/../train_gpt2_adahop}
pass=()
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --dry-run) dry=1; shift; continue ;;
        --) shift; pass=("$@"); break ;;
        --root|--modes|--seed|--seeds|--data-seed|--steps|--minutes|--keep|--trainer|--poll|--gpus)
            [ $# -ge 2 ] || die_usage "$1 needs a value"
            case $1 in
                --root) root=$2 ;;
                --modes) modes_csv=$2 ;;
                --seed|--seeds) seeds_csv=$2 ;;
                --data-seed) data_seed=$2 ;;
                --steps) steps=$2 ;;
                --minutes) minutes=$2 ;;
                --keep) keep=$2 ;;
                --trainer) trainer=$2 ;;
                --poll) poll=$2 ;;
                --gpus) gpus_csv=$2 gpus_given=1 ;;
            esac
            shift 2 ;;
        *) die_usage "unknown argument '$1' (trainer flags go after '--')" ;;
    esac
done
[ -n "$root" ] || die_usage "--root DIR is required"
IFS=, read -r -a seeds <<< "$seeds_csv"
[ ${#seeds[@]} -gt 0 ] || die_usage "--seeds is empty"
for s in "${seeds[@]}"; do is_uint "$s" || die_usage "--seeds: '$s' is not a non-negative integer"; done
[ "$(printf '%s\n' "${seeds[@]}" | sort -u | wc -l)" -eq ${#seeds[@]} ] || die_usage "--seeds '$seeds_csv' names a seed twice"
is_uint "$data_seed" || die_usage "--data-seed '$data_seed' is not a non-negative integer"
[ -z "$steps" ] || { is_uint "$steps" && [ "$steps" -gt 0 ]; } || die_usage "--steps '$steps' is not a positive integer"
[ -z "$minutes" ] || [[ $minutes =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || die_usage "--minutes '$minutes' is not a positive number"
[ -z "$minutes" ] || awk -v m="$minutes" 'BEGIN { exit !(m > 0) }' || die_usage "--minutes must be > 0"
is_uint "$keep" || die_usage "--keep '$keep' is not a non-negative integer"
if ! [[ $poll =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || ! awk -v p="$poll" 'BEGIN { exit !(p > 0) }'; then
    die_usage "--poll '$poll' is not a positive number"
fi

gpus=()
if [ $gpus_given -eq 1 ]; then
    IFS=, read -r -a gpus <<< "$gpus_csv"
    [ ${#gpus[@]} -gt 0 ] || die_usage "--gpus is empty"
    for g in "${gpus[@]}"; do is_uint "$g" || die_usage "--gpus: '$g' is not a device number"; done
    [ "$(printf '%s\n' "${gpus[@]}" | sort -u | wc -l)" -eq ${#gpus[@]} ] || die_usage "--gpus '$gpus_csv' names a device twice"
fi

modes=()
if [ -z "$modes_csv" ]; then modes=("${ALL_MODES[@]}"); else
    IFS=, read -r -a modes <<< "$modes_csv"
    [ ${#modes[@]} -gt 0 ] || die_usage "--modes is empty"
    for m in "${modes[@]}"; do
        [[ " ${ALL_MODES[*]} " == *" $m "* ]] || die_usage "--modes: '$m' is not one of ${ALL_MODES[*]}"
    done
fi

# trainer flags: pairs "-X value"; -o -p -r -D -y belong to this script
max_steps=200 val_every=50 ckpt_every=0 with_evals=0 gemm_flag=0
i=0
while [ $i -lt ${#pass[@]} ]; do
    f=${pass[$i]}
    [[ $f =~ ^-[a-zA-Z]$ ]] || die_usage "trainer flags: '$f' is not a flag like -x (each flag takes one value)"
    [ $((i + 1)) -lt ${#pass[@]} ] || die_usage "trainer flag $f needs a value"
    v=${pass[$((i + 1))]}
    case ${f:1} in
        o|p|r|D|y) die_usage "trainer flag $f is set by run_modes.sh (use --root, --modes, --seeds, --data-seed; -y 1 is always on)" ;;
        h) die_usage "-h is not a trainer flag here: run the trainer with -h to see its flags" ;;
        x) is_uint "$v" || die_usage "trainer flag -x '$v' is not a non-negative integer"; max_steps=$((10#$v)) ;;
        v) is_uint "$v" || die_usage "trainer flag -v '$v' is not a non-negative integer"; val_every=$((10#$v)) ;;
        n) is_uint "$v" || die_usage "trainer flag -n '$v' is not a non-negative integer"; ckpt_every=$((10#$v)) ;;
        E) with_evals=1 ;;
        a) gemm_flag=1 ;;
        i|j|e|b|t|d|l|u|q|c|k|m|s|g|z|V|P|S|w|C|R|W|K|A|Q|H|N|L|Z|f) ;;
        *) die_usage "unknown trainer flag $f (see the trainer's -h)" ;;
    esac
    i=$((i + 2))
done
if [ -n "$steps$minutes" ] && [ "$ckpt_every" -eq 0 ]; then
    die_usage "--steps/--minutes cut runs at checkpoints: pass a checkpoint interval, e.g. '-- -n 250 ...'"
fi
if [ -n "$steps" ] && [ "$steps" -lt "$ckpt_every" ] && [ "$steps" -lt "$max_steps" ]; then
    die_usage "--steps $steps is smaller than the checkpoint interval -n $ckpt_every: no run could advance"
fi
if [ ! -f "$trainer" ] || [ ! -x "$trainer" ]; then
    echo "run_modes.sh: error: trainer '$trainer' not found or not executable" >&2
    echo "run_modes.sh: build it with 'make train_gpt2_adahop' or pass --trainer PATH (or set ADAHOP_TRAINER)" >&2
    exit 2
fi

[ $gemm_flag -eq 1 ] || pass+=(-a 0)
runs=()   # "mode seed", seed by seed: the first seed's modes first, so finished runs form pairs early
for s in "${seeds[@]}"; do for m in "${modes[@]}"; do runs+=("$m $s"); done; done

# ---- helpers on a run directory
newest_ckpt() {   # newest complete checkpoint step, or -1
    local d=$1 best=-1 f s
    for f in "$d"/state_*.bin; do
        [ -e "$f" ] || continue
        s=${f##*/state_}; s=${s%.bin}
        is_uint "$s" || continue
        s=$((10#$s)); [ "$s" -gt "$best" ] && best=$s
    done
    echo "$best"
}
last_train_step() {   # last "s:N tl:" step in main.log, or 0
    [ -f "$1/main.log" ] || { echo 0; return; }
    awk '/^s:[0-9]+ tl:/ { split($1, a, ":"); s = a[2] + 0 } END { print s + 0 }' "$1/main.log"
}
is_finished() {   # main.log has the final train line and, with validation / evals on, the final val / eval line
    local log=$1/main.log
    [ -f "$log" ] || return 1
    awk -v x="$max_steps" -v v="$val_every" -v ev="$with_evals" '
        /^s:[0-9]+ tl:/ { split($1, a, ":"); if (a[2] + 0 == x) t = 1; next }
        /^s:[0-9]+ vl:/ { split($1, a, ":"); if (a[2] + 0 == x) l = 1; next }
        /^s:[0-9]+ [a-z_]+:/ { split($1, a, ":"); if (a[2] + 0 == x) e = 1 }
        END { exit !(t && (v == 0 || l) && (!ev || e)) }' "$log"
}
truncate_log() {   # drop what the trainer logged after checkpoint k (it is trained, validated and evaluated again on resume)
    local log=$1/main.log json=$1/main.jsonl k=$2
    [ "$k" -gt 0 ] || return 0
    if [ -f "$log" ]; then   # "s:<k> tl:" ends the step before checkpoint k; the val and eval lines of step k come after it
        awk -v k="$k" '
            /^s:[0-9]+ tl:/ { split($1, a, ":"); if (a[2] + 0 <= k) print; next }
            /^s:[0-9]+ / { split($1, a, ":"); if (a[2] + 0 < k) print; next }
            /^adahop step [0-9]+ / { if ($3 + 0 <= k) print; next }
            { print }' "$log" > "$log.trunc" && mv "$log.trunc" "$log"
    fi
    if [ -f "$json" ]; then   # the trainer's lines start {"event":"<kind>","step":<s>; a line cut off mid-write goes too
        awk -v k="$k" '
            !/}$/ { next }
            /^\{"event":"step","step":[0-9]+,/ { split($0, a, /[:,]/); if (a[4] + 0 <= k) print; next }
            /^\{"event":"(val|eval)","step":[0-9]+,/ { split($0, a, /[:,]/); if (a[4] + 0 < k) print; next }
            { print }' "$json" > "$json.trunc" && mv "$json.trunc" "$json"
    fi
}
prune_ckpts() {   # state_%08d.bin names sort by step
    local d=$1 f all=()
    [ "$keep" -gt 0 ] || return 0
    for f in "$d"/state_*.bin; do [ -e "$f" ] && [[ ${f##*/} =~ ^state_[0-9]+\.bin$ ]] && all+=("$f"); done
    local n=${#all[@]} j
    for ((j = 0; j < n - keep; j++)); do rm -f "${all[$j]}"; echo "  deleted old checkpoint ${all[$j]}"; done
}

# ---- Ctrl-C / kill: stop the trainer we started, leave the log consistent with the newest checkpoint
child=""
cur_dir=""
# shellcheck disable=SC2317
on_signal() {
    if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; fi
    if [ -n "$cur_dir" ]; then
        rm -f "$cur_dir"/state_*.bin.tmp
        local k; k=$(newest_ckpt "$cur_dir"); [ "$k" -gt 0 ] && truncate_log "$cur_dir" "$k"
    fi
    echo "run_modes.sh: interrupted; call again to resume" >&2
    exit 130
}
trap on_signal INT TERM

t_start=$(now_ms)
deadline=""
if [ -n "$minutes" ]; then deadline=$((t_start + $(awk -v m="$minutes" 'BEGIN { printf "%.0f", m * 60000 }'))); fi

# the exit status and its line: 1 when a run failed, 2 when one was refused (another run_modes.sh holds it), 0 after a
# dry run, 3 when runs remain, else 0
exit_with_status() {   # n_failed n_refused n_unfinished
    if [ "$1" -gt 0 ]; then echo "run_modes.sh: $1 run(s) failed"; exit 1; fi
    if [ "$2" -gt 0 ]; then echo "run_modes.sh: $2 run(s) refused (see their output)"; exit 2; fi
    if [ $dry -eq 1 ]; then exit 0; fi
    if [ "$3" -gt 0 ]; then echo "run_modes.sh: $3 run(s) unfinished: call again with the same flags to continue"; exit 3; fi
    echo "run_modes.sh: every run finished; plot with: ${PYTHON:-python3} scripts/plot_losses.py $root"
    exit 0
}

# ---- --gpus: every run in a run_modes.sh of its own on one GPU, as many at a time as GPUs; they lock their runs
if [ ${#gpus[@]} -gt 0 ]; then
    self="$SCRIPT_DIR/$(basename "${BASH_SOURCE[0]}")"
    slot_pid=() slot_name=() slot_log=()
    n_failed=0 n_usage=0 n_unfinished=0 n_listed=0
    # shellcheck disable=SC2317
    stop_all() {
        for p in "${slot_pid[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; done
        wait
        echo "run_modes.sh: interrupted; call again to resume" >&2
        exit 130
    }
    trap stop_all INT TERM
    end_slot() {   # waits for slot $1's run_modes.sh, shows its output, counts its status
        local i=$1 rc
        wait "${slot_pid[$i]}"; rc=$?
        echo "== ${slot_name[$i]} (GPU ${gpus[$i]}): run_modes.sh exited with status $rc; its output ($(basename "${slot_log[$i]}")):"
        sed 's/^/   | /' "${slot_log[$i]}"
        case $rc in 0) ;; 3) n_unfinished=$((n_unfinished + 1)) ;; 2) n_usage=$((n_usage + 1)) ;; *) n_failed=$((n_failed + 1)) ;; esac
        slot_pid[$i]=""
    }
    [ $dry -eq 1 ] || mkdir -p "$root" || { echo "run_modes.sh: error: cannot create $root" >&2; exit 2; }
    echo "run_modes.sh: root $root, ${#runs[@]} runs on GPUs ${gpus[*]}${minutes:+, at most $minutes min}"
    for r in "${runs[@]}"; do
        read -r mode s <<< "$r"
        name="${mode}_s$s"
        args=(--root "$root" --modes "$mode" --seeds "$s" --data-seed "$data_seed" --keep "$keep" --trainer "$trainer" --poll "$poll")
        [ -n "$steps" ] && args+=(--steps "$steps")
        slot=-1
        [ $dry -eq 1 ] && slot=$((n_listed++ % ${#gpus[@]}))   # a dry run shows the GPUs taken in turn
        while [ "$slot" -lt 0 ]; do   # a free GPU
            for i in "${!gpus[@]}"; do
                if [ -z "${slot_pid[$i]:-}" ]; then slot=$i; break; fi
                if ! kill -0 "${slot_pid[$i]}" 2>/dev/null; then end_slot "$i"; slot=$i; break; fi
            done
            [ "$slot" -ge 0 ] || sleep "$poll"
        done
        if [ -n "$deadline" ]; then
            left=$((deadline - $(now_ms)))
            if [ "$left" -le 0 ]; then echo "== $name: not started (the time is up)"; n_unfinished=$((n_unfinished + 1)); continue; fi
            args+=(--minutes "$(awk -v l="$left" 'BEGIN { printf "%.4f", l / 60000 }')")
        fi
        if [ $dry -eq 1 ]; then
            echo "== $name: GPU ${gpus[$slot]}:"
            CUDA_VISIBLE_DEVICES=${gpus[$slot]} bash "$self" "${args[@]}" --dry-run -- "${pass[@]}" | sed 's/^/   | /'
            continue
        fi
        slot_log[$slot]="$root/$name.run_modes.log"
        slot_name[$slot]=$name
        echo "== $name: started on GPU ${gpus[$slot]}"
        CUDA_VISIBLE_DEVICES=${gpus[$slot]} bash "$self" "${args[@]}" -- "${pass[@]}" > "${slot_log[$slot]}" 2>&1 &
        slot_pid[$slot]=$!
    done
    for i in "${!gpus[@]}"; do [ -n "${slot_pid[$i]:-}" ] && end_slot "$i"; done
    echo "run_modes.sh: $(( ($(now_ms) - t_start) / 1000 )) s"
    exit_with_status "$n_failed" "$n_usage" "$n_unfinished"
fi

# one invocation per run at a time (two would train the same run twice and cut each other's logs): a lock a run,
# <root>/.<mode>_s<seed>.lock, taken for every run of this invocation before the first starts
if [ $dry -eq 0 ]; then
    mkdir -p "$root" || { echo "run_modes.sh: error: cannot create $root" >&2; exit 2; }
    if command -v flock >/dev/null 2>&1; then
        for r in "${runs[@]}"; do
            read -r mode s <<< "$r"
            lock="$root/.${mode}_s$s.lock"
            exec {lock_fd}> "$lock"
            if ! flock -n "$lock_fd"; then
                echo "run_modes.sh: error: another run_modes.sh is working on $root/${mode}_s$s (lock $lock)" >&2; exit 2
            fi
        done
    else
        echo "run_modes.sh: warning: no flock here: make sure no other run_modes.sh works on the runs in $root" >&2
    fi
fi
max_interval_ms=0   # longest checkpoint interval seen in this invocation (to decide whether a run can start)
summary=()
n_failed=0 n_unfinished=0

echo "run_modes.sh: root $root, ${#runs[@]} runs, -x $max_steps -v $val_every -n $ckpt_every${steps:+, at most $steps steps per run}${minutes:+, at most $minutes min}"
for r in "${runs[@]}"; do
    read -r mode s <<< "$r"
    name="${mode}_s$s"
    dir="$root/$name"
    args_line="$(printf '%q ' -p "$mode" -r "$s" -D "$data_seed" "${pass[@]}")"
    if [ -f "$dir/run_modes.args" ] && [ "$(cat "$dir/run_modes.args")" != "$args_line" ]; then
        echo "== $name: ERROR: $dir was started with other trainer flags:" >&2
        echo "   then: $(cat "$dir/run_modes.args")" >&2
        echo "   now:  $args_line" >&2
        echo "   use another --root, or delete $dir to start this run again" >&2
        summary+=("$name|FAILED (other flags)|-|-"); n_failed=$((n_failed + 1)); continue
    fi
    if is_finished "$dir"; then
        echo "== $name: already finished (main.log has step $max_steps), skipped"
        summary+=("$name|finished before|$max_steps/$max_steps|-"); continue
    fi
    rm -f "$dir"/state_*.bin.tmp 2>/dev/null   # a checkpoint half-written when a trainer was killed
    start=$(newest_ckpt "$dir"); [ "$start" -lt 0 ] && start=0
    [ "$start" -gt "$max_steps" ] && { echo "== $name: ERROR: checkpoint at step $start > -x $max_steps" >&2; summary+=("$name|FAILED (checkpoint past -x)|-|-"); n_failed=$((n_failed + 1)); continue; }
    target=$max_steps why_stop="finished"
    if [ -n "$steps" ]; then
        t=$(( (start + steps) / ckpt_every * ckpt_every ))
        if [ "$t" -lt "$max_steps" ]; then target=$t why_stop="step budget"; fi
    fi
    if [ -n "$deadline" ]; then
        left=$((deadline - $(now_ms)))
        est=$max_interval_ms
        [ -f "$dir/run_modes.interval_ms" ] && { e=$(cat "$dir/run_modes.interval_ms"); is_uint "$e" && [ "$e" -gt "$est" ] && est=$e; }
        if [ "$left" -le 0 ] || [ "$left" -lt "$est" ]; then
            echo "== $name: not started: $((left > 0 ? left / 1000 : 0)) s left, one checkpoint interval takes ~$((est / 1000)) s (at step $start of $max_steps)"
            summary+=("$name|not started (time)|$start/$max_steps|-"); n_unfinished=$((n_unfinished + 1)); continue
        fi
    fi
    cmd=("$trainer" "${pass[@]}" -p "$mode" -r "$s" -D "$data_seed" -o "$dir" -y 1)
    echo "== $name: $( [ "$start" -gt 0 ] && echo "resume at step $start" || echo "start") -> stop at step $target ($why_stop)${deadline:+ or at the deadline}"
    echo "   $(printf '%q ' "${cmd[@]}")>> $dir/train.out"
    if [ $dry -eq 1 ]; then summary+=("$name|dry run|$start/$max_steps|-"); continue; fi

    mkdir -p "$dir" || { echo "== $name: ERROR: cannot create $dir" >&2; exit 1; }
    [ -f "$dir/run_modes.args" ] || printf '%s' "$args_line" > "$dir/run_modes.args"
    truncate_log "$dir" "$start"
    echo "---- run_modes.sh $(date '+%F %T'): $(printf '%q ' "${cmd[@]}")" >> "$dir/train.out"
    t_run=$(now_ms); t_last=$t_run; last=$start; stopped=""
    cur_dir=$dir
    "${cmd[@]}" >> "$dir/train.out" 2>&1 &
    child=$!
    while kill -0 "$child" 2>/dev/null; do
        sleep "$poll"
        c=$(newest_ckpt "$dir")
        now=$(now_ms)
        if [ "$c" -gt "$last" ]; then
            iv=$((now - t_last)); t_last=$now; last=$c
            [ "$iv" -gt "$max_interval_ms" ] && max_interval_ms=$iv
            echo "$iv" > "$dir/run_modes.interval_ms"
            if [ "$c" -ge "$target" ] && [ "$target" -lt "$max_steps" ]; then stopped="step budget"; break; fi
            if [ -n "$deadline" ] && [ $((now + iv)) -gt "$deadline" ] && [ "$c" -lt "$max_steps" ]; then
                stopped="time (next checkpoint would come after the deadline)"; break
            fi
        fi
        if [ -n "$deadline" ] && [ "$now" -ge "$deadline" ]; then stopped="deadline (killed)"; break; fi
    done
    if [ -n "$stopped" ]; then kill -TERM "$child" 2>/dev/null; fi
    wait "$child"; rc=$?
    child=""
    rm -f "$dir"/state_*.bin.tmp
    k=$(newest_ckpt "$dir")
    if [ "$stopped" = "step budget" ] && [ "$k" -gt "$target" ] && ! is_finished "$dir" && [ -f "$(printf '%s/state_%08d.bin' "$dir" "$target")" ]; then
        # the trainer passed another checkpoint before it was stopped: go back to the budget's end
        for f in "$dir"/state_*.bin; do
            s_=${f##*/state_}; s_=$((10#${s_%.bin}))
            [ "$s_" -gt "$target" ] && rm -f "$f"
        done
        echo "  went back from checkpoint $k to $target (the step budget); the steps after it are trained next time"
        k=$target
    fi
    secs=$(( ($(now_ms) - t_run) / 1000 ))
    if is_finished "$dir"; then
        echo "== $name: finished ($start -> $max_steps, ${secs} s)"
        summary+=("$name|finished now|$max_steps/$max_steps|${secs}s")
    elif [ -n "$stopped" ]; then
        [ "$k" -gt 0 ] && truncate_log "$dir" "$k"
        echo "== $name: stopped at checkpoint $((k > 0 ? k : 0)) ($stopped; $start -> $((k > 0 ? k : 0)) of $max_steps, ${secs} s)"
        summary+=("$name|stopped: $stopped|$((k > 0 ? k : 0))/$max_steps|${secs}s"); n_unfinished=$((n_unfinished + 1))
    else
        echo "== $name: ERROR: trainer exited with status $rc before step $max_steps (main.log at step $(last_train_step "$dir")); last lines of $dir/train.out:" >&2
        tail -n 5 "$dir/train.out" | sed 's/^/   /' >&2
        summary+=("$name|FAILED (status $rc)|$(last_train_step "$dir")/$max_steps|${secs}s"); n_failed=$((n_failed + 1))
    fi
    cur_dir=""
    prune_ckpts "$dir"
done

echo "run_modes.sh: summary ($(( ($(now_ms) - t_start) / 1000 )) s)"
printf '  %-16s %-58s %-13s %s\n' run status steps time
for line in "${summary[@]}"; do
    IFS='|' read -r a b c d <<< "$line"
    printf '  %-16s %-58s %-13s %s\n' "$a" "$b" "$c" "$d"
done
exit_with_status "$n_failed" 0 "$n_unfinished"
