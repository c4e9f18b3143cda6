"""The defaults audit: the project's ports use no framework default where the spec gives a value;
planted defaults are found in source text and in built torch, Keras, nnx and mlx.nn models, read
by each framework's user.py and compared by shared/your_model/spec_check.py."""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from pathlib import Path

import jax
import pytest

from ports import create_port, load_port_part
from shared.core.presets import get_preset
from shared.errors import InputError
from shared.teaching.audit import audit_model, audit_ports, audit_source, probe_specs
from shared.teaching.framework_defaults import defaults_module
from shared.your_model.spec_check import from_layers

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("framework", ["torch", "flax", "keras", "mlx"])
def test_project_ports_use_no_divergent_default(framework: str) -> None:
    findings, checked = audit_ports([framework], get_preset("quadrant"))
    assert findings == []
    assert len(checked) == 3  # source + two probe builds


def test_source_audit_names_each_default() -> None:
    text = "\n".join([
        "a = nn.LayerNorm(32)",
        "b = nnx.LayerNorm(32, epsilon=1e-6, rngs=r)",
        "c = keras.ops.gelu(x)",
        "d = jax.nn.gelu",
        "e = nn.MultiheadAttention(32, 4)",
        "f = keras.losses.SparseCategoricalCrossentropy()",
        "g = layers.LayerNormalization(epsilon=1e-6)",  # pinned: no finding
        "h = partial(jax.nn.gelu, approximate=False)",  # pinned: no finding
        "i = nnx.Conv(1, 8, (4, 4), rngs=r)",
        "j = torch.optim.AdamW(params, lr=1e-3)",
        "k = nn.RMSNorm(32)",  # torch: the dtype's machine epsilon
        "m = keras.layers.RMSNormalization(epsilon=1e-5)",  # pinned: no finding
    ])
    found = [(f.where, f.entry) for f in audit_source(text, "user.py")]
    assert found == [("user.py:1", "layer_norm_eps"), ("user.py:2", "layer_norm_variance"),
                     ("user.py:3", "gelu"), ("user.py:4", "gelu"), ("user.py:5", "batch_first"),
                     ("user.py:6", "cross_entropy"), ("user.py:9", "remainder"),
                     ("user.py:10", "adamw_epsilon"), ("user.py:11", "rms_norm_eps")]


def test_built_torch_model_with_defaults() -> None:
    """torch's defaults in a user's nn.Module: each finding is the spec check's one text."""
    from torch import nn

    spec = get_preset("quadrant").replace(activation="gelu_tanh")
    model = nn.Sequential(nn.LayerNorm(32), nn.GELU(), nn.MultiheadAttention(32, 2))
    assert [f.line() for f in audit_model(model, spec, "user")] == [  # eps 1e-5 equals the spec's here
        "user:1: [gelu] activation: your model gelu, spec gelu_tanh",
        "user:2: [batch_first] batch_first: your model MultiheadAttention batch_first=False (torch's "
        "default: a (B, T, D) input attends across the batch), spec batch-first tokens",
        "user:2: [head_width] heads: your model 2, spec 4",
        "user:2: [head_width] head_dim: your model 16, spec 8",
        "user: [depth] depth: your model 1 attention layers, spec 2",
    ]
    layers = load_port_part("torch", "user").layers(model)  # verify --model's reader and comparison
    assert [c.line() for c in from_layers(spec, layers)][1].startswith("batch_first: your model Multihead")


def test_built_keras_and_nnx_models_with_defaults() -> None:
    defaults_module("keras")  # prepares the process before TensorFlow loads
    import keras

    spec = probe_specs(get_preset("quadrant"))[0]  # eps 3.3e-4, MLP tanh, head exact
    port = create_port("keras", spec)
    port.model.blocks[1].norm2.epsilon = 1e-3  # Keras' default
    found = {(f.where.split(":")[1], f.entry) for f in audit_model(port.model, spec, "keras")}
    # Keras numbers its auto-generated names per process (block_79 after earlier tests), so the
    # expected place is the layer's own path, as Keras names it
    assert found == {(port.model.blocks[1].norm2.path, "layer_norm_eps")}
    user = keras.Sequential([keras.layers.LayerNormalization(name="ln"),
                             keras.layers.Activation(keras.ops.gelu, name="mlp_act")])
    exact = spec.replace(activation="gelu")
    found = {(f.where.split(":")[1], f.entry) for f in audit_model(user, exact, "u")}
    assert found == {("sequential/ln", "layer_norm_eps"), ("sequential/mlp_act", "gelu")}  # 1e-3; tanh

    port = create_port("flax", spec)
    port.model.blocks[0].norm1.use_fast_variance = True
    port.model.head.act = partial(jax.nn.gelu)  # tanh by default, the spec's head wants exact
    found = {(f.where.split(":")[1], f.entry) for f in audit_model(port.model, spec, "flax")}
    assert found == {("blocks.0.norm1", "layer_norm_variance"), ("head.act", "gelu")}


def test_built_mlx_model_with_defaults() -> None:
    """MLX's own defaults planted in the MLX port and in a user's mlx.nn model: found by layer."""
    from mlx import nn

    spec = probe_specs(get_preset("quadrant"))[0]  # eps 3.3e-4, MLP tanh, head exact
    port = create_port("mlx", spec)
    port.model.blocks[1].norm2 = nn.LayerNorm(spec.dim)  # MLX's default eps 1e-5
    port.model.head.act = nn.GELU(approx="fast")  # x * sigmoid(1.702x): neither form
    found = {(f.where.split(":")[1], f.entry) for f in audit_model(port.model, spec, "mlx")}
    assert found == {("blocks.1.norm2", "layer_norm_eps"), ("head.act", "gelu_names")}
    user = nn.Sequential(nn.MultiHeadAttention(32, 2), nn.GELU(approx="precise"))
    found = {f.entry for f in audit_model(user, spec.replace(activation="gelu"), "u")}
    # 2 heads of width 16 against 4 of 8; no bias; the tanh form; one attention layer of two
    assert found == {"head_width", "attention_bias", "gelu", "depth"}
    text = "a = nn.MultiHeadAttention(32, 4)\nb = nn.GELU(approx='none')\nc = nn.GELU()"
    assert [(f.where, f.entry) for f in audit_source(text, "m.py")] == [("m.py:1", "attention_bias"),
                                                                      ("m.py:3", "gelu")]


def test_audit_model_refuses_what_no_framework_owns_in_one_line() -> None:
    with pytest.raises(InputError, match=r"^audit_model: a builtins\.object is not a torch nn\.Module"):
        audit_model(object(), get_preset("quadrant"))


def test_cli_source_mode(tmp_path: Path) -> None:
    user = tmp_path / "mine.py"
    user.write_text("import torch.nn as nn\nnorm = nn.LayerNorm(64)\n")
    proc = subprocess.run([sys.executable, "compare.py", "audit", "--source", str(user)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert f"{user}:2: [layer_norm_eps] nn.LayerNorm(...) without eps" in proc.stdout
    missing = subprocess.run([sys.executable, "compare.py", "audit", "--source", "nope.py"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120, check=False)
    assert missing.returncode == 2 and "source file 'nope.py' does not exist" in missing.stderr
    from tests.adversarial import refused

    (tmp_path / "broken.py").write_text("def f(:\n")  # was reported as a finding, exit 1
    refused(tmp_path, "audit", "--source", "broken.py",
            expect="--source broken.py: not Python source (line 1: invalid syntax)")


def test_the_bare_audit_builds_the_parallel_texts_only(monkeypatch, tmp_path) -> None:
    """`compare.py audit` builds its ports in one process: by default the installed parallel
    texts, never keras-jax/keras-torch (the Keras port's own source, on a backend this process
    cannot start once Keras runs) or onnx; naming one of those is refused in one line."""
    from ports import NATIVE
    from shared.cli._common import installed_ports
    from shared.teaching import audit as audit_tool  # the command imports it when it runs
    from tests.adversarial import refused, run_cli

    built: list[list[str]] = []

    def audit_ports(frameworks: list[str], spec: object) -> tuple[list, list]:
        built.append(frameworks)
        return [], []

    monkeypatch.setattr(audit_tool, "audit_ports", audit_ports)
    assert run_cli("audit", cwd=tmp_path).code == 0
    assert built == [[name for name in NATIVE if name in installed_ports()]]
    refused(tmp_path, "audit", "--frameworks", "keras-jax",
            expect="framework 'keras-jax' is not one this command runs")
