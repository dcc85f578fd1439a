"""
Tokenizes raw text files into llm.c token shards with the GPT-2 BPE, loaded from the repo's
data/gpt2.tiktoken (or --ranks FILE; no network).

Shard format (llm.c): int32 header[256] = {20240520 magic, 1 version, number of tokens, 0...}, then the
tokens as uint16, little endian.

Documents: each input file (plain UTF-8 or .xz) holds documents separated by the line <|endoftext|>
(they are split on "\\n<|endoftext|>\\n"); every document is prefixed with <|endoftext|> = 50256.
With --sections (llm.c's tinyshakespeare convention) a file is instead cut into sections at blank lines,
each section keeps its trailing "\\n\\n" and is prefixed with 50256.

The held-out split is the START of the token stream (--val-tokens N or --val-docs N), or a separate
file (--val-input). Outputs: OUT_DIR/PREFIX_val_000000.bin ..., OUT_DIR/PREFIX_train_000000.bin ...,
or OUT_DIR/PREFIX_val.bin and OUT_DIR/PREFIX_train.bin with --single-file.

Bad input (a missing, non-UTF-8 or corrupt .xz file, an input or ranks file that is not a regular file such as a
FIFO or a device, a corrupt ranks file, an --out-dir that is a file or not writable, no text at all) ends with one
"tokenize_text: error: ..." line and exit status 1; a usage error (a bad flag value, a --prefix with '/' or '..' or
a leading '.', which would name files outside --out-dir or hidden ones) with one such line and exit status 2. The
shards are written under temporary names and renamed into place only once all the input was read and tokenized, so
a failed run leaves the shards in --out-dir as they were. An --out-dir that already holds shards of PREFIX is refused (a glob would
mix the two runs) unless --overwrite: then the new shards replace the old ones, and the old shards of PREFIX that
the new run does not replace are deleted, both only after a successful run. A shard holds at most 2^31 - 1 tokens,
the C loader's int32 count.

Examples (from the repo root; the text paths are where your corpus lies):
  python3 dev/data/tokenize_text.py --tinyshakespeare text/tinyshakespeare.txt --out-dir data
  python3 dev/data/tokenize_text.py text/gutenberg_train_0*.txt.xz \\
      --val-input text/gutenberg_val.txt.xz --out-dir gutenberg --prefix gutenberg --workers 2
"""
import argparse
import lzma
import multiprocessing as mp
import os
import re
import sys

import numpy as np
import tiktoken
import tiktoken.load

import tool_files
from tool_files import FileProblem

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_RANKS = os.path.join(REPO_ROOT, "data", "gpt2.tiktoken")
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = 50256
DOC_SEPARATOR = "\n<|endoftext|>\n"
SHARD_MAGIC, SHARD_VERSION, HEADER_INTS = 20240520, 1, 256
TINYSHAKESPEARE_VAL_TOKENS = 32768
MAX_SHARD_TOKENS = 2 ** 31 - 1   # the header's int32 token count (llmc/dataloader.h)


class InputError(Exception):
    """bad input or output: main prints it as one "error: ..." line"""


def load_encoding(ranks_path):
    """The GPT-2 BPE (r50k_base) from a local gpt2.tiktoken file: 50256 ranks + <|endoftext|>."""
    try:
        tool_files.input_size(ranks_path, "ranks file")
        ranks = tiktoken.load.load_tiktoken_bpe(ranks_path)
    except FileProblem as e:
        raise InputError(str(e)) from None
    except (ValueError, OSError) as e:   # binascii.Error and UnicodeDecodeError are ValueErrors
        raise InputError(f"ranks file '{ranks_path}' is not a tiktoken ranks file: {e}") from None
    if len(ranks) != EOT:
        raise InputError(f"'{ranks_path}' holds {len(ranks)} ranks, GPT-2 has {EOT}")
    return tiktoken.Encoding(name="gpt2_local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOT})


def read_text(path):
    opener = lzma.open if path.endswith(".xz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise InputError(f"'{path}' is not UTF-8 text (byte {e.start} of the {'decompressed ' if path.endswith('.xz') else ''}"
                         f"text: {e.reason})") from None
    except (lzma.LZMAError, EOFError) as e:
        raise InputError(f"'{path}' is not a valid .xz file ({e or 'truncated'})") from None
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror or e}") from None


def split_documents(text, sections):
    """Documents of one file; with sections=True llm.c's blank-line sections, each but the last keeping its \\n\\n."""
    if sections:
        parts = text.split("\n\n")
        return [p + "\n\n" for p in parts[:-1]] + parts[-1:]
    return [d for d in text.split(DOC_SEPARATOR) if d]


# each worker process builds its encoder once
_encoding = None


def _init_worker(ranks_path):
    global _encoding
    _encoding = load_encoding(ranks_path)


def _encode_document(doc):
    tokens = [EOT]
    tokens.extend(_encoding.encode_ordinary(doc))
    return np.array(tokens, dtype=np.uint16)


def write_shard(path, tokens):
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = SHARD_MAGIC, SHARD_VERSION, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def read_shard(path):
    """Returns (header as int32 array, tokens as uint16 array) of a shard, checking magic, version and size."""
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(HEADER_INTS * 4), dtype="<i4")
        tokens = np.frombuffer(f.read(), dtype="<u2")
    if header[0] != SHARD_MAGIC or header[1] != SHARD_VERSION or header[2] != len(tokens):
        raise ValueError(f"'{path}' is not a valid token shard (header {header[:3].tolist()}, {len(tokens)} tokens)")
    return header, tokens


class ShardWriter:
    """Collects a token stream and writes it out in shards of at most shard_tokens tokens."""

    def __init__(self, out_dir, prefix, split, shard_tokens, single_file):
        self.out_dir, self.prefix, self.split = out_dir, prefix, split
        self.shard_tokens, self.single_file = shard_tokens, single_file
        self.pending = []     # token arrays not written yet
        self.pending_count = 0
        self.added = 0        # tokens received so far
        self.written = 0      # tokens written so far
        self.shards = 0
        self.paths = []       # (temporary, final) path of each shard written: renamed by commit(), or removed by discard()

    def add(self, tokens):
        self.pending.append(tokens)
        self.pending_count += len(tokens)
        self.added += len(tokens)
        while self.pending_count > self.shard_tokens:  # strictly more: the last shard is written by close()
            self._flush(self.shard_tokens)

    def _flush(self, n):
        if self.single_file and self.shards > 0:
            raise InputError(f"the {self.split} split does not fit one file of --shard-tokens {self.shard_tokens}")
        stream = np.concatenate(self.pending)
        self.pending, self.pending_count = [stream[n:]], len(stream) - n
        name = f"{self.prefix}_{self.split}.bin" if self.single_file else f"{self.prefix}_{self.split}_{self.shards:06d}.bin"
        path = os.path.join(self.out_dir, name)
        self.paths.append((tool_files.temporary_name(path), path))
        try:
            write_shard(self.paths[-1][0], stream[:n])
        except OSError as e:
            raise InputError(f"cannot write '{path}': {e.strerror or e}") from None
        print(f"{path}: {n:,} tokens")
        self.written += n
        self.shards += 1

    def close(self):
        if self.pending_count > 0:
            self._flush(self.pending_count)
        return self.written

    def discard(self):
        tool_files.remove_quietly(tmp for tmp, _ in self.paths)


def encoded_documents(paths, sections, pool):
    """Yields one uint16 token array per document, in input order."""
    for path in paths:
        docs = split_documents(read_text(path), sections)
        print(f"{path}: {len(docs):,} documents")
        yield from pool.imap(_encode_document, docs, chunksize=16)


def route_tokens(docs, train, val, val_docs, val_tokens):
    """Sends the first val_docs documents or the first val_tokens tokens to val, the rest to train."""
    for i, tokens in enumerate(docs):
        if i < val_docs:
            val.add(tokens)
            continue
        n = max(0, min(len(tokens), val_tokens - val.added))
        val.add(tokens[:n])
        train.add(tokens[n:])


def parse_args(argv=None):
    p = tool_files.ArgumentParser("tokenize_text", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", help="text files (plain or .xz), tokenized in the given order")
    p.add_argument("--ranks", default=DEFAULT_RANKS, help="local gpt2.tiktoken file (default: %(default)s)")
    p.add_argument("--out-dir", default=".", help="output folder, created if missing (default: %(default)s)")
    p.add_argument("--prefix", help="shard name prefix (default: data, or tinyshakespeare with --tinyshakespeare)")
    p.add_argument("--shard-tokens", type=int, default=100_000_000, help="tokens per shard (default: %(default)s)")
    held_out = p.add_mutually_exclusive_group()
    held_out.add_argument("--val-docs", type=int, default=0, help="the first N documents form the val split")
    held_out.add_argument("--val-tokens", type=int, default=0, help="the first N tokens form the val split")
    held_out.add_argument("--val-input", action="append", default=[], metavar="FILE",
                          help="a text file tokenized into the val split (repeatable)")
    p.add_argument("--sections", action="store_true", help="split documents at blank lines (llm.c tinyshakespeare style)")
    p.add_argument("--single-file", action="store_true", help="write PREFIX_SPLIT.bin instead of numbered shards")
    p.add_argument("--tinyshakespeare", action="store_true",
                   help=f"llm.c's tinyshakespeare preset: --sections --single-file --val-tokens "
                        f"{TINYSHAKESPEARE_VAL_TOKENS} --prefix tinyshakespeare")
    p.add_argument("--workers", type=int, default=os.cpu_count(), help="tokenizer processes (default: %(default)s)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the shards of PREFIX already in --out-dir (after a successful run)")
    args = p.parse_args(argv)
    if args.tinyshakespeare:
        args.sections, args.single_file = True, True
        args.prefix = args.prefix or "tinyshakespeare"
        if not args.val_docs and not args.val_input:
            args.val_tokens = args.val_tokens or TINYSHAKESPEARE_VAL_TOKENS
    args.prefix = args.prefix or "data"
    if args.shard_tokens <= 0 or args.workers <= 0 or args.val_docs < 0 or args.val_tokens < 0:
        p.error("--shard-tokens and --workers must be positive, --val-docs and --val-tokens non-negative")
    if args.shard_tokens > MAX_SHARD_TOKENS:
        p.error(f"--shard-tokens {args.shard_tokens} exceeds {MAX_SHARD_TOKENS}, the most a shard header can count")
    if "/" in args.prefix or os.sep in args.prefix or ".." in args.prefix or args.prefix.startswith("."):
        p.error(f"--prefix '{args.prefix}': a file name prefix without '/' or '..' and not starting with '.'")
    return args


def existing_shards(out_dir, prefix):
    """the shards of prefix in out_dir: PREFIX_{train,val}.bin and PREFIX_{train,val}_NNNNNN.bin"""
    pattern = re.compile(re.escape(prefix) + r"_(train|val)(_\d{6})?\.bin")
    return sorted(n for n in os.listdir(out_dir) if pattern.fullmatch(n))


def prepare_out_dir(out_dir, prefix, overwrite):
    """creates out_dir and checks that it takes files and holds no shards of prefix unless overwrite; returns the
    names of those shards (those the new run does not replace are deleted once it has succeeded)"""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise InputError(f"--out-dir '{out_dir}' exists and is not a directory")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise InputError(f"--out-dir '{out_dir}' cannot be created: {e.strerror or e}") from None
    old = existing_shards(out_dir, prefix)
    for name in old:   # a folder or FIFO named like a shard is neither replaced nor deleted
        try:
            tool_files.check_output(os.path.join(out_dir, name))
        except FileProblem as e:
            raise InputError(str(e)) from None
    if old and not overwrite:
        raise InputError(f"--out-dir '{out_dir}' already holds {len(old)} shard(s) of prefix '{prefix}' ({old[0]} ...): "
                         f"a glob would mix them with this run's; remove them or pass --overwrite")
    try:
        probe = os.path.join(out_dir, f".write_probe.{os.getpid()}")
        with open(probe, "wb") as f:
            f.write(b"x")
        os.remove(probe)
    except OSError as e:
        raise InputError(f"--out-dir '{out_dir}' is not writable: {e.strerror or e}") from None
    return old


def tokenize(args, train, val):
    with mp.Pool(args.workers, initializer=_init_worker, initargs=(args.ranks,)) as pool:
        for tokens in encoded_documents(args.val_input, args.sections, pool):
            val.add(tokens)
        route_tokens(encoded_documents(args.inputs, args.sections, pool), train, val, args.val_docs, args.val_tokens)
    n_val, n_train = val.close(), train.close()
    if n_train == 0:
        raise InputError("no text for the train split: the inputs are empty" +
                         (" or all went to the val split" if n_val else ""))
    print(f"total: {n_val + n_train:,} tokens ({n_val:,} val in {val.shards} file(s), "
          f"{n_train:,} train in {train.shards} file(s))")


def commit(out_dir, old, writers):
    """renames the shards of the writers into place, then deletes the old shards (names in out_dir) they did not
    replace"""
    pairs = [pair for w in writers for pair in w.paths]
    try:
        for _, final in pairs:
            tool_files.check_output(final)
        tool_files.put_in_place(pairs)
    except FileProblem as e:
        raise InputError(str(e)) from None
    new = {os.path.basename(final) for _, final in pairs}
    for name in old:
        if name not in new:
            try:
                os.remove(os.path.join(out_dir, name))
            except OSError as e:
                raise InputError(f"cannot delete the old shard '{os.path.join(out_dir, name)}': {e.strerror}") from None


def main(argv=None):
    args = parse_args(argv)
    train = ShardWriter(args.out_dir, args.prefix, "train", args.shard_tokens, args.single_file)
    val = ShardWriter(args.out_dir, args.prefix, "val", args.shard_tokens, args.single_file)
    try:
        for path in args.inputs + args.val_input:
            try:
                tool_files.input_size(path, "input")
            except FileProblem as e:
                raise InputError(str(e)) from None
        old = prepare_out_dir(args.out_dir, args.prefix, args.overwrite)
        load_encoding(args.ranks)  # fail early, before starting workers
        tokenize(args, train, val)
        commit(args.out_dir, old, (train, val))
    except InputError as e:
        train.discard()
        val.discard()
        sys.exit(f"tokenize_text: error: {e}")


if __name__ == "__main__":
    main()
