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
candidate of the example). A raw file may be plain or .bz2 UTF-8 text.

Bad input is one line "prepare_evals: error: ..." naming the file and line, and exit status 1: a file that is not a
regular file (a FIFO, a device, a directory; refused before it is opened), not UTF-8, a truncated or corrupt .bz2,
a JSON line that is not an object, a field of the wrong type (a string where a list of strings is expected, a float,
boolean or string gold), a label out of range; a missing or corrupt --ranks; an --out that is not a folder. Every
task is read and encoded before the first file is written, and the files are written under temporary names and
renamed into place once all are complete (tool_files.py): a failed run leaves the --out folder as it was.

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
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_file  # noqa: E402
import tool_files  # noqa: E402
from eval_file import KIND_CHOICE, KIND_LASTWORD, MAX_CANDIDATES  # noqa: E402
from tokenize_text import InputError, load_encoding  # noqa: E402
from tool_files import FileProblem  # noqa: E402


def fail(msg):
    """one-line error and exit 1"""
    print(f"prepare_evals: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_text(path):
    """the UTF-8 text of a plain or .bz2 file"""
    try:
        tool_files.input_size(path, "input")
        with (bz2.open if path.endswith(".bz2") else open)(path, "rt", encoding="utf-8") as f:
            return f.read()
    except FileProblem as e:
        fail(str(e))
    except UnicodeDecodeError as e:
        fail(f"'{path}' is not UTF-8 text (byte {e.start} of the {'decompressed ' if path.endswith('.bz2') else ''}"
             f"text: {e.reason})")
    except EOFError:
        fail(f"'{path}' is a truncated .bz2 file")
    except OSError as e:   # a corrupt .bz2 too ("Invalid data stream")
        fail(f"cannot read '{path}': {e.strerror or e}")


def json_type(value):
    """the JSON name of value's type, for errors"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}[type(value)]


def read_jsonl(path):
    """[(line number, object)] of a JSON-lines file; every non-blank line must be a JSON object"""
    out = []
    for no, line in enumerate(read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f"'{path}' line {no} is not JSON: {e.msg} (column {e.colno})")
        except RecursionError:
            fail(f"'{path}' line {no} is not JSON this reader takes: nested too deeply")
        if not isinstance(obj, dict):
            fail(f"'{path}' line {no} is {json_type(obj)}, not a JSON object")
        out.append((no, obj))
    return out


def field(path, no, obj, key, kind):
    """obj[key], checked to be of kind: "string", "strings" (a list of strings) or "gold" (an integer, not a
    boolean); a clear error naming the file and line otherwise"""
    if key not in obj:
        fail(f"'{path}' line {no} has no \"{key}\"")
    v = obj[key]
    if kind == "strings" and isinstance(v, list):
        bad = [x for x in v if not isinstance(x, str)]
        if bad:
            fail(f"'{path}' line {no}: \"{key}\" holds {json_type(bad[0])}, not only strings")
        return v
    if kind == "string" and isinstance(v, str) or kind == "gold" and isinstance(v, int) and not isinstance(v, bool):
        return v
    want = {"string": "a string", "strings": "a list of strings", "gold": "an integer"}[kind]
    fail(f"'{path}' line {no}: \"{key}\" is {json_type(v)}, not {want}")


def hellaswag_examples(path):
    """(line number, contexts, completions, label) of the 6-lines-per-task HellaSwag text"""
    lines = read_text(path).split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    if len(lines) % 6:
        fail(f"'{path}' has {len(lines)} lines, not 6 per task")
    out = []
    for i in range(0, len(lines), 6):
        ctx = lines[i].split(": ", 1)[1] if ": " in lines[i] else lines[i]
        if not re.fullmatch(r"[0-3]", lines[i + 1].strip()):
            fail(f"'{path}' line {i + 2}: label {lines[i + 1][:20]!r} is not 0..3")
        out.append((i + 1, [ctx], [" " + e for e in lines[i + 2:i + 6]], int(lines[i + 1])))
    return out


def lambada_examples(path):
    """(line number, context, last word, 0) of each LAMBADA text"""
    out = []
    for no, obj in read_jsonl(path):
        text = field(path, no, obj, "text", "string").strip()
        if " " not in text:
            fail(f"'{path}' line {no}: text has no last word")
        ctx, word = text.rsplit(" ", 1)
        out.append((no, [ctx], [" " + word], 0))
    return out


def choice_examples(path):
    """question + choices of llm-foundry's piqa / arc jsonl"""
    out = []
    for no, obj in read_jsonl(path):
        query, choices, gold = (field(path, no, obj, k, kind)
                                for k, kind in (("query", "string"), ("choices", "strings"), ("gold", "gold")))
        out.append((no, [query.strip() + "\nAnswer:"], [" " + c for c in choices], gold))
    return out


def winogrande_examples(path):
    """context options + one continuation of llm-foundry's winogrande jsonl"""
    out = []
    for no, obj in read_jsonl(path):
        options, cont, gold = (field(path, no, obj, k, kind) for k, kind in
                               (("context_options", "strings"), ("continuation", "string"), ("gold", "gold")))
        out.append((no, options, [" " + cont], gold))
    return out


def check_example(contexts, completions, label, where):
    """checks the candidate count and the label of one example"""
    k = max(len(contexts), len(completions))
    if len(contexts) not in (1, k) or len(completions) not in (1, k) or not 1 <= k <= MAX_CANDIDATES:
        fail(f"{where}: {len(contexts)} contexts and {len(completions)} completions do not make 1..{MAX_CANDIDATES} candidates")
    if not 0 <= label < k:
        fail(f"{where}: label {label} is not one of the {k} candidates")


def encode_example(enc, contexts, completions, max_len, where):
    """token lists of one example, a too long candidate's context cut from the left"""
    ctx = [enc.encode_ordinary(c) for c in contexts]
    comp = [enc.encode_ordinary(c) for c in completions]
    if any(len(c) == 0 for c in comp) or any(len(c) == 0 for c in ctx):
        fail(f"{where}: an empty context or completion")
    for j in range(max(len(ctx), len(comp))):   # keep the last max_len tokens of a too long candidate
        c, d = ctx[j if len(ctx) > 1 else 0], comp[j if len(comp) > 1 else 0]
        if len(d) >= max_len:
            fail(f"{where}: a completion of {len(d)} tokens does not fit --max-len {max_len}")
        if len(c) + len(d) > max_len:
            del c[:len(c) + len(d) - max_len]
    return ctx, comp


TASKS = [("hellaswag", KIND_CHOICE, hellaswag_examples), ("lambada", KIND_LASTWORD, lambada_examples),
         ("piqa", KIND_CHOICE, choice_examples), ("arc_easy", KIND_CHOICE, choice_examples),
         ("winogrande", KIND_CHOICE, winogrande_examples)]


def main():
    """command line"""
    ap = tool_files.ArgumentParser("prepare_evals", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", required=True, help="tiktoken ranks file of the GPT-2 BPE (gpt2.tiktoken)")
    ap.add_argument("--out", required=True, help="folder for the <task>.bin files (created if missing)")
    for name, _, _ in TASKS:
        ap.add_argument("--" + name.replace("_", "-"), help=f"raw {name} file")
    ap.add_argument("--limit", type=int, default=0, help="only the first N examples of each task (0 = all)")
    ap.add_argument("--max-len", type=int, default=1024, help="longest candidate in tokens (default 1024)")
    args = ap.parse_args()
    if args.limit < 0 or args.max_len < 2:
        ap.error("--limit must be >= 0 and --max-len >= 2")
    given = [(n, k, fn, getattr(args, n)) for n, k, fn in TASKS if getattr(args, n)]
    if not given:
        fail("no task file given (--hellaswag, --lambada, --piqa, --arc-easy, --winogrande)")
    tasks = []
    for name, kind, read, src in given:   # every raw file is checked before the tokenizer is loaded
        examples = read(src)
        if args.limit > 0:
            examples = examples[:args.limit]
        if not examples:
            fail(f"'{src}' holds no {name} example")
        for no, contexts, completions, label in examples:
            check_example(contexts, completions, label, f"'{src}' line {no}")
        tasks.append((name, kind, src, examples))
    try:
        enc = load_encoding(args.ranks)
    except InputError as e:
        fail(str(e))
    files, lines = {}, []
    for name, kind, src, examples in tasks:
        encoded = [(label, *encode_example(enc, contexts, completions, args.max_len, f"'{src}' line {no}"))
                   for no, contexts, completions, label in examples]
        files[name + ".bin"], words = eval_file.encode(name, kind, enc.n_vocab, encoded)
        lines.append(f"{name}: {len(encoded)} examples, {words} int32 words -> {os.path.join(args.out, name + '.bin')}")
    try:
        tool_files.write_files(args.out, {n: [data] for n, data in files.items()})
    except FileProblem as e:
        fail(str(e))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
