"""Fixed-seed fuzzer of the Python tools' input files and output paths: dev/export_hf.py, dev/data/prepare_evals.py,
dev/data/tokenize_text.py, dev/eval_hf.py (its eval files and --json; the model is never loaded, so no torch is
needed) and scripts/plot_losses.py (its run logs and --markdown, with --no-plot).

Each case runs a tool on one bad input or output path, made from small valid files: random bytes, truncations,
flipped bits, changed header words, invalid UTF-8, JSON lines of the wrong types, a FIFO, a directory, /dev/zero, a
missing file, an output folder that is a file, lies under a file or cannot be created, an output file that is a
folder or a FIFO, bad flag values. --cases per tool (seed --seed, printed), two at a time. Every case must end
within --timeout seconds either with exit 0 (a mutation may leave a valid input; not for a case marked as one that
must fail, such as a FIFO) or the way every failure of these tools must: a non-zero exit status, stderr exactly one
line "<tool>: error: ..." (no Traceback), and the good output that an earlier run left at the output path (a
folder, a file or a FIFO) as it was. Prints one line per tool and "N passed, M failed"; exits 1 on a failure.

A tool whose packages are missing (numpy; tiktoken and data/gpt2.tiktoken for prepare_evals and tokenize_text) is
skipped with a message, appended as "what: why" to the file $TEST_SKIP_LOG names, if set.

usage: python3 dev/test/fuzz_tools.py [--cases 60] [--seed 1] [--timeout 30] [--tools export_hf,...]
"""
import argparse
import base64
import bz2
import importlib.util
import json
import lzma
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "dev"))
sys.path.insert(0, os.path.join(ROOT, "dev", "data"))
from skip_log import skip  # noqa: E402

RANKS = os.path.join(ROOT, "data", "gpt2.tiktoken")
FIXTURE = os.path.join(ROOT, "dev", "test", "fixtures", "tiny_model.bin")
INTERESTING = [0, 1, -1, 2, 3, 7, 8, 9, 63, 64, 100, 127, 128, 255, 1024, 65535, 65536, 2 ** 20, 2 ** 20 + 1, 2 ** 30,
               2 ** 31 - 1, -2 ** 31]
# JSON values of every type, for fields that expect another
JSON_VALUES = [None, True, False, 0, 1, -1, 1.5, 1e400, "", "x", "ab cd", [], ["a"], ["a", 1], [None], {}, {"a": 1},
               [[["deep"]]], "\u2028", "a\x0cb\x1e", 2 ** 70]


class Case:
    """one run of a tool: args after the interpreter; out: the output path whose earlier contents a failed run must
    keep (None: none); must_fail: exit 0 is a failure of the case too; expect: text the error line must hold"""

    def __init__(self, what, args, out=None, must_fail=False, expect=""):
        self.what, self.args, self.out, self.must_fail, self.expect = what, args, out, must_fail, expect
        self.before = snapshot(out) if out else None


def snapshot(path):
    """what is at path, to compare before and after a run: a file's bytes, a folder's entries, or the file type"""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return ("missing",)
    if stat.S_ISDIR(st.st_mode):
        return ("dir", {n: snapshot(os.path.join(path, n)) for n in sorted(os.listdir(path))})
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            return ("file", f.read())
    return ("type", stat.S_IFMT(st.st_mode))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def flip_bits(rng, data, n=None, start=0):
    data = bytearray(data)
    for _ in range(n or rng.randrange(1, 9)):
        at = rng.randrange(start, len(data))
        data[at] ^= 1 << rng.randrange(8)
    return bytes(data)


def random_bytes(rng):
    return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 7, 100, 1024, 1500])))


def mutate_bytes(rng, good):
    """a generic mutation of a file's bytes: bits flipped, truncated, extended, a span replaced or random bytes"""
    kind = rng.randrange(5)
    if kind == 0:
        return flip_bits(rng, good), "flipped bits"
    if kind == 1:
        return good[:rng.randrange(len(good))], "truncated"
    if kind == 2:
        return good + random_bytes(rng)[:rng.choice([1, 3, 64])] + b"\xff", "extended"
    if kind == 3:
        at = rng.randrange(len(good))
        return good[:at] + random_bytes(rng)[:32] + good[at + 32:], "a span replaced"
    return random_bytes(rng), "random bytes"


class Fuzzer:
    """the work folder: the special files every tool gets (a FIFO, a file, a symlink to /dev/zero), one folder per
    case, and the runs"""

    def __init__(self, work, timeout):
        self.work, self.timeout = work, timeout
        self.count = 0
        self.fifo = self.path("shared", "a.fifo")
        os.makedirs(os.path.dirname(self.fifo))
        os.mkfifo(self.fifo)
        self.a_file = self.path("shared", "a_file")
        write(self.a_file, b"a file, not a folder")
        self.link_zero = self.path("shared", "zero_link")
        os.symlink("/dev/zero", self.link_zero)

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def case_dir(self, tool):
        """a fresh folder for one case"""
        self.count += 1
        d = self.path(tool, f"c{self.count}")
        os.makedirs(d)
        return d

    def special_inputs(self, d):
        """(path, what) of inputs that are not regular files, or not there"""
        return [(self.fifo, "a FIFO"), ("/dev/zero", "/dev/zero"), (self.link_zero, "a symlink to /dev/zero"),
                (d, "a directory"), (os.path.join(d, "missing"), "a missing file")]

    def bad_folders(self, d):
        """(path, what) of output folders that cannot be: a file (kept as it was), under a file, not creatable"""
        a_file = os.path.join(d, "out_is_a_file")
        write(a_file, b"keep me")
        return [(a_file, "an output folder that is a file"), (os.path.join(self.a_file, "sub"), "an output folder under a file"),
                ("/proc/fuzz_tools_no_such/out", "an output folder that cannot be created"), (self.fifo, "a FIFO as the output folder")]

    def run(self, tool, case):
        """-> None when the case passed, else what went wrong"""
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        try:
            p = subprocess.run([sys.executable] + case.args, capture_output=True, text=True, errors="replace",
                               timeout=self.timeout, env=env, cwd=self.work, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return f"no exit within {self.timeout:g} s"
        lines = p.stderr.splitlines()
        if p.returncode == 0:
            return "exit 0, expected a refusal" if case.must_fail else None
        if p.returncode < 0:
            return f"killed by signal {-p.returncode}"
        name = TOOL_NAMES[tool]
        if len(lines) != 1 or not lines[0].startswith(f"{name}: error: ") or len(lines[0]) <= len(name) + 9 \
                or "Traceback" in p.stderr:
            return f"exit {p.returncode}, stderr not one line '{name}: error: ...': {p.stderr[-600:]!r}"
        if case.expect not in lines[0]:
            return f"exit {p.returncode} ({lines[0]}), expected an error with {case.expect!r}"
        if case.out and snapshot(case.out) != case.before:
            return f"exit {p.returncode} ({lines[0]}), but the earlier output at {case.out} changed"
        return None


# ---- dev/export_hf.py: model files, --ranks, output folders

def reseal_model(data, slot, value):
    """data with header slot set to the int32 value and the header CRC-32 recomputed (dev/checkpoint_crc.py)"""
    import checkpoint_crc
    h = bytearray(data[:4 * checkpoint_crc.HEADER_INTS])
    h[4 * slot:4 * slot + 4] = struct.pack("<i", value)
    h[4 * checkpoint_crc.CRC_SLOT:4 * checkpoint_crc.CRC_SLOT + 4] = struct.pack("<I", checkpoint_crc.header_crc(h))
    return bytes(h) + data[len(h):]


def export_cases(fz, rng, n):
    """n cases of dev/export_hf.py, each with an earlier export in its output folder"""
    tool = os.path.join(ROOT, "dev", "export_hf.py")
    with open(FIXTURE, "rb") as f:
        good = f.read()
    earlier = fz.path("export_hf", "earlier")
    subprocess.run([sys.executable, tool, FIXTURE, earlier, "--dtype", "fp32"], check=True, stdout=subprocess.DEVNULL)
    ranks = "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256))
    cases = []
    for i in range(n):
        d = fz.case_dir("export_hf")
        out = os.path.join(d, "out")
        shutil.copytree(earlier, out)
        model, extra, must_fail = os.path.join(d, "model.bin"), [], False
        kind = i % 10
        if kind < 4:     # the bytes of the model file
            data, what = mutate_bytes(rng, good)
            write(model, data)
        elif kind < 6:   # a header word, CRC-32 resealed: a shape, a count, a size or any other slot
            slot = rng.choice([2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 18, 19, 22, 23, rng.randrange(25, 256)])
            value = rng.choice(INTERESTING)
            write(model, reseal_model(good, slot, value))
            what = f"header slot {slot} = {value}, resealed"
        elif kind == 6:  # not a regular file
            model, what = rng.choice(fz.special_inputs(d))
            must_fail = True
        elif kind == 7:  # --ranks: not a regular file, or garbage, or ranks of another vocab than the model's
            model = FIXTURE
            choice = rng.randrange(3)
            if choice == 0:
                path, what = rng.choice(fz.special_inputs(d))
            else:
                path = os.path.join(d, "ranks.tiktoken")
                write(path, ranks if choice == 1 else mutate_bytes(rng, ranks.encode())[0])
                what = "ranks of 256 tokens" if choice == 1 else "mutated ranks"
            extra, what, must_fail = ["--ranks", path], f"--ranks {what}", True
        elif kind == 8:  # the output folder cannot be one
            model = FIXTURE
            out, what = rng.choice(fz.bad_folders(d))
            must_fail = True
        else:            # an output file of the folder that is a folder or a FIFO
            model = FIXTURE
            name = rng.choice(["model.safetensors", "config.json", "generation_config.json"])
            os.remove(os.path.join(out, name))
            if rng.random() < 0.5:
                os.mkdir(os.path.join(out, name))
            else:
                os.mkfifo(os.path.join(out, name))
            what, must_fail = f"{name} in the output folder is not a regular file", True
        cases.append(Case(f"export_hf {what}", [tool, model, out] + extra, out, must_fail))
    return cases


# ---- dev/data/prepare_evals.py: raw eval files, --ranks, --out

PIQA = [{"query": "Question: How do you open a stuck jar?", "choices": ["Run hot water over it.", "Freeze it."], "gold": 0},
        {"query": "Question: How do you keep bread fresh?", "choices": ["Leave it out.", "Seal it."], "gold": 1}]
WINOGRANDE = [{"context_options": ["The cup fell because the cup", "The cup fell because the table"],
               "continuation": "was tipped.", "gold": 0}]
LAMBADA = [{"text": "She poured the milk into the bowl and gave it to the cat"}]
HELLASWAG = "Cooking: A man stirs a pot. he\n1\nsings.\nadds salt.\nleaves.\nsleeps.\n"


def mutate_json_lines(rng, rows):
    """JSON lines of rows with one row changed: a field of another type, removed or added, the row not an object,
    a line not JSON; -> (bytes, what)"""
    rows = [dict(r) for r in rows]
    i = rng.randrange(len(rows))
    kind = rng.randrange(5)
    if kind <= 1:
        key = rng.choice(sorted(rows[i]))
        rows[i][key] = rng.choice(JSON_VALUES + [rng.randrange(-3, 5)])
        what = f"\"{key}\" = {rows[i][key]!r:.30}"
    elif kind == 2:
        key = rng.choice(sorted(rows[i]))
        del rows[i][key]
        what = f"no \"{key}\""
    elif kind == 3:
        rows[i] = rng.choice(JSON_VALUES)
        what = f"a line {rows[i]!r:.30}"
    else:
        lines = [json.dumps(r) for r in rows]
        lines[i] = lines[i][:rng.randrange(len(lines[i]))] if rng.random() < 0.7 else "[" * 50000
        return ("\n".join(lines) + "\n").encode(), "a line that is not JSON"
    return "".join(json.dumps(r) + "\n" for r in rows).encode(), what


def prepare_cases(fz, rng, n):
    """n cases of dev/data/prepare_evals.py, each with the eval files of an earlier run in its --out"""
    tool = os.path.join(ROOT, "dev", "data", "prepare_evals.py")
    raw = fz.path("prepare_evals", "raw")
    good = {"--piqa": (os.path.join(raw, "piqa.jsonl"), PIQA), "--arc-easy": (os.path.join(raw, "arc.jsonl"), PIQA),
            "--winogrande": (os.path.join(raw, "winogrande.jsonl"), WINOGRANDE),
            "--lambada": (os.path.join(raw, "lambada.jsonl"), LAMBADA)}
    for path, rows in good.values():
        write(path, "".join(json.dumps(r) + "\n" for r in rows))
    hellaswag = os.path.join(raw, "hellaswag.txt.bz2")
    write(hellaswag, bz2.compress(HELLASWAG.encode()))
    earlier = fz.path("prepare_evals", "earlier")
    subprocess.run([sys.executable, tool, "--ranks", RANKS, "--out", earlier, "--piqa", good["--piqa"][0],
                    "--hellaswag", hellaswag], check=True, stdout=subprocess.DEVNULL)
    cases = []
    for i in range(n):
        d = fz.case_dir("prepare_evals")
        out = os.path.join(d, "out")
        shutil.copytree(earlier, out)
        flags, must_fail, ranks = ["--hellaswag", hellaswag], False, RANKS   # a good task before the bad one
        kind = i % 10
        if kind < 5:     # a JSON-lines file with a row of the wrong types
            flag = rng.choice(sorted(good))
            data, what = mutate_json_lines(rng, good[flag][1])
            path = os.path.join(d, "raw.jsonl")
            write(path, data)
            flags += [flag, path]
        elif kind == 5:  # the bytes of a raw file: invalid UTF-8, truncated, random
            flag = rng.choice(sorted(good))
            with open(good[flag][0], "rb") as f:
                data, what = mutate_bytes(rng, f.read())
            path = os.path.join(d, "raw.jsonl")
            write(path, data)
            flags += [flag, path]
        elif kind == 6:  # the HellaSwag .bz2: truncated or corrupt compressed bytes, or a changed text
            path = os.path.join(d, "hellaswag.txt.bz2")
            if rng.random() < 0.5:
                with open(hellaswag, "rb") as f:
                    data, what = mutate_bytes(rng, f.read())
            else:
                lines = HELLASWAG.split("\n")
                lines[rng.choice([0, 1, 1, 2])] = rng.choice(["4", "-1", "\u00b2", "1.0", "", "x", "\udcff", "1\x0b"])
                data, what = bz2.compress("\n".join(lines).encode(errors="surrogateescape")), "a changed HellaSwag line"
            write(path, data)
            flags = ["--hellaswag", path]
            what = f"hellaswag .bz2 {what}"
        elif kind == 7:  # a raw file or --ranks that is not a regular file, or a bad --ranks
            path, what = rng.choice(fz.special_inputs(d))
            if rng.random() < 0.5:
                flags += [rng.choice(sorted(good)), path]
            else:
                ranks = path
                if rng.random() < 0.3:
                    ranks = os.path.join(d, "ranks.tiktoken")
                    write(ranks, random_bytes(rng))
                    what = "random bytes"
                flags += ["--piqa", good["--piqa"][0]]
                what = f"--ranks {what}"
            must_fail = True
        elif kind == 8:  # --out cannot be a folder
            out, what = rng.choice(fz.bad_folders(d))
            flags += ["--piqa", good["--piqa"][0]]
            must_fail = True
        else:            # an output file that is a folder or a FIFO, or a bad flag value
            if rng.random() < 0.5:
                name = rng.choice(["piqa.bin", "hellaswag.bin"])
                os.remove(os.path.join(out, name))
                (os.mkdir if rng.random() < 0.5 else os.mkfifo)(os.path.join(out, name))
                what = f"{name} in --out is not a regular file"
            else:
                flag, value = rng.choice([("--limit", "-1"), ("--max-len", "0"), ("--max-len", "1"), ("--limit", "x"),
                                          ("--max-len", "1e3"), ("--bogus", "1")])
                flags += [flag, value]
                what = f"{flag} {value}"
            flags += ["--piqa", good["--piqa"][0]]
            must_fail = True
        cases.append(Case(f"prepare_evals {what}", [tool, "--ranks", ranks, "--out", out] + flags, out, must_fail))
    return cases


# ---- dev/data/tokenize_text.py: text inputs, --ranks, --out-dir with old shards, --prefix

TEXT = "First document, with numbers 123 and caf\u00e9.\n<|endoftext|>\nSecond one.\n\nA blank line above.\n"


def tokenize_cases(fz, rng, n):
    """n cases of dev/data/tokenize_text.py --overwrite, each with the shards of an earlier run in its --out-dir"""
    tool = os.path.join(ROOT, "dev", "data", "tokenize_text.py")
    good = fz.path("tokenize_text", "good.txt")
    write(good, TEXT * 3)
    good_xz = fz.path("tokenize_text", "good.txt.xz")
    write(good_xz, lzma.compress((TEXT * 3).encode()))
    earlier = fz.path("tokenize_text", "earlier")
    subprocess.run([sys.executable, tool, good, "--ranks", RANKS, "--out-dir", earlier, "--prefix", "p",
                    "--shard-tokens", "16", "--val-tokens", "8", "--workers", "1"], check=True, stdout=subprocess.DEVNULL)
    cases = []
    for i in range(n):
        d = fz.case_dir("tokenize_text")
        out = os.path.join(d, "out")
        shutil.copytree(earlier, out)
        inputs, flags, must_fail = [good], ["--shard-tokens", "16"], False
        kind = i % 8
        if kind < 3:     # the bytes of a text file, plain or .xz, as the second input or the val input
            xz = rng.random() < 0.4
            with open(good_xz if xz else good, "rb") as f:
                data, what = mutate_bytes(rng, f.read())
            if not xz and rng.random() < 0.5:
                at = rng.randrange(len(data) + 1)
                data, what = data[:at] + bytes([rng.choice([0x80, 0xc3, 0xff, 0xfe, 0xed])]) + data[at:], "invalid UTF-8"
            path = os.path.join(d, "bad.txt.xz" if xz else "bad.txt")
            write(path, data)
            if rng.random() < 0.5:
                inputs.append(path)
            else:
                flags += ["--val-input", path]
            what = f"{'.xz ' if xz else ''}{what}"
        elif kind == 3:  # an input, a val input or the ranks that is not a regular file
            path, what = rng.choice(fz.special_inputs(d))
            where = rng.randrange(3)
            if where == 0:
                inputs.append(path)
            elif where == 1:
                flags += ["--val-input", path]
            else:
                flags += ["--ranks", path]
            what = f"{['input', '--val-input', '--ranks'][where]} {what}"
            must_fail = True
        elif kind == 4:  # --out-dir cannot be a folder
            out, what = rng.choice(fz.bad_folders(d))
            must_fail = True
        elif kind == 5:  # a --prefix naming a path or a hidden file, or a bad flag value
            flag, value = rng.choice([("--prefix", "../p"), ("--prefix", "a/b"), ("--prefix", ".p"), ("--prefix", ".."),
                                      ("--prefix", "/tmp/p"), ("--shard-tokens", "0"), ("--shard-tokens", str(2 ** 31)),
                                      ("--workers", "0"), ("--val-tokens", "-1"), ("--val-docs", "x")])
            flags += [flag, value]
            what, must_fail = f"{flag} {value}", True
        elif kind == 6:  # empty input, everything in val, or a split too large for --single-file
            choice = rng.randrange(3)
            if choice == 0:
                path = os.path.join(d, "empty.txt")
                write(path, b"")
                inputs, what = [path], "empty input"
            elif choice == 1:
                flags += ["--val-tokens", "100000"]
                what = "all in val"
            else:
                flags += ["--single-file", "--shard-tokens", "4"]
                what = "--single-file too large"
            must_fail = True
        else:            # a new shard's name taken by a folder or a FIFO
            name = rng.choice(["p_train_000000.bin", "p_train_000001.bin", "p_val_000000.bin"])
            os.remove(os.path.join(out, name))
            (os.mkdir if rng.random() < 0.5 else os.mkfifo)(os.path.join(out, name))
            what, must_fail = f"{name} is not a regular file", True
        args = [tool] + inputs + ["--ranks", RANKS, "--out-dir", out, "--prefix", "p", "--workers", "1", "--overwrite"]
        cases.append(Case(f"tokenize_text {what}", args + flags, out, must_fail))
    return cases


# ---- dev/eval_hf.py: eval files (checked before the model is loaded) and --json

def eval_cases(fz, rng, n):
    """n cases of dev/eval_hf.py, each with an earlier --json file"""
    import eval_file
    tool = os.path.join(ROOT, "dev", "eval_hf.py")
    examples = [(1, [[5, 6, 7]], [[8], [9, 10]]), (0, [[1, 2], [3]], [[4, 4]]), (2, [[11]], [[12], [13], [14, 15]])]
    good, _ = eval_file.encode("piqa", eval_file.KIND_CHOICE, 50, examples)
    no_model = fz.path("eval_hf", "no_model")   # never loaded: every case fails before, or at, the model folder check
    os.makedirs(no_model)
    words = (len(good) - 4 * eval_file.HEADER_INTS) // 4
    write(fz.path("eval_hf", "good.bin"), good)   # passes the eval file checks, to fail at the model folder
    cases = [Case("eval_hf a valid eval file", [tool, no_model, fz.path("eval_hf", "good.bin")], must_fail=True,
                  expect="is not a folder written by dev/export_hf.py")]
    for i in range(n - 1):
        d = fz.case_dir("eval_hf")
        js = os.path.join(d, "scores.json")
        write(js, b'{"piqa": {"acc": 0.5}}\n')
        path, extra, out = os.path.join(d, "task.bin"), ["--json", js], js
        kind = i % 6
        if kind < 2:
            data, what = mutate_bytes(rng, good)
        elif kind < 4:   # one int32 word: a header field, the task name, or a count, length, label or token
            at = rng.choice([2, 3, 4, 5, 6, 7, eval_file.NAME_SLOT, eval_file.NAME_SLOT + 1,
                             eval_file.HEADER_INTS + rng.randrange(words)])
            value = rng.choice(INTERESTING + [0x0A6C6C65, 0x20202020, 0x3A3A3A3A])   # "ell\n", spaces, colons
            data = good[:4 * at] + struct.pack("<i", value) + good[4 * at + 4:]
            what = f"word {at} = {value}"
        elif kind == 4:
            path, what = rng.choice(fz.special_inputs(d))
            data = None
        else:            # --json that is a folder or a FIFO (kept as it is), or a bad flag value
            data, what = good, ""
            if rng.random() < 0.5:
                out = js = os.path.join(d, "scores_fifo.json")
                (os.mkdir if rng.random() < 0.5 else os.mkfifo)(js)
                extra = ["--json", js]
                what = "--json not a regular file"
            else:
                flag, value = rng.choice([("--batch", "0"), ("--max-len", "-1"), ("--dtype", "x"), ("--batch", "x")])
                extra += [flag, value]
                what = f"{flag} {value}"
        if data is not None:
            write(path, data)
        # the model folder has no model: a valid eval file still fails, at the model check
        cases.append(Case(f"eval_hf {what}", [tool, no_model, path] + extra, out, must_fail=True))
    return cases


# ---- scripts/plot_losses.py: run logs (main.jsonl, main.log, run_modes.args) and --markdown

def jsonl_run():
    """the events of a small valid run"""
    lines = [{"event": "run", "family": "GPT-2", "gpu": "cpu", "build_commit": "abc", "precision": "adahop", "seed": 1}]
    for s in range(1, 21):
        lines.append({"event": "step", "step": s, "loss": 5.0 - 0.1 * s, "tok_s": 1000.0, "mfu": 0.1,
                      "inexact_blocks": 3, "strategy_changes": ["layer 0 qkv fwd: a -> b"] if s == 5 else []})
        if s % 5 == 0:
            lines.append({"event": "val", "step": s, "val_loss": 5.0 - 0.09 * s, "val_loss_bf16": 5.0 - 0.091 * s})
    lines.append({"event": "eval", "step": 20, "hellaswag": 0.25, "hellaswag_ll": -3.5})
    return lines


LOG_LINES = ["s:{s} tl:{v} lr:0.001 norm:1.0 tok/s:1000 mem_gib:1", "s:{s} vl:{v} vlb:{v}", "s:{s} hellaswag:{v} hellaswag_ll:{v}",
             "adahop step {s} layer 0 qkv fwd: a -> b"]
LOG_VALUES = ["abc", "nan", "inf", "-inf", "1e400", "-1", "0", "1e-400", "--1", "1..2", "", "0x10", "1_000", "1\x0c2"]


def plot_cases(fz, rng, n):
    """n cases of scripts/plot_losses.py, each with an earlier --markdown file"""
    tool = os.path.join(ROOT, "scripts", "plot_losses.py")
    events = jsonl_run()
    cases = []
    for i in range(n):
        d = fz.case_dir("plot_losses")
        run = os.path.join(d, "adahop_s1")
        os.makedirs(run)
        md = os.path.join(d, "losses.md")
        write(md, b"an earlier table\n")
        args, must_fail = [], False
        kind = i % 7
        if kind < 2:     # main.jsonl with an event of the wrong types
            rows = [dict(e) for e in events]
            data, what = mutate_json_lines(rng, rows)
            write(os.path.join(run, "main.jsonl"), data)
        elif kind == 2:  # the bytes of main.jsonl
            data, what = mutate_bytes(rng, "".join(json.dumps(e) + "\n" for e in events).encode())
            write(os.path.join(run, "main.jsonl"), data)
        elif kind == 3:  # main.log lines with values that are not numbers, or out of range
            lines = [t.format(s=s, v=f"{5 - 0.1 * s:.3f}") for s in range(1, 11) for t in LOG_LINES[:2]]
            for _ in range(rng.randrange(1, 4)):
                template = rng.choice(LOG_LINES)
                lines.insert(rng.randrange(len(lines) + 1),
                             template.format(s=rng.choice(["3", "0", "99999999999999999999"]), v=rng.choice(LOG_VALUES)))
            write(os.path.join(run, "main.log"), "\n".join(lines) + "\n")
            what = "main.log values"
        elif kind == 4:  # a log or the run's folder that is not a regular file or folder
            choice = rng.randrange(3)
            if choice == 0:
                os.mkfifo(os.path.join(run, "main.jsonl"))
                what = "main.jsonl a FIFO"
            elif choice == 1:
                os.symlink("/dev/zero", os.path.join(run, rng.choice(["main.jsonl", "main.log"])))
                what = "a log a symlink to /dev/zero"
            else:
                run, what = rng.choice([(fz.fifo, "a FIFO"), ("/dev/zero", "/dev/zero"), (os.path.join(d, "none"), "missing")])
            must_fail = True
        elif kind == 5:  # run_modes.args beside a valid log
            write(os.path.join(run, "main.jsonl"), "".join(json.dumps(e) + "\n" for e in events))
            write(os.path.join(run, "run_modes.args"), rng.choice([random_bytes(rng), b"-r", b"-r x -p", b"'unclosed",
                                                                   b"-r 99999999999999999999999", b"-p \xff"]))
            what = "run_modes.args"
        else:            # --markdown that is a folder or a FIFO, or a bad flag value
            write(os.path.join(run, "main.jsonl"), "".join(json.dumps(e) + "\n" for e in events))
            if rng.random() < 0.5:
                md = os.path.join(d, "md_out")
                (os.mkdir if rng.random() < 0.5 else os.mkfifo)(md)
                what = "--markdown not a regular file"
            else:
                flag, value = rng.choice([("--window", "-1"), ("--ema", "1"), ("--ema", "nan"), ("--gap-steps", "1,x"),
                                          ("--ymax", "big"), ("--xmin", "x")])
                args += [flag, value]
                what = f"{flag} {value}"
            must_fail = True
        cases.append(Case(f"plot_losses {what}", [tool, run, "--no-plot", "--allow-unpaired", "--markdown", md] + args,
                          md, must_fail))
    return cases


TOOL_NAMES = {"export_hf": "export_hf", "prepare_evals": "prepare_evals", "tokenize_text": "tokenize_text",
              "eval_hf": "eval_hf", "plot_losses": "plot_losses.py"}
TOOLS = {"export_hf": export_cases, "prepare_evals": prepare_cases, "tokenize_text": tokenize_cases,
         "eval_hf": eval_cases, "plot_losses": plot_cases}


def missing_packages(tool):
    """why tool cannot run here, or None"""
    needs = {"export_hf": ["numpy"], "prepare_evals": ["numpy", "tiktoken"], "tokenize_text": ["numpy", "tiktoken"],
             "eval_hf": ["numpy"], "plot_losses": []}[tool]
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        return f"{sys.executable} has no {', '.join(missing)} (pip install -r dev/data/requirements.txt)"
    if tool in ("prepare_evals", "tokenize_text") and not os.path.isfile(RANKS):
        return f"no tokenizer ranks at {RANKS}"
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", type=int, default=60, help="cases per tool (default 60)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds before a run counts as a hang")
    p.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset of " + ",".join(TOOLS))
    a = p.parse_args()
    print(f"fuzz_tools: seed {a.seed}, {a.cases} cases per tool")
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="fuzz_tools_") as work:
        fz = None
        for index, (tool, make_cases) in enumerate(TOOLS.items()):
            if tool not in a.tools.split(","):
                continue
            why = missing_packages(tool)
            if why:
                skip(f"dev/test/fuzz_tools.py {tool}", why)
                continue
            fz = fz or Fuzzer(work, a.timeout)
            cases = make_cases(fz, random.Random(1000 * a.seed + index), a.cases)   # each tool its own stream
            with ThreadPoolExecutor(2) as pool:
                results = list(pool.map(lambda c: fz.run(tool, c), cases))
            fails = [f"{c.what}: {r}" for c, r in zip(cases, results) if r]
            for f in fails[:10]:
                print("FAIL", f)
            refused = sum(c.must_fail for c in cases)
            print(f"{tool}: {len(cases)} cases ({refused} that must be refused), {len(fails)} failures")
            passed += len(cases) - len(fails)
            failed += len(fails)
    print(f"fuzz_tools: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
