"""Extra backends: ONNX Runtime running the exported torch port, and the Keras port on all
three Keras backends (each in its own process, as verify and time run them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ports import PORTS, create_port
from shared.core import reference
from shared.core.presets import get_preset
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable
from tests.checkpoints_support import ATOL, assert_same_tensors, images_for

ROOT = Path(__file__).resolve().parents[1]
# Taps are compared with the logits' tolerance scaled by their size: block outputs and
# pre-softmax activations reach |x| ~ 10, and fp32 keeps ~7 significant digits (measured max
# relative error 2e-7 .. 1e-6 on these specs).
TAP_RTOL = 5e-6


@pytest.mark.parametrize("preset", ["archive-keras", "mnist-vit-small"])
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


KERAS_CHECK = """
import json, sys
import numpy as np
from ports import create_port
from shared.core import reference
from shared.core.presets import get_preset
from shared.core.inputs import probe_batch
from shared.core.weights import init_weights
out = {}
for preset in sys.argv[2:]:
    spec = get_preset(preset)
    tensors, images = init_weights(spec, seed=3), probe_batch(spec, batch=2)
    port = create_port(sys.argv[1], spec)
    port.load(tensors)
    exported = port.export()
    out[preset] = {
        "logits": float(np.abs(port.logits(images) - reference.forward(spec, tensors, images)).max()),
        "exact_round_trip": all(np.array_equal(exported[k], tensors[k]) for k in tensors),
        "params": port.param_count() == spec.derived.params,
        "backend": __import__("keras").backend.backend(),
    }
print("RESULT " + json.dumps(out))
"""


def test_keras_port_on_three_backends() -> None:
    # One spec, the one where Keras differs most from torch (pad remainder, head width 32 = 4x
    # dim/heads, mean pooling, hidden head): Keras-on-JAX spends ~40 s compiling eager ops on a
    # loaded 2-core machine; class-token specs run on Keras/TensorFlow in the library tests.
    presets = ["archive-keras"]
    entries = {"keras": "tensorflow", "keras-jax": "jax", "keras-torch": "torch"}
    procs = {}
    for name, backend in entries.items():
        assert PORTS[name].env == {"KERAS_BACKEND": backend}
        env = {**os.environ, **PORTS[name].env, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
        procs[name] = subprocess.Popen([sys.executable, "-c", KERAS_CHECK, name, *presets], cwd=ROOT,
                                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-2000:]
        result = json.loads(next(line for line in stdout.splitlines() if line.startswith("RESULT "))[7:])
        for preset, r in result.items():
            assert r["backend"] == entries[name]
            assert r["logits"] <= ATOL, (name, preset, r)
            assert r["exact_round_trip"] and r["params"], (name, preset, r)
