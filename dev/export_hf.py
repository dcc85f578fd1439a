"""Exports one of our model or checkpoint files (llmc/checkpoint.h) as a Hugging Face `transformers` model folder.

The folder holds config.json, model.safetensors and, with --ranks, the GPT-2 tokenizer files (vocab.json,
merges.txt, tokenizer_config.json, special_tokens_map.json) made from a tiktoken ranks file. It loads with
`AutoModelForCausalLM.from_pretrained(folder)` and `AutoTokenizer.from_pretrained(folder)`, offline:
  GPT-2 (family 0)  -> GPT2LMHeadModel: tanh GELU ("gelu_new"), LayerNorm eps 1e-5, LM head tied to wte;
                       our [out, in] linears become GPT-2's Conv1D [in, out] weights.
  LLaMA (family 1)  -> LlamaForCausalLM: RMSNorm eps 1e-5, RoPE theta 10000 (rotate-half pairs), grouped-query
                       attention, SwiGLU, no biases, untied LM head; the fused qkv and gate/up are split.
The padded vocab rows (V..Vp) are dropped: the exported vocab is the real V. Optimizer and AdaHOP state and the
GEMM algorithm table in a training-state file are ignored, but every section's CRC-32 is checked (dev/model_file.py
reads the file): a corrupt file, or one of another format version, is a one-line error. --dtype bf16 rounds the
FP32 weights to nearest even. An input that is not a regular file (a FIFO, a device, a directory) is refused before
it is read, a model file before its parameters are read when its size is not the one its header implies. The
folder's files are written under temporary names and renamed into place once all are complete (dev/data/
tool_files.py): a failed export leaves no partial file and an earlier export in the folder as it was.

Needs numpy only (the safetensors file is written directly; its format: an 8-byte little-endian header length,
a JSON header naming each tensor's dtype, shape and byte range, then the raw little-endian data).

usage: python dev/export_hf.py MODEL.bin OUT_DIR [--dtype bf16|fp32] [--ranks gpt2.tiktoken]
"""
import argparse
import json
import os
import sys

import numpy as np

import model_file
from model_file import FAMILY_GPT2, ModelFileError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
import ranks_file  # noqa: E402
import tool_files  # noqa: E402
from ranks_file import RanksFileError  # noqa: E402
from tool_files import FileProblem  # noqa: E402

NORM_EPS, ROPE_THETA = 1e-5, 10000.0
EOT_NAME = "<|endoftext|>"


def fail(msg):
    """one-line error and exit 1"""
    print(f"export_hf: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_model(path):
    """model_file.read_model, with a one-line error for a bad file"""
    try:
        return model_file.read_model(path)
    except ModelFileError as e:
        fail(str(e))


def gpt2_tensors(cfg, p):
    """GPT2LMHeadModel's state dict (lm_head tied to wte, so not stored); Conv1D weights are [in, out]"""
    V = cfg["V"]
    t = {"transformer.wte.weight": p["wte"][:V], "transformer.wpe.weight": p["wpe"],
         "transformer.ln_f.weight": p["lnfw"], "transformer.ln_f.bias": p["lnfb"]}
    for l in range(cfg["L"]):
        pre = f"transformer.h.{l}."
        t.update({pre + "ln_1.weight": p["ln1w"][l], pre + "ln_1.bias": p["ln1b"][l],
                  pre + "attn.c_attn.weight": p["qkvw"][l].T, pre + "attn.c_attn.bias": p["qkvb"][l],
                  pre + "attn.c_proj.weight": p["attprojw"][l].T, pre + "attn.c_proj.bias": p["attprojb"][l],
                  pre + "ln_2.weight": p["ln2w"][l], pre + "ln_2.bias": p["ln2b"][l],
                  pre + "mlp.c_fc.weight": p["fcw"][l].T, pre + "mlp.c_fc.bias": p["fcb"][l],
                  pre + "mlp.c_proj.weight": p["fcprojw"][l].T, pre + "mlp.c_proj.bias": p["fcprojb"][l]})
    return t


def llama_tensors(cfg, p):
    """LlamaForCausalLM's state dict: qkv split into q/k/v (rows: NH, NKV, NKV heads), gate/up into gate and up"""
    V, H, HS = cfg["V"], cfg["H"], cfg["C"] // cfg["NH"]
    nq, nkv = cfg["NH"] * HS, cfg["NKV"] * HS
    t = {"model.embed_tokens.weight": p["wte"][:V], "model.norm.weight": p["rmsfw"], "lm_head.weight": p["lmheadw"][:V]}
    for l in range(cfg["L"]):
        pre = f"model.layers.{l}."
        qkv, gateup = p["qkvw"][l], p["gateupw"][l]
        t.update({pre + "input_layernorm.weight": p["rms1w"][l],
                  pre + "self_attn.q_proj.weight": qkv[:nq], pre + "self_attn.k_proj.weight": qkv[nq:nq + nkv],
                  pre + "self_attn.v_proj.weight": qkv[nq + nkv:], pre + "self_attn.o_proj.weight": p["attprojw"][l],
                  pre + "post_attention_layernorm.weight": p["rms2w"][l],
                  pre + "mlp.gate_proj.weight": gateup[:H], pre + "mlp.up_proj.weight": gateup[H:],
                  pre + "mlp.down_proj.weight": p["downw"][l]})
    return t


def hf_config(cfg, dtype_name, eot):
    """config.json of the family"""
    common = {"vocab_size": cfg["V"], "torch_dtype": dtype_name, "bos_token_id": eot, "eos_token_id": eot,
              "initializer_range": 0.02, "use_cache": True}
    if cfg["family"] == FAMILY_GPT2:
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_positions": cfg["maxT"],
                "n_ctx": cfg["maxT"], "n_embd": cfg["C"], "n_layer": cfg["L"], "n_head": cfg["NH"], "n_inner": None,
                "activation_function": "gelu_new", "layer_norm_epsilon": NORM_EPS, "resid_pdrop": 0.0,
                "embd_pdrop": 0.0, "attn_pdrop": 0.0, "scale_attn_weights": True, "tie_word_embeddings": True,
                **common}
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": cfg["C"],
            "intermediate_size": cfg["H"], "num_hidden_layers": cfg["L"], "num_attention_heads": cfg["NH"],
            "num_key_value_heads": cfg["NKV"], "head_dim": cfg["C"] // cfg["NH"], "hidden_act": "silu",
            "max_position_embeddings": cfg["maxT"], "rms_norm_eps": NORM_EPS, "rope_theta": ROPE_THETA,
            "rope_scaling": None, "attention_bias": False, "mlp_bias": False, "attention_dropout": 0.0,
            "tie_word_embeddings": False, "pretraining_tp": 1, **common}


def bf16_bits(x):
    """float32 array -> uint16 bfloat16 bits, rounded to nearest even"""
    u = np.ascontiguousarray(x, dtype="<f4").view("<u4").astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def safetensors_chunks(tensors, bf16):
    """the bytes of a safetensors file of {name: float32 array}, in BF16 or F32, as a list of chunks"""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        arr = tensors[name]
        raw = (bf16_bits(arr) if bf16 else np.ascontiguousarray(arr, dtype="<f4")).tobytes()
        header[name] = {"dtype": "BF16" if bf16 else "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return [len(head).to_bytes(8, "little"), head] + blobs


def bytes_to_unicode():
    """GPT-2's reversible map of the 256 byte values to printable unicode characters"""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def read_ranks(path):
    """ranks_file.read_ranks (token bytes indexed by rank), with a one-line error for a bad file"""
    try:
        return ranks_file.read_ranks(path)
    except RanksFileError as e:
        fail(str(e))


def bpe_merge(ranks, token, max_rank):
    """the byte-pair parts of token under the merges of rank < max_rank (tiktoken's merge order)"""
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return parts
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


def json_file(obj, **kwargs):
    """the chunks of a JSON file holding obj"""
    return [json.dumps(obj, **kwargs).encode("utf-8")]


def tokenizer_files(ranks_path, cfg):
    """{name: chunks} of vocab.json, merges.txt and the tokenizer configs of the GPT-2 BPE in the ranks file, EOT =
    the last id"""
    tokens = read_ranks(ranks_path)
    if len(tokens) + 1 != cfg["V"]:
        fail(f"ranks file '{ranks_path}' has {len(tokens)} tokens + {EOT_NAME}, the model's vocab is {cfg['V']}")
    ranks = {t: r for r, t in enumerate(tokens)}
    to_uni = bytes_to_unicode()
    show = lambda t: "".join(to_uni[b] for b in t)
    merges = []
    for r, t in enumerate(tokens[256:], start=256):
        parts = bpe_merge(ranks, t, r)
        if len(parts) != 2:
            fail(f"ranks file '{ranks_path}': token {r} is not a merge of two lower-ranked tokens")
        merges.append(f"{show(parts[0])} {show(parts[1])}")
    vocab = {show(t): r for r, t in enumerate(tokens)}
    vocab[EOT_NAME] = len(tokens)
    special = {"bos_token": EOT_NAME, "eos_token": EOT_NAME, "unk_token": EOT_NAME}
    return {"vocab.json": json_file(vocab, ensure_ascii=False),
            "merges.txt": [("#version: 0.2\n" + "\n".join(merges) + "\n").encode("utf-8")],
            "special_tokens_map.json": json_file(special, indent=2),
            "tokenizer_config.json": json_file({"tokenizer_class": "GPT2Tokenizer", "model_max_length": cfg["maxT"],
                                                "add_prefix_space": False, "add_bos_token": False, **special}, indent=2)}


def export(model_path, out_dir, dtype, ranks_path=None):
    """writes the folder (its files replace those of an earlier export only once all are complete); returns the
    model's cfg"""
    cfg, params, step = read_model(model_path)
    tensors = gpt2_tensors(cfg, params) if cfg["family"] == FAMILY_GPT2 else llama_tensors(cfg, params)
    config = hf_config(cfg, "bfloat16" if dtype == "bf16" else "float32", cfg["V"] - 1)
    files = {"model.safetensors": safetensors_chunks(tensors, dtype == "bf16"), "config.json": json_file(config, indent=2),
             "generation_config.json": json_file({"bos_token_id": cfg["V"] - 1, "eos_token_id": cfg["V"] - 1}, indent=2)}
    if ranks_path:
        files.update(tokenizer_files(ranks_path, cfg))
    try:
        tool_files.write_files(out_dir, files)
    except FileProblem as e:
        fail(str(e))
    name = config["architectures"][0]
    print(f"exported {model_path} (step {step}) as {name} L={cfg['L']} C={cfg['C']} NH={cfg['NH']} "
          f"NKV={cfg['NKV']} V={cfg['V']} ({dtype}) to {out_dir}{' with the tokenizer' if ranks_path else ''}")
    return cfg


def main():
    """command line"""
    ap = tool_files.ArgumentParser("export_hf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="model or training-state file (llmc/checkpoint.h)")
    ap.add_argument("out_dir", help="folder to write (created if missing)")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16", help="weight dtype (default bf16)")
    ap.add_argument("--ranks", help="tiktoken ranks file of the GPT-2 BPE (e.g. data/gpt2.tiktoken): write the tokenizer")
    args = ap.parse_args()
    export(args.model, args.out_dir, args.dtype, args.ranks)


if __name__ == "__main__":
    main()
