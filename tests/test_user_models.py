"""ports/keras/user.py and ports/flax/user.py on a user's own model: examples/keras_functional_vit.py
(functional) and examples/flax_nnx_vit.py (flax.nnx), both mnist-vit-small, and a model around
each that returns a dict or a tuple or takes another layout. The same tests for both frameworks;
what only one framework has (Keras' unbuilt models and call wrapping, nnx's eval view) is its own
test below. Canonical weights are renamed to the examples' native names by hand here
(`native_weights`); the binding engine does this for users."""

from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ports import load_port_part
from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset, resolve_spec
from shared.core.tolerance import logit_atol, max_abs_diff
from shared.core.weights import Tensors, init_weights
from shared.errors import InputError, SpecError, WeightsError

ROOT = Path(__file__).resolve().parent.parent
SPEC = get_preset("mnist-vit-small")
FRAMEWORKS = ("keras", "flax")


def load_example(name: str) -> ModuleType:
    """An example file loaded by path, as `--model FILE.py:NAME` loads a user's file."""
    found = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def keras_names(w: Tensors) -> Tensors:
    """Canonical tensors under the Keras example's variable paths (the class token and the position
    table carry a leading (1, 1) / (1,) axis there)."""
    out = {"patchify/kernel": w["patch_embed.kernel"], "patchify/bias": w["patch_embed.bias"],
           "class_token/token": w["cls_token"].reshape(1, 1, -1), "positions/table": w["pos_embed"][None],
           "classifier/kernel": w["head.out.kernel"], "classifier/bias": w["head.out.bias"]}
    for i in range(SPEC.depth):
        c, n = f"blocks.{i}.", f"encoder_{i}_"
        pairs = (("query", "query"), ("key", "key"), ("value", "value"), ("out", "attention_output"))
        for ours, theirs in pairs:
            for part in ("kernel", "bias"):
                out[f"{n}attention/{theirs}/{part}"] = w[f"{c}attn.{ours}.{part}"]
        for ours, theirs in (("norm1", "norm_attention"), ("norm2", "norm_mlp")):
            out[f"{n}{theirs}/gamma"], out[f"{n}{theirs}/beta"] = w[f"{c}{ours}.scale"], w[f"{c}{ours}.bias"]
        for ours, theirs in (("fc1", "mlp_in"), ("fc2", "mlp_out")):
            for part in ("kernel", "bias"):
                out[f"{n}{theirs}/{part}"] = w[f"{c}mlp.{ours}.{part}"]
    return out


def flax_names(w: Tensors) -> Tensors:
    """Canonical tensors under the nnx example's paths (the patch kernel flattened to a Linear's
    (ph * pw * C, D); the class token and the position table with a leading batch axis)."""
    out = {"patch_projection.kernel": w["patch_embed.kernel"].reshape(-1, SPEC.dim),
           "patch_projection.bias": w["patch_embed.bias"],
           "class_embedding": w["cls_token"].reshape(1, 1, -1), "position_embedding": w["pos_embed"][None],
           "classifier.kernel": w["head.out.kernel"], "classifier.bias": w["head.out.bias"]}
    for i in range(SPEC.depth):
        c, n = f"blocks.{i}.", f"layers.{i}."
        for name in ("query", "key", "value", "out"):
            for part in ("kernel", "bias"):
                out[f"{n}self_attention.{name}.{part}"] = w[f"{c}attn.{name}.{part}"]
        for ours, theirs in (("norm1", "attention_norm"), ("norm2", "output_norm")):
            out[f"{n}{theirs}.scale"], out[f"{n}{theirs}.bias"] = w[f"{c}{ours}.scale"], w[f"{c}{ours}.bias"]
        for ours, theirs in (("fc1", "fc_in"), ("fc2", "fc_out")):
            for part in ("kernel", "bias"):
                out[f"{n}feed_forward.{theirs}.{part}"] = w[f"{c}mlp.{ours}.{part}"]
    return out


@dataclass(frozen=True)
class Framework:
    """What differs between the two frameworks' runs of the same tests."""

    name: str
    user: ModuleType  # ports/<fw>/user.py
    example: ModuleType
    native_weights: Any  # canonical -> the example's native names
    wrapped: Any  # (model, form) -> a model around it: form "dict", "tuple", "NHW" or "NCHW"
    other_layer: Any  # a bare layer of this framework, owned too
    first_params: list[str]  # the first four parameter names, in definition order
    sep: str  # the separator of native names
    taps: dict[str, str]  # a layer path -> the reference tap it captures
    missing_layer: str  # a path the model lacks, and the refusal's words for it
    mistake_factor: float  # the planted mistake's gap, in tolerances (measured below)


def keras_framework() -> Framework:
    user = load_port_part("keras", "user")
    import keras  # after the registry has set KERAS_BACKEND

    class Wrapped(keras.Model):
        """A subclassed model around the functional one: a dict or a tuple out, or another layout in."""

        def __init__(self, inner: keras.Model, form: str) -> None:
            super().__init__(name="wrapped")
            self.inner, self.form = inner, form

        def call(self, x, training=False):
            if self.form == "NHW":
                return self.inner(x[..., None], training=training)
            if self.form == "NCHW":
                return self.inner(keras.ops.transpose(x, (0, 2, 3, 1)), training=training)
            logits = self.inner(x, training=training)
            if self.form == "tuple":  # logits and a (B, 3, 5, 2) map: one (B, classes)
                return logits, keras.ops.zeros((keras.ops.shape(x)[0], 3, 5, 2))
            return {"logits": logits, "probs": keras.ops.softmax(logits)}

    return Framework("keras", user, load_example("keras_functional_vit"), keras_names, Wrapped,
                     lambda: keras.layers.Dense(3),
                     ["patchify/kernel", "patchify/bias", "class_token/token", "positions/table"], "/",
                     {"patchify": "patch_embed", "encoder_0_norm_mlp": "block0.out",
                      "encoder_1_attention": "block1.attn"},
                     "no layer 'encoder_9_norm_mlp'", 100)  # measured 2.5e-3 against 5e-6


def flax_framework() -> Framework:
    user = load_port_part("flax", "user")
    import jax
    import jax.numpy as jnp
    from flax import nnx

    class Wrapped(nnx.Module):
        """A module around the example that returns a dict or a tuple, or takes another layout."""

        def __init__(self, inner: nnx.Module, form: str) -> None:
            self.inner, self.form = inner, form

        def __call__(self, x: jax.Array):
            if self.form == "NHW":
                return self.inner(x[..., None])
            if self.form == "NCHW":
                return self.inner(x.transpose(0, 2, 3, 1))
            logits = self.inner(x)
            if self.form == "tuple":  # only the first is (B, classes); (B, 3, 5) would be tokens
                return logits, jnp.zeros((x.shape[0], 3, 5, 2))
            return {"logits": logits, "probs": jax.nn.softmax(logits)}

    return Framework("flax", user, load_example("flax_nnx_vit"), flax_names, Wrapped,
                     lambda: nnx.Linear(2, 3, rngs=nnx.Rngs(0)),
                     ["patch_projection.kernel", "patch_projection.bias", "class_embedding",
                      "position_embedding"], ".",
                     {"patch_projection": "patch_embed", "layers.0": "block0.out",
                      "layers.1.self_attention": "block1.attn"},
                     "no module 'layers.9'", 20)  # measured 3.5e-4 against 5e-6


@functools.cache
def setup(name: str) -> tuple[Framework, dict]:
    fw = keras_framework() if name == "keras" else flax_framework()
    w = init_weights(SPEC, 0)
    images, taps = probe_batch(SPEC), {}
    ref = reference.forward(SPEC, w, images, taps)
    model = fw.example.build(SPEC)
    fw.user.assign(model, fw.native_weights(w))
    return fw, {"w": w, "images": images, "taps": taps, "ref": ref, "model": model,
                "atol": logit_atol(SPEC, ref)}


@pytest.fixture(params=FRAMEWORKS)
def both(request) -> tuple[Framework, dict]:
    return setup(request.param)


def name(fw: Framework, *parts: str) -> str:
    return fw.sep.join(parts)


def test_owns_its_own_layers_and_models_only(both) -> None:
    fw, _ = both
    assert fw.user.owns(fw.example.build(SPEC)) and fw.user.owns(fw.other_layer())
    assert not fw.user.owns(object()) and not fw.user.owns(np.zeros(3)) and not fw.user.owns(fw.example.build)


def test_parameters_are_the_native_paths_in_definition_order(both) -> None:
    fw, case = both
    params = fw.user.parameters(case["model"])
    expected = fw.native_weights(case["w"])
    assert set(params) == set(expected)
    assert list(params)[:4] == fw.first_params  # definition order (nnx.state's is alphabetical)
    assert {n: v.shape for n, v in params.items()} == {n: v.shape for n, v in expected.items()}
    assert all(v.dtype == np.float32 for v in params.values())
    assert "seed_generator" not in " ".join(params) and "rngs" not in " ".join(params)  # dropout RNG state


def test_assign_then_parameters_round_trips_bit_exactly(both) -> None:
    fw, case = both
    model = fw.example.build(SPEC)
    values = {n: v + 0.5 for n, v in fw.native_weights(case["w"]).items()}
    fw.user.assign(model, values)
    back = fw.user.parameters(model)
    assert all(np.array_equal(back[n], values[n]) for n in values)
    bias = name(fw, "classifier", "bias")
    back[bias][:] = 0  # a copy: the model is not changed through it
    assert np.array_equal(fw.user.parameters(model)[bias], values[bias])


def test_assign_refuses_unknown_and_misshapen_before_writing(both) -> None:
    fw, _ = both
    model = fw.example.build(SPEC)
    bias, weight, kernel = (name(fw, "classifier", p) for p in ("bias", "weight", "kernel"))
    before = fw.user.parameters(model)[bias]
    with pytest.raises(WeightsError, match=f"no variable {re.escape(repr(weight))}"):
        fw.user.assign(model, {bias: before + 1, weight: before})
    misshapen = re.escape(repr(kernel)) + r" has shape \(64, 10\), got .*\(10, 64\)"
    with pytest.raises(WeightsError, match=misshapen):
        fw.user.assign(model, {bias: before + 1, kernel: np.zeros((10, 64))})
    assert np.array_equal(fw.user.parameters(model)[bias], before)  # nothing written


def test_run_matches_the_reference_and_the_planted_mistake_does_not(both) -> None:
    fw, case = both
    gap = max_abs_diff(fw.user.run(case["model"], case["images"], "NHWC", None), case["ref"])
    assert gap <= case["atol"], gap
    mistaken = fw.example.build_with_mistake(SPEC)
    fw.user.assign(mistaken, fw.native_weights(case["w"]))
    mistake_gap = max_abs_diff(fw.user.run(mistaken, case["images"], "NHWC", None), case["ref"])
    assert mistake_gap > fw.mistake_factor * case["atol"], mistake_gap


def test_compiled_equals_run(both) -> None:
    fw, case = both
    eager = fw.user.run(case["model"], case["images"], "NHWC", None)
    graph = fw.user.compiled(case["model"], "NHWC", None)(case["images"])
    assert max_abs_diff(graph, eager) <= case["atol"]


def test_capture_gives_the_reference_taps(both) -> None:
    fw, case = both
    got = fw.user.capture(case["model"], case["images"], "NHWC", list(fw.taps))
    first = next(iter(fw.taps))  # the patch embedding, as tokens
    assert got[first].shape == (4, SPEC.derived.num_patches, SPEC.dim)
    for path, tap in fw.taps.items():
        assert max_abs_diff(got[path], case["taps"][tap]) <= case["atol"], path
    missing = re.search(r"'(.*)'", fw.missing_layer).group(1)
    with pytest.raises(InputError, match=re.escape(fw.missing_layer)):
        fw.user.capture(case["model"], case["images"], "NHWC", [missing])


def test_layers_report_the_settings_each_parameter_owned_once(both) -> None:
    fw, case = both
    found = fw.user.layers(case["model"])
    norms = [layer for layer in found if layer.kind == "layer_norm"]
    assert len(norms) == 2 * SPEC.depth and all(n.settings["eps"] == 1e-5 for n in norms)
    gelus = [layer for layer in found if layer.kind == "gelu"]
    assert len(gelus) == SPEC.depth
    assert all(g.settings == {"approximate": False, "form": "gelu"} for g in gelus)
    attention = next(layer for layer in found if layer.kind == "attention")
    assert attention.settings["num_heads"] == 4 and attention.settings["head_dim"] == 16
    assert len(attention.params) == 8  # query, key, value, output: kernel and bias
    owned = [p for layer in found for p in layer.params]
    assert sorted(owned) == sorted(fw.user.parameters(case["model"]))  # each parameter owned once


def test_run_picks_the_output_element_or_refuses_in_one_line(both) -> None:
    fw, case = both
    as_dict, as_tuple = fw.wrapped(case["model"], "dict"), fw.wrapped(case["model"], "tuple")
    logits = fw.user.run(case["model"], case["images"], "NHWC", None)
    assert np.array_equal(fw.user.run(as_dict, case["images"], "NHWC", "logits"), logits)
    assert np.array_equal(fw.user.run(as_tuple, case["images"], "NHWC", None), logits)
    assert np.array_equal(fw.user.run(as_tuple, case["images"], "NHWC", "0"), logits)
    assert np.array_equal(fw.user.run(as_dict, case["images"], "NHWC", None), logits)  # its `logits`
    with pytest.raises(InputError, match="'scores' is not among the model's outputs") as error:
        fw.user.run(as_dict, case["images"], "NHWC", "scores")
    assert "\n" not in str(error.value)
    with pytest.raises(InputError, match="logits have shape"):
        fw.user.run(as_tuple, case["images"], "NHWC", "1")


def test_run_converts_to_the_models_own_layout(both) -> None:
    fw, case = both
    logits = fw.user.run(case["model"], case["images"], "NHWC", None)
    for layout in ("NHW", "NCHW"):
        wrapped = fw.wrapped(case["model"], layout)
        assert np.array_equal(fw.user.run(wrapped, case["images"], layout, None), logits), layout
    with pytest.raises(InputError, match="input layout 'HWC' is not one of"):
        fw.user.run(case["model"], case["images"], "HWC", None)
    with pytest.raises(InputError, match="'NHW' drops the channel axis, but the images have 3 channels"):
        fw.user.run(case["model"], np.zeros((1, 28, 28, 3), np.float32), "NHW", None)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_example_refuses_a_spec_it_does_not_implement_in_one_line(framework: str) -> None:
    fw, _ = setup(framework)
    with pytest.raises(SpecError, match="pooling='mean' is not implemented, expected 'cls'"):
        fw.example.build(resolve_spec("mnist-vit-small", ["pooling=mean"]))


# ---- what only one framework has ---------------------------------------------------------------
def test_keras_planted_epsilon_and_unbuilt_model() -> None:
    fw, _ = setup("keras")
    import keras

    mistaken = fw.user.layers(fw.example.build_with_mistake(SPEC))
    assert {n.settings["eps"] for n in mistaken if n.kind == "layer_norm"} == {0.001}
    rates = {d.settings["rate"] for d in fw.user.layers(fw.example.build(SPEC)) if d.kind == "dropout"}
    assert rates == {0.0, 0.1}
    with pytest.raises(WeightsError, match="is not built"):
        fw.user.parameters(keras.Sequential([keras.layers.Dense(2)]))


def test_keras_capture_by_wrapping_layer_calls_in_a_subclassed_model() -> None:
    fw, case = setup("keras")
    wrapped = fw.wrapped(case["model"], "dict")
    paths = [layer.path for layer in fw.user.layers(wrapped)]
    assert "encoder_0_norm_mlp" in paths and paths[0] == "wrapped"
    got = fw.user.capture(wrapped, case["images"], "NHWC", ["encoder_0_norm_mlp"])
    assert max_abs_diff(got["encoder_0_norm_mlp"], case["taps"]["block0.out"]) <= case["atol"]
    assert "call" not in vars(case["model"].get_layer("encoder_0_norm_mlp"))  # the wrapper is gone


def test_flax_planted_gelu_paths_and_fast_variance() -> None:
    fw, case = setup("flax")
    found = fw.user.layers(case["model"])
    assert found[0].path == "" and found[0].params == ("class_embedding", "position_embedding")
    assert all(not n.settings["use_fast_variance"] for n in found if n.kind == "layer_norm")
    gelus = [layer.path for layer in found if layer.kind == "gelu"]
    assert gelus == [f"layers.{i}.feed_forward.activation" for i in range(SPEC.depth)]
    assert not any(layer.path.endswith(".query") for layer in found)  # part of the attention
    mistaken = [la for la in fw.user.layers(fw.example.build_with_mistake(SPEC)) if la.kind == "gelu"]
    assert {layer.settings["form"] for layer in mistaken} == {"gelu_tanh"}
    assert all(layer.settings["approximate"] for layer in mistaken)


def test_flax_run_is_eval_mode_and_leaves_the_models_own_mode() -> None:
    fw, case = setup("flax")
    from flax import nnx

    model = case["model"]
    assert not model.layers[0].feed_forward.dropout.deterministic  # nnx.Dropout starts active
    first = fw.user.run(model, case["images"], "NHWC", None)
    assert np.array_equal(fw.user.run(model, case["images"], "NHWC", None), first)  # dropout off
    assert not model.layers[0].feed_forward.dropout.deterministic  # a view ran, not the model
    fw.user.capture(model, case["images"], "NHWC", ["layers.0"])
    assert nnx.state(model, nnx.Intermediate) == nnx.State({})  # capture leaves nothing in the model


def test_a_tower_without_a_classifier_is_checked_against_its_pooled_width() -> None:
    """timm's DINOv2 and SigLIP and Transformers' vision towers return the pooled vector."""
    import numpy as np

    from shared.core.presets import get_preset
    from shared.errors import InputError
    from shared.your_model.evaluate import check_logits

    tower = get_preset("siglip-tiny")
    check_logits(np.zeros((4, 32)), tower, 4)  # the pooled width, 32: accepted
    with pytest.raises(InputError, match=r"expected \(4, 32\) \(batch 4 x the pooled width: no classifier\)"):
        check_logits(np.zeros((4, 10)), tower, 4)
