"""Binding a user's parameters to canonical tensors (NumPy only, no framework): by a naming
convention, by structure, by a rename file; both directions; and each refusal in one line."""

from __future__ import annotations

import numpy as np
import pytest

from shared.checkpoints import export_tensors, import_tensors
from shared.core.layer import Layer
from shared.core.presets import get_preset
from shared.core.weights import init_weights
from shared.errors import SpecError, WeightsError
from shared.your_model.binding import Binding, bind
from shared.your_model.evaluate import library_tables
from shared.your_model.rules import read_rules
from shared.your_model.spec_check import from_layers

SPEC = get_preset("mnist-vit-small")


def conventions(spec=SPEC):
    return library_tables(spec)


def test_an_inert_library_tensor_does_not_stop_its_convention_from_binding() -> None:
    """Transformers' Dinov2WithRegistersModel holds a mask token (masked pre-training only): the
    hf table names it inert, so the model itself binds by that table, and nothing else is let off."""
    spec = get_preset("dinov2-s14-reg4").replace(image_height=28, image_width=28, dim=32, heads=4, head_dim=8,
                                                 mlp_dim=64, depth=2, pos_embed_class_row=True)
    native = {n: v.shape for n, v in export_tensors("hf", spec, init_weights(spec)).items()}
    assert "embeddings.mask_token" in native
    assert bind(spec, native, [], "torch", conventions(spec)).rule == "hf"
    extra = {**native, "embeddings.stray": (32,)}
    with pytest.raises(WeightsError):
        bind(spec, extra, [], "torch", conventions(spec))


def torch_style(spec=SPEC) -> tuple[dict[str, tuple[int, ...]], list[Layer]]:
    """The names, shapes and layers of examples/torch_mha_vit.py, without torch."""
    d, m = spec.dim, spec.mlp_dim
    shapes = {"class_embedding": (1, 1, d), "position_table": (1, 17, d),
              "to_patches.weight": (d, 1, 7, 7), "to_patches.bias": (d,)}
    layers = [Layer("", "other", ("class_embedding", "position_table"), {}),
              Layer("to_patches", "conv", ("to_patches.weight", "to_patches.bias"), {})]
    for i in range(spec.depth):
        p = f"layers.{i}."
        attn = (p + "attention.in_proj_weight", p + "attention.in_proj_bias",
                p + "attention.out_proj.weight", p + "attention.out_proj.bias")
        shapes |= dict(zip(attn, [(3 * d, d), (3 * d,), (d, d), (d,)], strict=True))
        layers.append(Layer(p + "attention", "attention", attn, {"batch_first": True, "num_heads": 4}))
        layers.append(Layer(p + "attention.out_proj", "linear", attn[2:], {}))  # owned above: skipped
        for norm in ("ln_a", "ln_b"):
            names = (f"{p}{norm}.weight", f"{p}{norm}.bias")
            shapes |= {names[0]: (d,), names[1]: (d,)}
            layers.append(Layer(p + norm, "layer_norm", names, {"eps": 1e-5}))
        for j, weight in (("0", (m, d)), ("3", (d, m))):
            names = (f"{p}ffn.{j}.weight", f"{p}ffn.{j}.bias")
            shapes |= {names[0]: weight, names[1]: (weight[0],)}
            layers.append(Layer(f"{p}ffn.{j}", "linear", names, {}))
    shapes |= {"classifier.weight": (10, d), "classifier.bias": (10,)}
    layers.append(Layer("classifier", "linear", ("classifier.weight", "classifier.bias"), {}))
    return shapes, layers


def test_structure_binds_the_torch_example_and_round_trips_both_ways() -> None:
    shapes, layers = torch_style()
    binding = bind(SPEC, shapes, layers, "torch", conventions())
    assert binding.rule == "structure"
    tensors = init_weights(SPEC, 3)
    native = binding.to_native(tensors)
    assert {n: v.shape for n, v in native.items()} == shapes
    back = binding.to_canonical(native)
    assert list(back) == list(SPEC.derived.tensor_shapes)
    for name, value in tensors.items():
        np.testing.assert_array_equal(back[name], value)
    assert native["layers.0.attention.in_proj_weight"].shape == (192, 64)


@pytest.mark.parametrize("fmt", ["timm", "torchvision", "hf"])
def test_a_library_state_dict_binds_by_its_convention(fmt: str) -> None:
    spec = get_preset("quadrant").replace(layer_norm_eps=1e-6, channels=3) if fmt != "timm" else \
        get_preset("quadrant").replace(layer_norm_eps=1e-6)
    if fmt == "torchvision":
        spec = spec.replace(image_height=8, image_width=8, final_norm="tokens")
    tensors = init_weights(spec, 1)
    raw = export_tensors(fmt, spec, tensors)
    binding = bind(spec, {n: v.shape for n, v in raw.items()}, [], "torch", conventions(spec))
    assert binding.rule == fmt
    for name, value in binding.to_canonical(raw).items():
        np.testing.assert_array_equal(value, tensors[name])


def refusal(shapes, layers, framework="torch", rules=None) -> str:
    with pytest.raises(WeightsError) as caught:
        bind(SPEC, shapes, layers, framework, conventions(), rules)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_missing_parameter_is_named() -> None:
    shapes, layers = torch_style()
    del shapes["classifier.bias"]
    assert "classifier" in refusal(shapes, layers) or "head.out.bias" in refusal(shapes, layers)


def test_an_unused_parameter_is_named() -> None:
    shapes, layers = torch_style()
    shapes["extra_scale"] = (3,)
    layers.append(Layer("", "other", ("extra_scale",), {}))
    assert "extra_scale" in refusal(shapes, layers)


def test_two_free_tables_of_one_size_are_ambiguous() -> None:
    shapes, layers = torch_style()
    shapes["second_class_embedding"] = (1, 1, SPEC.dim)
    layers[0] = Layer("", "other", ("class_embedding", "second_class_embedding", "position_table"), {})
    message = refusal(shapes, layers)
    assert "ambiguous" in message and "second_class_embedding" in message


def test_a_transposed_kernel_under_a_convention_is_named_with_both_shapes() -> None:
    spec = get_preset("quadrant").replace(layer_norm_eps=1e-6)
    raw = export_tensors("timm", spec, init_weights(spec, 0))
    shapes = {n: v.shape for n, v in raw.items()}
    shapes["blocks.0.mlp.fc1.weight"] = shapes["blocks.0.mlp.fc1.weight"][::-1]
    with pytest.raises(WeightsError, match=r"blocks\.0\.mlp\.fc1\.weight.*\(32, 64\).*\(64, 32\)"):
        bind(spec, shapes, [], "torch", conventions(spec))


def test_two_conventions_that_both_bind_are_refused() -> None:
    from shared.core.mapping import Table

    names = list(SPEC.derived.tensor_shapes)
    native = {f"n.{c}": s for c, s in SPEC.derived.tensor_shapes.items()}
    one = Table("\n".join(f"{c} n.{c}" for c in names), "one")
    swapped = {"blocks.0.norm1.scale": "n.blocks.0.norm1.bias",
               "blocks.0.norm1.bias": "n.blocks.0.norm1.scale"}
    two = Table("\n".join(f"{c} {swapped.get(c, 'n.' + c)}" for c in names), "two")
    with pytest.raises(WeightsError, match="bind two ways: by one and by two"):
        bind(SPEC, native, [], "torch", [one, two])


def test_a_rename_file_binds_what_structure_cannot(tmp_path) -> None:
    shapes, layers = torch_style()
    shapes["cls"] = shapes.pop("class_embedding")
    shapes["cls_copy"] = (1, 1, SPEC.dim)  # two candidates by size: structure refuses
    layers[0] = Layer("", "other", ("cls", "cls_copy", "position_table"), {})
    assert "ambiguous" in refusal(shapes, layers)
    rules = tmp_path / "rules.toml"
    rules.write_text('[map]\n"cls_copy" = ["cls_token", "batch_token"]\n')
    text = read_rules(str(rules))
    with pytest.raises(WeightsError, match=r"layer cls \(parameter\) fits no tensor"):  # the row wins
        bind(SPEC, shapes, layers, "torch", conventions(), text)
    del shapes["cls"]
    layers[0] = Layer("", "other", ("cls_copy", "position_table"), {})
    binding = bind(SPEC, shapes, layers, "torch", conventions(), text)
    assert binding.why["cls_copy"] == "map file" and binding.rule == "structure"


def test_a_rename_file_alone_binds_a_model_without_layers(tmp_path) -> None:
    names = list(SPEC.derived.tensor_shapes)
    rules = tmp_path / "rules.toml"
    rules.write_text("[map]\n" + "".join(f'"p{k}" = "{c}"\n' for k, c in enumerate(names)))
    native = {f"p{k}": SPEC.derived.tensor_shapes[c] for k, c in enumerate(names)}
    binding = bind(SPEC, native, [], "torch", conventions(), read_rules(str(rules)))
    assert binding.rule == "map file" and binding.canonical_of()["head.out.bias"] == f"p{len(names) - 1}"


def test_a_bad_rename_file_is_one_line(tmp_path) -> None:
    bad = tmp_path / "rules.toml"
    bad.write_text("[map\n")
    with pytest.raises(SpecError, match="malformed TOML"):
        read_rules(str(bad))
    bad.write_text("x = 1\n")
    with pytest.raises(WeightsError, match=r"\[map\] table"):
        read_rules(str(bad))


def test_binding_a_vit_b16_sized_model_takes_well_under_a_second() -> None:
    import time

    spec = get_preset("vit-b16")
    zeros = {n: np.zeros(s, np.bool_) for n, s in spec.derived.tensor_shapes.items()}
    shapes = \
        {n: v.shape for n, v in _timm_names(spec, zeros).items()}
    started = time.perf_counter()
    binding = bind(spec, shapes, [], "torch", conventions(spec))
    assert isinstance(binding, Binding) and binding.rule == "timm"
    assert time.perf_counter() - started < 1.0


def _timm_names(spec, zeros):
    from shared.checkpoints import plan

    return plan("timm", spec).to_native(zeros)


def test_layer_settings_that_contradict_the_spec_are_named() -> None:
    layers = [{"kind": "layer_norm", "settings": {"eps": 1e-6}, "path": "ln"},
              {"kind": "gelu", "settings": {"form": "gelu_tanh"}, "path": "act"},
              {"kind": "attention", "settings": {"batch_first": False, "num_heads": 4, "head_dim": 16},
               "path": "attn"}, {"kind": "dropout", "settings": {"rate": 0.3}, "path": "drop"}]
    found = {c.field: c.line() for c in from_layers(SPEC, layers)}
    assert found["layer_norm_eps"] == "layer_norm_eps: your model 1e-06, spec 1e-05 (ln)"
    assert found["activation"].startswith("activation: your model gelu_tanh, spec gelu")
    assert "batch_first" in found and "dropout" in found and "depth" in found


def test_timm_pooling_follows_timms_default_with_a_note() -> None:
    spec = get_preset("quadrant").replace(layer_norm_eps=1e-6)
    raw = export_tensors("timm", spec, init_weights(spec, 0))
    converted = import_tensors("timm", raw, None, {"heads": spec.heads})
    assert converted.spec.pooling == "cls"
    assert any("pooling='cls'" in note and "global_pool='token'" in note for note in converted.notes)


def test_a_linear_patch_embedding_binds_in_keras_and_flax_layouts() -> None:
    """A Dense / nnx.Linear on (ph, pw, C)-flattened patches, nnx.MultiHeadAttention's per-head
    kernels, (in, out) Linears: the flax.nnx example's names and layers, without flax."""
    d, m, h, hd = SPEC.dim, SPEC.mlp_dim, SPEC.heads, SPEC.head_dim
    shapes = {"patch_projection.kernel": (49, d), "patch_projection.bias": (d,),
              "class_embedding": (1, 1, d), "position_embedding": (1, 17, d)}
    layers = [Layer("", "other", ("class_embedding", "position_embedding"), {}),
              Layer("patch_projection", "linear", ("patch_projection.kernel", "patch_projection.bias"), {})]
    for i in range(SPEC.depth):
        p = f"layers.{i}."
        attn = {f"{p}self_attention.{q}.kernel": (d, h, hd) for q in ("query", "key", "value")}
        attn |= {f"{p}self_attention.{q}.bias": (h, hd) for q in ("query", "key", "value")}
        attn |= {f"{p}self_attention.out.kernel": (h, hd, d), f"{p}self_attention.out.bias": (d,)}
        shapes |= attn
        layers.append(Layer(p + "self_attention", "attention", tuple(attn), {"num_heads": h}))
        for norm in ("attention_norm", "output_norm"):
            names = (f"{p}{norm}.scale", f"{p}{norm}.bias")
            shapes |= {names[0]: (d,), names[1]: (d,)}
            layers.append(Layer(p + norm, "layer_norm", names, {"eps": 1e-5}))
        for fc, kernel in (("fc_in", (d, m)), ("fc_out", (m, d))):
            names = (f"{p}feed_forward.{fc}.kernel", f"{p}feed_forward.{fc}.bias")
            shapes |= {names[0]: kernel, names[1]: (kernel[1],)}
            layers.append(Layer(f"{p}feed_forward.{fc}", "linear", names, {}))
    shapes |= {"classifier.kernel": (d, 10), "classifier.bias": (10,)}
    layers.append(Layer("classifier", "linear", ("classifier.kernel", "classifier.bias"), {}))
    binding = bind(SPEC, shapes, layers, "flax", conventions())
    tensors = init_weights(SPEC, 2)
    native = binding.to_native(tensors)
    assert {n: v.shape for n, v in native.items()} == shapes
    patch = tensors["patch_embed.kernel"].reshape(49, d)
    np.testing.assert_array_equal(native["patch_projection.kernel"], patch)
    assert all(np.array_equal(v, tensors[k]) for k, v in binding.to_canonical(native).items())


def test_a_rename_file_takes_the_layouts_the_binder_uses(tmp_path) -> None:
    """A Flax-style model whose q, k, v kernels are one (D, 3*H*hd) Dense: a `--map` row packs
    them with `heads_dense`, as structure binds a Keras / Flax packed qkv; the rest are renames."""
    d, inner = SPEC.dim, SPEC.heads * SPEC.head_dim
    rows = {f"p.{c}": c for c in SPEC.derived.tensor_shapes if ".attn." not in c or ".out." in c}
    rows |= {f"p.blocks.{{i}}.qkv.{w}": [f"blocks.{{i}}.attn.{{p:query|key|value}}.{w}", lay]
             for w, lay in (("kernel", "heads_dense"), ("bias", "heads_bias"))}
    rules = tmp_path / "rules.toml"
    rules.write_text("[map]\n" + "".join(f'"{n}" = {c!r}\n'.replace("'", '"') for n, c in rows.items()))
    native = {f"p.{c}": s for c, s in SPEC.derived.tensor_shapes.items() if ".attn." not in c or ".out." in c}
    native |= {f"p.blocks.{i}.qkv.{w}": s for i in range(SPEC.depth)
               for w, s in (("kernel", (d, 3 * inner)), ("bias", (3 * inner,)))}
    binding = bind(SPEC, native, [], "flax", conventions(), read_rules(str(rules), SPEC))
    tensors = init_weights(SPEC, 4)
    native_arrays = binding.to_native(tensors)
    key = tensors["blocks.1.attn.key.kernel"].reshape(d, -1)
    np.testing.assert_array_equal(native_arrays["p.blocks.1.qkv.kernel"][:, inner:2 * inner], key)
    assert all(np.array_equal(v, tensors[k]) for k, v in binding.to_canonical(native_arrays).items())
    from pathlib import Path

    from shared.core.mapping import LAYOUTS

    readme = (Path(__file__).resolve().parent.parent / "docs" / "your-model.md").read_text()
    assert [name for name in LAYOUTS if f"`{name}`" not in readme] == []  # where the format is documented
