"""The eval token file of llmc/evals.h (its format is described there): the writer of dev/data/prepare_evals.py and
the reader of dev/eval_hf.py. An example is (label, contexts, completions): token lists, one context or one
completion shared by all candidates, or one each."""
import numpy as np

MAGIC, VERSION, HEADER_INTS = 20261204, 1, 256
KIND_CHOICE, KIND_LASTWORD = 0, 1
MAX_CANDIDATES = 8     # EVAL_MAX_CANDIDATES in llmc/evals.h
NAME_SLOT, NAME_BYTES = 16, 64


class EvalFileError(Exception):
    """a file that is not a valid eval file"""


def candidates(contexts, completions):
    """[(context, completion)] of each candidate of an example"""
    k = max(len(contexts), len(completions))
    return [(contexts[min(c, len(contexts) - 1)], completions[min(c, len(completions) - 1)]) for c in range(k)]


def write(path, name, kind, vocab_size, examples):
    """writes the examples [(label, contexts, completions)]; returns the number of int32 words after the header"""
    words, longest, max_k = [], 0, 0
    for label, ctx, comp in examples:
        cands = candidates(ctx, comp)
        words += [label, len(cands), len(ctx), len(comp)] + [len(c) for c in ctx + comp]
        for c in ctx + comp:
            words += c
        longest = max([longest] + [len(c) + len(p) for c, p in cands])
        max_k = max(max_k, len(cands))
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[0:8] = [MAGIC, VERSION, kind, len(examples), max_k, longest, vocab_size, len(words)]
    raw = name.encode()[:NAME_BYTES - 1].ljust(NAME_BYTES, b"\0")
    h[NAME_SLOT:NAME_SLOT + NAME_BYTES // 4] = np.frombuffer(raw, dtype="<i4")
    with open(path, "wb") as f:
        f.write(h.tobytes())
        f.write(np.array(words, dtype="<i4").tobytes())
    return len(words)


def read(path):
    """an eval file -> (name, kind, [(label, [(context tokens, completion tokens)] per candidate)])"""
    data = np.fromfile(path, dtype="<i4")
    if data.size < HEADER_INTS or data[0] != MAGIC or data[1] != VERSION:
        raise EvalFileError(f"'{path}' is not a version {VERSION} eval file")
    h, w = data[:HEADER_INTS], data[HEADER_INTS:].tolist()
    if h[7] != len(w):
        raise EvalFileError(f"'{path}' holds {len(w)} words, its header says {h[7]} (truncated or corrupt)")
    name = h[NAME_SLOT:NAME_SLOT + NAME_BYTES // 4].tobytes().split(b"\0")[0].decode()
    examples, at = [], 0
    for _ in range(int(h[3])):
        label, _, nc, npl = w[at:at + 4]
        lens = w[at + 4:at + 4 + nc + npl]
        at += 4 + nc + npl
        segs = []
        for n in lens:
            segs.append(w[at:at + n])
            at += n
        examples.append((label, candidates(segs[:nc], segs[nc:])))
    if at != len(w):
        raise EvalFileError(f"'{path}': the examples do not fill the file")
    return name, int(h[2]), examples
