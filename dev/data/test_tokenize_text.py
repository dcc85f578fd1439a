"""
Tests of dev/data/tokenize_text.py: shard headers, round-trip decoding of the shards back to the text,
the val splits, sharding, .xz input, worker count independence, the committed tinyshakespeare shards and
the committed token decoding file, all from the repo's data/ (gpt2.tiktoken, the shards, gpt2_tokenizer.bin), and bad
input: one "tokenize_text: error: ..." line and exit status 1 for invalid UTF-8, a corrupt .xz, a corrupt ranks file,
an input or ranks file that is a FIFO, a device or a directory, an --out-dir that is a file or not writable, empty
input; old shards of the prefix refused unless --overwrite, and with --overwrite kept as they were when the new input
turns out bad (no temporary file left either way); a --prefix that names a path (exit status 2); the loader's shard
size limit.
Run: python3 dev/data/test_tokenize_text.py [--ranks PATH]   (default: data/gpt2.tiktoken; skips, exit 0, when tiktoken
or numpy is missing; the reason is also appended to the file named by $TEST_SKIP_LOG, which `make test` summarizes)
"""
import argparse
import contextlib
import filecmp
import glob
import hashlib
import io
import lzma
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test"))
from skip_log import skip  # noqa: E402

try:
    import numpy as np
    import tiktoken  # noqa: F401  (tokenize_text needs it)
except ImportError as e:
    skip("dev/data/test_tokenize_text.py", f"{e} (pip install -r dev/data/requirements.txt)")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizer_bin as mtb  # noqa: E402
import tokenize_text as tt  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"  # data/README.md

DOCS = ["First doc.\nIt has two lines, numbers 12345 and émojis 🙂.",
        "  Second doc:\tindented, with 'quotes' and it's contractions.\n\n\nBlank lines above.",
        "Third." * 50,
        "Last one, no trailing newline"]
TEXT = "".join(d + tt.DOC_SEPARATOR for d in DOCS)
SECTIONS_TEXT = "Para one\nline two\n\nPara two.\n\n\nPara three after two blank lines\n"


RANKS = tt.DEFAULT_RANKS   # set by main from --ranks


def tokenize(args):
    """tokenize_text's main with the ranks file of this test run unless args name one"""
    tt.main(args if "--ranks" in args else args + ["--ranks", RANKS])


def write(path, text):
    with (lzma.open(path, "wt", encoding="utf-8") if path.endswith(".xz") else open(path, "w", encoding="utf-8")) as f:
        f.write(text)


def run(tmp, name, text, *flags):
    """Tokenizes text (written to tmp/name) into a fresh folder; returns {split: token array over all its shards}."""
    src = os.path.join(tmp, name)
    write(src, text)
    out = tempfile.mkdtemp(dir=tmp)
    with contextlib.redirect_stdout(io.StringIO()):
        tokenize([src, "--out-dir", out, "--workers", "1", *flags])
    return {split: read_split(out, split) for split in ("train", "val")}


def read_split(out, split):
    tokens = [tt.read_shard(p)[1] for p in sorted(glob.glob(os.path.join(out, f"*_{split}*.bin")))]
    return np.concatenate(tokens) if tokens else np.zeros(0, dtype=np.uint16)


def documents(enc, tokens):
    """Decodes a token stream into the documents that follow each EOT."""
    assert len(tokens) == 0 or tokens[0] == tt.EOT, "the stream starts with <|endoftext|>"
    starts = list(np.flatnonzero(tokens == tt.EOT)) + [len(tokens)]
    return [enc.decode(tokens[a + 1:b].tolist()) for a, b in zip(starts, starts[1:])]


def test_header_fields(enc, tmp):
    path = os.path.join(tmp, "shard.bin")
    tt.write_shard(path, enc.encode_ordinary("hello world"))
    raw = open(path, "rb").read()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    assert header[0] == 20240520 and header[1] == 1 and header[2] == 2, header[:3]
    assert not header[3:].any(), "the rest of the header is zero"
    assert np.frombuffer(raw[1024:], dtype="<u2").tolist() == [31373, 995]


def test_round_trip(enc, tmp):
    out = run(tmp, "docs.txt", TEXT)
    assert len(out["val"]) == 0
    assert documents(enc, out["train"]) == DOCS
    assert (out["train"] == tt.EOT).sum() == len(DOCS)


def test_xz_and_workers(enc, tmp):
    plain = run(tmp, "docs.txt", TEXT)["train"]
    xz = run(tmp, "docs.txt.xz", TEXT)["train"]
    assert np.array_equal(plain, xz)
    src = os.path.join(tmp, "docs.txt")
    with contextlib.redirect_stdout(io.StringIO()):
        tokenize([src, "--out-dir", os.path.join(tmp, "two_workers"), "--workers", "2"])
    assert np.array_equal(read_split(os.path.join(tmp, "two_workers"), "train"), plain)


def test_sharding(enc, tmp):
    whole = run(tmp, "docs.txt", TEXT)["train"]
    out = os.path.join(tmp, "out_sharded")
    with contextlib.redirect_stdout(io.StringIO()):
        tokenize([os.path.join(tmp, "docs.txt"), "--out-dir", out, "--prefix", "x", "--shard-tokens", "10"])
    names = sorted(os.listdir(out))
    assert names[0] == "x_train_000000.bin" and len(names) == (len(whole) + 9) // 10, names
    sizes = [tt.read_shard(os.path.join(out, n))[0][2] for n in names]
    assert all(s == 10 for s in sizes[:-1]) and 0 < sizes[-1] <= 10, sizes
    assert np.array_equal(read_split(out, "train"), whole)


def test_val_tokens(enc, tmp):
    whole = run(tmp, "docs.txt", TEXT)["train"]
    out = run(tmp, "docs.txt", TEXT, "--val-tokens", "25", "--shard-tokens", "7")
    assert len(out["val"]) == 25
    assert np.array_equal(np.concatenate([out["val"], out["train"]]), whole)


def test_val_docs(enc, tmp):
    out = run(tmp, "docs.txt", TEXT, "--val-docs", "2")
    assert documents(enc, out["val"]) == DOCS[:2]
    assert documents(enc, out["train"]) == DOCS[2:]


def test_val_input(enc, tmp):
    val_path = os.path.join(tmp, "held_out.txt")
    write(val_path, "Held out text." + tt.DOC_SEPARATOR)
    out = run(tmp, "docs.txt", TEXT, "--val-input", val_path)
    assert documents(enc, out["val"]) == ["Held out text."]
    assert documents(enc, out["train"]) == DOCS


def test_sections(enc, tmp):
    out = run(tmp, "sections.txt", SECTIONS_TEXT, "--sections")["train"]
    assert (out == tt.EOT).sum() == len(SECTIONS_TEXT.split("\n\n"))
    assert enc.decode(out[out != tt.EOT].tolist()) == SECTIONS_TEXT
    assert documents(enc, out)[0] == "Para one\nline two\n\n"


def test_single_file(enc, tmp):
    out, src = os.path.join(tmp, "out_single"), os.path.join(tmp, "single.txt")
    write(src, SECTIONS_TEXT)
    args = [src, "--out-dir", out, "--tinyshakespeare", "--val-tokens", "5"]
    with contextlib.redirect_stdout(io.StringIO()):
        tokenize(args)
    assert sorted(os.listdir(out)) == ["tinyshakespeare_train.bin", "tinyshakespeare_val.bin"]
    assert tt.read_shard(os.path.join(out, "tinyshakespeare_val.bin"))[0][2] == 5
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            tokenize(args + ["--shard-tokens", "4", "--overwrite"])
        raise AssertionError("a split larger than one file must fail with --single-file")
    except SystemExit as e:
        assert "does not fit one file" in str(e.code), e.code


def fails_with(args, expect):
    """runs tokenize_text's main(args); True when it exits non-zero with one line 'tokenize_text: error: ...'
    containing expect"""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            tokenize(args)
    except SystemExit as e:
        message = str(e.code)
        ok = e.code not in (0, None) and message.startswith("tokenize_text: error: ") and "\n" not in message and expect in message
        if not ok:
            print(f"  exit {e.code!r}, expected an error with {expect!r}")
        return ok
    print(f"  no error, expected one with {expect!r}")
    return False


def test_bad_text(enc, tmp):
    bad_utf8 = os.path.join(tmp, "latin1.txt")
    with open(bad_utf8, "wb") as f:
        f.write("caf\u00e9 ok\n".encode("utf-8") + b"caf\xe9\n")
    out = os.path.join(tmp, "out_bad_text")
    assert fails_with([bad_utf8, "--out-dir", out, "--workers", "1"], "is not UTF-8 text (byte 12"), "invalid UTF-8"
    corrupt_xz = os.path.join(tmp, "corrupt.txt.xz")
    write(corrupt_xz, TEXT * 20)
    data = bytearray(open(corrupt_xz, "rb").read())
    data[len(data) // 2] ^= 0xFF
    with open(corrupt_xz, "wb") as f:
        f.write(data)
    assert fails_with([corrupt_xz, "--out-dir", out, "--workers", "1"], "is not a valid .xz file"), "corrupt .xz"
    truncated_xz = os.path.join(tmp, "truncated.txt.xz")
    with open(truncated_xz, "wb") as f:
        f.write(data[:len(data) // 3])
    assert fails_with([truncated_xz, "--out-dir", out, "--workers", "1"], "is not a valid .xz file"), "truncated .xz"
    empty = os.path.join(tmp, "empty.txt")
    write(empty, "")
    assert fails_with([empty, "--out-dir", out, "--workers", "1"], "the inputs are empty"), "empty input"
    assert not os.listdir(out) if os.path.isdir(out) else True, f"a failed run leaves no shards: {os.listdir(out)}"
    small = os.path.join(tmp, "small.txt")
    write(small, "a b c d e f g")
    assert fails_with([small, "--out-dir", out, "--workers", "1", "--val-tokens", "1000"], "all went to the val split"), \
        "everything in val"


def test_existing_shards(enc, tmp):
    out = os.path.join(tmp, "out_existing")
    src = os.path.join(tmp, "docs.txt")
    write(src, TEXT)
    with contextlib.redirect_stdout(io.StringIO()):
        tokenize([src, "--out-dir", out, "--prefix", "p", "--shard-tokens", "10", "--workers", "1"])
    first = sorted(os.listdir(out))
    assert len(first) > 2, first
    assert fails_with([src, "--out-dir", out, "--prefix", "p", "--workers", "1"], "already holds"), "old shards refused"
    assert sorted(os.listdir(out)) == first, "a refused run leaves the old shards alone"
    with contextlib.redirect_stdout(io.StringIO()):
        tokenize([src, "--out-dir", out, "--prefix", "p", "--workers", "1", "--overwrite"])
    assert sorted(os.listdir(out)) == ["p_train_000000.bin"], f"--overwrite replaces every old shard: {os.listdir(out)}"
    with contextlib.redirect_stdout(io.StringIO()):
        tokenize([src, "--out-dir", out, "--prefix", "q", "--workers", "1"])
    assert "q_train_000000.bin" in os.listdir(out), "another prefix in the same folder is fine"


def folder_bytes(folder, leave_out=()):
    """{name: bytes} of the files in folder, but those named in leave_out"""
    return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder)) if n not in leave_out}


def test_overwrite_keeps_old_shards_on_bad_input(enc, tmp):
    """--overwrite replaces the old shards only after all the input was read: a bad second input, a bad val input or
    a split too large for --single-file leaves the old shards as they were, and no temporary file behind"""
    out = os.path.join(tmp, "out_overwrite")
    src, bad = os.path.join(tmp, "docs.txt"), os.path.join(tmp, "bad_second.txt")
    write(src, TEXT)
    with open(bad, "wb") as f:
        f.write(b"fine text, then \xff\n")
    with contextlib.redirect_stdout(io.StringIO()):
        tokenize([src, "--out-dir", out, "--prefix", "p", "--shard-tokens", "10", "--val-tokens", "5", "--workers", "1"])
    before = folder_bytes(out)
    common = ["--out-dir", out, "--prefix", "p", "--workers", "1", "--overwrite"]
    assert fails_with([src, bad] + common, "is not UTF-8 text"), "a bad second input"
    assert folder_bytes(out) == before, f"the bad input kept the old shards: {sorted(os.listdir(out))}"
    assert fails_with([src, "--val-input", bad] + common, "is not UTF-8 text"), "a bad val input"
    assert folder_bytes(out) == before, f"the bad val input kept the old shards: {sorted(os.listdir(out))}"
    assert fails_with([src, "--single-file", "--shard-tokens", "4"] + common, "does not fit one file"), "too large"
    assert folder_bytes(out) == before, f"a split too large kept the old shards: {sorted(os.listdir(out))}"
    os.rename(os.path.join(out, "p_train_000001.bin"), os.path.join(out, "keep"))
    os.mkdir(os.path.join(out, "p_train_000001.bin"))   # a folder where a new shard goes
    assert fails_with([src, "--shard-tokens", "10"] + common, "exists and is a directory"), "a shard name taken"
    assert sorted(os.listdir(out)) == sorted(before.keys() | {"keep"}), f"no temporary file: {sorted(os.listdir(out))}"
    kept = {n: open(os.path.join(out, n), "rb").read() for n in before if n != "p_train_000001.bin"}
    assert all(kept[n] == before[n] for n in kept), "the old shards are kept"
    os.rmdir(os.path.join(out, "p_train_000001.bin"))
    os.rename(os.path.join(out, "keep"), os.path.join(out, "p_train_000001.bin"))
    os.mkfifo(os.path.join(out, "p_val_000007.bin"))   # named like an old shard that the run would delete
    assert fails_with([src, "--shard-tokens", "10"] + common, "is not a regular file"), "a FIFO named like a shard"
    assert folder_bytes(out, ["p_val_000007.bin"]) == before, "a FIFO named like a shard: nothing changed"


def test_non_regular_inputs(enc, tmp):
    """a FIFO, a device file or a directory as an input or the ranks: refused before it is opened"""
    src = os.path.join(tmp, "plain_ok.txt")
    write(src, TEXT)
    fifo = os.path.join(tmp, "input.fifo")
    os.mkfifo(fifo)
    out = os.path.join(tmp, "out_non_regular")
    for path in (fifo, "/dev/zero", tmp):
        what = "is a directory" if path == tmp else "is not a regular file"
        assert fails_with([path, "--out-dir", out, "--workers", "1"], what), f"input {path}"
        assert fails_with([src, "--val-input", path, "--out-dir", out, "--workers", "1"], what), f"--val-input {path}"
        assert fails_with([src, "--ranks", path, "--out-dir", out, "--workers", "1"], what), f"--ranks {path}"
    assert not os.path.exists(out) or not os.listdir(out), "nothing written"


def test_prefix_outside_out_dir(ranks, tmp):
    """a --prefix with '/' or '..', or a hidden one: a usage error (exit 2, one line), nothing written"""
    src = os.path.join(tmp, "plain.txt")
    write(src, TEXT)
    out = os.path.join(tmp, "out_prefix", "inner")
    for prefix in ("../x", "a/b", "..", ".hidden", "x..y", "/abs"):
        err = io.StringIO()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                tokenize([src, "--ranks", ranks, "--out-dir", out, "--prefix", prefix, "--workers", "1"])
            code = 0
        except SystemExit as e:
            code = e.code
        lines = err.getvalue().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("tokenize_text: error: --prefix"), \
            f"--prefix {prefix!r}: exit {code!r}, {err.getvalue()!r}"
    assert not os.path.exists(os.path.dirname(out)), "nothing written"


# ---- bad input that needs no tokenizer (runs without a ranks file)

def test_out_dir_problems(ranks, tmp):
    src = os.path.join(tmp, "plain.txt")
    write(src, TEXT)
    ranks = os.path.join(tmp, "unused.tiktoken")   # the folder is checked before the ranks are read
    write(ranks, "x")
    a_file = os.path.join(tmp, "a_file")
    write(a_file, "x")
    assert fails_with([src, "--ranks", ranks, "--out-dir", a_file], "is not a directory"), "--out-dir a file"
    assert fails_with([src, "--ranks", ranks, "--out-dir", os.path.join(a_file, "sub")], "--out-dir"), "--out-dir under a file"
    assert fails_with([src, "--ranks", ranks, "--out-dir", "/proc/no_such_dir"], "--out-dir '/proc/no_such_dir'"), \
        "--out-dir that cannot be created"
    out = os.path.join(tmp, "out_p")
    os.makedirs(out)
    write(os.path.join(out, "p_val_000003.bin"), "old")
    assert fails_with([src, "--ranks", ranks, "--out-dir", out, "--prefix", "p"], "p_val_000003.bin"), "an old val shard"


def test_corrupt_ranks(ranks, tmp):
    src = os.path.join(tmp, "plain.txt")
    write(src, TEXT)
    bad = os.path.join(tmp, "bad1.tiktoken")   # a new name each time: tiktoken caches what it read by path
    write(bad, "not base64!! 1\nQQ== x\n")
    out = os.path.join(tmp, "out_ranks")
    assert fails_with([src, "--ranks", bad, "--out-dir", out], f"ranks file '{bad}' is not a tiktoken ranks file"), \
        "garbage ranks"
    bad = os.path.join(tmp, "bad2.tiktoken")
    write(bad, "IQ== 0\nIg== 1\n")
    assert fails_with([src, "--ranks", bad, "--out-dir", out], "holds 2 ranks, GPT-2 has 50256"), "too few ranks"
    bad = os.path.join(tmp, "bad3.tiktoken")
    with open(bad, "wb") as f:
        f.write(b"\xff\xfe\x00 1\n")
    assert fails_with([src, "--ranks", bad, "--out-dir", out], "holds 1 ranks"), "binary ranks"


def test_shard_limit(ranks, tmp):
    src = os.path.join(tmp, "plain.txt")
    write(src, TEXT)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            tokenize([src, "--ranks", ranks, "--shard-tokens", str(2 ** 31)])
        raise AssertionError("--shard-tokens 2^31 must be refused")
    except SystemExit as e:
        assert e.code == 2, e.code   # argparse's usage error
    assert tt.MAX_SHARD_TOKENS == 2 ** 31 - 1


def test_committed_tinyshakespeare(enc, tmp):
    """data/'s shards decode to tinyshakespeare (the file's sha256), and tokenizing that text again with the
    --tinyshakespeare preset writes the same two files byte for byte"""
    committed = [os.path.join(REPO, "data", f"tinyshakespeare_{s}.bin") for s in ("val", "train")]
    val, train = (tt.read_shard(p)[1] for p in committed)
    assert len(val) == 32768 and len(train) == 305260, (len(val), len(train))
    tokens = np.concatenate([val, train])
    raw = enc.decode_bytes(tokens[tokens != tt.EOT].tolist())
    assert hashlib.sha256(raw).hexdigest() == TINYSHAKESPEARE_SHA256, "decoded text is not tinyshakespeare"
    text = raw.decode("utf-8")
    assert len(enc.encode_ordinary(text)) == 338025
    src, out = os.path.join(tmp, "tinyshakespeare.txt"), os.path.join(tmp, "out_tinyshakespeare")
    write(src, text)
    with contextlib.redirect_stdout(io.StringIO()):
        tt.main([src, "--tinyshakespeare", "--out-dir", out, "--workers", "1"])
    for path in committed:
        assert filecmp.cmp(path, os.path.join(out, os.path.basename(path)), shallow=False), path


def test_committed_tokenizer_bin(enc, tmp):
    """make_tokenizer_bin.py turns data/gpt2.tiktoken into data/gpt2_tokenizer.bin byte for byte, and the
    table agrees with the BPE's own token bytes"""
    out = os.path.join(tmp, "gpt2_tokenizer.bin")
    pieces = mtb.read_ranks(tt.DEFAULT_RANKS)
    mtb.write_tokenizer_bin(out, pieces + [mtb.EOT_BYTES])
    assert filecmp.cmp(out, os.path.join(REPO, "data", "gpt2_tokenizer.bin"), shallow=False)
    assert all(enc.decode_single_token_bytes(i) == piece for i, piece in enumerate(pieces))


NO_TOKENIZER_TESTS = (test_out_dir_problems, test_corrupt_ranks, test_shard_limit, test_prefix_outside_out_dir)   # take a ranks path, not an encoder


def main():
    p = argparse.ArgumentParser(description="tests of dev/data/tokenize_text.py")
    p.add_argument("--ranks", default=tt.DEFAULT_RANKS, help="the GPT-2 ranks file (default: the script's, %(default)s)")
    global RANKS
    ranks = RANKS = p.parse_args().ranks
    have_ranks = os.path.isfile(ranks)
    enc = tt.load_encoding(ranks) if have_ranks else None
    tests = [v for k, v in globals().items() if k.startswith("test_")]
    if not have_ranks:
        skipped = [t.__name__ for t in tests if t not in NO_TOKENIZER_TESTS]
        print(f"skipping {len(skipped)} tests of dev/data/test_tokenize_text.py that need the tokenizer ranks (none at {ranks})")
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="test_tokenize_text_") as tmp:
        for test in tests:
            if test not in NO_TOKENIZER_TESTS and not have_ranks:
                continue
            try:
                test(ranks if test in NO_TOKENIZER_TESTS else enc, tmp)
                passed += 1
            except AssertionError as e:
                failed += 1
                print(f"FAIL {test.__name__}: {e!r}")
    print(f"test_tokenize_text: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
