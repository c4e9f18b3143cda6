"""big_vision and vit_jax `.npz` trees: written by the exporter (big_vision itself is not
installed here), read back bit-exactly with the same inferred spec, in both naming dialects,
scanned or not, under a `params/` prefix; the ports reproduce the reference's logits on the
imported weights, and timm's own reader of Google's JAX checkpoints loads the exported trees into
a timm ViT that reproduces them too."""

from __future__ import annotations

import numpy as np
import pytest

from shared.checkpoints import export_checkpoint, export_tensors, import_checkpoint, import_tensors
from shared.checkpoints.common import parse_given
from shared.core import reference
from shared.core.spec import ModelSpec
from shared.core.weights import init_weights
from shared.errors import SpecError
from tests.checkpoints_support import assert_ports_match, assert_same_tensors, images_for

BASE = dict(channels=3, dim=16, depth=2, heads=2, head_dim=8, mlp_dim=32, activation="gelu_tanh",
            norm="pre", layer_norm_eps=1e-6, qkv_bias=True, final_norm="tokens", num_classes=5,
            remainder="drop")
SPECS = {
    # big_vision pool_type='tok', learned positions without a class row, non-square image.
    "big_vision-tok-learned": ("big_vision", ModelSpec(
        **BASE, image_height=24, image_width=32, patch_height=8, patch_width=8, class_token=True,
        pos_embed="learned", pos_embed_class_row=False, pooling="cls")),
    # big_vision pool_type='gap', posemb='sincos2d' (no table: the image size must be given).
    "big_vision-gap-sincos": ("big_vision", ModelSpec(
        **BASE, image_height=16, image_width=24, patch_height=4, patch_width=6, class_token=False,
        pos_embed="sincos", pos_embed_class_row=False, pooling="mean")),
    # vit_jax classifier='token': the table has the class row, added after the class token.
    "vit_jax-token": ("vit_jax", ModelSpec(
        **BASE, image_height=32, image_width=32, patch_height=8, patch_width=8, class_token=True,
        pos_embed="learned", pos_embed_class_row=True, pooling="cls")),
}


def given_for(spec: ModelSpec) -> list[str]:
    if spec.pos_embed == "sincos" or spec.image_height != spec.image_width:
        return [f"image_height={spec.image_height}", f"image_width={spec.image_width}"]
    return []


@pytest.mark.parametrize("case", list(SPECS))
def test_npz_round_trip_and_logits(case: str, tmp_path) -> None:
    fmt, spec = SPECS[case]
    tensors = init_weights(spec, seed=11)
    path = tmp_path / "params.npz"
    export_checkpoint(fmt, spec, tensors, path)
    with np.load(path, allow_pickle=False) as archive:  # the tree as big_vision names it
        assert "Transformer/encoderblock_0/MlpBlock_{}/Dense_0/kernel".format(
            3 if fmt == "vit_jax" else 0) in archive.files
        assert archive["Transformer/encoderblock_1/MultiHeadDotProductAttention_{}/query/kernel".format(
            1 if fmt == "vit_jax" else 0)].shape == (16, 2, 8)
    back = import_checkpoint(fmt, path, overrides=given_for(spec))
    assert back.spec == spec.replace(name=back.spec.name)
    assert_same_tensors(back.tensors, tensors)
    images = images_for(spec)
    # Flax (big_vision's own framework) on the sincos tree; the torch port on every tree.
    ports = ("torch", "flax") if case == "big_vision-gap-sincos" else ("torch",)
    assert_ports_match(back.spec, back.tensors, images, reference.forward(spec, tensors, images), ports)


def test_scanned_tree_under_a_prefix_reads_the_same() -> None:
    fmt, spec = SPECS["big_vision-tok-learned"]
    tensors = init_weights(spec, seed=2)
    tree = export_tensors(fmt, spec, tensors)
    scanned: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        if key.startswith("Transformer/encoderblock_"):
            continue
        scanned["params/" + key] = value
    for key in [k for k in tree if k.startswith("Transformer/encoderblock_0/")]:
        rest = key[len("Transformer/encoderblock_0/"):]
        layers = [tree[f"Transformer/encoderblock_{i}/{rest}"] for i in range(spec.depth)]
        scanned["params/Transformer/encoderblock/" + rest] = np.stack(layers)
    back = import_tensors(fmt, scanned, None, parse_given(None, given_for(spec)))
    assert_same_tensors(back.tensors, tensors)


def test_wrong_dialect_and_inexpressible_specs_are_refused() -> None:
    _, spec = SPECS["vit_jax-token"]
    tree = export_tensors("vit_jax", spec, init_weights(spec))
    with pytest.raises(Exception, match=r"MultiHeadDotProductAttention_1.*use --from vit_jax"):
        import_tensors("big_vision", tree, None, {})
    with pytest.raises(SpecError, match="pos_embed_class_row"):
        export_tensors("big_vision", spec, init_weights(spec))
    exact = spec.replace(activation="gelu")
    with pytest.raises(SpecError, match=r"activation='gelu'.*gelu_tanh"):
        export_tensors("vit_jax", exact, init_weights(exact))


TIMM_READERS = [  # (format, spec fields, timm VisionTransformer kwargs for the same model)
    ("vit_jax", dict(class_token=True, pos_embed_class_row=True, pooling="cls"), {}),
    ("big_vision", dict(class_token=True, pos_embed_class_row=False, pooling="cls"),
     dict(no_embed_class=True)),
    ("big_vision", dict(class_token=False, pos_embed_class_row=False, pooling="mean"),
     dict(class_token=False, global_pool="avg", fc_norm=False)),
]


@pytest.mark.parametrize(("fmt", "fields", "timm_kwargs"), TIMM_READERS,
                         ids=[f"{f}-{d['pooling']}" for f, d, _ in TIMM_READERS])
def test_timm_reads_the_exported_tree_with_the_same_logits(fmt, fields, timm_kwargs, tmp_path) -> None:
    """Third-party code on our .npz: timm's own loader for Google's JAX checkpoints
    (`_load_weights`, square grids only) fills a timm ViT that reproduces the reference."""
    import torch
    from timm.models.vision_transformer import VisionTransformer, _load_weights

    from tests.checkpoints_support import ATOL, library_logits

    spec = ModelSpec(**BASE, image_height=32, image_width=32, patch_height=8, patch_width=8,
                     pos_embed="learned", **fields)
    tensors = init_weights(spec, seed=4)
    export_checkpoint(fmt, spec, tensors, tmp_path / "params.npz")
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2,
                              num_classes=5, act_layer="gelu_tanh", **timm_kwargs).eval()
    with torch.no_grad():
        _load_weights(model, str(tmp_path / "params.npz"))
    images = images_for(spec)
    assert np.abs(library_logits(model, images) - reference.forward(spec, tensors, images)).max() <= ATOL


@pytest.mark.parametrize("num_classes", [0, 5], ids=["siglip-tower", "map-with-head"])
def test_siglip_map_head_tree_reads_back_and_timm_reads_it(num_classes: int, tmp_path) -> None:
    """big_vision's MAPHead_0 (SigLIP's image tower, with and without a classifier): written,
    read back bit-exactly with the map pooling inferred, and timm's own `_load_weights` fills its
    AttentionPoolLatent from the tree with the reference's output (the pooled vector when
    num_classes=0)."""
    import torch
    from timm.models.vision_transformer import VisionTransformer, _load_weights

    from tests.checkpoints_support import ATOL, library_logits

    spec = ModelSpec(**{**BASE, "num_classes": num_classes}, image_height=32, image_width=32, patch_height=8,
                     patch_width=8, class_token=False, pos_embed="learned", pos_embed_class_row=False,
                     pooling="map")
    tensors = init_weights(spec, seed=6)
    path = tmp_path / "params.npz"
    export_checkpoint("big_vision", spec, tensors, path)
    with np.load(path, allow_pickle=False) as archive:
        assert archive["MAPHead_0/MultiHeadDotProductAttention_0/key/kernel"].shape == (16, 2, 8)
        assert ("head/kernel" in archive.files) == bool(num_classes)
    back = import_checkpoint("big_vision", path)
    assert back.spec == spec.replace(name=back.spec.name)
    assert_same_tensors(back.tensors, tensors)
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2,
                              num_classes=num_classes, class_token=False, global_pool="map",
                              act_layer="gelu_tanh").eval()
    with torch.no_grad():
        _load_weights(model, str(path))
    images = images_for(spec)
    assert np.abs(library_logits(model, images) - reference.forward(spec, tensors, images)).max() <= ATOL
