"""keras-hub presets, built small by keras-hub itself (random weights, perturbed, no downloads,
Keras on the TensorFlow backend in this process; torch is imported first, tests/conftest.py):
`save_to_preset` -> convert -> the reference and the torch and Keras ports reproduce keras-hub's
own logits (or, for a backbone or an image tower, its embedding); random canonical weights -> a
preset `from_preset` loads with the reference's output; every variable is used; and `verify
--model` binds a live keras-hub object by the same table. Families: ViT, DeiT, DINOv2 (layer
scale, registers, SwiGLU), the SigLIP (MAP head) and CLIP (pre-norm, QuickGELU) image towers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shared.checkpoints import export_checkpoint, import_checkpoint, import_tensors
from shared.core import reference
from shared.core.weights import init_weights
from tests.checkpoints_support import ATOL, assert_ports_match, assert_same_tensors, images_for

TINY = dict(image_shape=(16, 16, 3), patch_size=4, num_heads=4, hidden_dim=32, mlp_dim=48)


def vit_classifier(pooling: str, num_layers: int = 1, seed: int = 1) -> Any:
    """A keras-hub ViTImageClassifier with every variable moved off its initial value (keras-hub
    starts biases near 0 and LayerNorms at 1, which would hide a swapped one)."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.ViTBackbone(num_layers=num_layers, **TINY)
    model = keras_hub.models.ViTImageClassifier(backbone=backbone, num_classes=5, pooling=pooling)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(variable.numpy() + 0.2 * rng.standard_normal(variable.shape).astype(np.float32))
    return model


# token: the class token read out, two blocks (block names 1-based in Keras, deduplicated groups
# in the h5); gap: the mean over every token, class token included (pooling=mean_all).
@pytest.mark.parametrize(("pooling", "num_layers", "expected"), [("token", 2, "cls"), ("gap", 1, "mean_all")])
def test_vit_preset_both_directions(tmp_path: Path, pooling: str, num_layers: int, expected: str) -> None:
    import keras_hub

    model = vit_classifier(pooling, num_layers)
    model.save_to_preset(str(tmp_path / "preset"))
    converted = import_checkpoint("keras_hub", tmp_path / "preset")
    spec = converted.spec
    assert (spec.pooling, spec.depth, spec.layer_norm_eps, spec.activation) == (
        expected, num_layers, 1e-6, "gelu")
    images = images_for(spec)
    library = model.predict_on_batch(images)
    assert_ports_match(spec, converted.tensors, images, library, ports=("torch", "keras"))
    # And back: random canonical weights -> a preset keras-hub loads with the reference's logits,
    # which reads back bit for bit.
    tensors = init_weights(spec, seed=5)
    notes = export_checkpoint("keras_hub", spec, tensors, tmp_path / "out")
    assert notes == [f"load with keras_hub.models.ViTImageClassifier.from_preset({str(tmp_path / 'out')!r})"]
    with pytest.warns(UserWarning, match="optimizer"):  # no optimizer state is written: none to load
        rebuilt = keras_hub.models.ViTImageClassifier.from_preset(str(tmp_path / "out"))
    back = np.abs(rebuilt.predict_on_batch(images) - reference.forward(spec, tensors, images)).max()
    assert back <= ATOL, back
    assert_same_tensors(import_checkpoint("keras_hub", tmp_path / "out").tensors, tensors)


def perturbed(model: Any, seed: int = 1) -> Any:
    """Every float variable moved off its initial value (keras-hub starts biases at 0, LayerNorms
    and layer scales at 1, register tokens at 0: a swapped or dropped one would hide)."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "float" in str(variable.dtype):
            variable.assign(variable.numpy() + 0.2 * rng.standard_normal(variable.shape).astype(np.float32))
    return model


def dinov2(**options: Any) -> Any:
    import keras_hub

    model = perturbed(keras_hub.models.DINOV2Backbone(
        patch_size=4, num_layers=1, hidden_dim=32, num_heads=4, intermediate_dim=48, image_shape=(16, 16, 3),
        position_embedding_shape=(16, 16), **options))  # two numbers, as keras-hub's converter writes it
    prefix = f"{options['name']}_" if "name" in options else ""  # a named backbone's layers carry it
    table = model.get_layer(f"{prefix}embeddings")  # the copy it computes with, as loading rebuilds it
    table.interpolated_position_embeddings.assign(table.position_embeddings.numpy())
    return model


def clip() -> Any:
    import keras_hub

    model = perturbed(keras_hub.models.CLIPVisionEncoder(
        patch_size=4, hidden_dim=32, num_layers=2, num_heads=4, intermediate_dim=48, image_shape=(16, 16, 3)))
    ids = model.get_layer("embedding").position_ids  # built as zeros: a preset brings 0 .. rows-1
    ids.assign(np.arange(ids.shape[1])[None])
    return model


def siglip() -> Any:
    import keras_hub

    return perturbed(keras_hub.models.SigLIPVisionEncoder(
        patch_size=4, hidden_dim=32, num_layers=1, num_heads=4, intermediate_dim=48, image_shape=(16, 16, 3)))


def deit() -> Any:
    """A classifier averaging every token (gap): the distillation token included, as a register."""
    import keras_hub

    shape = {k: v for k, v in TINY.items() if k != "mlp_dim"}
    backbone = keras_hub.models.DeiTBackbone(num_layers=1, intermediate_dim=48, **shape)
    return perturbed(keras_hub.models.DeiTImageClassifier(backbone=backbone, num_classes=5, pooling="gap"))


# Each family's features as the spec reads them; a backbone's output is every token (the spec
# reads token 0), a tower's the pooled embedding.
FAMILY_CASES = {
    "dinov2-registers-swiglu": (
        lambda: dinov2(num_register_tokens=2, use_swiglu_ffn=True, use_mask_token=False),
        dict(layer_scale=True, registers=2, pos_embed_register_rows=False, mlp="gated", mlp_dim=32,
             activation="silu")),
    # named: its weights file prefixes every layer's path with the name, which the reader strips
    "dinov2-mask-token-named": (lambda: dinov2(name="my_dino"),
                                dict(layer_scale=True, registers=0, mlp="standard", mlp_dim=48)),
    "siglip": (siglip, dict(pooling="map", class_token=False, activation="gelu_tanh", num_classes=0)),
    "clip": (clip, dict(norm_before_blocks=True, activation="quick_gelu", patch_bias=False,
                        layer_norm_eps=1e-5, depth=2)),
    "deit": (deit, dict(distill_token=False, registers=1, pos_embed_register_rows=True, pooling="mean_all",
                        num_classes=5)),
}


@pytest.mark.parametrize("family", list(FAMILY_CASES))
def test_family_preset_both_directions(tmp_path: Path, family: str) -> None:
    import keras_hub

    build, expected = FAMILY_CASES[family]
    model = build()
    model.save_to_preset(str(tmp_path / "preset"))
    converted = import_checkpoint("keras_hub", tmp_path / "preset")
    spec = converted.spec
    assert {k: getattr(spec, k) for k in expected} == expected
    images = images_for(spec)
    library = model.predict_on_batch(images)
    library = library if library.ndim == 2 else library[:, 0]
    assert_ports_match(spec, converted.tensors, images, library, ports=("torch", "keras"))
    tensors = init_weights(spec, seed=5)
    notes = export_checkpoint("keras_hub", spec, tensors, tmp_path / "out")
    cls = type(model).__name__
    assert notes == [f"load with keras_hub.models.{cls}.from_preset({str(tmp_path / 'out')!r})"]
    rebuilt = getattr(keras_hub.models, cls).from_preset(str(tmp_path / "out"))
    out = rebuilt.predict_on_batch(images)
    back = np.abs((out if out.ndim == 2 else out[:, 0]) - reference.forward(spec, tensors, images)).max()
    assert back <= ATOL, back
    assert_same_tensors(import_checkpoint("keras_hub", tmp_path / "out").tensors, tensors)


SIZES = dict(patch_size=4, num_layers=1, hidden_dim=32, num_heads=4, intermediate_dim=48,
             image_shape=[16, 16, 3])


# What the new families cannot express, refused from the config before any tensor is read.
@pytest.mark.fast
@pytest.mark.parametrize(("config", "message"), [
    ({"class_name": "DINOV2Backbone", "config": SIZES | {"position_embedding_shape": [518, 518, 3]}},
     r"position_embedding_shape = \[518, 518, 3\]: keras-hub resizes the table"),
    ({"class_name": "SigLIPVisionEncoder", "config": SIZES | {"layer_norm_epsilon": 1e-5}},
     r"layer_norm_epsilon = 1e-05: SigLIP's post_layer_norm keeps epsilon 1e-06"),
    ({"class_name": "CLIPVisionEncoder", "config": SIZES | {"intermediate_activation": "relu"}},
     r"intermediate_activation = 'relu': expected one of quick_gelu, gelu"),
    ({"class_name": "ImageClassifier", "config": {"backbone": {"class_name": "SigLIPVisionEncoder",
                                                               "config": SIZES}}},
     r"class_name = 'ImageClassifier': keras-hub 0.32.0 has no task around SigLIPVisionEncoder"),
])
def test_keras_hub_family_configs_the_spec_cannot_express(config: dict[str, Any], message: str) -> None:
    from shared.errors import SpecError

    with pytest.raises(SpecError, match=message):
        import_tensors("keras_hub", {}, config, {})


def test_a_random_keras_hub_clip_reads_position_row_0_everywhere_and_is_refused() -> None:
    """keras-hub's CLIP builds `position_ids` as zeros and never fills them (a preset brings its
    own): converted as inert, every token would silently get row 0's position. Refused by name."""
    import keras_hub

    from shared.errors import WeightsError

    model = keras_hub.models.CLIPVisionEncoder(**SIZES)
    raw = {v.path: v.numpy() for v in model.weights}
    config = {"class_name": "CLIPVisionEncoder", "config": model.get_config()}
    zeros = r"tensor 'embedding/position_ids' is \(1, 17\) starting \[0, 0, 0, 0\]"
    with pytest.raises(WeightsError, match=zeros):
        import_tensors("keras_hub", raw, config, {})

def test_every_keras_hub_variable_is_used_and_the_inexpressible_is_named(tmp_path: Path) -> None:
    """An extra variable is refused as unused (never dropped); an h5 dataset of a layer the
    families do not name, and the ViT options the spec cannot express, are refused in one line;
    a backbone alone converts (no head) with its default pooling noted, and export refuses a
    feature keras-hub's ViT lacks."""
    import h5py

    from shared.errors import SpecError, WeightsError

    model = vit_classifier("token")
    model.save_to_preset(str(tmp_path / "preset"))
    raw = {v.path: v.numpy() for v in model.weights}
    config = {"class_name": "ViTImageClassifier", "config": model.get_config()}
    extra = dict(raw, **{"vit_encoder/transformer_block_1/ls1/gamma": np.ones(32, np.float32)})
    with pytest.raises(WeightsError, match=r"1 unused \(vit_encoder/transformer_block_1/ls1/gamma\)"):
        import_tensors("keras_hub", extra, config, {})
    for key, value, field in (("intermediate_dim", 16, "intermediate_dim = 16"),
                              ("activation", "softmax", "activation = 'softmax'")):
        bad = {"class_name": "ViTImageClassifier", "config": dict(config["config"], **{key: value})}
        with pytest.raises(SpecError, match=f"keras_hub config {field}"):
            import_tensors("keras_hub", raw, bad, {})
    with h5py.File(tmp_path / "preset" / "model.weights.h5", "a") as h5:
        h5.create_group("layers/vi_t_encoder/adapter/vars").attrs["name"] = "adapter"
        h5["layers/vi_t_encoder/adapter/vars/0"] = np.ones(4, np.float32)
    with pytest.raises(WeightsError, match=r"dataset '/layers/vi_t_encoder/adapter/vars/0' \(layer "
                                           r"'vit_encoder/adapter', variable 0\) belongs to no layer"):
        import_checkpoint("keras_hub", tmp_path / "preset")
    (tmp_path / "backbone").mkdir()
    model.backbone.save_to_preset(str(tmp_path / "backbone"))
    backbone = import_checkpoint("keras_hub", tmp_path / "backbone")
    assert (backbone.spec.num_classes, backbone.spec.pooling) == (0, "cls")
    assert any("ViTImageClassifier's default pooling='token'" in note for note in backbone.notes)
    normed = backbone.spec.replace(qk_norm=True)  # no keras-hub family has it
    with pytest.raises(SpecError, match=r"keras-hub ViTBackbone: spec field qk_norm=True"):
        export_checkpoint("keras_hub", normed, init_weights(normed), tmp_path / "refused")


def test_verify_binds_a_keras_hub_object_by_its_table() -> None:
    """`portbench.check` (verify --model in process) on a live ViTImageClassifier: its variable
    paths are the keras_hub table's native names, so it binds by that table and passes."""
    import portbench
    from shared.core.spec import ModelSpec

    model = vit_classifier("gap")
    spec = ModelSpec(image_height=16, image_width=16, patch_height=4, patch_width=4, dim=32, depth=1, heads=4,
                     head_dim=8, mlp_dim=48, num_classes=5, pooling="mean_all")
    result = portbench.check(model, spec, trace=False)
    assert result.passed, result.explanation
    assert {link["why"] for link in result.binding["links"]} == {"keras_hub table"}
