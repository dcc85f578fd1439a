"""Tests dev/export_hf.py against the FP32 CPU reference (build/model_logits, llmc/gpt2_cpu.h, llmc/llama_cpu.h).

For a tiny GPT-2 (V 50257 padded to 50304) and a tiny LLaMA (V 100 padded to 128, GQA with NKV < NH, untied head,
written as a training-state file with AdamW moments and AdaHOP state), both with random weights large enough that attention,
biases and norm weights matter and with garbage in the padded vocab rows:
  - the fp32 export loads in transformers (GPT2LMHeadModel / LlamaForCausalLM) and its logits equal the C
    reference's within FP32 tolerance; a model with one tensor wrong is caught by the same comparison
  - the bf16 export holds exactly the FP32 weights rounded to nearest even (torch's own rounding)
  - a truncated model file is a clear error with a non-zero exit
  - (numpy only, run without torch too) the optional GEMM algorithm table of a training state (contents 15, header
    slots 22-23 and 28): such a file reads as the same parameters as one without it and exports the same weights;
    a flipped byte in it fails the "GEMM algorithms" CRC, a truncated table is a size error, a bad table size and
    the contents flags 8 and 11 are refused
  - (numpy only) a FIFO, /dev/zero or a directory as the model or --ranks, and an output folder that is a file, under
    a file or cannot be created: one-line errors, exit 1, nothing read or written; a failed export (a ranks file of
    another vocab, an output file that is a directory) leaves an earlier export in the folder as it was
With --ranks (a tiktoken ranks file of the GPT-2 BPE): the exported tokenizer (vocab.json, merges.txt) loads with
AutoTokenizer and encodes like tiktoken with those ranks.

usage: python dev/test/test_export_hf.py [--ranks data/gpt2.tiktoken]   (from the repository root, after
       `make build/model_logits`); needs torch, transformers and (for --ranks) tiktoken, except for the file
       format checks, which need numpy only
"""
import argparse
import base64
import contextlib
import io
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "dev"))
sys.path.insert(0, os.path.join(ROOT, "dev", "data"))
import export_hf  # noqa: E402
import model_file  # noqa: E402
from checkpoint_crc import CRC_SLOT, HEADER_INTS, MAGIC, VERSION, first_bad_section, header_crc, seal  # noqa: E402
from pycheck import check, run, summary  # noqa: E402
from skip_log import skip  # noqa: E402
from eval_hf import load_model  # noqa: E402

FP32_TOL = 1e-4     # max |logit difference| relative to the largest |logit|
TEXTS = ["Hello world", " The quick brown fox jumps over the lazy dog.\n\n", "It's 1234 o'clock, isn't it?",
         "naïve café — 東京 🙂  spaces   and\ttabs", "<|endoftext|>"[2:-2] + "\n  indented\n"]


def random_model(cfg, seed):
    """random weights of the family's layout: matrices N(0, 0.1), norm weights 1 + N(0, 0.1), biases N(0, 0.1),
    padded vocab rows 5.0 (never read by a correct model)"""
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in model_file.param_shapes(cfg):
        p = rng.normal(0.0, 0.1, shape).astype(np.float32)
        if name.endswith("w") and len(shape) <= 2 and name not in ("wte", "wpe", "lmheadw"):
            p += 1.0   # LayerNorm / RMSNorm weights
        if name in ("wte", "lmheadw"):
            p[cfg["V"]:] = 5.0
        params[name] = p
    return params


def write_model(path, cfg, params, optimizer_state=False, gemm_words=None):
    """our model file (llmc/checkpoint.h); with optimizer_state a training state of the GPU trainer: random AdamW
    m and v (v >= 0), then 5 words of AdaHOP state, then, given gemm_words (int32s), a GEMM algorithm table (contents 15)"""
    assert gemm_words is None or optimizer_state, "a GEMM algorithm table comes with the optimizer and AdaHOP state"
    flat = np.concatenate([params[n].reshape(-1) for n, _ in model_file.param_shapes(cfg)]).astype("<f4")
    contents = (15 if gemm_words is not None else 7) if optimizer_state else 1
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[0:10] = [MAGIC, VERSION, contents, cfg["family"], cfg["maxT"], cfg["V"], cfg["Vp"], cfg["L"],
               cfg["NH"], cfg["C"]]
    h[10] = 7
    h[16] = 5 if optimizer_state else 0
    h[22] = len(gemm_words) if gemm_words is not None else 0
    h[12], h[13] = flat.size & 0xFFFFFFFF, flat.size >> 32
    if cfg["family"] == model_file.FAMILY_LLAMA:
        h[18], h[19] = cfg["NKV"], cfg["H"]
    sections = [flat.tobytes(), b"", b""]
    if optimizer_state:
        moments = np.random.default_rng(1).normal(size=(2, flat.size))
        moments[1] = np.abs(moments[1])   # AdamW v >= 0: a negative one is refused by the trainers' checkpoint reader
        sections[1] = moments.astype("<f4").tobytes()
        sections[2] = np.arange(5, dtype="<i4").tobytes()
    if gemm_words is not None:
        sections.append(np.array(gemm_words, dtype="<i4").tobytes())
    seal(h, sections)
    with open(path, "wb") as f:
        f.write(h.tobytes() + b"".join(sections))


def write_tokens(path, tokens):
    """the token file of build/model_logits (dev/test/logits_file.h)"""
    with open(path, "wb") as f:
        f.write(np.array(tokens.shape, dtype="<i4").tobytes())
        f.write(tokens.astype("<i4").tobytes())


def c_logits(model_path, tokens, tmp):
    """the C reference's logits [B, T, V] of the model file on tokens [B, T]"""
    tok_path, out_path = os.path.join(tmp, "tokens.bin"), os.path.join(tmp, "logits.bin")
    write_tokens(tok_path, tokens)
    subprocess.run([os.path.join(ROOT, "build", "model_logits"), model_path, tok_path, out_path], check=True,
                   stdout=subprocess.DEVNULL)
    return np.fromfile(out_path, dtype="<f4").reshape(*tokens.shape, -1)


def hf_logits_on(model, tokens, device):
    """transformers' logits [B, T, V] of the model on `device`, as float64 numpy"""
    import torch
    with torch.no_grad():
        return model(torch.from_numpy(tokens.astype(np.int64)).to(device)).logits.double().cpu().numpy()


def hf_logits(model, tokens):
    """transformers' logits [B, T, V] on the CPU"""
    return hf_logits_on(model, tokens, "cpu")


def max_rel_diff(a, b):
    """max |a - b| over max |b|"""
    return float(np.abs(a - b).max() / np.abs(b).max())


def break_one_tensor(model, family):
    """changes one tensor the way a wrong mapping would: GPT-2 drops the qkv bias, LLaMA swaps k and v"""
    import torch
    with torch.no_grad():
        if family == model_file.FAMILY_GPT2:
            model.transformer.h[0].attn.c_attn.bias.zero_()
        else:
            attn = model.model.layers[1].self_attn
            k = attn.k_proj.weight.clone()
            attn.k_proj.weight.copy_(attn.v_proj.weight)
            attn.v_proj.weight.copy_(k)


def check_family(cfg, name, tmp, optimizer_state):
    """export in fp32 and bf16 and compare with the C reference"""
    import torch
    model_path = os.path.join(tmp, f"{name}.bin")
    write_model(model_path, cfg, random_model(cfg, seed=cfg["family"] + 1), optimizer_state)
    tokens = np.random.default_rng(7).integers(0, cfg["V"], size=(2, 16))
    want = c_logits(model_path, tokens, tmp)
    fp32_dir, bf16_dir = os.path.join(tmp, f"{name}_fp32"), os.path.join(tmp, f"{name}_bf16")
    export_hf.export(model_path, fp32_dir, "fp32")
    export_hf.export(model_path, bf16_dir, "bf16")

    model = load_model(fp32_dir)
    arch = type(model).__name__
    check(arch == ("GPT2LMHeadModel" if cfg["family"] == model_file.FAMILY_GPT2 else "LlamaForCausalLM"),
          f"{name}: fp32 folder loads as {arch}")
    check(model.config.vocab_size == cfg["V"], f"{name}: exported vocab {model.config.vocab_size} = V {cfg['V']} (padding dropped)")
    got = hf_logits(model, tokens)
    diff = max_rel_diff(got, want) if got.shape == want.shape else float("inf")
    check(diff <= FP32_TOL, f"{name}: transformers logits {got.shape} vs C reference: max rel diff {diff:.2e} <= {FP32_TOL:g}")
    break_one_tensor(model, cfg["family"])
    broken = max_rel_diff(hf_logits(model, tokens), want)
    check(broken > 100 * FP32_TOL, f"{name}: one wrong tensor is caught (max rel diff {broken:.2e})")

    bf16 = load_model(bf16_dir, torch.bfloat16)
    ref = load_model(fp32_dir).to(torch.bfloat16)
    sd, ref_sd = bf16.state_dict(), ref.state_dict()
    same = all(torch.equal(sd[k], ref_sd[k]) for k in ref_sd)
    check(same and len(sd) == len(ref_sd), f"{name}: bf16 weights = fp32 weights rounded to bf16 ({len(sd)} tensors)")
    bdiff = max_rel_diff(hf_logits(bf16.float(), tokens), want)
    check(bdiff < 0.05, f"{name}: bf16 export logits vs C reference: max rel diff {bdiff:.2e} < 0.05")


def export_fails(tmp, name, data, expect):
    """dev/export_hf.py on a file holding `data` exits 1 with a one-line error that contains `expect`"""
    bad = os.path.join(tmp, name)
    with open(bad, "wb") as f:
        f.write(data)
    export_cmd_fails([bad, os.path.join(tmp, "bad")], name, expect)


def export_cmd_fails(args, what, expect):
    """dev/export_hf.py with args exits 1 within 30 s with a one-line error that contains `expect`"""
    try:
        rc, _, err = run([sys.executable, os.path.join(ROOT, "dev", "export_hf.py")] + args, timeout=30)
    except subprocess.TimeoutExpired:
        rc, err = None, "(no exit within 30 s)"
    check(rc == 1 and expect in err and err.count("\n") == 1 and err.startswith("export_hf: error: "),
          f"{what}: exit {rc}, '{err.strip()}'", f"expected one line 'export_hf: error: ...{expect}...'")


def folder_bytes(folder):
    """{name: bytes} of the files in folder"""
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


def check_files(tmp):
    """(numpy only) an input that is not a regular file is refused before it is read (a FIFO would block, /dev/zero
    never end), and so is an output folder that cannot be one; a failed export keeps the earlier export in its
    folder as it was, without temporary files"""
    cfg = dict(family=model_file.FAMILY_LLAMA, L=1, C=64, NH=4, NKV=2, H=96, V=100, Vp=128, maxT=32)
    model_a, model_b = os.path.join(tmp, "files_a.bin"), os.path.join(tmp, "files_b.bin")
    write_model(model_a, cfg, random_model(cfg, seed=5))
    write_model(model_b, cfg, random_model(cfg, seed=6))
    fifo = os.path.join(tmp, "files_fifo")
    os.mkfifo(fifo)
    a_file = os.path.join(tmp, "files_a_file")
    with open(a_file, "wb") as f:
        f.write(b"not a folder")
    out = os.path.join(tmp, "files_out")
    export_cmd_fails(["/dev/zero", out], "/dev/zero as the model", "'/dev/zero' is not a regular file")
    export_cmd_fails([fifo, out], "a FIFO as the model", "is not a regular file")
    export_cmd_fails([tmp, out], "a directory as the model", "is a directory")
    export_cmd_fails([model_a, out, "--ranks", "/dev/zero"], "/dev/zero as --ranks", "is not a regular file")
    export_cmd_fails([model_a, out, "--ranks", fifo], "a FIFO as --ranks", "is not a regular file")
    check(not os.path.exists(out), "refused inputs leave no output folder")
    export_cmd_fails([model_a, a_file], "an output folder that is a file", "exists and is not a directory")
    export_cmd_fails([model_a, os.path.join(a_file, "sub")], "an output folder under a file", "Not a directory")
    export_cmd_fails([model_a, "/proc/no_such_folder"], "an output folder that cannot be created", "cannot create")
    with open(a_file, "rb") as f:
        check(f.read() == b"not a folder", "the file given as the output folder is unchanged")

    with contextlib.redirect_stdout(io.StringIO()):
        export_hf.export(model_a, out, "bf16")
    before = folder_bytes(out)
    ranks = os.path.join(tmp, "files_bytes.tiktoken")   # the 256 single bytes: a vocab of 257, not the model's 100
    with open(ranks, "w") as f:
        f.write("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
    export_cmd_fails([model_b, out, "--ranks", ranks], "another model with a ranks file of another vocab",
                     "has 256 tokens + <|endoftext|>, the model's vocab is 100")
    check(folder_bytes(out) == before, f"the failed export left the earlier one as it was ({', '.join(before)})")
    os.rename(os.path.join(out, "config.json"), os.path.join(out, "config.json.keep"))
    os.mkdir(os.path.join(out, "config.json"))
    export_cmd_fails([model_b, out], "an output file that is a directory", "exists and is a directory")
    check(sorted(os.listdir(out)) == sorted(list(before) + ["config.json.keep"]),
          f"no temporary file is left: {sorted(os.listdir(out))}")
    with open(os.path.join(out, "model.safetensors"), "rb") as f:
        check(f.read() == before["model.safetensors"], "model.safetensors of the earlier export is kept")


def check_errors(tmp):
    """a truncated file, a flipped bit in the parameters or the AdaHOP words, a version 1 file: one-line errors,
    exit 1"""
    with open(os.path.join(tmp, "gpt2.bin"), "rb") as f:
        gpt2 = f.read()
    with open(os.path.join(tmp, "llama.bin"), "rb") as f:
        llama = f.read()
    export_fails(tmp, "truncated.bin", gpt2[:-4], "truncated")
    flipped = bytearray(gpt2)
    flipped[4 * HEADER_INTS + 100] ^= 0x10
    export_fails(tmp, "flipped_param.bin", bytes(flipped), "parameters section fails its CRC-32")
    flipped = bytearray(llama)
    flipped[-3] ^= 0x01
    export_fails(tmp, "flipped_adahop.bin", bytes(flipped), "AdaHOP state section fails its CRC-32")
    version1 = bytearray(gpt2)
    version1[4:8] = (1).to_bytes(4, "little")
    export_fails(tmp, "version1.bin", bytes(version1), "version 1 model file")


def resealed(data, **slots):
    """data with header slots changed (slot_N=value, int32) and the header CRC recomputed (the sections' CRCs kept)"""
    h = np.frombuffer(data[:4 * HEADER_INTS], dtype="<i4").copy()
    for name, value in slots.items():
        h[int(name.split("_")[1])] = np.array(value & 0xFFFFFFFF, dtype=np.uint32).astype("<i4")
    h[CRC_SLOT] = np.array(header_crc(h.tobytes()), dtype=np.uint32).astype("<i4")
    return h.tobytes() + data[4 * HEADER_INTS:]


def read_fails(tmp, name, data, expect):
    """model_file.read_model on a file holding `data` raises ModelFileError with a message that contains `expect`"""
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    try:
        model_file.read_model(path)
        msg = "read without an error"
    except model_file.ModelFileError as e:
        msg = str(e)
    check(expect in msg, f"{name}: {msg}", f"expected an error containing '{expect}'")


def check_gemm_section(tmp):
    """the GEMM algorithm table (contents 15, slots 22-23 its int32 word count, slot 28 its CRC), with numpy only:
    read past and checked, never interpreted"""
    cfg = dict(family=model_file.FAMILY_LLAMA, L=2, C=64, NH=4, NKV=2, H=96, V=100, Vp=128, maxT=32)
    params = random_model(cfg, seed=3)
    gemm = [3, -1, 0, 0x7FFFFFFF, -2 ** 31, 42, 7]    # opaque words: any int32 values
    plain, with_gemm = os.path.join(tmp, "state7.bin"), os.path.join(tmp, "state15.bin")
    write_model(plain, cfg, params, optimizer_state=True)
    write_model(with_gemm, cfg, params, optimizer_state=True, gemm_words=gemm)
    with open(plain, "rb") as f:
        plain_bytes = f.read()
    with open(with_gemm, "rb") as f:
        data = f.read()
    check(len(data) == len(plain_bytes) + 4 * len(gemm) and data[-4 * len(gemm):] == np.array(gemm, "<i4").tobytes(),
          f"contents 15: {len(gemm)} GEMM words after the AdaHOP words ({len(data)} bytes)")
    cfg7, params7, step7 = model_file.read_model(plain)
    cfg15, params15, step15 = model_file.read_model(with_gemm)
    same = params15.keys() == params7.keys() and all(np.array_equal(params15[k], params7[k]) for k in params7)
    check(same and cfg15 == cfg7 and step15 == step7 == 7,
          f"contents 15 reads as the same {len(params15)} tensors, shape and step {step15} as contents 7")
    check(all(np.array_equal(params15[k], params[k]) for k in params), "contents 15: the parameters as written")
    empty = os.path.join(tmp, "state15_empty.bin")
    with open(empty, "wb") as f:
        f.write(resealed(plain_bytes, slot_2=15))
    _, params0, _ = model_file.read_model(empty)
    check(all(np.array_equal(params0[k], params[k]) for k in params), "contents 15 with an empty GEMM table reads")
    export_hf.export(plain, os.path.join(tmp, "state7_hf"), "bf16")
    export_hf.export(with_gemm, os.path.join(tmp, "state15_hf"), "bf16")
    with open(os.path.join(tmp, "state7_hf", "model.safetensors"), "rb") as a, \
            open(os.path.join(tmp, "state15_hf", "model.safetensors"), "rb") as b:
        check(a.read() == b.read(), "contents 15 exports the same model.safetensors as contents 7")

    flipped = bytearray(data)
    flipped[-4 * len(gemm) + 5] ^= 0x40
    read_fails(tmp, "flipped_gemm.bin", bytes(flipped), "GEMM algorithms section fails its CRC-32")
    export_fails(tmp, "flipped_gemm.bin", bytes(flipped), "GEMM algorithms section fails its CRC-32")
    read_fails(tmp, "truncated_gemm.bin", data[:-4], "truncated")
    read_fails(tmp, "short_gemm.bin", resealed(data, slot_22=len(gemm) + 1), "truncated")
    read_fails(tmp, "long_gemm.bin", data + bytes(4), "truncated")
    read_fails(tmp, "no_gemm_words.bin", resealed(data, slot_2=7), "invalid GEMM algorithm table size 7")
    read_fails(tmp, "gemm_size_negative.bin", resealed(data, slot_23=-1), "invalid GEMM algorithm table size -")
    read_fails(tmp, "gemm_size_high_word.bin", resealed(data, slot_23=1),
               f"invalid GEMM algorithm table size {(1 << 32) + len(gemm)}")
    read_fails(tmp, "gemm_size_over_limit.bin", resealed(data, slot_22=(1 << 20) + 1),
               f"invalid GEMM algorithm table size {(1 << 20) + 1}")
    read_fails(tmp, "gemm_crc_without_table.bin", resealed(plain_bytes, slot_28=1), "GEMM algorithms section fails")
    for contents in (8, 11, 9, 13, 31):
        read_fails(tmp, f"contents{contents}.bin", resealed(data, slot_2=contents),
                   f"unknown contents flags {contents}")
    # a table of the most words allowed is a size check, not a refusal of the count
    read_fails(tmp, "gemm_size_at_limit.bin", resealed(data, slot_22=1 << 20), "truncated")

    # dev/checkpoint_crc.py: three sections seal slot 28 as zero; a prefix of the sections checks those only
    h = np.frombuffer(data[:4 * HEADER_INTS], dtype="<i4").copy()
    seal(h, [b"", b"", b""])
    check(h[CRC_SLOT + 4] == 0 and first_bad_section(h.tobytes(), [0, 0, 0]) is None,
          "seal with 3 sections: slot 28 (the GEMM algorithms' CRC) zero, the header CRC valid")
    three = [4 * model_file.num_params(cfg), 8 * model_file.num_params(cfg), 4 * 5]
    check(first_bad_section(bytes(flipped), three) is None
          and first_bad_section(bytes(flipped), three + [4 * len(gemm)]) == "GEMM algorithms",
          "first_bad_section checks the GEMM algorithms only when given 4 sections")


def check_tokenizer(ranks_path, tmp):
    """the exported tokenizer encodes like tiktoken with the same ranks (read by tiktoken's own loader)"""
    from tokenize_text import EOT, load_encoding
    from transformers import AutoTokenizer
    out = os.path.join(tmp, "gpt2_tokenizer")
    export_hf.export(os.path.join(tmp, "gpt2.bin"), out, "fp32", ranks_path)
    enc = load_encoding(ranks_path)
    tok = AutoTokenizer.from_pretrained(out)
    for text in TEXTS:
        want, got = enc.encode(text), tok.encode(text)
        check(want == got and tok.decode(got) == text, f"tokenizer: {text!r} -> {got[:8]}{'...' if len(got) > 8 else ''}")
    eot = tok.encode(export_hf.EOT_NAME)
    check(eot == [EOT] and tok.eos_token_id == EOT, f"tokenizer: {export_hf.EOT_NAME} is {eot}")


def main():
    """runs the checks; exits 1 if any failed"""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", help="tiktoken ranks file of the GPT-2 BPE: also test the exported tokenizer")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        check_gemm_section(tmp)
        check_files(tmp)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        skip("dev/test/test_export_hf.py (all but the file format checks)",
             f"{sys.executable} has no {e.name} (pip install -r dev/requirements.txt)")
        sys.exit(summary("test_export_hf"))
    gpt2 = dict(family=model_file.FAMILY_GPT2, L=2, C=64, NH=4, NKV=4, H=256, V=50257, Vp=50304, maxT=32)
    llama = dict(family=model_file.FAMILY_LLAMA, L=2, C=64, NH=4, NKV=2, H=96, V=100, Vp=128, maxT=32)
    with tempfile.TemporaryDirectory() as tmp:
        check_family(gpt2, "gpt2", tmp, optimizer_state=False)
        check_family(llama, "llama", tmp, optimizer_state=True)
        check_errors(tmp)
        if args.ranks:
            check_tokenizer(args.ranks, tmp)
        else:
            skip("dev/test/test_export_hf.py tokenizer", "no tokenizer ranks (--ranks data/gpt2.tiktoken)")
    sys.exit(summary("test_export_hf"))


if __name__ == "__main__":
    main()
