"""Turns raw downstream-eval files into the engine's eval token files (format: llmc/evals.h), one per task.

Each example is a few candidates, each a context and a completion, GPT-2 BPE tokens; a model scores a candidate by
its loss on the completion tokens given the context (llm.c's HellaSwag scoring). Candidates share one context
(different completions) or one completion (different contexts: Winogrande). Tasks and their text:
  hellaswag   HellaSwag val, the 6-lines-per-task text file (.bz2 or plain): "activity: ctx", label, 4 endings.
              Context = ctx without the "activity: " prefix; completion = " " + ending (llm.c). Metric acc_norm.
  lambada     LAMBADA (OpenAI's lambada_test.jsonl, {"text"}): context = the text up to its last space,
              completion = " " + the last word. Metrics: accuracy (every completion token is the greedy argmax)
              and perplexity exp(mean over examples of the word's summed loss).
  piqa        llm-foundry piqa.jsonl {"query", "choices", "gold"}: context = query (stripped) + "\\nAnswer:",
  arc_easy    completion = " " + choice. Metric acc_norm (llm-foundry arc_easy.jsonl has the same fields).
  winogrande  llm-foundry winogrande.jsonl {"context_options", "continuation", "gold"}: one candidate per
              context option, completion = " " + continuation. Metric acc (= acc_norm: one completion).
A candidate longer than --max-len tokens has its context cut from the left to fit (a shared context for every
candidate of the example).

usage: python dev/data/prepare_evals.py --ranks gpt2.tiktoken --out DIR [--hellaswag F] [--lambada F] [--piqa F]
           [--arc-easy F] [--winogrande F] [--limit N]
e.g.   python dev/data/prepare_evals.py --ranks data/gpt2.tiktoken --out data/evals \\
           --hellaswag EVAL/hellaswag_val_full.txt.bz2 --lambada EVAL/lambada_test.jsonl \\
           --piqa EVAL/piqa.jsonl --arc-easy EVAL/arc_easy.jsonl --winogrande EVAL/winogrande.jsonl
       (EVAL: the folder where the raw eval files lie)
"""
import argparse
import bz2
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_file  # noqa: E402
from eval_file import KIND_CHOICE, KIND_LASTWORD, MAX_CANDIDATES  # noqa: E402
from tokenize_text import load_encoding  # noqa: E402


def fail(msg):
    """one-line error and exit 1"""
    print(f"prepare_evals: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_jsonl(path):
    """the objects of a JSON-lines file"""
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        fail(f"cannot read '{path}': {e}")


def field(path, i, obj, key):
    """obj[key], or a clear error naming the file and line"""
    if key not in obj:
        fail(f"'{path}' line {i + 1} has no \"{key}\"")
    return obj[key]


def hellaswag_examples(path):
    """(contexts, completions, label) of the 6-lines-per-task HellaSwag text"""
    try:
        opener = bz2.open if path.endswith(".bz2") else open
        with opener(path, "rt", encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        fail(f"cannot read '{path}': {e}")
    while lines and lines[-1] == "":
        lines.pop()
    if len(lines) % 6:
        fail(f"'{path}' has {len(lines)} lines, not 6 per task")
    out = []
    for i in range(0, len(lines), 6):
        ctx = lines[i].split(": ", 1)[1] if ": " in lines[i] else lines[i]
        if not lines[i + 1].strip().isdigit() or int(lines[i + 1]) > 3:
            fail(f"'{path}' line {i + 2}: label '{lines[i + 1]}' is not 0..3")
        out.append(([ctx], [" " + e for e in lines[i + 2:i + 6]], int(lines[i + 1])))
    return out


def lambada_examples(path):
    """(context, last word) of each LAMBADA text"""
    out = []
    for i, obj in enumerate(read_jsonl(path)):
        text = field(path, i, obj, "text").strip()
        if " " not in text:
            fail(f"'{path}' line {i + 1}: text has no last word")
        ctx, word = text.rsplit(" ", 1)
        out.append(([ctx], [" " + word], 0))
    return out


def choice_examples(path):
    """question + choices of llm-foundry's piqa / arc jsonl"""
    out = []
    for i, obj in enumerate(read_jsonl(path)):
        query, choices, gold = (field(path, i, obj, k) for k in ("query", "choices", "gold"))
        out.append(([query.strip() + "\nAnswer:"], [" " + c for c in choices], int(gold)))
    return out


def winogrande_examples(path):
    """context options + one continuation of llm-foundry's winogrande jsonl"""
    out = []
    for i, obj in enumerate(read_jsonl(path)):
        options, cont, gold = (field(path, i, obj, k) for k in ("context_options", "continuation", "gold"))
        out.append((list(options), [" " + cont], int(gold)))
    return out


def encode_example(enc, contexts, completions, label, max_len, where):
    """token lists of one example; checks the candidate count and the label"""
    k = max(len(contexts), len(completions))
    if len(contexts) not in (1, k) or len(completions) not in (1, k) or not 1 <= k <= MAX_CANDIDATES:
        fail(f"{where}: {len(contexts)} contexts and {len(completions)} completions do not make 1..{MAX_CANDIDATES} candidates")
    if not 0 <= label < k:
        fail(f"{where}: label {label} is not one of the {k} candidates")
    ctx = [enc.encode_ordinary(c) for c in contexts]
    comp = [enc.encode_ordinary(c) for c in completions]
    if any(len(c) == 0 for c in comp) or any(len(c) == 0 for c in ctx):
        fail(f"{where}: an empty context or completion")
    for j in range(k):   # keep the last max_len tokens of a too long candidate: trim its context from the left
        c, d = ctx[j if len(ctx) > 1 else 0], comp[j if len(comp) > 1 else 0]
        if len(d) >= max_len:
            fail(f"{where}: a completion of {len(d)} tokens does not fit --max-len {max_len}")
        if len(c) + len(d) > max_len:
            del c[:len(c) + len(d) - max_len]
    return k, ctx, comp


def write_task(path, name, kind, examples, enc, max_len):
    """writes the eval token file of one task (llmc/evals.h); returns (examples, words)"""
    encoded = []
    for i, (contexts, completions, label) in enumerate(examples):
        _, ctx, comp = encode_example(enc, contexts, completions, label, max_len, f"{name} example {i}")
        encoded.append((label, ctx, comp))
    return len(encoded), eval_file.write(path, name, kind, enc.n_vocab, encoded)


TASKS = [("hellaswag", KIND_CHOICE, hellaswag_examples), ("lambada", KIND_LASTWORD, lambada_examples),
         ("piqa", KIND_CHOICE, choice_examples), ("arc_easy", KIND_CHOICE, choice_examples),
         ("winogrande", KIND_CHOICE, winogrande_examples)]


def main():
    """command line"""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", required=True, help="tiktoken ranks file of the GPT-2 BPE (gpt2.tiktoken)")
    ap.add_argument("--out", required=True, help="folder for the <task>.bin files (created if missing)")
    for name, _, _ in TASKS:
        ap.add_argument("--" + name.replace("_", "-"), help=f"raw {name} file")
    ap.add_argument("--limit", type=int, default=0, help="only the first N examples of each task (0 = all)")
    ap.add_argument("--max-len", type=int, default=1024, help="longest candidate in tokens (default 1024)")
    args = ap.parse_args()
    given = [(n, k, fn, getattr(args, n)) for n, k, fn in TASKS if getattr(args, n)]
    if not given:
        fail("no task file given (--hellaswag, --lambada, --piqa, --arc-easy, --winogrande)")
    enc = load_encoding(args.ranks)
    os.makedirs(args.out, exist_ok=True)
    for name, kind, read, src in given:
        examples = read(src)
        if args.limit > 0:
            examples = examples[:args.limit]
        if not examples:
            fail(f"'{src}' holds no {name} example")
        path = os.path.join(args.out, name + ".bin")
        n, words = write_task(path, name, kind, examples, enc, args.max_len)
        print(f"{name}: {n} examples, {words} int32 words -> {path}")


if __name__ == "__main__":
    main()
