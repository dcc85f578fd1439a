"""Reads a tiktoken ranks file of a byte-level BPE such as data/gpt2.tiktoken: one "base64(token bytes) rank" line per
token (blank lines are skipped), the ranks exactly 0..N-1 and ranks 0..255 the 256 single bytes. Needs only the
standard library.
"""
import base64

from tool_files import FileProblem, input_size


class RanksFileError(Exception):
    """a ranks file that cannot be read or is not a valid one; the message names the file and the problem"""


def read_ranks(path):
    """-> list of token bytes indexed by rank; raises RanksFileError for an unreadable or invalid file"""
    try:
        input_size(path, "ranks file")
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except FileProblem as e:
        raise RanksFileError(str(e)) from None
    except OSError as e:
        raise RanksFileError(f"cannot read ranks file '{path}': {e.strerror}") from None
    tokens = {}
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError
            tokens[int(parts[1])] = base64.b64decode(parts[0], validate=True)
        except ValueError:   # binascii.Error is a ValueError
            raise RanksFileError(f"ranks file '{path}' line {i + 1} is not 'base64 rank': {line[:60]!r}") from None
    if sorted(tokens) != list(range(len(tokens))):
        raise RanksFileError(f"ranks file '{path}': ranks are not 0..{len(tokens) - 1} without gaps")
    byte_tokens = {tokens[r] for r in range(min(256, len(tokens)))}
    if len(byte_tokens) != 256 or any(len(t) != 1 for t in byte_tokens):
        raise RanksFileError(f"ranks file '{path}': ranks 0..255 must be the 256 single bytes")
    return [tokens[r] for r in range(len(tokens))]
