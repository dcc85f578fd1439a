"""Fixed-seed fuzzer of the CPU trainer's inputs: token shards, checkpoints, tokenizer files and flags.

Runs the trainer built with AddressSanitizer and UndefinedBehaviorSanitizer (make build/train_gpt2_asan) on
mutated copies of small valid inputs (--cases per kind, seed --seed), two at a time. Every run must end either with
exit 0 or with exit 1 and an "error: ..." line; a sanitizer report, a signal, another exit status or no clear
error counts as a crash, a run past --timeout seconds as a hang. Oracles on top:
  - shards: the expected verdict is computed here (header, size, every token < vocab, enough tokens for a batch);
    a valid shard must train, an invalid one must be refused;
  - checkpoints: a file with changed bits, a changed length or a NaN weight (CRC resealed) must be refused, both
    as -e and as the newest state of a -y 1 resume, which must fall back to the older valid state.
Prints one line per kind and "N passed, M failed"; exits non-zero on any failure.

usage: fuzz_trainer.py --trainer build/train_gpt2_asan [--cases 200] [--seed 1] [--timeout 60] [--kinds shards,...]
       fuzz_trainer.py --write-data DIR    (only the small valid inputs: train.bin, val.bin, tok.bin)
"""
import argparse
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checkpoint_crc  # noqa: E402  (dev/checkpoint_crc.py: the checkpoint format's CRC slots)

SHARD_MAGIC, TOKENIZER_MAGIC, CKPT_MAGIC = 20240520, 20240328, checkpoint_crc.MAGIC
HEADER_BYTES = 4 * checkpoint_crc.HEADER_INTS
CKPT_CRC_SLOT = checkpoint_crc.CRC_SLOT
VOCAB = 100                      # the fixture model's vocabulary
B, T = 2, 16
FIXTURE = "dev/test/fixtures/tiny_model.bin"
INTERESTING = [0, 1, -1, 2, 7, 16, 17, 100, 127, 128, 255, 1024, 65535, 65536, 2 ** 20, 2 ** 30, 2 ** 31 - 1, -2 ** 31]


def shard_bytes(tokens, magic=SHARD_MAGIC, version=1, count=None):
    header = struct.pack("<256i", magic, version, len(tokens) if count is None else count, *([0] * 253))
    return header + struct.pack(f"<{len(tokens)}H", *tokens)


def tokenizer_bytes(pieces, eot):
    header = struct.pack("<256i", TOKENIZER_MAGIC, 2, len(pieces), eot, *([0] * 252))
    return header + b"".join(bytes([len(p)]) + p for p in pieces)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def write_data(d):
    """the small valid inputs: train/val shards of tokens < VOCAB and a tokenizer of VOCAB pieces"""
    os.makedirs(d, exist_ok=True)
    rng = random.Random(1)
    write(os.path.join(d, "train.bin"), shard_bytes([rng.randrange(VOCAB) for _ in range(20000)]))
    write(os.path.join(d, "val.bin"), shard_bytes([rng.randrange(VOCAB) for _ in range(3000)]))
    write(os.path.join(d, "tok.bin"), tokenizer_bytes([f"t{i} ".encode() for i in range(VOCAB)], VOCAB - 1))


class Fuzzer:
    def __init__(self, trainer, work, timeout):
        self.trainer, self.work, self.timeout = trainer, work, timeout
        self.data = os.path.join(work, "data")
        write_data(self.data)
        self.train, self.val, self.tok = (os.path.join(self.data, n) for n in ("train.bin", "val.bin", "tok.bin"))
        self.env = dict(os.environ, OMP_NUM_THREADS="1",
                        ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:exitcode=86",
                        UBSAN_OPTIONS="halt_on_error=1:exitcode=87:print_stacktrace=1")

    def base(self):
        return [self.trainer, "-e", FIXTURE, "-i", self.train, "-j", self.val, "-z", self.tok, "-b", str(B), "-t", str(T),
                "-x", "1", "-v", "0", "-g", "0"]

    def run(self, args):
        """-> (verdict, returncode, output): verdict 'ok' (exit 0), 'refused' (exit 1 with an error line), or
        'crash' / 'hang' / 'unclear' (exit 1 without an error line)"""
        try:
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return "hang", None, ""
        out = p.stdout.decode(errors="replace")
        if "Sanitizer" in out or "runtime error:" in out or p.returncode not in (0, 1):
            return "crash", p.returncode, out
        if p.returncode == 1:
            return ("refused" if any(l.startswith("error: ") for l in out.splitlines()) else "unclear"), 1, out
        return "ok", 0, out

    def make_state(self):
        """a training state with every section (params, m and v, AdaHOP) and an older valid one: 2 and 4 steps"""
        d = os.path.join(self.work, "states")
        shutil.rmtree(d, ignore_errors=True)
        verdict, _, out = self.run(self.base()[:-6] + ["-x", "4", "-n", "2", "-v", "0", "-g", "0", "-p", "adahop",
                                                       "-w", "2", "-o", d])
        if verdict != "ok":
            sys.exit(f"fuzz_trainer: cannot make the base training state:\n{out}")
        return os.path.join(d, "state_00000002.bin"), os.path.join(d, "state_00000004.bin")


# ---- shards: mutations with a verdict computed here

def shard_verdict(data):
    """True when the loader must accept the shard bytes for batches of B x T"""
    if len(data) < HEADER_BYTES:
        return False
    magic, version, count = struct.unpack("<3i", data[:12])
    if magic != SHARD_MAGIC or version != 1 or count <= 0 or len(data) != HEADER_BYTES + 2 * count:
        return False
    tokens = struct.unpack(f"<{count}H", data[HEADER_BYTES:])
    return count >= B * T + 1 and max(tokens) < VOCAB


def mutate_shard(rng, good):
    data = bytearray(good)
    kind = rng.randrange(6)
    if kind == 0:    # a header field
        slot = rng.choice([0, 1, 2, 2, 3])
        data[4 * slot:4 * slot + 4] = struct.pack("<i", rng.choice(INTERESTING + [SHARD_MAGIC, len(good) // 2 - 512]))
    elif kind == 1:  # truncated
        del data[rng.randrange(len(data)):]
    elif kind == 2:  # extra bytes
        data += bytes(rng.randrange(256) for _ in range(rng.choice([1, 2, 3, 64])))
    elif kind == 3:  # tokens, some out of the vocabulary, anywhere (the last ones too)
        for _ in range(rng.randrange(1, 4)):
            at = HEADER_BYTES + 2 * rng.choice([rng.randrange((len(good) - HEADER_BYTES) // 2), (len(good) - HEADER_BYTES) // 2 - 1])
            data[at:at + 2] = struct.pack("<H", rng.choice([VOCAB - 1, VOCAB, VOCAB + 1, 65535, rng.randrange(65536)]))
    elif kind == 4:  # a short shard: too few tokens for one batch, or just enough
        n = rng.choice([0, 1, B * T, B * T + 1, B * T + 2])
        data = bytearray(shard_bytes([rng.randrange(VOCAB) for _ in range(n)]))
    else:            # random bytes
        data = bytearray(rng.randrange(256) for _ in range(rng.choice([0, 5, 1024, 1100])))
    return bytes(data)


def mutated_files(fz, rng, cases, name, good_path, mutate):
    """cases files in a fresh folder `name`: mutate(rng, good bytes) of the file good_path, every 50th a directory
    instead; -> [(path, bytes or None for a directory)]"""
    good = open(good_path, "rb").read()
    d = os.path.join(fz.work, name)
    os.makedirs(d, exist_ok=True)
    files = []
    for i in range(cases):
        path = os.path.join(d, f"{name}{i}.bin")
        data = None if i % 50 == 49 else mutate(rng, good)
        if data is None:
            os.makedirs(path, exist_ok=True)
        else:
            write(path, data)
        files.append((path, data))
    return files


def fuzz_shards(fz, rng, cases):
    jobs = []
    for path, data in mutated_files(fz, rng, cases, "shard", fz.train, mutate_shard):
        args = fz.base()
        args[args.index("-i") + 1] = path
        jobs.append((args, data is not None and shard_verdict(data)))
    fails = []
    with ThreadPoolExecutor(2) as pool:
        for (args, valid), (verdict, rc, out) in zip(jobs, pool.map(lambda j: fz.run(j[0]), jobs)):
            want = "ok" if valid else "refused"
            if verdict != want:
                fails.append(f"shard {args[args.index('-i') + 1]}: {verdict} (status {rc}), expected {want}: {out[-300:]}")
    return fails


# ---- checkpoints: every corruption must be refused

def reseal(data, slot, value):
    """data with header slot set to the 4 bytes `value` and the header CRC recomputed"""
    h = bytearray(data[:HEADER_BYTES])
    h[4 * slot:4 * slot + 4] = value
    h[4 * CKPT_CRC_SLOT:4 * CKPT_CRC_SLOT + 4] = struct.pack("<I", checkpoint_crc.header_crc(h))
    return bytes(h) + data[HEADER_BYTES:]


def mutate_checkpoint(rng, good):
    """-> (bytes, corrupt): corrupt = must be refused; resealed header edits may make a consistent file"""
    data = bytearray(good)
    kind = rng.randrange(6)
    if kind <= 1:    # 1 to 8 flipped bits anywhere (header, params, m, v, AdaHOP state)
        for _ in range(rng.randrange(1, 9)):
            at = rng.randrange(len(data)) if kind == 0 else rng.randrange(HEADER_BYTES)
            data[at] ^= 1 << rng.randrange(8)
        return bytes(data), bytes(data) != good
    if kind == 2:    # truncated or extended
        if rng.random() < 0.5:
            return bytes(data[:rng.randrange(len(data))]), True
        return bytes(data) + bytes(rng.randrange(1, 9)), True
    if kind == 3:    # a NaN or Inf weight or moment with every CRC recomputed
        n_floats = struct.unpack("<q", good[48:56])[0]
        section = rng.randrange(2)
        i = HEADER_BYTES + 4 * (rng.randrange(n_floats) if section == 0 else n_floats + rng.randrange(2 * n_floats))
        data[i:i + 4] = struct.pack("<f", rng.choice([float("nan"), float("inf"), float("-inf")]))
        start, length = (HEADER_BYTES, 4 * n_floats) if section == 0 else (HEADER_BYTES + 4 * n_floats, 8 * n_floats)
        crc = zlib.crc32(bytes(data[start:start + length]))
        return reseal(bytes(data), CKPT_CRC_SLOT + 1 + section, struct.pack("<I", crc)), True
    if kind == 4:    # a shape or size field out of bounds, header CRC recomputed: must still be refused
        slot = rng.choice([4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 18, 19, 22, 23])
        value = rng.choice([0, -1, 2 ** 30, 2 ** 31 - 1, -2 ** 31, 65537, 1 << 24 | 1])
        edited = reseal(bytes(data), slot, struct.pack("<i", value))
        return edited, (edited != good) or None   # a slot that already held the value leaves a valid file
    slot = rng.randrange(CKPT_CRC_SLOT + 1, 256)   # any other slot, resealed: consistent or refused, never a crash
    return reseal(bytes(data), slot, struct.pack("<i", rng.choice(INTERESTING))), None


def fuzz_checkpoints(fz, rng, cases):
    older, good_path = fz.make_state()
    good = open(good_path, "rb").read()
    d = os.path.join(fz.work, "ckpts")
    os.makedirs(d, exist_ok=True)
    jobs = []
    for i in range(cases):
        data, corrupt = mutate_checkpoint(rng, good)
        if i % 2 == 0:   # as -e
            path = os.path.join(d, f"c{i}.bin")
            write(path, data)
            args = fz.base()
            args[args.index("-e") + 1] = path
            args += ["-p", "adahop", "-w", "2"]
            jobs.append((args, corrupt, None))
        else:            # as the newest state of a resume, beside a valid older one
            run_dir = os.path.join(d, f"r{i}")
            os.makedirs(run_dir, exist_ok=True)
            shutil.copy(older, run_dir)
            write(os.path.join(run_dir, "state_00000004.bin"), data)
            args = fz.base() + ["-p", "adahop", "-w", "2", "-o", run_dir, "-y", "1"]
            args[args.index("-x") + 1] = "5"
            jobs.append((args, corrupt, run_dir))
    fails, corrupt_cases = [], 0
    with ThreadPoolExecutor(2) as pool:
        for (args, corrupt, run_dir), (verdict, rc, out) in zip(jobs, pool.map(lambda j: fz.run(j[0]), jobs)):
            where = run_dir or args[args.index("-e") + 1]
            if verdict in ("crash", "hang", "unclear"):
                fails.append(f"checkpoint {where}: {verdict} (status {rc}): {out[-300:]}")
            elif run_dir and corrupt and verdict != "ok":
                fails.append(f"checkpoint {where}: the resume failed instead of falling back: {out[-300:]}")
            elif run_dir and corrupt and "state_00000002.bin at step 2" not in out:
                fails.append(f"checkpoint {where}: a corrupt newest state was resumed from: {out[-300:]}")
            elif not run_dir and corrupt and verdict == "ok":
                fails.append(f"checkpoint {where}: a corrupt file was accepted")
            corrupt_cases += corrupt is True
    return fails, corrupt_cases


# ---- tokenizer files and flags: no crash, no hang, a clear error when refused

def run_all(fz, jobs, flag):
    """runs the argument lists, two at a time; the crashes, hangs and unclear errors, each named by the value of
    flag (None: the whole command line)"""
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(fz.run, jobs))
    return [f"{a[a.index(flag) + 1] if flag else ' '.join(a[1:])}: {v} (status {rc}): {out[-300:]}"
            for a, (v, rc, out) in zip(jobs, results) if v in ("crash", "hang", "unclear")]


def mutate_tokenizer(rng, good):
    data = bytearray(good)
    kind = rng.randrange(5)
    if kind == 0:
        slot = rng.choice([0, 1, 2, 2, 3, 3])
        data[4 * slot:4 * slot + 4] = struct.pack("<i", rng.choice(INTERESTING + [VOCAB - 1, VOCAB + 1]))
    elif kind == 1:
        del data[rng.randrange(len(data)):]
    elif kind == 2:   # piece lengths
        for _ in range(rng.randrange(1, 4)):
            data[HEADER_BYTES + rng.randrange(len(data) - HEADER_BYTES)] = rng.randrange(256)
    elif kind == 3:   # control bytes and invalid UTF-8 in the pieces
        data = bytearray(tokenizer_bytes([bytes(rng.randrange(256) for _ in range(rng.randrange(4))) for _ in range(VOCAB)],
                                         rng.randrange(VOCAB)))
    else:             # fewer or more tokens than the model
        n = rng.choice([1, 2, VOCAB - 1, VOCAB + 1, 300])
        data = bytearray(tokenizer_bytes([f"p{i}".encode() for i in range(n)], n - 1))
    return bytes(data)


def fuzz_tokenizers(fz, rng, cases):
    jobs = []
    for path, _ in mutated_files(fz, rng, cases, "tokenizer", fz.tok, mutate_tokenizer):
        args = fz.base()
        args[args.index("-z") + 1] = path
        args[args.index("-g") + 1] = "8"
        jobs.append(args)
    return run_all(fz, jobs, "-z")


def flag_values(fz, d):
    a_file = os.path.join(d, "a_file")
    write(a_file, b"x")
    return {
        "-b": ["1", "2", "4", "0", "-1", "65536", "x", "2.5"], "-t": ["1", "8", "16", "32", "33", "0", "65536", "1e2"],
        "-x": ["0", "1", "2", "-1", "x", ""], "-l": ["0.1", "nan", "inf", "-1", "1e40", "10"],
        "-c": ["0", "0.1", "nan", "11"], "-k": ["0", "1", "1e30", "inf", "-3"], "-r": ["0", "1", "-1", "9223372036854775807", "99999999999999999999"],
        "-v": ["0", "1", "2", "-1"], "-m": ["1", "2", "0", "-1"], "-g": ["0", "1", "2", "16", "65536", "65537"],
        "-p": ["bf16", "mxfp4", "hadamard", "adahop", "fp8", ""], "-w": ["1", "2", "0"], "-C": ["plain", "iht", "x"],
        "-R": ["0", "1", "2", "-1"], "-W": ["1", "2", "5", "0"], "-K": ["1", "8", "64", "0", "2000000"],
        "-e": [FIXTURE, "L1C32H1", "L1C32H2", "L2C1073741824H1", "L0C0H0", "L99999C64H4", "L1C64H0", "d0", "d7", "junk",
               d, a_file, os.path.join(d, "missing.bin")],
        "-i": [fz.train, fz.val, os.path.join(d, "none_*.bin"), d], "-j": [fz.val, d, a_file],
        "-z": [fz.tok, a_file, d, os.path.join(d, "missing.bin")],
        "-o": [os.path.join(d, "out"), a_file, "/proc/no/such/dir", "/dev/null/x", os.path.join(d, "out/deeper/run")],
        "-n": ["0", "1", "-1"], "-N": ["0", "1", "2", "-1"], "-y": ["0", "1", "2"],
        "-L": ["0", "0.01", "1.5", "-1", "nan", "1e7"], "-Z": ["0", "0.01", "2", "inf"],
        "-Q": ["1"], "--bogus": ["1"], "x": ["y"],
    }


def fuzz_flags(fz, rng, cases):
    d = os.path.join(fz.work, "flags")
    os.makedirs(d, exist_ok=True)
    values = flag_values(fz, d)
    flags = sorted(values)
    jobs = []
    for i in range(cases):
        args = fz.base()
        for _ in range(rng.randrange(1, 5)):
            f = rng.choice(flags)
            args += [f, rng.choice(values[f])]
        if rng.random() < 0.1:
            args.append(rng.choice(flags))   # a flag without its value
        jobs.append(args)
    return run_all(fz, jobs, None)


KINDS = {"shards": fuzz_shards, "checkpoints": fuzz_checkpoints, "tokenizers": fuzz_tokenizers, "flags": fuzz_flags}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trainer", help="the CPU trainer built with -fsanitize=address,undefined")
    p.add_argument("--cases", type=int, default=200, help="cases per kind (default 200)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before a run counts as a hang")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of " + ",".join(KINDS))
    p.add_argument("--write-data", metavar="DIR", help="only write the small valid inputs into DIR")
    a = p.parse_args()
    if a.write_data:
        write_data(a.write_data)
        return 0
    if not a.trainer or not os.access(a.trainer, os.X_OK):
        sys.exit(f"error: --trainer '{a.trainer}' is not an executable")
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="fuzz_trainer_") as work:
        fz = Fuzzer(os.path.abspath(a.trainer), work, a.timeout)
        for index, (kind, fn) in enumerate(KINDS.items()):
            if kind not in a.kinds.split(","):
                continue
            result = fn(fz, random.Random(1000 * a.seed + index), a.cases)   # each kind its own stream
            fails, extra = (result, "") if kind != "checkpoints" else (result[0], f", {result[1]} of them corrupt (must be refused)")
            for f in fails[:10]:
                print("FAIL", f)
            print(f"{kind}: {a.cases} cases, {len(fails)} failures (crash, hang, unclear error or wrong verdict){extra}")
            passed += a.cases - len(fails)
            failed += len(fails)
    print(f"fuzz_trainer: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
