"""ports/keras/user.py on a user's own Keras model: examples/keras_functional_vit.py (functional,
mnist-vit-small) and a subclassed model around it. Canonical weights are renamed to the example's
native names by hand here (`native_weights`); the binding engine does this for users."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ports import load_port_part
from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset, resolve_spec
from shared.core.tolerance import logit_atol, max_abs_diff
from shared.core.weights import Tensors, init_weights
from shared.errors import InputError, SpecError, WeightsError

user = load_port_part("keras", "user")
import keras  # noqa: E402  (after the registry has set KERAS_BACKEND)
from keras import layers  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPEC = get_preset("mnist-vit-small")


def load_example(name: str) -> ModuleType:
    """An example file loaded by path, as `--model FILE.py:NAME` loads a user's file."""
    found = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


example = load_example("keras_functional_vit")


def native_weights(w: Tensors) -> Tensors:
    """Canonical tensors under the example's variable paths (the class token and the position
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


@pytest.fixture(scope="module")
def case() -> dict:
    w = init_weights(SPEC, 0)
    images, taps = probe_batch(SPEC), {}
    ref = reference.forward(SPEC, w, images, taps)
    model = example.build(SPEC)
    user.assign(model, native_weights(w))
    return {"w": w, "images": images, "taps": taps, "ref": ref, "model": model,
            "atol": logit_atol(SPEC, ref)}


class Wrapped(keras.Model):
    """A subclassed model around the functional one, returning a dict (or a tuple)."""

    def __init__(self, inner: keras.Model, form: str) -> None:
        super().__init__(name="wrapped")
        self.inner, self.form = inner, form

    def call(self, x, training=False):
        logits = self.inner(x, training=training)
        if self.form == "tuple":  # logits and a (B, 17, 64)-like array: only one is (B, classes)
            return logits, keras.ops.zeros((keras.ops.shape(x)[0], 3, 5))
        return {"logits": logits, "probs": keras.ops.softmax(logits)}


def test_owns_keras_layers_and_models_only() -> None:
    assert user.owns(example.build(SPEC)) and user.owns(layers.Dense(3))
    assert not user.owns(object()) and not user.owns(np.zeros(3)) and not user.owns(example.build)


def test_parameters_are_the_variable_paths_in_definition_order(case) -> None:
    params = user.parameters(case["model"])
    expected = native_weights(case["w"])
    assert set(params) == set(expected)
    assert list(params)[:4] == ["patchify/kernel", "patchify/bias", "class_token/token", "positions/table"]
    assert {n: v.shape for n, v in params.items()} == {n: v.shape for n, v in expected.items()}
    assert all(v.dtype == np.float32 for v in params.values())
    assert "seed_generator" not in " ".join(params)  # a Dropout's RNG state is not a parameter


def test_assign_then_parameters_round_trips_bit_exactly(case) -> None:
    model = example.build(SPEC)
    values = {n: v + 0.5 for n, v in native_weights(case["w"]).items()}
    user.assign(model, values)
    back = user.parameters(model)
    assert all(np.array_equal(back[n], values[n]) for n in values)
    back["patchify/bias"][:] = 0  # a copy: the model is not changed through it
    assert np.array_equal(user.parameters(model)["patchify/bias"], values["patchify/bias"])


def test_assign_refuses_unknown_and_misshapen_before_writing(case) -> None:
    model = example.build(SPEC)
    before = user.parameters(model)["classifier/bias"]
    with pytest.raises(WeightsError, match="no variable 'classifier/weight'"):
        user.assign(model, {"classifier/bias": before + 1, "classifier/weight": before})
    with pytest.raises(WeightsError, match=r"'classifier/kernel' has shape \(64, 10\), got .*\(10, 64\)"):
        user.assign(model, {"classifier/bias": before + 1, "classifier/kernel": np.zeros((10, 64))})
    assert np.array_equal(user.parameters(model)["classifier/bias"], before)  # nothing written


def test_unbuilt_model_is_refused_in_one_line() -> None:
    with pytest.raises(WeightsError, match="is not built"):
        user.parameters(keras.Sequential([layers.Dense(2)]))


def test_run_matches_the_reference_and_the_planted_mistake_does_not(case) -> None:
    gap = max_abs_diff(user.run(case["model"], case["images"], "NHWC", None), case["ref"])
    assert gap <= case["atol"], gap
    mistaken = example.build_with_mistake(SPEC)
    user.assign(mistaken, native_weights(case["w"]))
    mistake_gap = max_abs_diff(user.run(mistaken, case["images"], "NHWC", None), case["ref"])
    assert mistake_gap > 100 * case["atol"], mistake_gap  # measured 2.5e-3 against 5e-6


def test_compiled_equals_run(case) -> None:
    eager = user.run(case["model"], case["images"], "NHWC", None)
    graph = user.compiled(case["model"], "NHWC", None)(case["images"])
    assert max_abs_diff(graph, eager) <= case["atol"]


def test_capture_through_a_sub_model_gives_the_reference_taps(case) -> None:
    got = user.capture(case["model"], case["images"], "NHWC", ["encoder_0_norm_mlp", "patchify",
                                                                 "encoder_1_attention"])
    assert got["patchify"].shape == (4, SPEC.derived.num_patches, SPEC.dim)  # (B, 4, 4, D) as tokens
    assert max_abs_diff(got["patchify"], case["taps"]["patch_embed"]) <= case["atol"]
    assert max_abs_diff(got["encoder_0_norm_mlp"], case["taps"]["block0.out"]) <= case["atol"]
    assert max_abs_diff(got["encoder_1_attention"], case["taps"]["block1.attn"]) <= case["atol"]
    with pytest.raises(InputError, match="no layer 'encoder_9_norm_mlp'"):
        user.capture(case["model"], case["images"], "NHWC", ["encoder_9_norm_mlp"])


def test_capture_by_wrapping_layer_calls_in_a_subclassed_model(case) -> None:
    wrapped = Wrapped(case["model"], "dict")
    paths = [layer.path for layer in user.layers(wrapped)]
    assert "encoder_0_norm_mlp" in paths and paths[0] == "wrapped"
    got = user.capture(wrapped, case["images"], "NHWC", ["encoder_0_norm_mlp"])
    assert max_abs_diff(got["encoder_0_norm_mlp"], case["taps"]["block0.out"]) <= case["atol"]
    assert "call" not in vars(case["model"].get_layer("encoder_0_norm_mlp"))  # the wrapper is gone


def test_layers_report_the_settings_and_the_planted_epsilon(case) -> None:
    found = user.layers(case["model"])
    norms = [layer for layer in found if layer.kind == "layer_norm"]
    assert len(norms) == 2 * SPEC.depth and all(n.settings["eps"] == 1e-5 for n in norms)
    gelus = [layer for layer in found if layer.kind == "gelu"]
    assert len(gelus) == SPEC.depth
    assert all(g.settings == {"approximate": False, "form": "gelu"} for g in gelus)
    attention = next(layer for layer in found if layer.kind == "attention")
    assert attention.settings["num_heads"] == 4 and attention.settings["head_dim"] == 16
    assert len(attention.params) == 8  # query, key, value, attention_output: kernel and bias
    dropout_rates = {layer.settings["rate"] for layer in found if layer.kind == "dropout"}
    assert dropout_rates == {0.0, 0.1}
    owned = [p for layer in found for p in layer.params]
    assert sorted(owned) == sorted(user.parameters(case["model"]))  # each parameter owned once
    mistaken = user.layers(example.build_with_mistake(SPEC))
    assert {n.settings["eps"] for n in mistaken if n.kind == "layer_norm"} == {0.001}


def test_run_picks_the_output_element_or_refuses_in_one_line(case) -> None:
    as_dict, as_tuple = Wrapped(case["model"], "dict"), Wrapped(case["model"], "tuple")
    logits = user.run(case["model"], case["images"], "NHWC", None)
    assert np.array_equal(user.run(as_dict, case["images"], "NHWC", "logits"), logits)
    assert np.array_equal(user.run(as_tuple, case["images"], "NHWC", None), logits)
    assert np.array_equal(user.run(as_tuple, case["images"], "NHWC", "0"), logits)
    with pytest.raises(InputError, match=r"returns 2 arrays of shape \(batch=4, classes\)") as error:
        user.run(as_dict, case["images"], "NHWC", None)
    assert "\n" not in str(error.value)
    with pytest.raises(InputError, match="'scores' is not among the model's outputs"):
        user.run(as_dict, case["images"], "NHWC", "scores")
    with pytest.raises(InputError, match="logits have shape"):
        user.run(as_tuple, case["images"], "NHWC", "1")


def test_run_converts_to_the_models_own_layout(case) -> None:
    logits = user.run(case["model"], case["images"], "NHWC", None)
    nhw = keras.Input((28, 28))
    takes_nhw = keras.Model(nhw, case["model"](layers.Reshape((28, 28, 1))(nhw)))
    nchw = keras.Input((1, 28, 28))
    takes_nchw = keras.Model(nchw, case["model"](layers.Permute((2, 3, 1))(nchw)))
    assert np.array_equal(user.run(takes_nhw, case["images"], "NHW", None), logits)
    assert np.array_equal(user.run(takes_nchw, case["images"], "NCHW", None), logits)
    with pytest.raises(InputError, match="input layout 'HWC' is not one of"):
        user.run(case["model"], case["images"], "HWC", None)


def test_example_refuses_a_spec_it_does_not_implement_in_one_line() -> None:
    with pytest.raises(SpecError, match="pooling='mean' is not implemented, expected 'cls'"):
        example.build(resolve_spec("mnist-vit-small", ["pooling=mean"]))
