"""ports/flax/user.py on a user's own flax.nnx model: examples/flax_nnx_vit.py (mnist-vit-small)
and a module around it. Canonical weights are renamed to the example's native names by hand here
(`native_weights`); the binding engine does this for users."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from ports import load_port_part
from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset, resolve_spec
from shared.core.tolerance import logit_atol, max_abs_diff
from shared.core.weights import Tensors, init_weights
from shared.errors import InputError, SpecError, WeightsError

user = load_port_part("flax", "user")

ROOT = Path(__file__).resolve().parent.parent
SPEC = get_preset("mnist-vit-small")


def load_example(name: str) -> ModuleType:
    """An example file loaded by path, as `--model FILE.py:NAME` loads a user's file."""
    found = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


example = load_example("flax_nnx_vit")


def native_weights(w: Tensors) -> Tensors:
    """Canonical tensors under the example's nnx paths (the patch kernel flattened to a Linear's
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


@pytest.fixture(scope="module")
def case() -> dict:
    w = init_weights(SPEC, 0)
    images, taps = probe_batch(SPEC), {}
    ref = reference.forward(SPEC, w, images, taps)
    model = example.build(SPEC)
    user.assign(model, native_weights(w))
    return {"w": w, "images": images, "taps": taps, "ref": ref, "model": model,
            "atol": logit_atol(SPEC, ref)}


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
        if self.form == "tuple":  # only the first is (B, classes)
            return logits, jnp.zeros((x.shape[0], 3, 5))
        return {"logits": logits, "probs": jax.nn.softmax(logits)}


def test_owns_nnx_modules_only() -> None:
    assert user.owns(example.build(SPEC)) and user.owns(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    assert not user.owns(object()) and not user.owns(np.zeros(3)) and not user.owns(jax.nn.gelu)


def test_parameters_are_the_nnx_paths_in_definition_order(case) -> None:
    params = user.parameters(case["model"])
    expected = native_weights(case["w"])
    assert set(params) == set(expected)
    # definition order, not nnx.state's alphabetical one
    assert list(params)[:4] == ["patch_projection.kernel", "patch_projection.bias", "class_embedding",
                                "position_embedding"]
    assert {n: v.shape for n, v in params.items()} == {n: v.shape for n, v in expected.items()}
    assert all(v.dtype == np.float32 for v in params.values())
    assert "rngs" not in " ".join(params)  # dropout's RNG keys and counts are not parameters


def test_assign_then_parameters_round_trips_bit_exactly(case) -> None:
    model = example.build(SPEC)
    values = {n: v + 0.5 for n, v in native_weights(case["w"]).items()}
    user.assign(model, values)
    back = user.parameters(model)
    assert all(np.array_equal(back[n], values[n]) for n in values)
    back["classifier.bias"][:] = 0  # a copy: the model is not changed through it
    assert np.array_equal(user.parameters(model)["classifier.bias"], values["classifier.bias"])


def test_assign_refuses_unknown_and_misshapen_before_writing(case) -> None:
    model = example.build(SPEC)
    before = user.parameters(model)["classifier.bias"]
    with pytest.raises(WeightsError, match=r"no variable 'classifier\.weight'"):
        user.assign(model, {"classifier.bias": before + 1, "classifier.weight": before})
    with pytest.raises(WeightsError, match=r"'classifier\.kernel' has shape \(64, 10\), got .*\(10, 64\)"):
        user.assign(model, {"classifier.bias": before + 1, "classifier.kernel": np.zeros((10, 64))})
    assert np.array_equal(user.parameters(model)["classifier.bias"], before)  # nothing written


def test_run_matches_the_reference_and_the_planted_mistake_does_not(case) -> None:
    gap = max_abs_diff(user.run(case["model"], case["images"], "NHWC", None), case["ref"])
    assert gap <= case["atol"], gap
    mistaken = example.build_with_mistake(SPEC)
    user.assign(mistaken, native_weights(case["w"]))
    mistake_gap = max_abs_diff(user.run(mistaken, case["images"], "NHWC", None), case["ref"])
    assert mistake_gap > 20 * case["atol"], mistake_gap  # measured 3.5e-4 against 5e-6


def test_run_is_eval_mode_and_leaves_the_models_own_mode(case) -> None:
    model = case["model"]
    assert not model.layers[0].feed_forward.dropout.deterministic  # nnx.Dropout starts active
    first = user.run(model, case["images"], "NHWC", None)
    assert np.array_equal(user.run(model, case["images"], "NHWC", None), first)  # dropout off
    assert not model.layers[0].feed_forward.dropout.deterministic  # a view ran, not the model


def test_compiled_equals_run(case) -> None:
    eager = user.run(case["model"], case["images"], "NHWC", None)
    jitted = user.compiled(case["model"], "NHWC", None)(case["images"])
    assert max_abs_diff(jitted, eager) <= case["atol"]


def test_capture_intercepts_module_calls_and_gives_the_reference_taps(case) -> None:
    got = user.capture(case["model"], case["images"], "NHWC", ["layers.0", "patch_projection",
                                                                 "layers.1.self_attention"])
    assert max_abs_diff(got["patch_projection"], case["taps"]["patch_embed"]) <= case["atol"]
    assert max_abs_diff(got["layers.0"], case["taps"]["block0.out"]) <= case["atol"]
    assert max_abs_diff(got["layers.1.self_attention"], case["taps"]["block1.attn"]) <= case["atol"]
    assert nnx.state(case["model"], nnx.Intermediate) == nnx.State({})  # nothing left in the model
    with pytest.raises(InputError, match=r"no module 'layers\.9'"):
        user.capture(case["model"], case["images"], "NHWC", ["layers.9"])


def test_layers_report_the_settings_and_the_planted_gelu(case) -> None:
    found = user.layers(case["model"])
    assert found[0].path == "" and found[0].params == ("class_embedding", "position_embedding")
    norms = [layer for layer in found if layer.kind == "layer_norm"]
    assert len(norms) == 2 * SPEC.depth
    assert all(n.settings["eps"] == 1e-5 and not n.settings["use_fast_variance"] for n in norms)
    gelus = [layer for layer in found if layer.kind == "gelu"]
    assert [g.path for g in gelus] == [f"layers.{i}.feed_forward.activation" for i in range(SPEC.depth)]
    assert all(g.settings == {"approximate": False, "form": "gelu"} for g in gelus)
    attention = next(layer for layer in found if layer.kind == "attention")
    assert attention.settings["num_heads"] == 4 and attention.settings["head_dim"] == 16
    assert len(attention.params) == 8  # query, key, value, out: kernel and bias
    assert not any(layer.path.endswith(".query") for layer in found)  # part of the attention
    owned = [p for layer in found for p in layer.params]
    assert sorted(owned) == sorted(user.parameters(case["model"]))  # each parameter owned once
    mistaken = [layer for layer in user.layers(example.build_with_mistake(SPEC)) if layer.kind == "gelu"]
    assert {layer.settings["form"] for layer in mistaken} == {"gelu_tanh"}
    assert all(layer.settings["approximate"] for layer in mistaken)


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
    for layout in ("NHW", "NCHW"):
        assert np.array_equal(user.run(Wrapped(case["model"], layout), case["images"], layout, None), logits)
    with pytest.raises(InputError, match="'NHW' drops the channel axis, but the images have 3 channels"):
        user.run(case["model"], np.zeros((1, 28, 28, 3), np.float32), "NHW", None)


def test_example_refuses_a_spec_it_does_not_implement_in_one_line() -> None:
    with pytest.raises(SpecError, match="pooling='mean' is not implemented, expected 'cls'"):
        example.build(resolve_spec("mnist-vit-small", ["pooling=mean"]))
