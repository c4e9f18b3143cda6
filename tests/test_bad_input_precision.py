"""Bad input on the precision ladder (shared/core/precision.py): each contradiction or unavailable
rung is refused in one line, before any work and without touching a file."""

from __future__ import annotations

from pathlib import Path

import pytest
from adversarial import refused

CASES = [
    (("verify", "--spec", "quadrant", "--frameworks", "torch", "--precision", "mixed"),
     "--precision mixed with --dtype float32"),
    (("verify", "--spec", "quadrant", "--frameworks", "torch", "--dtype", "float16", "--allow-tf32"),
     "--allow-tf32 with --dtype float16"),
    (("logits", "--spec", "quadrant", "--framework", "reference", "--dtype", "bfloat16", "--out", "x.npy"),
     "the reference computes in float64 only"),
    (("logits", "--spec", "quadrant", "--framework", "torch", "--allow-tf32", "--out", "x.npy"),
     "TF32 is a CUDA tensor-core mode"),
    (("logits", "--spec", "quadrant", "--framework", "mlx", "--dtype", "bfloat16", "--precision", "mixed",
      "--out", "x.npy"), "MLX has no mixed precision"),
    (("verify", "--model", "nowhere.py:build", "--spec", "quadrant", "--dtype", "bfloat16"),
     "--model runs your model in the dtype it was written in"),
    (("verify", "--spec", "quadrant", "--dtype", "float8"), "invalid choice: 'float8'"),
]


@pytest.mark.parametrize(("argv", "expect"), CASES, ids=[" ".join(a[:1] + a[-3:]) for a, _ in CASES])
def test_contradictions_are_one_line(tmp_path: Path, argv: tuple[str, ...], expect: str) -> None:
    refused(tmp_path, *argv, expect=expect)


def test_weights_stored_below_float32_are_one_line(tmp_path: Path) -> None:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file

    from shared.core.presets import get_preset
    from shared.core.weights import init_weights, save_weights

    spec = get_preset("quadrant")
    tensors = init_weights(spec, 0)
    save_weights(tmp_path / "w.safetensors", spec, tensors)
    with safe_open(str(tmp_path / "w.safetensors"), framework="numpy") as handle:
        metadata = handle.metadata()
    half = {k: np.asarray(v, np.float16) for k, v in tensors.items()}
    save_file(half, str(tmp_path / "half.safetensors"), metadata=metadata)
    (tmp_path / "w.safetensors").unlink()
    refused(tmp_path, "verify", "--weights", "half.safetensors", "--frameworks", "torch",
            "--dtype", "float16", expect="is stored as float16, a lower precision than the float32")
