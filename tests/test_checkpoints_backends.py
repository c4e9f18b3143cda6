"""Extra backends: ONNX Runtime running the exported torch port, and the Keras port on all
three Keras backends (JAX and PyTorch each in a worker of its own, as verify and time run them,
in the background: tests/background.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from ports import PORTS, create_port
from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable
from shared.runtime.verify import VerifyCase, collect_logits, start_logits
from tests import background
from tests.checkpoints_support import ATOL, assert_same_tensors, images_for

# Taps are compared with the logits' tolerance scaled by their size: block outputs and
# pre-softmax activations reach |x| ~ 10, and fp32 keeps ~7 significant digits (measured max
# relative error 2e-7 .. 1e-6 on these specs).
TAP_RTOL = 5e-6


# RMSNorm (ports/onnx/export.py writes it out, the exporter has no symbolic for it) on the patch
# norm and in the blocks (aimv2), as qk-norm and a final norm with an epsilon of its own
# (internvit); pixtral's norm before the blocks is the same module of the torch port.
RMS_NORM_PRESETS = ["aimv2-tiny", "internvit-tiny"]


@pytest.mark.parametrize("preset", ["archive-keras", "mnist-vit-small", "siglip-tiny", "dinov2-reg-tiny",
                                    *RMS_NORM_PRESETS])
def test_onnx_runtime_reproduces_the_reference(preset: str) -> None:
    spec = get_preset(preset)  # pad + mean pooling + hidden head; post-norm + class token
    tensors, images = init_weights(spec, seed=3), images_for(spec, batch=3)
    taps: dict[str, np.ndarray] = {}
    expected = reference.forward(spec, tensors, images, taps)
    port = create_port("onnx", spec)
    port.load(tensors)
    assert np.abs(port.logits(images) - expected).max() <= ATOL
    compiled = port.compiled_forward()(port.prepare(images))  # all ORT graph optimisations on
    assert np.abs(port.to_numpy(compiled) - expected).max() <= ATOL
    got = port.intermediates(images)
    assert set(got) == set(taps)
    for name, value in taps.items():
        scale = max(1.0, float(np.abs(value).max()))
        assert np.abs(got[name] - value).max() <= TAP_RTOL * scale, name
    assert_same_tensors(port.export(), tensors)  # read back from the ONNX graph's initializers
    assert port.param_count() == spec.derived.params
    with pytest.raises(FrameworkUnavailable, match="inference only"):
        port.logits(images, train=True)


@background.task("keras-backends", "test_checkpoints_backends.py::test_keras_port_on_another")
def keras_on_every_backend(start: background.Start) -> dict[str, dict]:
    """The Keras port on its JAX and PyTorch backends, each in its own worker (Keras' backend is
    fixed at import), through the launcher every command uses. One spec, the one where Keras
    differs most from torch (pad remainder, head width 32 = 4x dim/heads, mean pooling, hidden
    head); Keras on TensorFlow runs in-process in every other test."""
    spec = get_preset("archive-keras")
    case = VerifyCase(spec, init_weights(spec, seed=3), probe_batch(spec, batch=2))
    workdir = Path(tempfile.mkdtemp(prefix="portbench-keras-backends-"))
    reports = {name: collect_logits(start(start_logits(name, [case], workdir, "cpu")), 300)[0]
               for name in ("keras-jax", "keras-torch")}
    return {"reference": reference.forward(spec, case.tensors, case.images), **reports}


@pytest.mark.parametrize(("name", "backend"), [("keras-jax", "jax"), ("keras-torch", "torch")])
def test_keras_port_on_another_backend(name: str, backend: str) -> None:
    assert PORTS[name].env == {"KERAS_BACKEND": backend}
    runs = background.result("keras-backends")
    report = runs[name]
    assert not report.get("error"), report.get("error")
    assert report["versions"]["keras_backend"] == backend
    assert np.abs(report["logits"] - runs["reference"]).max() <= ATOL
    assert report["param_count"] == get_preset("archive-keras").derived.params
