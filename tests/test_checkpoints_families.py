"""The ViT families people port now, built small by timm and Transformers themselves (random
weights, perturbed, no downloads): each converts to canonical tensors on which the float64
reference reproduces the library's own output (timm's forward: logits, or the pooled vector with
num_classes=0; Transformers' `logits`, or a vision tower's `pooler_output`), and random canonical
weights export back into the library's model (strict load) with the reference's output. The
ports are checked against the reference on each family's tiny preset (tests/test_ports.py)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import torch

from shared.checkpoints import export_tensors, import_tensors
from shared.checkpoints.common import parse_given
from shared.checkpoints.timm import model_kwargs
from shared.core import reference
from shared.core.weights import init_weights
from tests.checkpoints_support import ATOL, images_for, library_logits, perturbed, state_dict

os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("USE_FLAX", "0")

SMALL = dict(img_size=16, patch_size=4, embed_dim=32, depth=2, num_heads=4)
# (id, VisionTransformer kwargs, --set values a state dict cannot tell)
TIMM_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("dinov2-reg-swiglu-packed-noembedclass-nohead",
     dict(SMALL, init_values=1e-5, reg_tokens=2, no_embed_class=True, mlp_layer="SwiGLUPacked",
          act_layer="silu", mlp_ratio=3, num_classes=0), ["heads=4"]),
    ("reg-table-qknorm-swiglu-split",
     dict(SMALL, reg_tokens=2, qk_norm=True, mlp_layer="SwiGLU", act_layer="silu", mlp_ratio=1.5,
          num_classes=5), ["heads=4"]),
    ("deit3-layerscale-noembedclass",
     dict(SMALL, init_values=1e-6, no_embed_class=True, num_classes=5), ["heads=4"]),
    ("siglip-map-nohead",
     dict(SMALL, class_token=False, global_pool="map", act_layer="gelu_tanh", num_classes=0),
     ["heads=4", "activation=gelu_tanh"]),
    ("clip-prenorm-quickgelu-eps1e-5",
     dict(SMALL, pre_norm=True, act_layer="quick_gelu", num_classes=6,
          norm_layer="functools.partial(timm.layers.LayerNorm, eps=1e-05)"),
     ["heads=4", "activation=quick_gelu", "layer_norm_eps=1e-5"]),
    ("deit-distilled", dict(SMALL, distilled=True, num_classes=4), ["heads=4"]),
    ("patchnorm-avg-fcnorm",
     dict(SMALL, class_token=False, embed_norm_layer="layernorm", global_pool="avg", fc_norm=True,
          num_classes=3), ["heads=4"]),
]


def timm_model(distilled: bool = False, **kwargs: Any) -> torch.nn.Module:
    """A timm ViT from kwargs in model_kwargs' spelling (layers named as strings), as peers builds it."""
    from ports.public_models import timm_model as build

    return build(kwargs, distilled)


@pytest.mark.parametrize(("kwargs", "given"), [c[1:] for c in TIMM_CASES], ids=[c[0] for c in TIMM_CASES])
def test_timm_families_both_directions(kwargs: dict[str, Any], given: list[str]) -> None:
    torch.manual_seed(0)
    model = perturbed(timm_model(**kwargs), seed=1)
    raw = state_dict(model)
    converted = import_tensors("timm", raw, None, parse_given(None, given))
    spec, images = converted.spec, images_for(converted.spec)
    diff = np.abs(reference.forward(spec, converted.tensors, images) - library_logits(model, images)).max()
    assert diff <= ATOL, diff
    # And back: random canonical weights, exported, load strictly into the model timm builds
    # from model_kwargs(spec) (SwiGLU split comes back packed) and give the reference's output.
    tensors = init_weights(spec, seed=5)
    rebuilt = timm_model(**model_kwargs(spec), distilled=spec.distill_token).eval()
    exported = export_tensors("timm", spec, tensors)
    rebuilt.load_state_dict({k: torch.from_numpy(v) for k, v in exported.items()}, strict=True)
    back = np.abs(library_logits(rebuilt, images) - reference.forward(spec, tensors, images)).max()
    assert back <= ATOL, back


def test_a_table_shorter_than_the_prefix_tokens_is_read_as_patches_only() -> None:
    """DINOv2-reg at a tiny image: 4 patch rows, 5 prefix tokens; once a traceback (complex sqrt)."""
    torch.manual_seed(0)
    raw = state_dict(timm_model(**dict(SMALL, img_size=8), reg_tokens=4, no_embed_class=True))
    spec = import_tensors("timm", raw, None, parse_given(None, ["heads=4"])).spec
    assert (spec.image_height, spec.registers, spec.pos_embed_class_row) == (8, 4, False)


def test_every_timm_tensor_is_used_and_the_inexpressible_is_named() -> None:
    """A LayerScale gamma the spec does not place (here: block 1 only, so block 0 says no
    LayerScale) is refused by the mapping engine as unused, never dropped; timm options the spec
    cannot express are refused naming the tensor; so is a map pool over prefix tokens."""
    from shared.errors import SpecError, WeightsError

    torch.manual_seed(0)
    raw = state_dict(timm_model(**SMALL, num_classes=3))
    given = parse_given(None, ["heads=4"])
    extra = dict(raw, **{"blocks.1.ls1.gamma": np.ones(32, np.float32)})
    with pytest.raises(WeightsError, match=r"1 unused \(blocks\.1\.ls1\.gamma\)"):
        import_tensors("timm", extra, None, given)
    for name, option in (("blocks.0.attn.relative_position_bias_table", "relative position bias"),
                         ("blocks.0.mlp.norm.weight", "scale_mlp_norm"), ("rope.freqs", "rotary"),
                         ("blocks.0.attns.0.qkv.weight", "parallel blocks")):
        with pytest.raises(WeightsError, match=rf"tensor '{name}' comes from timm's .*{option}"):
            import_tensors("timm", dict(raw, **{name: np.ones(4, np.float32)}), None, given)
    pooled = state_dict(timm_model(**SMALL, global_pool="map", num_classes=0))
    with pytest.raises(WeightsError, match=r"'attn_pool.latent' with tensor 'cls_token'.*patch tokens only"):
        import_tensors("timm", pooled, None, given)
    spec = import_tensors("timm", state_dict(timm_model(**SMALL, pre_norm=True)), None, given).spec
    assert not spec.patch_bias  # timm's pre_norm model has no patch bias: read, not assumed
    biased = spec.replace(patch_bias=True)
    with pytest.raises(SpecError, match=r"patch_bias=True.*timm builds the patch bias exactly when pre_norm"):
        export_tensors("timm", biased, init_weights(biased))
    with pytest.raises(SpecError, match="patch_norm_in=True"):
        both = spec.replace(patch_norm_in=True)
        export_tensors("timm", both, init_weights(both))


HF_SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=16, patch_size=4)
HF_CASES: list[tuple[str, str, dict[str, Any]]] = [  # (id, model class, config kwargs)
    ("dinov2-swiglu", "Dinov2Model", dict(HF_SMALL, use_swiglu_ffn=True, mlp_ratio=2)),
    ("dinov2-registers", "Dinov2WithRegistersModel", dict(HF_SMALL, num_register_tokens=2, mlp_ratio=2)),
    ("siglip-vision", "SiglipVisionModel", dict(HF_SMALL, intermediate_size=48)),
    ("clip-vision", "CLIPVisionModel", dict(HF_SMALL, intermediate_size=48)),
    ("deit-distilled", "DeiTForImageClassificationWithTeacher",
     dict(HF_SMALL, intermediate_size=48, num_labels=3)),
    # RoPE: default biases (no key bias), then registers, a gated MLP and a theta of its own
    ("dinov3-rope", "DINOv3ViTModel", dict(HF_SMALL, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=48)),
    ("dinov3-rope-registers-gated", "DINOv3ViTModel",
     dict(HF_SMALL, num_hidden_layers=1, num_attention_heads=2, intermediate_size=48, num_register_tokens=2,
          use_gated_mlp=True, hidden_act="silu", rope_theta=10.0)),
]


def hf_model(model_class: str, config: dict[str, Any]) -> torch.nn.Module:
    import transformers

    cls = getattr(transformers, model_class)
    return cls(cls.config_class(**config))


@pytest.mark.parametrize(("model_class", "config"), [c[1:] for c in HF_CASES], ids=[c[0] for c in HF_CASES])
def test_hf_families_both_directions(model_class: str, config: dict[str, Any]) -> None:
    from shared.checkpoints.hf import config_for

    torch.manual_seed(0)
    model = perturbed(hf_model(model_class, config), seed=1)
    converted = import_tensors("hf", state_dict(model), model.config.to_dict(), {})
    spec, images = converted.spec, images_for(converted.spec)
    diff = np.abs(reference.forward(spec, converted.tensors, images) - library_logits(model, images)).max()
    assert diff <= ATOL, diff
    tensors = init_weights(spec, seed=5)
    exported = export_tensors("hf", spec, tensors)
    rebuilt = hf_model(model_class, config_for(spec)).eval()
    rebuilt.load_state_dict({k: torch.from_numpy(v) for k, v in exported.items()}, strict=True)
    back = np.abs(library_logits(rebuilt, images) - reference.forward(spec, tensors, images)).max()
    assert back <= ATOL, back


# preset -> the library's constructor, built on the meta device: no 90M-parameter init is paid
SOURCES = {
    "dinov2-s14-reg4": ("timm", "vit_small_patch14_reg4_dinov2"),
    "deit3-s16": ("timm", "deit3_small_patch16_224"),
    "siglip-b16": ("timm", "vit_base_patch16_siglip_224"),
    "clip-b16": ("hf", "CLIPVisionModel"),
    "deit-s16-distilled": ("timm", "deit_small_distilled_patch16_224"),
}


@pytest.mark.parametrize("preset", list(SOURCES))
def test_full_size_presets_count_the_libraries_parameters(preset: str) -> None:
    import timm
    import transformers

    from shared.core.presets import FULL_SIZE_PRESETS

    library, name = SOURCES[preset]
    with torch.device("meta"):
        if library == "timm":
            model = timm.create_model(name, pretrained=False)
        else:
            model = transformers.CLIPVisionModel(transformers.CLIPVisionConfig(patch_size=16))
    assert set(SOURCES) == set(FULL_SIZE_PRESETS)
    count = sum(p.numel() for p in model.parameters())
    assert FULL_SIZE_PRESETS[preset].spec.derived.params == count
