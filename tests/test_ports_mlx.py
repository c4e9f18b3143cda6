"""The MLX port beyond what tests/test_ports.py checks in every native port (every preset against
the float64 reference, pairwise agreement, round trips) and tests/test_training_parity.py (1 and
10 AdamW steps, the loop, resume): round trips of MLX's own layouts with the compiled forward,
the reference's taps, dropout, and `compare.py devices` (its gradients against every other port's are
tests/test_ports.py's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ports import create_port
from shared import REPO_ROOT
from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.tolerance import logit_atol, max_abs_diff
from shared.core.weights import init_weights

ROUND_TRIP_SPECS = {
    "archive-keras": get_preset("archive-keras"),
    # no qkv bias (a separate output bias here too), sincos positions (not a parameter), pooled
    # final norm, a hidden head layer, padding and post-norm
    "no-qkv-bias": get_preset("quadrant").replace(
        qkv_bias=False, pos_embed="sincos", pos_embed_class_row=False, final_norm="pooled", pooling="mean",
        head_hidden=(8,),
        image_height=9, remainder="pad", norm="post", head_dim=5),
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_SPECS))
def test_round_trip_is_bit_exact_and_compiled_forward_agrees(name: str) -> None:
    spec = ROUND_TRIP_SPECS[name]
    tensors = init_weights(spec, 7)
    port = create_port("mlx", spec)
    port.load(tensors)
    exported = port.export()
    assert list(exported) == list(tensors)
    for key, value in tensors.items():
        assert exported[key].dtype == np.float32 and np.array_equal(exported[key], value), key
    assert port.param_count() == spec.derived.params
    images = probe_batch(spec)
    eager = port.logits(images)
    assert max_abs_diff(eager, reference.forward(spec, tensors, images)) <= logit_atol(spec)
    compiled = port.compiled_forward()
    assert max_abs_diff(port.to_numpy(compiled(port.prepare(images))), eager) <= logit_atol(spec)
    port.load(init_weights(spec, 8))  # the compiled graph takes the parameters as inputs
    again = port.to_numpy(compiled(port.prepare(images)))
    assert max_abs_diff(again, port.logits(images)) <= logit_atol(spec)


def test_taps_have_the_reference_names_and_values() -> None:
    spec = get_preset("archive-torch")
    tensors, images = init_weights(spec, 0), probe_batch(spec, 2)
    ref_taps: dict[str, np.ndarray] = {}
    reference.forward(spec, tensors, images, ref_taps)
    port = create_port("mlx", spec)
    port.load(tensors)
    taps = port.intermediates(images)
    assert sorted(taps) == sorted(ref_taps)
    for name, value in taps.items():
        assert value.shape == ref_taps[name].shape, name
        assert max_abs_diff(value, ref_taps[name]) <= 1e-4, name


def test_dropout_only_in_train_mode_including_attention_dropout() -> None:
    spec = get_preset("quadrant").replace(dropout_attn=0.5)  # the path nn.MultiHeadAttention lacks
    tensors, images = init_weights(spec, 0), probe_batch(spec)
    port = create_port("mlx", spec)
    port.load(tensors)
    eval_logits = port.logits(images)
    assert max_abs_diff(port.logits(images, train=True), eval_logits) > 1e-3
    assert np.array_equal(port.logits(images), eval_logits)


def test_devices_reports_mlx_cpu_and_why_not_cuda_or_metal(tmp_path: Path) -> None:
    out = tmp_path / "devices.json"
    command = [sys.executable, "compare.py", "devices", "--frameworks", "mlx", "--json", str(out)]
    proc = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    rows = {r["device"]: r for r in json.loads(out.read_text())["entries"]}
    assert rows["cpu"]["usable"] and rows["cpu"]["reason"] is None
    import mlx.core as mx

    has_cuda = getattr(mx, "cuda", None) is not None and mx.cuda.is_available()
    if has_cuda or mx.metal.is_available():  # not this project's CI machine; state what holds
        gpu = "cuda" if has_cuda else "metal"
        assert rows[gpu]["usable"], rows[gpu]
        return
    for device in ("cuda", "metal"):
        assert not rows[device]["usable"] and rows[device]["reason"], rows[device]
        assert f"mlx: {rows[device]['reason']}" in proc.stdout
    if sys.platform == "linux":
        assert "Metal is not available on Linux" in rows["metal"]["reason"]
