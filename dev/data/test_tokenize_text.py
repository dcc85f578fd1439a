"""
Tests of dev/data/tokenize_text.py: shard headers, round-trip decoding of the shards back to the text,
the val splits, sharding, .xz input, worker count independence, and the committed tinyshakespeare shards.
Run: python3 dev/data/test_tokenize_text.py   (skips, exit 0, when tiktoken or numpy is missing)
"""
import contextlib
import glob
import io
import lzma
import os
import sys
import tempfile

try:
    import numpy as np
    import tiktoken  # noqa: F401  (tokenize_text needs it)
except ImportError as e:
    print(f"skipping dev/data/test_tokenize_text.py: {e} (pip install -r dev/data/requirements.txt)")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenize_text as tt  # noqa: E402

DOCS = ["First doc.\nIt has two lines, numbers 12345 and émojis 🙂.",
        "  Second doc:\tindented, with 'quotes' and it's contractions.\n\n\nBlank lines above.",
        "Third." * 50,
        "Last one, no trailing newline"]
TEXT = "".join(d + tt.DOC_SEPARATOR for d in DOCS)
SECTIONS_TEXT = "Para one\nline two\n\nPara two.\n\n\nPara three after two blank lines\n"


def write(path, text):
    with (lzma.open(path, "wt", encoding="utf-8") if path.endswith(".xz") else open(path, "w", encoding="utf-8")) as f:
        f.write(text)


def run(tmp, name, text, *flags):
    """Tokenizes text (written to tmp/name) into a fresh folder; returns {split: token array over all its shards}."""
    src = os.path.join(tmp, name)
    write(src, text)
    out = tempfile.mkdtemp(dir=tmp)
    with contextlib.redirect_stdout(io.StringIO()):
        tt.main([src, "--out-dir", out, "--workers", "1", *flags])
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
        tt.main([src, "--out-dir", os.path.join(tmp, "two_workers"), "--workers", "2"])
    assert np.array_equal(read_split(os.path.join(tmp, "two_workers"), "train"), plain)


def test_sharding(enc, tmp):
    whole = run(tmp, "docs.txt", TEXT)["train"]
    out = os.path.join(tmp, "out_sharded")
    with contextlib.redirect_stdout(io.StringIO()):
        tt.main([os.path.join(tmp, "docs.txt"), "--out-dir", out, "--prefix", "x", "--shard-tokens", "10"])
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
        tt.main(args)
    assert sorted(os.listdir(out)) == ["tinyshakespeare_train.bin", "tinyshakespeare_val.bin"]
    assert tt.read_shard(os.path.join(out, "tinyshakespeare_val.bin"))[0][2] == 5
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            tt.main(args + ["--shard-tokens", "4"])
        raise AssertionError("a split larger than one file must fail with --single-file")
    except SystemExit as e:
        assert "does not fit one file" in str(e.code), e.code


def test_committed_tinyshakespeare(enc, tmp):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    source = os.path.join(repo, "..", "shared", "data", "text", "tinyshakespeare.txt")
    val_path, train_path = (os.path.join(repo, "data", f"tinyshakespeare_{s}.bin") for s in ("val", "train"))
    if not all(os.path.exists(p) for p in (source, val_path, train_path)):
        print("  (tinyshakespeare source or data/ shards missing: check skipped)")
        return
    val, train = tt.read_shard(val_path)[1], tt.read_shard(train_path)[1]
    assert len(val) == 32768 and len(train) == 305260, (len(val), len(train))
    tokens = np.concatenate([val, train])
    text = open(source, encoding="utf-8").read()
    assert enc.decode(tokens[tokens != tt.EOT].tolist()) == text
    assert len(enc.encode_ordinary(text)) == 338025


def main():
    if not os.path.isfile(tt.DEFAULT_RANKS):
        print(f"skipping dev/data/test_tokenize_text.py: no tokenizer ranks at {tt.DEFAULT_RANKS}")
        return 0
    enc = tt.load_encoding(tt.DEFAULT_RANKS)
    tests = [v for k, v in globals().items() if k.startswith("test_")]
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="test_tokenize_text_") as tmp:
        for test in tests:
            try:
                test(enc, tmp)
                passed += 1
            except AssertionError as e:
                failed += 1
                print(f"FAIL {test.__name__}: {e!r}")
    print(f"test_tokenize_text: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
