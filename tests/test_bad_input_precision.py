"""Bad input on the precision ladder (shared/core/precision.py): each contradiction or unavailable
rung is refused in one line, before any work and without touching a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial import refused
from tests.refusals import refused_promptly

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


# ---- a rung a framework does not offer: one decision (ports.rung_refusal) for every command ----
NOT_OFFERED = [
    (("--frameworks", "mlx", "--dtype", "bfloat16", "--precision", "mixed"),
     "mlx: rung bfloat16-mixed is not offered: MLX has no mixed precision"),
    (("--frameworks", "mlx", "--dtype", "float16", "--precision", "mixed"),
     "mlx: rung float16-mixed is not offered"),
    (("--frameworks", "onnx", "--dtype", "bfloat16", "--precision", "mixed"),
     "onnx: rung bfloat16-mixed is not offered: the extra ONNX backend exports the float32 torch port only"),
    (("--frameworks", "onnx", "--dtype", "float16"), "onnx: rung float16-pure is not offered"),
    (("--frameworks", "torch", "--allow-tf32", "--device", "cpu"), "torch: TF32 is a CUDA tensor-core mode"),
    (("--frameworks", "mlx,onnx", "--dtype", "bfloat16", "--precision", "mixed"), "mlx: rung bfloat16-mixed"),
]


@pytest.mark.parametrize("command", ["time", "main", "verify"])
@pytest.mark.parametrize(("argv", "expect"), NOT_OFFERED, ids=[" ".join(a) for a, _ in NOT_OFFERED])
def test_a_rung_not_offered_is_the_same_refusal_for_time_and_verify(
        tmp_path: Path, command: str, argv: tuple[str, ...], expect: str) -> None:
    """Before, `time` wrote results with a CRASHED row and exited 1; now it refuses before any
    worker, as verify does: exit 2, one line, nothing written."""
    outputs = ("--json", "r.json") if command != "verify" else ()
    line = refused_promptly(tmp_path, command, "--spec", "quadrant", *argv, *outputs, expect=expect)
    assert line.startswith("error: no framework could run here: "), line
    assert not (tmp_path / "results").exists()


def test_a_rung_refused_in_the_worker_is_unavailable_not_crashed(tmp_path: Path) -> None:
    """`--device auto` (time's default): only the worker knows the device it resolved to; its
    refusal is the same function's, and the row is `unavailable` as verify's would be."""
    refused_promptly(tmp_path, "time", "--spec", "quadrant", "--frameworks", "torch", "--allow-tf32",
                     "--json", "r.json", "--modes", "eager", seconds=300,
                     expect="no framework could run here: torch: TF32 is a CUDA tensor-core mode")


def test_a_framework_without_the_rung_is_an_unavailable_row_beside_those_that_run() -> None:
    from ports import rung_refusal
    from shared.cli.time import choose_frameworks
    from shared.core.precision import Precision

    mixed = Precision("bfloat16", "mixed")
    runnable, rows = choose_frameworks("torch,mlx,onnx", refusal=lambda n: rung_refusal(n, mixed, "cpu"))
    assert runnable == ["torch"]
    assert [(r["framework"], r["status"]) for r in rows] == [("mlx", "unavailable"), ("onnx", "unavailable")]
    assert rows[0]["reason"] == rung_refusal("mlx", mixed, "cpu")
    assert rung_refusal("torch", Precision(tf32=True), "auto") is None  # decided where the device is known
    assert rung_refusal("flax", Precision("float16", "pure"), "cpu") is None
