"""
Writes the token decoding file the C trainer reads (llm.c's gpt2_tokenizer.bin, version 2) from the repo's
data/gpt2.tiktoken (or --ranks FILE). Needs only the standard library.

Format: int32 header[256] = {20240328 magic, 2 version, vocab size 50257, eot token 50256, 0...}, then for
each token id 0..50256: one uint8 length followed by that many bytes. Token 50256 is b"<|endoftext|>".

Example (from the repo root):
  python3 dev/data/make_tokenizer_bin.py --out data/gpt2_tokenizer.bin
"""
import argparse
import os
import struct
import sys

import ranks_file
from ranks_file import RanksFileError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_RANKS = os.path.join(REPO_ROOT, "data", "gpt2.tiktoken")
MAGIC, VERSION, HEADER_INTS = 20240328, 2, 256
EOT, EOT_BYTES = 50256, b"<|endoftext|>"


def read_ranks(path):
    """ranks_file.read_ranks (token bytes indexed by rank), with a one-line error for a bad file"""
    try:
        return ranks_file.read_ranks(path)
    except RanksFileError as e:
        sys.exit(f"error: {e}")


def write_tokenizer_bin(path, tokens):
    header = [MAGIC, VERSION, len(tokens), len(tokens) - 1] + [0] * (HEADER_INTS - 4)
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{HEADER_INTS}i", *header))
        for token_id, piece in enumerate(tokens):
            if not 0 < len(piece) < 256:
                sys.exit(f"error: token {token_id} is {len(piece)} bytes; the format stores 1..255")
            f.write(bytes([len(piece)]) + piece)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default=DEFAULT_RANKS, help="local gpt2.tiktoken file (default: %(default)s)")
    p.add_argument("--out", default=os.path.join(REPO_ROOT, "data", "gpt2_tokenizer.bin"),
                   help="output file (default: %(default)s)")
    args = p.parse_args()
    tokens = read_ranks(args.ranks)
    if len(tokens) != EOT:
        sys.exit(f"error: '{args.ranks}' holds {len(tokens)} tokens, GPT-2 has {EOT} plus <|endoftext|>")
    write_tokenizer_bin(args.out, tokens + [EOT_BYTES])
    print(f"{args.out}: {len(tokens) + 1} tokens, eot {EOT}, {os.path.getsize(args.out):,} bytes")


if __name__ == "__main__":
    main()
