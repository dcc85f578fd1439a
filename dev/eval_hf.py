"""Scores an exported model (dev/export_hf.py, loaded with Hugging Face transformers) on the engine's eval token
files (dev/data/prepare_evals.py; format and scoring rule: llmc/evals.h), independently of the engine.

Each candidate row (context + completion, the last --max-len + 1 tokens when longer) runs through the model; the
candidate's loss is the sum of the completion tokens' cross-entropies. Multiple choice: acc (least summed loss) and
acc_norm (least mean loss per completion token), ties to the lower index. Last word: acc (every completion token is
the greedy argmax) and ppl = exp(mean summed completion loss). Both: ll = the mean over examples of the gold
completion's summed log-likelihood (minus its summed loss). Rows are right-padded in batches: with causal
attention, padding after a row does not change its logits.

usage: python dev/eval_hf.py MODEL_DIR EVAL [EVAL ...] [--max-len T] [--batch N] [--device cpu|cuda]
           [--dtype auto|float32|bfloat16] [--json OUT.json]
  EVAL: eval files or folders of them (their *.bin). Prints one line per task; --json writes
  {task: {"acc", "acc_norm", "ppl", "ll", "examples"}}.
Every eval file is read and checked (dev/data/eval_file.py: as llmc/evals.h checks it, and a task name of letters,
digits and '_') and the model folder checked for its files before torch is imported; any problem, a model that does
not load included, is one line "eval_hf: error: ..." and exit status 1. --json is written under a temporary name and
renamed into place (an earlier file stays as it was until the scores are complete).
"""
import argparse
import glob
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
import eval_file  # noqa: E402
import tool_files  # noqa: E402
from eval_file import KIND_LASTWORD  # noqa: E402
from tool_files import FileProblem  # noqa: E402


def fail(msg):
    """one-line error and exit 1"""
    print(f"eval_hf: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_eval(path):
    """eval_file.read, with a clear error for a bad file"""
    try:
        return eval_file.read(path)
    except eval_file.EvalFileError as e:
        fail(str(e))


def row_tokens(ctx, comp, max_len):
    """(tokens, first scored target position) of a candidate row, cut to its last max_len + 1 tokens"""
    row = ctx + comp
    skip = max(0, len(row) - 1 - max_len)
    return row[skip:], len(ctx) - 1 - skip


def score_rows(model, rows, batch, device):
    """[(summed completion loss, all greedy)] of rows [(tokens, first target position, completion length)]"""
    import torch
    out = []
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]
        width = max(len(t) for t, _, _ in chunk)
        tokens = torch.zeros((len(chunk), width), dtype=torch.long)
        for r, (t, _, _) in enumerate(chunk):
            tokens[r, :len(t)] = torch.tensor(t)
        with torch.no_grad():
            logits = model(tokens.to(device)).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        targets = tokens[:, 1:].to(device)
        nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        target_logit = logits[:, :-1].gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        greedy = target_logit >= logits[:, :-1].max(dim=-1).values
        for r, (_, start, n) in enumerate(chunk):
            out.append((float(nll[r, start:start + n].double().sum()), bool(greedy[r, start:start + n].all())))
    return out


def score_task(model, kind, examples, max_len, batch, device):
    """{"acc", "acc_norm", "ppl", "ll", "examples"} of one task"""
    rows = []
    for _, cands in examples:
        for ctx, comp in cands:
            tokens, start = row_tokens(ctx, comp, max_len)
            rows.append((tokens, start, len(comp)))
    scores = score_rows(model, rows, batch, device)
    correct = correct_norm = loss = gold_loss = 0.0
    at = 0
    for label, cands in examples:
        s = scores[at:at + len(cands)]
        gold_loss += s[label][0]
        sums = [x[0] for x in s]
        means = [x[0] / len(comp) for x, (_, comp) in zip(s, cands)]
        correct_norm += int(np.argmin(means)) == label
        if kind == KIND_LASTWORD:
            correct += s[0][1]
            loss += s[0][0]
        else:
            correct += int(np.argmin(sums)) == label
        at += len(cands)
    n = len(examples)
    if kind == KIND_LASTWORD:
        return {"acc": correct / n, "acc_norm": correct / n, "ppl": math.exp(loss / n), "ll": -gold_loss / n, "examples": n}
    return {"acc": correct / n, "acc_norm": correct_norm / n, "ppl": 0.0, "ll": -gold_loss / n, "examples": n}


def load_model(model_dir, dtype="auto", device="cpu"):
    """the exported model in eval mode; dtype "auto" (as stored) or a torch dtype (transformers 5 names the
    argument dtype, earlier versions torch_dtype)"""
    import transformers
    from transformers import AutoModelForCausalLM
    key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    return AutoModelForCausalLM.from_pretrained(model_dir, **{key: dtype}).to(device).eval()


def eval_files(specs):
    """the eval files named by paths and folders"""
    files = []
    for s in specs:
        files += sorted(glob.glob(os.path.join(s, "*.bin"))) if os.path.isdir(s) else [s]
    if not files:
        fail(f"no eval file in {specs}")
    return files


def check_model_dir(model_dir):
    """a one-line error unless model_dir holds the config.json and model.safetensors of an export"""
    if not os.path.isdir(model_dir):
        fail(f"model folder '{model_dir}' is not a directory")
    for name in ("config.json", "model.safetensors"):
        try:
            tool_files.input_size(os.path.join(model_dir, name), "model file")
        except FileProblem as e:
            fail(f"'{model_dir}' is not a folder written by dev/export_hf.py: {e}")


def main():
    """command line"""
    ap = tool_files.ArgumentParser("eval_hf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", help="folder written by dev/export_hf.py")
    ap.add_argument("evals", nargs="+", help="eval files or folders of them")
    ap.add_argument("--max-len", type=int, default=1024, help="positions per row, the trainer's -t (default 1024)")
    ap.add_argument("--batch", type=int, default=16, help="rows per forward pass (default 16)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"],
                    help="compute dtype (default auto: the exported weights' dtype)")
    ap.add_argument("--json", help="also write the scores here")
    args = ap.parse_args()
    if args.max_len < 1 or args.batch < 1:
        ap.error("--max-len and --batch must be positive")
    tasks = [read_eval(path) for path in eval_files(args.evals)]   # every file is checked before the model loads
    check_model_dir(args.model_dir)
    if args.json:
        try:
            tool_files.check_output(args.json)
        except FileProblem as e:
            fail(str(e))
    try:
        import torch
    except ImportError:
        fail(f"{sys.executable} has no torch (pip install -r dev/requirements.txt)")
    try:
        model = load_model(args.model_dir, "auto" if args.dtype == "auto" else getattr(torch, args.dtype), args.device)
    except Exception as e:   # transformers, safetensors and torch raise many kinds for a corrupt folder or a bad device
        fail(f"cannot load the model in '{args.model_dir}' on {args.device}: {type(e).__name__}: "
             f"{(str(e).strip().splitlines() or [''])[0]}")
    results = {}
    for name, kind, examples in tasks:
        r = score_task(model, kind, examples, args.max_len, args.batch, args.device)
        results[name] = r
        if kind == KIND_LASTWORD:
            print(f"eval {name:<12} acc {r['acc']:.4f} gold ll {r['ll']:.4f} ppl {r['ppl']:.3f} ({r['examples']} examples)")
        else:
            print(f"eval {name:<12} acc_norm {r['acc_norm']:.4f} acc {r['acc']:.4f} gold ll {r['ll']:.4f} "
                  f"({r['examples']} examples)")
    if args.json:
        try:
            tool_files.write_files(os.path.dirname(args.json) or ".",
                                   {os.path.basename(args.json): [json.dumps(results, indent=2).encode()]})
        except FileProblem as e:
            fail(str(e))


if __name__ == "__main__":
    main()
