"""Reads our model and training-state files (llmc/checkpoint.h) for the Python tools: the header's model shape
(llmc/model_config.h), the parameter tensors in file order (llmc/gpt2_config.h, llmc/llama_config.h) and the
training step. Optimizer and AdaHOP state and the GEMM algorithm table (the trainer's cuBLASLt choices, opaque here)
are skipped, but every section's size and CRC-32 is checked (dev/checkpoint_crc.py). Needs numpy only.
"""
import math
import os
import stat

import numpy as np

from checkpoint_crc import CRC_SLOT, HEADER_INTS, MAGIC, VERSION, first_bad_section, header_crc

CONTENTS_PARAMS, CONTENTS_OPTIMIZER, CONTENTS_ADAHOP, CONTENTS_GEMM_ALGOS = 1, 2, 4, 8
# the valid contents flags: params; + optimizer state; + AdaHOP state; + GEMM algorithm table
VALID_CONTENTS = (CONTENTS_PARAMS, CONTENTS_PARAMS | CONTENTS_OPTIMIZER,
                  CONTENTS_PARAMS | CONTENTS_OPTIMIZER | CONTENTS_ADAHOP,
                  CONTENTS_PARAMS | CONTENTS_OPTIMIZER | CONTENTS_ADAHOP | CONTENTS_GEMM_ALGOS)
MAX_GEMM_ALGO_WORDS = 1 << 20    # int32 words of the GEMM algorithm table (header slots 22-23)
FAMILY_GPT2, FAMILY_LLAMA = 0, 1


class ModelFileError(Exception):
    """a model file that cannot be read or is not a valid one; the message names the file and the problem"""


def param_shapes(cfg):
    """[(name, shape)] of the parameter tensors of cfg's family, in file order"""
    L, C, Vp = cfg["L"], cfg["C"], cfg["Vp"]
    if cfg["family"] == FAMILY_GPT2:
        maxT = cfg["maxT"]
        return [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
                ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)),
                ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
                ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,))]
    H, qkv = cfg["H"], (cfg["NH"] + 2 * cfg["NKV"]) * (C // cfg["NH"])
    return [("wte", (Vp, C)), ("rms1w", (L, C)), ("qkvw", (L, qkv, C)), ("attprojw", (L, C, C)), ("rms2w", (L, C)),
            ("gateupw", (L, 2 * H, C)), ("downw", (L, C, H)), ("rmsfw", (C,)), ("lmheadw", (Vp, C))]


def num_params(cfg):
    """total number of parameters of cfg's family"""
    return sum(math.prod(s) for _, s in param_shapes(cfg))


def check_shape(path, cfg):
    """the invariants of llmc/model_config.h's model_config_problem, as a ModelFileError"""
    dims = [cfg[k] for k in ("L", "C", "NH", "NKV", "H", "V", "maxT")]
    if min(dims) <= 0 or cfg["C"] % cfg["NH"] or cfg["NH"] % cfg["NKV"] or cfg["Vp"] < cfg["V"] or cfg["Vp"] % 128:
        raise ModelFileError(f"'{path}' has an invalid model shape {cfg}")
    if cfg["family"] == FAMILY_GPT2 and (cfg["NKV"] != cfg["NH"] or cfg["H"] != 4 * cfg["C"]):
        raise ModelFileError(f"'{path}': a GPT-2 header with LLaMA fields (NKV {cfg['NKV']}, hidden {cfg['H']})")
    if cfg["family"] == FAMILY_LLAMA and (cfg["C"] // cfg["NH"]) % 2:
        raise ModelFileError(f"'{path}': LLaMA head size {cfg['C'] // cfg['NH']} is odd")


def get64(h, slot):
    """the int64 of header slots slot (low word, unsigned) and slot + 1 (high word, signed)"""
    return (int(h[slot]) & 0xFFFFFFFF) | (int(h[slot + 1]) << 32)


def header_config(h):
    """the model shape of the header words h: family, maxT, V, Vp, L, NH, C, NKV and H (a GPT-2 header may leave
    NKV and H zero)"""
    cfg = dict(family=int(h[3]), maxT=int(h[4]), V=int(h[5]), Vp=int(h[6]), L=int(h[7]), NH=int(h[8]), C=int(h[9]))
    gpt2 = cfg["family"] == FAMILY_GPT2
    cfg["NKV"] = cfg["NH"] if gpt2 and h[18] == 0 else int(h[18])
    cfg["H"] = 4 * cfg["C"] if gpt2 and h[19] == 0 else int(h[19])
    return cfg


def section_bytes(h, n):
    """the byte counts of the sections after the header (parameters, optimizer state, AdaHOP state, GEMM
    algorithms) of a file of n parameters with the header words h"""
    copies = 3 if h[2] & CONTENTS_OPTIMIZER else 1
    adahop_words = get64(h, 16) if h[2] & CONTENTS_ADAHOP else 0
    return 4 * n, 4 * (copies - 1) * n, 4 * adahop_words, 4 * get64(h, 22)


def file_size(path, head):
    """checks the header bytes `head` of the file at path (magic, version, CRC-32, contents, model shape, section
    sizes) -> the size in bytes the header implies for the file; ModelFileError for an invalid header"""
    h = np.frombuffer(head, dtype="<i4").astype(np.int64)
    if h[0] != MAGIC:
        raise ModelFileError(f"'{path}' is not a model file of this engine (magic {h[0]}, expected {MAGIC})")
    if h[1] != VERSION:
        raise ModelFileError(f"'{path}' is a version {h[1]} model file; this reader takes version {VERSION} "
                             f"(llmc/checkpoint.h)")
    if header_crc(head) != int(h[CRC_SLOT]) & 0xFFFFFFFF:
        raise ModelFileError(f"'{path}': its header fails its CRC-32 check (corrupt)")
    if h[2] not in VALID_CONTENTS:
        raise ModelFileError(f"'{path}': unknown contents flags {h[2]}")
    if h[3] not in (FAMILY_GPT2, FAMILY_LLAMA):
        raise ModelFileError(f"'{path}': model family {h[3]} is not supported (0 = GPT-2, 1 = LLaMA)")
    cfg = header_config(h)
    check_shape(path, cfg)
    n = num_params(cfg)
    stated = get64(h, 12)
    if stated != n:
        raise ModelFileError(f"'{path}' says {stated} parameters, its shape implies {n}")
    adahop_words, gemm_words = get64(h, 16), get64(h, 22)
    if h[2] & CONTENTS_ADAHOP and adahop_words < 0:
        raise ModelFileError(f"'{path}': invalid AdaHOP state size {adahop_words} (header slots 16-17)")
    if gemm_words < 0 or gemm_words > MAX_GEMM_ALGO_WORDS or (not h[2] & CONTENTS_GEMM_ALGOS and gemm_words != 0):
        raise ModelFileError(f"'{path}': invalid GEMM algorithm table size {gemm_words} (header slots 22-23)")
    return 4 * HEADER_INTS + sum(section_bytes(h, n))


def read_model(path):
    """reads a model or training-state file -> (cfg, {name: float32 array in file order}, step); cfg holds family,
    maxT, V, Vp, L, NH, C, NKV and H. Raises ModelFileError for an unreadable, corrupt or unsupported file."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):   # a FIFO would block the open, a device such as /dev/zero never ends
            raise ModelFileError(f"'{path}' is {'a directory' if stat.S_ISDIR(st.st_mode) else 'not a regular file'}")
        with open(path, "rb") as f:
            head = f.read(4 * HEADER_INTS)
            size = os.fstat(f.fileno()).st_size
            if len(head) < 4 * HEADER_INTS:
                raise ModelFileError(f"'{path}' is {size} bytes, shorter than the {4 * HEADER_INTS}-byte model header")
            expected = file_size(path, head)
            if size != expected:
                raise ModelFileError(f"'{path}' is {size} bytes, its header implies {expected} (truncated or corrupt)")
            data = head + f.read(expected - len(head))
    except OSError as e:
        raise ModelFileError(f"cannot read '{path}': {e.strerror}") from None
    if len(data) != expected:
        raise ModelFileError(f"'{path}' is {len(data)} bytes, its header implies {expected} (changed while read)")
    h = np.frombuffer(data[:4 * HEADER_INTS], dtype="<i4").astype(np.int64)
    cfg = header_config(h)
    n = num_params(cfg)
    bad = first_bad_section(data, section_bytes(h, n))
    if bad:
        raise ModelFileError(f"'{path}': the {bad} section fails its CRC-32 check (corrupt)")
    flat = np.frombuffer(data, dtype="<f4", count=n, offset=4 * HEADER_INTS)
    params, off = {}, 0
    for name, shape in param_shapes(cfg):
        k = math.prod(shape)
        params[name] = flat[off:off + k].reshape(shape)
        off += k
    if not all(np.isfinite(p).all() for p in params.values()):
        raise ModelFileError(f"'{path}' holds non-finite parameters")
    return cfg, params, get64(h, 10)
