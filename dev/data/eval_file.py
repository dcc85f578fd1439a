"""The eval token file of llmc/evals.h (its format is described there): the encoder of dev/data/prepare_evals.py and
the reader of dev/eval_hf.py. An example is (label, contexts, completions): token lists, one context or one
completion shared by all candidates, or one each."""
import re

import numpy as np

from tool_files import FileProblem, input_size

MAGIC, VERSION, HEADER_INTS = 20261204, 1, 256
KIND_CHOICE, KIND_LASTWORD = 0, 1
MAX_CANDIDATES = 8     # EVAL_MAX_CANDIDATES in llmc/evals.h
MAX_SEGMENT = 1 << 20  # the most tokens of one context or completion, as llmc/evals.h reads them
NAME_SLOT, NAME_BYTES = 16, 64
# a task name is a key of the trainer's main.log eval lines "s:<step> <task>:<score> <task>_ll:<ll> ..." (scripts/
# plot_losses.py reads [A-Za-z0-9_]+ keys) and of main.jsonl: a space, a colon or a control character would break them
NAME_PATTERN = re.compile(r"[A-Za-z0-9_]{1,%d}" % (NAME_BYTES - 1))


class EvalFileError(Exception):
    """a file that is not a valid eval file"""


def candidates(contexts, completions):
    """[(context, completion)] of each candidate of an example"""
    k = max(len(contexts), len(completions))
    return [(contexts[min(c, len(contexts) - 1)], completions[min(c, len(completions) - 1)]) for c in range(k)]


def encode(name, kind, vocab_size, examples):
    """the file of the examples [(label, contexts, completions)] -> (its bytes, the number of int32 words after the
    header); ValueError for a task name that NAME_PATTERN does not match"""
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"eval task name {name!r} is not 1 to {NAME_BYTES - 1} letters, digits or '_'")
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
    h[NAME_SLOT:NAME_SLOT + NAME_BYTES // 4] = np.frombuffer(name.encode().ljust(NAME_BYTES, b"\0"), dtype="<i4")
    return h.tobytes() + np.array(words, dtype="<i4").tobytes(), len(words)


def read(path):
    """an eval file -> (name, kind, [(label, [(context tokens, completion tokens)] per candidate)]), checked as
    llmc/evals.h checks it, and its task name against NAME_PATTERN; EvalFileError for a file that is not one"""
    try:
        size = input_size(path, "eval file")
        if size < 4 * HEADER_INTS or size % 4:
            raise EvalFileError(f"'{path}' is {size} bytes, not a version {VERSION} eval file (a {4 * HEADER_INTS}-byte "
                                f"header, then int32 words)")
        with open(path, "rb") as f:
            data = np.frombuffer(f.read(size), dtype="<i4")
    except FileProblem as e:
        raise EvalFileError(str(e)) from None
    except OSError as e:
        raise EvalFileError(f"cannot read eval file '{path}': {e.strerror}") from None
    h, w = data[:HEADER_INTS], data[HEADER_INTS:].tolist()
    if h[0] != MAGIC or h[1] != VERSION:
        raise EvalFileError(f"'{path}' is not a version {VERSION} eval file (magic {h[0]}, version {h[1]})")
    if h[2] not in (KIND_CHOICE, KIND_LASTWORD) or h[3] <= 0 or h[6] <= 0:
        raise EvalFileError(f"'{path}': invalid header (kind {h[2]}, {h[3]} examples, vocab {h[6]})")
    if h[7] != len(w):
        raise EvalFileError(f"'{path}' holds {len(w)} words, its header says {h[7]} (truncated or corrupt)")
    raw = h[NAME_SLOT:NAME_SLOT + NAME_BYTES // 4].tobytes().split(b"\0")[0]
    name = raw.decode("ascii", errors="replace")
    if not NAME_PATTERN.fullmatch(name):
        raise EvalFileError(f"'{path}': task name {raw!r} is not 1 to {NAME_BYTES - 1} letters, digits or '_'")
    vocab, examples, at = int(h[6]), [], 0

    def take(n):
        nonlocal at
        if at + n > len(w):
            raise EvalFileError(f"'{path}' ends inside example {len(examples)} (truncated or corrupt)")
        at += n
        return w[at - n:at]

    for _ in range(int(h[3])):
        label, k, nc, npl = take(4)
        if not 1 <= k <= MAX_CANDIDATES or nc not in (1, k) or npl not in (1, k) or k != max(nc, npl) \
                or not 0 <= label < k or (h[2] == KIND_LASTWORD and k != 1):
            raise EvalFileError(f"'{path}', example {len(examples)}: {k} candidates, {nc} contexts, {npl} completions, "
                                f"label {label} are inconsistent")
        segs = []
        for n in take(nc + npl):
            if not 1 <= n <= MAX_SEGMENT:
                raise EvalFileError(f"'{path}', example {len(examples)}: a segment of {n} tokens")
            segs.append(take(n))
            if min(segs[-1]) < 0 or max(segs[-1]) >= vocab:
                raise EvalFileError(f"'{path}', example {len(examples)}: a token outside the vocab {vocab}")
        examples.append((label, candidates(segs[:nc], segs[nc:])))
    if at != len(w):
        raise EvalFileError(f"'{path}': {len(w) - at} words after the last example")
    return name, int(h[2]), examples
