"""GPU test of dev/export_hf.py: the trainer's BF16 logits (build/model_logits_gpu, the forward pass of
train_gpt2_adahop.cu) of each model file given equal those of its bf16 export run in transformers (weights as
exported, compute in FP32 on the GPU), within BF16 tolerance: relative Frobenius error <= 2e-2 (test_gpt2cu's
tolerance for BF16 logits) over a 4 x 64 batch of random tokens.

usage: python dev/test/export_gpu_test.py MODEL.bin [MODEL.bin ...]   (from the repository root, after
       `make build/model_logits_gpu`; run by dev/test/run_gpu_tests.sh on trained d12 and llama:d12 checkpoints)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "dev"))
import export_hf  # noqa: E402
from eval_hf import load_model  # noqa: E402
from pycheck import check, summary  # noqa: E402
from test_export_hf import hf_logits_on, write_tokens  # noqa: E402

TOL_FROB = 2e-2


def check_model(path, tmp):
    """checks that the trainer's and transformers' logits of the model file agree"""
    import torch
    cfg, _, step = export_hf.read_model(path)
    tokens = np.random.default_rng(1).integers(0, cfg["V"], size=(4, 64))
    tok_path, out_path, hf_dir = (os.path.join(tmp, n) for n in ("tokens.bin", "logits.bin", "hf"))
    write_tokens(tok_path, tokens)
    subprocess.run([os.path.join(ROOT, "build", "model_logits_gpu"), path, tok_path, out_path], check=True)
    ours = np.fromfile(out_path, dtype="<f4").reshape(*tokens.shape, -1).astype(np.float64)
    export_hf.export(path, hf_dir, "bf16")
    model = load_model(hf_dir, torch.bfloat16).float().to("cuda")
    theirs = hf_logits_on(model, tokens, "cuda")
    frob = float(np.linalg.norm(ours - theirs) / np.linalg.norm(theirs))
    top1 = float((ours.argmax(-1) == theirs.argmax(-1)).mean())
    check(frob <= TOL_FROB, f"{path} ({type(model).__name__}, step {step}): trainer vs transformers logits rel. Frobenius "
          f"{frob:.2e} (tol {TOL_FROB:g}), max abs {np.abs(ours - theirs).max():.3e}, same argmax {top1:.3f}")


def main():
    """checks every model file given"""
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        for path in sys.argv[1:]:
            check_model(path, tmp)
    sys.exit(summary("export_gpu_test"))


if __name__ == "__main__":
    main()
