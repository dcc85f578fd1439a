"""The CRC-32 checksums of our model and training-state files (llmc/checkpoint.h, version 2), for the Python tools
that read or write them. A file is a 1 KiB header of int32 slots, then the parameters, then (training states)
AdamW m and v, then the AdaHOP words, then (optionally) the GEMM algorithm words: the trainer's cuBLASLt algorithm
choices, opaque to Python. Slot 24 holds the CRC-32 of the header counted with slot 24 zero, slots 25-28 the
CRC-32 of the parameters, of m then v, of the AdaHOP words and of the GEMM algorithm words (CRC_SLOT + 1 + the
section's index; zero for a section the file does not have). The polynomial is zlib's (llmc/crc32.h), so
zlib.crc32 computes them.
"""
import zlib

import numpy as np

MAGIC, VERSION, HEADER_INTS, CRC_SLOT = 20261202, 2, 256, 24
SECTION_NAMES = ("parameters", "optimizer state", "AdaHOP state", "GEMM algorithms")


def header_crc(header):
    """the CRC-32 of the header bytes with slot CRC_SLOT counted as zero"""
    copy = bytearray(header[:4 * HEADER_INTS])
    copy[4 * CRC_SLOT:4 * CRC_SLOT + 4] = bytes(4)
    return zlib.crc32(copy)


def seal(h, sections):
    """writes the CRCs of `sections` (the bytes of parameters, m then v, AdaHOP words and optionally GEMM algorithm
    words; b"" for one the file lacks; a section left off the end, such as the GEMM algorithms of a file that has
    none, gets a zero slot) and then the header's own CRC into the header words h (a numpy int32 or uint32 array
    of HEADER_INTS)"""
    if len(sections) > len(SECTION_NAMES):
        raise ValueError(f"seal: {len(sections)} sections, at most {len(SECTION_NAMES)}")
    for s in range(len(SECTION_NAMES)):
        crc = zlib.crc32(sections[s]) if s < len(sections) else 0
        h[CRC_SLOT + 1 + s] = np.array(crc, dtype=np.uint32).astype(h.dtype)
    h[CRC_SLOT] = np.array(header_crc(h.tobytes()), dtype=np.uint32).astype(h.dtype)


def first_bad_section(data, section_bytes):
    """the name of the first section of the file bytes `data` whose CRC-32 differs from its header slot, or None;
    section_bytes: the byte counts of the sections to check, in file order (parameters, optimizer state, AdaHOP
    state, GEMM algorithms; a prefix of them checks those only), as the header implies them and the caller has
    checked the file holds them"""
    if len(section_bytes) > len(SECTION_NAMES):
        raise ValueError(f"first_bad_section: {len(section_bytes)} sections, at most {len(SECTION_NAMES)}")
    h = np.frombuffer(data[:4 * HEADER_INTS], dtype="<u4")
    if header_crc(data) != int(h[CRC_SLOT]):
        return "header"
    view, off = memoryview(data), 4 * HEADER_INTS
    for s, n in enumerate(section_bytes):
        if zlib.crc32(view[off:off + n]) != int(h[CRC_SLOT + 1 + s]):
            return SECTION_NAMES[s]
        off += n
    return None
