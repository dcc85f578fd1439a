"""End-to-end test of the downstream evals on tiny raw files written here, one per task:
  - dev/data/prepare_evals.py writes eval files whose tokens decode to the contexts and completions the task's
    format defines (HellaSwag without the activity prefix, " " + ending, LAMBADA's last word, the llm-foundry
    question + "\\nAnswer:", Winogrande's context options), and refuses a bad label with a clear error; bad raw
    files (not UTF-8, a truncated or corrupt .bz2, JSON lines that are not objects, fields of the wrong type: a
    string as the choices, a float, boolean or string gold; a FIFO, /dev/zero, a directory), a bad --out or --ranks:
    one-line errors naming the file and line, exit 1, and an earlier --out folder as it was after each;
  - dev/eval_hf.py refuses an eval file with a task name that is not letters, digits and '_', a truncated one and
    a FIFO before it imports torch: one-line errors, exit 1;
  - -V without -E and -E naming no file are clear errors;
  - the CPU trainer (./train_gpt2 -E) scores a tiny GPT-2 it trained and logs the scores to its main.log as one line
    "s:<step> <task>:<score> ..." (scripts/plot_losses.py reads it); dev/eval_hf.py scores the same model
    exported by dev/export_hf.py in transformers: equal acc and acc_norm on every task, the gold completion's mean
    log-likelihood within 1e-4 nats on every task and LAMBADA perplexity within 1e-4 (both FP32). One HellaSwag and one LAMBADA context are longer than T, so both cut them from the left.

usage: python dev/test/test_evals.py --ranks data/gpt2.tiktoken   (from the repository root, after `make train_gpt2`);
       needs tiktoken, and torch + transformers for the comparison with dev/eval_hf.py
"""
import argparse
import bz2
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "dev"))
sys.path.insert(0, os.path.join(ROOT, "dev", "data"))
from pycheck import check, run, summary  # noqa: E402
from skip_log import skip  # noqa: E402
T = 64
STEPS = 4   # steps of the tiny training run scored with -E

LONG = " ".join(["The man keeps talking about the weather and the roads and the long drive home."] * 6)
HELLASWAG = [("Washing dishes: A woman fills a sink with soapy water. she", 2,
              ["throws the plates out of the window.", "sings to the cat on the roof.", "scrubs the plates with a sponge.",
               "paints the sink bright red."]),
             ("Making tea: " + LONG + " Then he", 0,
              ["pours hot water into the cup.", "jumps into the lake.", "eats the kettle.", "flies to the moon."]),
             ("Running: A girl laces her shoes at the start line. she", 1,
              ["falls asleep on the grass.", "starts running down the track.", "reads a book about cooking.",
               "opens an umbrella indoors."])]
LAMBADA = ["He opened the door and looked outside. The rain had stopped, so he went for a walk",
           "She poured the milk into the bowl and gave it to the cat",
           "They sat by the fire and told stories until late at night",
           LONG + " and at last he walked through the door of his house"]
PIQA = [{"query": "Question: How do you open a jar that is stuck?\n", "choices": ["Run the lid under hot water.",
         "Put the jar in the freezer."], "gold": 0},
        {"query": "Question: How do you keep bread fresh?\n", "choices": ["Leave it in the sun.",
         "Store it in a sealed bag."], "gold": 1}]
ARC = [{"query": "Question: Which object is a source of light?", "choices": ["a rock", "the sun", "a shoe", "water"],
        "gold": 1},
       {"query": "Question: What do plants need to grow?", "choices": ["sunlight", "plastic", "noise", "sand"], "gold": 0}]
WINOGRANDE = [{"context_options": ["The trophy did not fit in the suitcase because the trophy",
                                   "The trophy did not fit in the suitcase because the suitcase"],
               "continuation": "was too big.", "gold": 0},
              {"context_options": ["Anna gave Maria a gift because Anna", "Anna gave Maria a gift because Maria"],
               "continuation": "had a birthday.", "gold": 1}]


def write_raw(tmp):
    """the raw files of the 5 tasks -> {task flag: path}"""
    paths = {}
    with open(os.path.join(tmp, "hellaswag.txt"), "w") as f:
        for ctx, label, ends in HELLASWAG:
            f.write("\n".join([ctx, str(label)] + ends) + "\n")
    paths["--hellaswag"] = f.name
    for flag, rows in (("--lambada", [{"text": t} for t in LAMBADA]), ("--piqa", PIQA), ("--arc-easy", ARC),
                       ("--winogrande", WINOGRANDE)):
        path = os.path.join(tmp, flag[2:] + ".jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
        paths[flag] = path
    return paths


def expected_text():
    """{task: [(label, [(context, completion) per candidate])]} the format defines"""
    return {
        "hellaswag": [(l, [(c.split(": ", 1)[1], " " + e) for e in ends]) for c, l, ends in HELLASWAG],
        "lambada": [(0, [(t.rsplit(" ", 1)[0], " " + t.rsplit(" ", 1)[1])]) for t in LAMBADA],
        "piqa": [(q["gold"], [(q["query"].strip() + "\nAnswer:", " " + c) for c in q["choices"]]) for q in PIQA],
        "arc_easy": [(q["gold"], [(q["query"].strip() + "\nAnswer:", " " + c) for c in q["choices"]]) for q in ARC],
        "winogrande": [(q["gold"], [(o, " " + q["continuation"]) for o in q["context_options"]]) for q in WINOGRANDE],
    }


def check_prepare(ranks, tmp, raw, out):
    """prepare_evals.py's files decode to the expected texts; a bad label is refused"""
    import eval_hf
    from tokenize_text import load_encoding
    cmd = [sys.executable, os.path.join(ROOT, "dev", "data", "prepare_evals.py"), "--ranks", ranks, "--out", out]
    subprocess.run(cmd + [a for kv in raw.items() for a in kv], check=True, stdout=subprocess.DEVNULL)
    enc = load_encoding(ranks)
    for task, want in expected_text().items():
        name, _, examples = eval_hf.read_eval(os.path.join(out, task + ".bin"))
        got = [(label, [(enc.decode(c), enc.decode(p)) for c, p in cands]) for label, cands in examples]
        check(name == task and got == want, f"prepare_evals: {task} decodes to its contexts and completions")
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(json.dumps({"query": "Question: ?", "choices": ["a", "b"], "gold": 2}) + "\n")
    r = subprocess.run(cmd + ["--piqa", bad], capture_output=True, text=True)
    check(r.returncode == 1 and "label 2" in r.stderr, f"prepare_evals: bad label -> exit {r.returncode}, {r.stderr.strip()}")


def prepare_fails(cmd, what, expect):
    """prepare_evals.py with cmd exits 1 within 30 s, its stderr one line 'prepare_evals: error: ...' with expect"""
    try:
        rc, _, err = run(cmd, timeout=30)
    except subprocess.TimeoutExpired:
        rc, err = None, "(no exit within 30 s)"
    check(rc == 1 and err.count("\n") == 1 and err.startswith("prepare_evals: error: ") and expect in err,
          f"prepare_evals: {what}: exit {rc}, {err.strip()}", f"expected one line with {expect!r}")


def check_prepare_errors(ranks, tmp, raw):
    """bad raw files, --out and --ranks: one-line errors naming the file and line, exit 1; the --out folder of an
    earlier run as it was after each"""
    cmd = [sys.executable, os.path.join(ROOT, "dev", "data", "prepare_evals.py"), "--ranks", ranks]
    out = os.path.join(tmp, "evals_errors")
    subprocess.run(cmd + ["--out", out, "--piqa", raw["--piqa"]], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "piqa.bin"), "rb") as f:
        before = f.read()
    piqa = {"query": "Question: ?", "choices": ["a", "b"], "gold": 0}
    jsonl = [("not UTF-8", "--piqa", json.dumps(piqa).encode() + b"\n{\"query\": \"caf\xe9\"}\n", "is not UTF-8 text"),
             ("a JSON list", "--piqa", b"[1, 2]\n", "line 1 is a list, not a JSON object"),
             ("a JSON string", "--lambada", b'"text"\n', "line 1 is a string, not a JSON object"),
             ("not JSON", "--lambada", b'{"text": \n', "line 1 is not JSON"),
             ("nested too deeply", "--lambada", b"[" * 100000 + b"\n", "nested too deeply"),
             ("text null", "--lambada", b'{"text": null}\n', '"text" is null, not a string'),
             ("query a number", "--piqa", json.dumps({**piqa, "query": 5}).encode(), '"query" is a number, not a string'),
             ("choices a string", "--piqa", json.dumps({**piqa, "choices": "ab"}).encode(),
              '"choices" is a string, not a list of strings'),
             ("a choice null", "--arc-easy", json.dumps({**piqa, "choices": ["a", None]}).encode(),
              '"choices" holds null, not only strings'),
             ("context_options a string", "--winogrande",
              json.dumps({"context_options": "ab", "continuation": "c", "gold": 0}).encode(),
              '"context_options" is a string, not a list of strings'),
             ("continuation a list", "--winogrande",
              json.dumps({"context_options": ["a", "b"], "continuation": ["c"], "gold": 0}).encode(),
              '"continuation" is a list, not a string')]
    for gold, expect in ((1.0, '"gold" is a number, not an integer'), (True, '"gold" is a boolean, not an integer'),
                         ("1", '"gold" is a string, not an integer'), (2, "label 2 is not one of the 2 candidates"),
                         (-1, "label -1 is not one of the 2 candidates"), (None, '"gold" is null, not an integer')):
        jsonl.append((f"gold {gold!r} on line 2", "--piqa", (json.dumps(piqa) + "\n" + json.dumps({**piqa, "gold": gold})).encode(),
                      "line 2: " + expect))
    for what, flag, data, expect in jsonl:
        path = os.path.join(tmp, "bad_raw.jsonl")
        with open(path, "wb") as f:
            f.write(data)
        prepare_fails(cmd + ["--out", out, "--hellaswag", raw["--hellaswag"], flag, path], what, expect)
    good_bz2 = bz2.compress(open(raw["--hellaswag"], "rb").read())
    for what, data, expect in (("a truncated .bz2", good_bz2[:len(good_bz2) // 2], "is a truncated .bz2 file"),
                               ("a corrupt .bz2", b"BZh9" + bytes(40), "cannot read"),
                               ("a label that is not 0..3", bz2.compress("ctx\n\u00b2\na\nb\nc\nd\n".encode()),
                                "line 2: label '\u00b2' is not 0..3")):
        path = os.path.join(tmp, "bad_hellaswag.txt.bz2")
        with open(path, "wb") as f:
            f.write(data)
        prepare_fails(cmd + ["--out", out, "--hellaswag", path], what, expect)
    fifo = os.path.join(tmp, "raw.fifo")
    os.mkfifo(fifo)
    prepare_fails(cmd + ["--out", out, "--piqa", fifo], "a FIFO as the raw file", "is not a regular file")
    prepare_fails(cmd + ["--out", out, "--piqa", "/dev/zero"], "/dev/zero as the raw file", "is not a regular file")
    prepare_fails(cmd + ["--out", out, "--piqa", tmp], "a directory as the raw file", "is a directory")
    prepare_fails(cmd + ["--out", out, "--piqa", os.path.join(tmp, "none.jsonl")], "a missing raw file", "cannot read")
    a_file = os.path.join(tmp, "out_file")
    with open(a_file, "w") as f:
        f.write("keep")
    prepare_fails(cmd + ["--out", a_file, "--piqa", raw["--piqa"]], "--out a file", "exists and is not a directory")
    prepare_fails(cmd + ["--out", os.path.join(a_file, "x"), "--piqa", raw["--piqa"]], "--out under a file",
                  "Not a directory")
    check(open(a_file).read() == "keep", "prepare_evals: the file given as --out is unchanged")
    base = [sys.executable, os.path.join(ROOT, "dev", "data", "prepare_evals.py"), "--out", out, "--piqa", raw["--piqa"]]
    prepare_fails(base + ["--ranks", os.path.join(tmp, "none.tiktoken")], "a missing --ranks", "cannot read ranks file")
    bad_ranks = os.path.join(tmp, "corrupt.tiktoken")
    with open(bad_ranks, "w") as f:
        f.write("not base64!! 1\n")
    prepare_fails(base + ["--ranks", bad_ranks], "a corrupt --ranks", "is not a tiktoken ranks file")
    prepare_fails(base + ["--ranks", fifo], "a FIFO as --ranks", "is not a regular file")
    with open(os.path.join(out, "piqa.bin"), "rb") as f:
        check(f.read() == before and sorted(os.listdir(out)) == ["piqa.bin"],
              f"prepare_evals: the earlier --out folder is as it was after the failures ({sorted(os.listdir(out))})")


def check_eval_hf_refusals(out, tmp):
    """dev/eval_hf.py checks every eval file before it imports torch (so this runs without it): a task name with a
    newline, a space or a colon (it would break the trainer's main.log eval line), a truncated file, a FIFO: one-line
    errors, exit 1"""
    import eval_file
    with open(os.path.join(out, "hellaswag.bin"), "rb") as f:
        good = f.read()
    slot = 4 * eval_file.NAME_SLOT
    fifo = os.path.join(tmp, "eval.fifo")
    os.mkfifo(fifo)
    cases = [(good[:slot] + name.ljust(eval_file.NAME_BYTES, b"\0") + good[slot + eval_file.NAME_BYTES:], f"task name {name!r}")
             for name in (b"hella\nswag", b"hella swag", b"hella:1", b"", b"\xff")]
    cases += [(good[:-4], "holds"), (None, "is not a regular file")]
    for data, expect in cases:
        path = fifo if data is None else os.path.join(tmp, "bad_eval.bin")
        if data is not None:
            with open(path, "wb") as f:
                f.write(data)
        try:
            rc, _, err = run([sys.executable, os.path.join(ROOT, "dev", "eval_hf.py"), os.path.join(tmp, "no_model"), path],
                             timeout=30)
        except subprocess.TimeoutExpired:
            rc, err = None, "(no exit within 30 s)"
        check(rc == 1 and err.count("\n") == 1 and err.startswith("eval_hf: error: ") and expect in err,
              f"eval_hf: {expect}: exit {rc}, {err.strip()}")


def check_flag_errors(tmp):
    """-V without -E, and -E naming no file: one-line errors, exit 1"""
    trainer = os.path.join(ROOT, "train_gpt2")
    for flags, msg in ((["-V", "5"], "need the eval files (-E)"), (["-E", os.path.join(tmp, "none", "*.bin")], "names no eval file")):
        r = subprocess.run([trainer, "-x", "0", "-g", "0"] + flags, capture_output=True, text=True, cwd=ROOT)
        check(r.returncode == 1 and msg in r.stderr, f"train_gpt2 {' '.join(flags)}: exit {r.returncode}, {r.stderr.strip()}")


def engine_scores(out, run_dir):
    """trains a tiny GPT-2 with the CPU trainer for STEPS steps into run_dir, scoring it with -E at the end
    -> {task: (acc, acc_norm, ppl, ll)} as printed"""
    cmd = [os.path.join(ROOT, "train_gpt2"), "-x", str(STEPS), "-v", "0", "-g", "0", "-b", "4", "-t", str(T),
           "-o", run_dir, "-E", out]
    log = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    scores = {}
    for m in re.finditer(r"eval (\S+)\s+acc_norm ([\d.]+) acc ([\d.]+) gold ll ([-\d.]+)", log):
        scores[m.group(1)] = (float(m.group(3)), float(m.group(2)), 0.0, float(m.group(4)))
    for m in re.finditer(r"eval (\S+)\s+acc ([\d.]+) gold ll ([-\d.]+) ppl ([\d.]+)", log):
        scores[m.group(1)] = (float(m.group(2)), float(m.group(2)), float(m.group(4)), float(m.group(3)))
    return scores


def check_main_log(run_dir, ours):
    """main.log holds one eval line "s:<STEPS> <task>:<score> <task>_ll:<gold ll> ..." with the printed scores
    (acc_norm; last word: acc, and <task>_ppl)"""
    lines = [x for x in open(os.path.join(run_dir, "main.log")) if re.match(r"^s:\d+ (?!tl:|vl:)[A-Za-z0-9_]+:", x)]
    logged = dict(kv.split(":", 1) for kv in lines[-1].split()[1:]) if lines else {}
    want = {}
    for task, (acc, acc_norm, ppl, ll) in ours.items():
        want[task] = acc_norm
        want[task + "_ll"] = ll
        if ppl:
            want[task + "_ppl"] = ppl
    same = sorted(logged) == sorted(want) and all(abs(float(logged[k]) - v) <= 1e-3 * max(1.0, abs(v)) for k, v in want.items())
    check(len(lines) == 1 and lines[0].startswith(f"s:{STEPS} ") and same,
          f"main.log's eval line {lines[-1].strip() if lines else None} = the printed scores {want}")


def check_against_hf(out, tmp, run_dir, ours):
    """the engine's scores `ours` of the run in run_dir equal dev/eval_hf.py's on its exported training state"""
    model = os.path.join(run_dir, f"state_{STEPS:08d}.bin")
    hf_dir, js = os.path.join(tmp, "hf"), os.path.join(tmp, "hf.json")
    subprocess.run([sys.executable, os.path.join(ROOT, "dev", "export_hf.py"), model, hf_dir, "--dtype", "fp32"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, os.path.join(ROOT, "dev", "eval_hf.py"), hf_dir, out, "--max-len", str(T),
                    "--json", js], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(js) as f:
        theirs = json.load(f)
    for task, (acc, acc_norm, ppl, ll) in sorted(ours.items()):
        h = theirs.get(task, {})
        same = abs(h.get("acc", -1) - acc) < 1e-4 and abs(h.get("acc_norm", -1) - acc_norm) < 1e-4
        close = abs(h.get("ppl", -1) - ppl) <= 1e-4 * max(ppl, 1.0) and abs(h.get("ll", 1) - ll) <= 1e-4
        check(same and close, f"{task}: engine acc {acc:.4f} acc_norm {acc_norm:.4f} ppl {ppl:.3f} ll {ll:.4f} vs "
                              f"transformers {h.get('acc', -1):.4f} {h.get('acc_norm', -1):.4f} {h.get('ppl', -1):.3f} "
                              f"{h.get('ll', 1):.4f}")


def main():
    """runs the checks; exits 1 if any failed"""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", help="tiktoken ranks file of the GPT-2 BPE")
    args = ap.parse_args()
    if not args.ranks:
        skip("dev/test/test_evals.py", "no tokenizer ranks (--ranks data/gpt2.tiktoken)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "evals")
        raw = write_raw(tmp)
        check_prepare(args.ranks, tmp, raw, out)
        check_prepare_errors(args.ranks, tmp, raw)
        check_eval_hf_refusals(out, tmp)
        check_flag_errors(tmp)
        run_dir = os.path.join(tmp, "run")
        ours = engine_scores(out, run_dir)
        check(sorted(ours) == sorted(expected_text()), f"train_gpt2 -E scored {sorted(ours)}")
        check_main_log(run_dir, ours)
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as e:
            skip("dev/test/test_evals.py comparison with dev/eval_hf.py",
                 f"{sys.executable} has no {e.name} (pip install -r dev/requirements.txt)")
        else:
            check_against_hf(out, tmp, run_dir, ours)
    sys.exit(summary("test_evals.py"))


if __name__ == "__main__":
    main()
