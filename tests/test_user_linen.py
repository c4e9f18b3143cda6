"""Flax linen and Keras 2 models where an nnx / Keras 3 one stands (ports/flax/linen.py, the tf_keras
half of ports/keras/user.py). In process: a big_vision-style linen ViT (tests/linen_vit.py, compact
modules, `nn.gelu` called as a function) as a `(module, variables)` pair and inside an
`nnx.bridge.ToNNX`, named by linen's '/'-joined paths so the big_vision table binds it, run,
compiled and captured at the reference's taps (what `trace` reads; the ToNNX capture failed with
"Cannot infer collection name"). In a worker (Transformers hides its Flax and TF classes unless the
worker starts for their framework): Transformers' Flax ViT, whose attention calls value before key
(bound by structure in definition order), and its TF ViT on tf_keras."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from ports import load_port_part
from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.presets import resolve_spec
from shared.core.tolerance import logit_atol, max_abs_diff
from shared.core.weights import init_weights
from shared.errors import WeightsError
from shared.your_model.binding import bind
from shared.your_model.evaluate import conventions
from shared.your_model.spec_check import from_layers
from shared.your_model.taps import tap_paths
from tests import background, linen_vit
from tests.adversarial import Outcome

# big_vision's conventions: positions without a class row, tanh GELU, linen's LayerNorm epsilon
SPEC = resolve_spec("quadrant", ["pos_embed_class_row=false", "activation=gelu_tanh", "layer_norm_eps=1e-6"])
FORMS = ("pair", "bridge")


def linen_model(form: str, factory: Any = linen_vit.build) -> Any:
    module, variables = factory(SPEC)
    if form == "pair":
        return module, variables
    import jax.numpy as jnp
    from flax import nnx
    from flax.nnx import bridge

    model = bridge.ToNNX(module, rngs=nnx.Rngs(0))
    bridge.lazy_init(model, jnp.zeros((1, SPEC.image_height, SPEC.image_width, SPEC.channels)))
    return model


@functools.cache
def setup(form: str) -> dict[str, Any]:
    user = load_port_part("flax", "user")
    model = linen_model(form)
    params = user.parameters(model)
    found = user.layers(model)
    binding = bind(SPEC, {n: v.shape for n, v in params.items()}, found, "flax",
                   conventions("flax", SPEC, model))
    w, images, taps = init_weights(SPEC, 1), probe_batch(SPEC), {}
    ref = reference.forward(SPEC, w, images, taps)
    user.assign(model, binding.to_native(w))
    return {"user": user, "model": model, "params": params, "layers": found, "binding": binding,
            "images": images, "taps": taps, "ref": ref, "atol": logit_atol(SPEC, ref)}


@pytest.mark.fast
@pytest.mark.parametrize("form", FORMS)
def test_linen_binds_by_the_big_vision_table_runs_compiles_and_captures_the_taps(form: str) -> None:
    case = setup(form)
    user, model = case["user"], case["model"]
    assert user.owns(model)
    assert {"embedding/kernel", "cls", "pos_embedding", "head/bias",
            "Transformer/encoderblock_1/MultiHeadDotProductAttention_0/out/kernel"} <= set(case["params"])
    assert case["binding"].rule == "big_vision"
    assert max_abs_diff(user.run(model, case["images"], "NHWC", None), case["ref"]) <= case["atol"]
    compiled = user.compiled(model, "NHWC", None)(case["images"])
    assert max_abs_diff(compiled, case["ref"]) <= case["atol"]
    paths = tap_paths(case["binding"], case["layers"], SPEC)
    assert paths["block0.norm1"] == "Transformer/encoderblock_0/LayerNorm_0"
    got = user.capture(model, case["images"], "NHWC", list(paths.values()))
    for tap, path in paths.items():
        value = got[path].reshape(len(case["images"]), -1, SPEC.dim)
        assert max_abs_diff(value, case["taps"][tap]) <= case["atol"], tap


@pytest.mark.fast
def test_linen_layers_read_settings_and_the_gelu_a_compact_mlp_computes() -> None:
    user = load_port_part("flax", "user")
    found = user.layers(linen_model("pair"))
    attention = [la for la in found if la.kind == "attention"]
    assert [la.settings["num_heads"] for la in attention] == [4, 4] and attention[0].settings["head_dim"] == 8
    assert len(attention[0].params) == 8  # query, key, value, out: kernel and bias
    gelus = [(la.path, la.settings["form"]) for la in found if la.kind == "gelu"]
    assert gelus == [(f"Transformer/encoderblock_{i}/MlpBlock_0/gelu", "gelu_tanh") for i in range(2)]
    owned = [p for la in found for p in la.params]
    assert sorted(owned) == sorted(user.parameters(linen_model("pair")))  # each owned once
    # the same model against a spec with the exact GELU and epsilon 1e-5: both named, with the layer
    wrong = resolve_spec("quadrant", ["pos_embed_class_row=false"])
    lines = [c.line() for c in from_layers(wrong, found)]
    assert "layer_norm_eps: your model 1e-06, spec 1e-05 (Transformer/encoderblock_0/LayerNorm_0)" in lines
    assert "activation: your model gelu_tanh, spec gelu (Transformer/encoderblock_0/MlpBlock_0/gelu)" in lines


@pytest.mark.fast
def test_linen_assign_refuses_a_frozen_dict_before_writing() -> None:
    from flax.core import freeze

    user = load_port_part("flax", "user")
    module, variables = linen_model("pair")
    frozen = (module, freeze(variables))
    bias = user.parameters(frozen)["head/bias"]
    with pytest.raises(WeightsError, match=r"'head/bias' is in a FrozenDict.*flax.core.unfreeze"):
        user.assign(frozen, {"head/bias": bias + 1})
    assert np.array_equal(user.parameters(frozen)["head/bias"], bias)


HF = "tests/hf_vit_models.py"
HF_SPEC = ("--spec", "quadrant", "--set", "depth=1", "--set", "layer_norm_eps=1e-12")


@background.task("transformers-flax-verify", "test_user_linen.py::test_transformers_flax_vit_binds")
def transformers_flax_verify(start: background.Start) -> Outcome:
    return background.compare_py(start, "verify", "--model", f"{HF}:flax_vit", "--framework", "flax",
                                 *HF_SPEC, env=background.transformers4_environ())


def test_transformers_flax_vit_binds_by_structure_in_definition_order() -> None:
    """Its attention calls query, value, key: bound in call order, key and value would swap."""
    outcome = background.result("transformers-flax-verify")
    assert "bound by structure" in outcome.stderr, outcome.stdout + outcome.stderr
    assert "yours (flax) | cpu    | 9,476  |" in outcome.stdout and "| PASS" in outcome.stdout
    # linen's LayerNorm default (use_fast_variance=True) is said, and does not fail it alone
    checks = [line for line in outcome.stdout.splitlines() if line.startswith("spec check:")]
    assert len(checks) == 1 and "layer_norm_variance: your model use_fast_variance=True" in checks[0]
    assert checks[0].endswith("the logits decide") and outcome.code == 0, outcome.stdout


