"""The ViT families people port now, built small by timm and Transformers themselves (random
weights, perturbed, no downloads): each converts to canonical tensors on which the float64
reference reproduces the library's own output (timm's forward: logits, or the pooled vector with
num_classes=0; Transformers' `logits`, or a vision tower's `pooler_output`), and random canonical
weights export back into the library's model (strict load) with the reference's output. The
ports are checked against the reference on each family's tiny preset (tests/test_ports.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import ports
from shared.checkpoints import export_tensors, import_checkpoint, import_tensors
from shared.checkpoints.common import parse_given
from shared.checkpoints.libraries.timm import target
from shared.core import reference
from shared.core.weights import init_weights
from tests import background
from tests.checkpoints_support import (
    ATOL,
    assert_ports_match,
    assert_same_tensors,
    images_for,
    library_logits,
    live_trace,
    load_exported_hf,
    perturbed,
    state_dict,
)

os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("USE_FLAX", "0")

SMALL = dict(img_size=16, patch_size=4, embed_dim=32, depth=2, num_heads=4)
EVA_SMALL = dict(img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2, use_rot_pos_emb=True)
# (id, VisionTransformer kwargs (Eva's with use_rot_pos_emb), --set values a state dict cannot tell;
# none: a timm config.json states them, {"model_args": kwargs})
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
    # pool_include_prefix=True: avg is the mean of every token (mean_all), map reads the class token too
    ("avg-every-token-registers", dict(SMALL, reg_tokens=2, global_pool="avg", pool_include_prefix=True,
                                       num_classes=3), []),
    ("map-every-token-cls", dict(SMALL, global_pool="map", pool_include_prefix=True, num_classes=3), []),
    ("patchnorm-avg-fcnorm",
     dict(SMALL, class_token=False, embed_norm_layer="layernorm", global_pool="avg", fc_norm=True,
          num_classes=3), ["heads=4"]),
    # timm's Eva, RoPE: EvaAttention (q_bias, v_bias, no key bias), Eva's default avg pool + fc_norm
    # AIMv2 (timm's aimv2_*: RmsNorm eps 1e-5 on every norm and the patch tokens, no q/k/v or projection
    # bias, split SwiGLU, avg pool over a final-normed sequence) and InternViT-6B's block (RmsNorm,
    # qk-norm, LayerScale, no final norm)
    ("aimv2-rmsnorm-nobias-swiglu-split",
     dict(SMALL, class_token=False, global_pool="avg", fc_norm=False, mlp_ratio=2.75, qkv_bias=False,
          proj_bias=False, act_layer="silu", mlp_layer="SwiGLU", num_classes=0,
          norm_layer="functools.partial(timm.layers.RmsNorm, eps=1e-05)",
          embed_norm_layer="functools.partial(timm.layers.RmsNorm, eps=1e-05)"),
     ["heads=4", "layer_norm_eps=1e-5"]),
    ("internvit-rmsnorm-qknorm-layerscale",
     dict(SMALL, norm_layer="rmsnorm", qk_norm=True, init_values=0.1, final_norm=False, num_classes=4),
     ["heads=4"]),
    ("eva-rope-interleaved", dict(EVA_SMALL, num_classes=3), ["heads=2", "rope=axial_interleaved"]),
    ("eva-rope-half-unfused-config",  # also: q/k/v_proj, gamma_1/2, registers, GluMlp, ref_feat_shape
     dict(EVA_SMALL, img_size=(16, 12), rope_rotate_half=True, rope_temperature=100.0, ref_feat_shape=(3, 5),
          qkv_fused=False, init_values=0.1, num_reg_tokens=2, global_pool="token", swiglu_mlp=True,
          num_classes=0), []),
]


def timm_model(distilled: bool = False, **kwargs: Any) -> torch.nn.Module:
    """A timm ViT from kwargs in model_kwargs' spelling (layers named as strings), as peers builds it;
    timm's Eva from eva_kwargs'."""
    from shared.checkpoints.libraries.timm import construct

    cls = "timm.models.eva.Eva" if kwargs.get("use_rot_pos_emb") else \
        "timm.models.deit.VisionTransformerDistilled" if distilled else \
        "timm.models.vision_transformer.VisionTransformer"
    return construct(cls, kwargs)


def assert_verified(model: torch.nn.Module, spec: Any = None) -> Any:
    """`verify --model` on the library's own object, in this process (portbench.check; no `spec`:
    the one read from the model), a Transformers model bound by the hf table in the names it holds (a
    Transformers 5 model's own), its logits against the float64 reference on its own weights
    (Transformers' distilled DeiT returns three (batch, classes) arrays: its `logits` are named).
    The result, passed: the gap within the float32 tolerance."""
    import portbench

    output = "logits" if type(model).__name__ == "DeiTForImageClassificationWithTeacher" else None
    result = portbench.check(model.eval(), spec, batch=2, trace=False, output=output)
    assert result.passed, result.explanation
    # (Siglip2VisionModel's Linear patch projection is not the hf table's convolution: structure binds it)
    if type(model).__module__.startswith("transformers.") and type(model).__name__ != "Siglip2VisionModel":
        assert result.binding["rule"].startswith("hf"), result.binding["rule"]
    return result


@pytest.mark.parametrize(("kwargs", "given"), [c[1:] for c in TIMM_CASES], ids=[c[0] for c in TIMM_CASES])
def test_timm_families_both_directions(kwargs: dict[str, Any], given: list[str]) -> None:
    torch.manual_seed(0)
    model = perturbed(timm_model(**kwargs), seed=1)
    raw = state_dict(model)
    config = None if given else {"model_args": kwargs}
    converted = import_tensors("timm", raw, config, parse_given(None, given))
    spec, images = converted.spec, images_for(converted.spec)
    # the reference; for RoPE every port too (the other families' features, AIMv2's and InternViT's
    # RMSNorm blocks included, are checked in every port on their tiny presets, tests/test_ports.py)
    assert_ports_match(spec, converted.tensors, images, library_logits(model, images),
                       ports=ports.NATIVE if spec.rope != "none" else ())
    if not kwargs.get("use_rot_pos_emb"):  # an Eva's key bias is no tensor of its own: it binds only
        assert_verified(model, spec)       # as Eva(attn_type='rope') (tests/test_user_spec_inference.py)
    if spec.norm_type == "rms_norm":  # norm kind, each place's eps and the activation read from the modules
        from shared.your_model.proposal import propose_spec

        assert propose_spec(model).spec == spec
    # And back: random canonical weights, exported, load strictly into the model timm builds
    # from model_kwargs(spec) (SwiGLU split comes back packed; Eva from eva_kwargs, attn_type='rope'
    # keeping the key bias) and give the reference's output.
    tensors = init_weights(spec, seed=5)
    rebuilt = timm_model(**target(spec)[1], distilled=spec.distill_token).eval()
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
                         ("blocks.0.mlp.norm.weight", "scale_mlp_norm"), ("rope.freqs", "rope_type='mixed'"),
                         ("blocks.0.attn.norm.weight", "scale_attn_inner"),
                         ("blocks.0.attn.gate.weight", "gated"),
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


def test_what_an_exporter_cannot_build_of_the_towers_is_refused_in_one_line() -> None:
    """timm writes RmsNorm with one epsilon (norm_layer) beside the patch norm's own (embed_norm_layer),
    and proj_bias=False leaves out every non-q/k/v bias at once; a library without RMSNorm refuses it."""
    from shared.core.presets import get_preset
    from shared.errors import SpecError

    aimv2, internvit = get_preset("aimv2-tiny"), get_preset("internvit-tiny")
    cases = (("timm", internvit, r"final_norm_eps=1e-05; .*one epsilon for every norm but the patch norm"),
             ("timm", aimv2.replace(bias_free=("attn.out",)),
              r"bias_free=\('attn.out',\); .*proj_bias=False"),
             ("timm", aimv2.replace(patch_norm_eps=1e-6), None),  # the patch norm's own: embed_norm_layer
             ("keras_hub", aimv2, r"norm_type='rms_norm'; .*layer_norm \(no RMSNorm\)"),
             ("torchvision", internvit, r"norm_type='rms_norm'"))
    for fmt, spec, refusal in cases:
        if refusal is None:
            export_tensors(fmt, spec, init_weights(spec))
            continue
        with pytest.raises(SpecError, match=refusal) as caught:
            export_tensors(fmt, spec, init_weights(spec))
        assert "\n" not in str(caught.value)


def test_timm_naflexvit_at_its_tables_grid_reads_as_vision_transformer() -> None:
    """timm's NaFlexVit (SigLIP2's and the NaFlex families' timm home) on images of its table's grid:
    its Linear patch projection and (1, rows, cols, D) table read as VisionTransformer's, the
    reference gives its own output (every port does on a NaFlex batch: tests/test_batching_libraries.py),
    and so does the VisionTransformer its export loads into. The live NaFlexVit reads as the naflex
    spec its state dict converts to (its table resized by NaFlexEmbeds' own mode), is bound by
    NaFlexEmbeds' own names (its Linear and (1, rows, cols, D) table), and passes verify --model both
    on NaFlex batches (called with patch coordinates, as its collator calls it; trace --model holds
    its layers' tokens too) and on images of its table's grid (the fixed spec); a factorized table,
    which the spec cannot say, and the NaFlex map pool with a register are refused in one line."""
    import timm

    from shared.checkpoints.libraries.timm import construct
    from shared.errors import SpecError, WeightsError
    from shared.your_model.proposal import propose_spec

    small = dict(embed_dim=32, depth=2, num_heads=4, img_size=16, patch_size=4, pos_embed_grid_size=(4, 4))
    images = np.random.default_rng(3).standard_normal((2, 16, 16, 3)).astype(np.float32)
    for name, act in (("naflexvit_base_patch16_siglip", "gelu_tanh"), ("naflexvit_base_patch16_gap", "gelu")):
        torch.manual_seed(0)
        model = perturbed(timm.create_model(name, pretrained=False, **small), seed=1)
        config = {"model_args": {"num_heads": 4, "act_layer": act}}
        converted = import_tensors("timm", state_dict(model), config, {})
        assert (converted.spec.image_height, converted.spec.pos_embed_class_row) == (16, False), name
        expected = library_logits(model, images)
        assert_ports_match(converted.spec, converted.tensors, images, expected, ports=())  # the reference
        rebuilt = construct(*target(converted.spec)).eval()
        exported = export_tensors("timm", converted.spec, converted.tensors)
        rebuilt.load_state_dict({k: torch.from_numpy(v) for k, v in exported.items()}, strict=True)
        assert np.abs(library_logits(rebuilt, images) - expected).max() <= ATOL
        config["model_args"]["pos_embed_interp_mode"] = model.embeds.pos_embed_interp_mode
        naflex = import_tensors("timm", state_dict(model), config, parse_given(None, ["batching=naflex"]))
        assert propose_spec(model).spec == naflex.spec
        assert assert_verified(model).binding["rule"] == "timm NaFlexVit"
        trace = live_trace(model)  # its layers' tokens, through the collator's call, are the batch's
        assert trace.passed and {"patch_embed", "block0.attn", "block1.mlp"} <= {
            row.name for row in trace.rows if row.error is not None}, [(r.name, r.note) for r in trace.rows]
        assert_verified(model, converted.spec)
    factorized = timm.create_model("naflexvit_base_patch16_gap", pretrained=False, **small,
                                   pos_embed="factorized")
    with pytest.raises(SpecError, match=r"^your model is a timm NaFlexVit with model.embeds.pos_embed_type = "
                                        r"'factorized': expected 'learned' or 'none'"):
        propose_spec(factorized)
    registered = timm.create_model("naflexvit_so150m2_patch16_reg1_map", pretrained=False, **small)
    with pytest.raises(WeightsError, match=r"'attn_pool.latent' with tensor 'reg_token'"):
        import_tensors("timm", state_dict(registered), {"model_args": {"num_heads": 4}}, {})


def test_timm_eva_asks_for_its_rope_and_refuses_what_the_spec_cannot_say() -> None:
    """No tensor says whether an Eva rotates: asked. Eva's options the spec cannot express are refused
    naming the tensor or config attribute (tensor ones beside VisionTransformer's, above); a rotary
    spec exports only as Eva builds it."""
    from timm.models.eva import Eva

    from shared.checkpoints.libraries.timm import model_kwargs
    from shared.core.presets import get_preset
    from shared.errors import SpecError, WeightsError

    raw = state_dict(Eva(img_size=8, patch_size=4, embed_dim=32, depth=1, num_heads=2, num_classes=0,
                         init_values=0.1))
    with pytest.raises(SpecError, match=r"does not record spec field 'rope'.*rope_rotate_half=True"):
        import_tensors("timm", raw, None, parse_given(None, ["heads=2"]))
    lone = {k: v for k, v in raw.items() if k != "blocks.0.gamma_2"}
    with pytest.raises(WeightsError, match=r"'blocks.0.gamma_1' has no 'blocks.0.gamma_2'.*attn_only_layer"):
        import_tensors("timm", lone, None, {})
    unfused = {k: v for k, v in raw.items() if ".attn.q" not in k and ".attn.v" not in k}
    unfused.update({f"blocks.0.attn.{p}_proj.weight": np.ones((32 if p == "q" else 16, 32), np.float32)
                    for p in "qkv"})
    with pytest.raises(WeightsError, match=r"'blocks.0.attn.k_proj.weight' .*num_kv_heads"):
        import_tensors("timm", unfused, None, {})
    for key, value in (("rope_type", "mrope"), ("use_post_norm", True), ("rope_grid_offset", 1.0)):
        config = {"model_args": {"num_heads": 2, "use_rot_pos_emb": True, key: value}}
        with pytest.raises(SpecError, match=rf"config model_args.{key} = {value!r}: expected"):
            import_tensors("timm", raw, config, {})
    dinov3 = get_preset("rope-tiny")
    with pytest.raises(SpecError, match=r"timm VisionTransformer: spec field rope='axial_half'"):
        model_kwargs(dinov3)  # never a VisionTransformer without its rotation (the peers' builder)


def registry_export(arch: str, spec: Any, tensors: dict[str, np.ndarray],
                    folder: Path) -> dict[str, np.ndarray]:
    """What `convert --to timm --arch ARCH` writes (its own layout: AIMv2's and DINOv3 S+'s SwiGLU
    split), read back."""
    from shared.checkpoints import export_checkpoint
    from shared.checkpoints.tensor_files import read_tensors

    path = folder / f"{arch}.safetensors"
    export_checkpoint("timm", spec, tensors, path, arch=arch)
    return read_tensors(path)


# timm's DINOv3 and Perception Encoder models (eva.py) and the Qwen3-ViT encoder, built by their registry
# names at a tiny size: (id, name, overrides). Their configs are as push_to_hub writes them: the
# architecture, and in model_args only the caller's arguments; the rest (rotary settings, the blocks'
# eps) is the registry's. DINOv3: centred RoPE (rope_type='dinov3'), 4 registers, no position table,
# LayerScale, q/k/v without bias or q/v with (_qkvb), split SwiGLU aligned to 8 (S+). PE:
# AttentionRope, norm_pre, rope_grid_indexing='xy' (rope_axes='cols_first': the columns' angles first),
# core's map pool over its class token (at the blocks' heads and offset 0: what the spec can say of
# it), lang-G's LayerScale and no final norm, and PE's offset 1 with no prefix token (it cancels).
# Qwen3-ViT: its encoder without the merger (GELU-tanh, axial_half RoPE, its G x G table).
PE_ARGS = dict(use_rot_pos_emb=True, rope_grid_indexing="xy")
EVA_SMALL_NAMED = dict(img_size=16, patch_size=4, embed_dim=32, depth=2, num_heads=2, num_classes=3)
EVA_NAMED: list[tuple[str, str, dict[str, Any]]] = [
    ("dinov3-s", "vit_small_patch16_dinov3", {}),
    ("dinov3-s-qkvb-token", "vit_small_patch16_dinov3_qkvb", dict(global_pool="token")),
    ("dinov3-splus-swiglu", "vit_small_plus_patch16_dinov3", {}),
    ("pe-core-t-map-cls", "vit_pe_core_tiny_patch16_384", dict(rope_grid_offset=0.0, attn_pool_num_heads=2)),
    ("pe-lang-g", "vit_pe_lang_gigantic_patch14_448", dict(mlp_ratio=2.0)),
    ("pe-spatial-t-no-prefix-offset", "vit_pe_spatial_tiny_patch16_512", dict(class_token=False)),
    ("qwen3-vit-enc-avg", "qwen3_vit_88m_enc", dict(global_pool="avg", pos_embed_grid_size=4)),
]


@pytest.mark.parametrize(("name", "overrides"), [c[1:] for c in EVA_NAMED], ids=[c[0] for c in EVA_NAMED])
def test_timm_dinov3_perception_encoder_qwen3_both_directions(name: str, overrides: dict[str, Any],
                                                              tmp_path: Path) -> None:
    """From the state dict with the config.json timm's own save_for_hf writes (push_to_hub's) and
    from the live model, the same spec, whose reference and every port give the library's output;
    random canonical weights load strictly into the class the export names and, written with --arch,
    into the registry's own (S+'s SwiGLU split), and give the reference's output; a PE spec without
    its ref_feat_shape is refused for its architecture, which would put its own back. Each live
    model passes verify --model on the spec read from it (PE-spatial, an 'xy' Eva, read as
    rope_axes='cols_first')."""
    import timm
    from timm.models import save_for_hf

    from shared.checkpoints.libraries.timm import construct
    from shared.errors import SpecError
    from shared.your_model.proposal import propose_spec

    torch.manual_seed(0)
    model = perturbed(timm.create_model(name, pretrained=False, **EVA_SMALL_NAMED, **overrides), seed=1)
    save_for_hf(model, tmp_path)  # its config.json: the architecture, model_args of the caller's only
    config = json.loads((tmp_path / "config.json").read_text())
    converted = import_tensors("timm", state_dict(model), config, {})
    spec, images = converted.spec, images_for(converted.spec)
    assert_ports_match(spec, converted.tensors, images, library_logits(model, images), ports=ports.NATIVE)
    # the _qkvb model's state dict reads as a zero key bias; the live module holds none (k_bias is a
    # buffer): read without one, it binds by EvaAttention's q_bias and v_bias and passes verify --model
    written = spec.replace(bias_free=("attn.key",)) if name.endswith("_qkvb") else spec
    assert propose_spec(model).spec == written
    assert_verified(model)
    assert spec.rope_axes == ("cols_first" if "_pe_" in name else "rows_first")
    if name in ("vit_small_patch16_dinov3", "qwen3_vit_88m_enc", "vit_pe_spatial_tiny_patch16_512"):
        read = (spec.rope, spec.rope_coords, spec.registers, spec.pos_embed, spec.qkv_bias, spec.activation)
        assert read == {"vit_small_patch16_dinov3": ("axial_half", "centered", 4, "none", False, "gelu"),
                        "qwen3_vit_88m_enc": ("axial_half", "index", 0, "learned", True, "gelu_tanh"),
                        "vit_pe_spatial_tiny_patch16_512": ("axial_interleaved", "index", 0, "learned",
                                                            True, "gelu")}[name]
    tensors = init_weights(written, seed=5)
    rebuilt = [(construct(*target(written)), export_tensors("timm", written, tensors)),
               (timm.create_model(name, pretrained=False, **EVA_SMALL_NAMED, **overrides),  # as --arch
                registry_export(name, written, tensors, tmp_path))]                       # writes it
    if written.rope_ref_grid:  # no tensor says it, and create_model drops a None: PE's own would stand
        with pytest.raises(SpecError, match=r"ref_feat_shape=\[\d+, \d+\] \(create_model drops a None"):
            registry_export(name, written.replace(rope_ref_grid=()), tensors, tmp_path / "none")
    for timm_class, exported in rebuilt:
        timm_class.eval().load_state_dict({k: torch.from_numpy(v) for k, v in exported.items()}, strict=True)
        back = np.abs(library_logits(timm_class, images) - reference.forward(written, tensors, images)).max()
        assert back <= ATOL, back


# timm's AIMv2 and InternViT-300M (VisionTransformer) by their registry names at a tiny size, with no
# num_heads of the caller's: (id, name, the heads and norm eps the registry builds it with)
VIT_NAMED: list[tuple[str, str, tuple[int, float]]] = [
    ("aimv2-l", "aimv2_large_patch14_224", (8, 1e-5)),  # RmsNorm 1e-5 (a default 1e-6 would miss it)
    ("intern300m", "vit_intern300m_patch14_448", (16, 1e-6)),
]


@pytest.mark.parametrize(("name", "read"), [c[1:] for c in VIT_NAMED], ids=[c[0] for c in VIT_NAMED])
def test_timm_aimv2_intern300m_registry_names_both_directions(name: str, read: tuple[int, float],
                                                             tmp_path: Path) -> None:
    """From the config.json save_for_hf writes, which states neither heads nor eps, the registry's,
    the spec the live model gives (and passes verify --model on), whose reference and every port
    give timm's output; random canonical weights load
    strictly into the class the export names and, written with --arch, into the registry's own
    (AIMv2's SwiGLU split as its fc1_g and fc1_x), and give the reference's output."""
    import timm
    from timm.models import save_for_hf

    from shared.checkpoints.libraries.timm import construct
    from shared.your_model.proposal import propose_spec

    small = dict(img_size=16, patch_size=4, embed_dim=32, depth=2)
    torch.manual_seed(0)
    model = perturbed(timm.create_model(name, pretrained=False, **small), seed=1)
    save_for_hf(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert "num_heads" not in config["model_args"]
    converted = import_tensors("timm", state_dict(model), config, {})
    spec, images = converted.spec, images_for(converted.spec)
    assert (spec.heads, spec.layer_norm_eps) == read
    assert_ports_match(spec, converted.tensors, images, library_logits(model, images), ports=ports.NATIVE)
    assert propose_spec(model).spec == spec
    assert_verified(model)
    tensors = init_weights(spec, seed=5)
    registry = timm.create_model(name, pretrained=False, **small)
    for timm_class, exported in ((construct(*target(spec)), export_tensors("timm", spec, tensors)),
                                 (registry, registry_export(name, spec, tensors, tmp_path))):
        timm_class.eval().load_state_dict({k: torch.from_numpy(v) for k, v in exported.items()}, strict=True)
        back = np.abs(library_logits(timm_class, images) - reference.forward(spec, tensors, images)).max()
        assert back <= ATOL, back


def test_what_perception_encoder_and_qwen3_vit_have_beyond_the_spec_is_refused_in_one_line() -> None:
    """PE's grid offset beside a class token, PE-core's pool heads (8) and a pool MLP of its own width;
    Qwen3-ViT's merger, its classifier's affine-free norm, its encoder's
    tokens (global_pool='') and its table resampled to another grid (bilinear, align_corners=True)."""
    import timm

    from shared.checkpoints.libraries.timm import live_tables
    from shared.errors import SpecError, WeightsError

    def built(name: str, **overrides: Any) -> torch.nn.Module:
        torch.manual_seed(0)
        return perturbed(timm.create_model(name, pretrained=False, **overrides), seed=1)

    small = dict(img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2)
    pe_core = state_dict(built("vit_pe_core_tiny_patch16_384", **small))
    refusals: list[tuple[dict[str, Any], Any, str]] = [
        (pe_core, dict(PE_ARGS, rope_grid_offset=1.0), r"model_args.rope_grid_offset = 1.0: expected 0 "),
        (pe_core, dict(PE_ARGS, attn_pool_num_heads=8),
         r"model_args.attn_pool_num_heads = 8: expected null or num_heads 2"),
        (state_dict(built("vit_pe_core_gigantic_patch14_448", **small, attn_pool_num_heads=2)),
         dict(PE_ARGS, attn_pool_num_heads=2), r"tensor 'attn_pool.mlp.fc1.weight' \(128 rows\)"),
    ]
    qwen3 = dict(small, pos_embed_grid_size=4)
    merged, classifier = built("qwen3_vit_88m_enc", **qwen3, out_features=24), built("qwen3_vit_88m", **qwen3)
    refusals += [(state_dict(merged), None, r"tensor 'merger.norm.weight' comes from timm's Qwen3-ViT"),
                 (state_dict(classifier), None, r"'encoder.patch_embed.proj.weight' is timm's Qwen3VitClass")]
    for raw, args, message in refusals:
        config = None if args is None else {"model_args": dict(args, num_heads=2)}
        with pytest.raises((SpecError, WeightsError), match=message) as caught:
            import_tensors("timm", raw, config, {"heads": 2} if args is None else {})
        assert "\n" not in str(caught.value)
    for model, message in ((merged, "with model.merger"), (classifier, "Qwen3VitClassifier, whose")):
        with pytest.raises(SpecError, match=message):
            live_tables(model, None)
    encoder = state_dict(built("qwen3_vit_88m_enc", **qwen3, global_pool="avg"))
    for pool, message in (("", "global_pool = ''"), ("avg", "align_corners=True")):
        config = {"architecture": "qwen3_vit_88m_enc", "global_pool": pool}
        with pytest.raises(SpecError, match=message):  # its tokens; another grid than its table's
            import_tensors("timm", encoder, config, {"heads": 2, "image_height": 24, "image_width": 24})


HF_SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=16, patch_size=4)
HF_CASES: list[tuple[str, str, dict[str, Any]]] = [  # (id, model class, config kwargs)
    ("dinov2-swiglu", "Dinov2Model", dict(HF_SMALL, use_swiglu_ffn=True, mlp_ratio=2)),
    ("dinov2-registers", "Dinov2WithRegistersModel", dict(HF_SMALL, num_register_tokens=2, mlp_ratio=2)),
    ("siglip-vision", "SiglipVisionModel", dict(HF_SMALL, intermediate_size=48)),
    ("clip-vision", "CLIPVisionModel", dict(HF_SMALL, intermediate_size=48)),
    ("deit-distilled", "DeiTForImageClassificationWithTeacher",
     dict(HF_SMALL, intermediate_size=48, num_labels=3)),
    # RoPE: default biases (no key bias), then registers, a gated MLP, a theta of its own and a key bias
    ("dinov3-rope", "DINOv3ViTModel", dict(HF_SMALL, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=48)),
    ("dinov3-rope-registers-gated", "DINOv3ViTModel",
     dict(HF_SMALL, num_hidden_layers=1, num_attention_heads=2, intermediate_size=48, num_register_tokens=2,
          use_gated_mlp=True, hidden_act="silu", rope_theta=10.0, key_bias=True)),
]


def hf_model(model_class: str, config: dict[str, Any]) -> torch.nn.Module:
    import transformers

    cls = getattr(transformers, model_class)
    return cls(cls.config_class(**config))


@pytest.mark.parametrize(("model_class", "config"), [c[1:] for c in HF_CASES], ids=[c[0] for c in HF_CASES])
def test_hf_families_both_directions(model_class: str, config: dict[str, Any], tmp_path: Path) -> None:
    """From memory (the names the installed Transformers holds the model by: 5.x's own) and from
    its `save_pretrained` folder (5.x writes 4.x's names, but a fresh SigLIP or CLIP tower without
    `vision_model.`), the same spec and tensors, the library's output; `verify --model` passes on
    the object with the spec read from it; exported, the folder loads with an empty load report."""
    torch.manual_seed(0)
    model = perturbed(hf_model(model_class, config), seed=1)
    converted = import_tensors("hf", state_dict(model), model.config.to_dict(), {})
    spec, images = converted.spec, images_for(converted.spec)
    assert_ports_match(spec, converted.tensors, images, library_logits(model, images),
                       ports=ports.NATIVE if spec.rope != "none" else ())  # DINOv3: every port
    model.save_pretrained(tmp_path / "saved")
    saved = import_checkpoint("hf", tmp_path / "saved")
    assert saved.spec == spec
    assert_same_tensors(saved.tensors, converted.tensors)
    if model_class == "DINOv3ViTModel":  # its bias switches are the spec's: no key bias by default
        assert spec.bias_free == (() if config.get("key_bias") else ("attn.key",))
    assert_verified(model)
    tensors = init_weights(spec, seed=5)
    rebuilt = load_exported_hf(spec, tensors, tmp_path / "exported")
    back = np.abs(library_logits(rebuilt, images) - reference.forward(spec, tensors, images)).max()
    assert back <= ATOL, back
    again = import_checkpoint("hf", tmp_path / "exported")  # 4.x's names, a SigLIP's `vision_model.` too
    assert again.spec == spec
    assert_same_tensors(again.tensors, tensors)


# The vision towers of Transformers 5 that return their tokens (no pooler): AIMv2 (use_head=False; the
# aimv2-tiny preset), InternViT-6B's block (RMSNorm, q/k/v biases, LayerScale, no final norm) and
# InternViT-300M's (the same with LayerNorm); SigLIP's without its attention-pool head
# (vision_use_head=False: its tokens after post_layernorm, pooler_output None)
TOWER_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("aimv2", "Aimv2VisionModel", dict(HF_SMALL, intermediate_size=88, use_head=False)),
    ("siglip-no-head", "SiglipVisionModel", dict(HF_SMALL, intermediate_size=48, vision_use_head=False)),
    ("siglip2-no-head", "Siglip2VisionModel",
     dict({k: v for k, v in HF_SMALL.items() if k != "image_size"}, num_patches=16, intermediate_size=48,
          vision_use_head=False)),
    ("internvl-rmsnorm", "InternVLVisionModel",
     dict(HF_SMALL, intermediate_size=48, norm_type="rms_norm", attention_bias=True)),
    ("internvl-layernorm", "InternVLVisionModel",
     dict(HF_SMALL, intermediate_size=48, norm_type="layer_norm", attention_bias=True)),
    ("pixtral", "PixtralVisionModel", dict(HF_SMALL, intermediate_size=64, head_dim=8, hidden_act="silu")),
]


def tower_output(model: torch.nn.Module, images: np.ndarray, pooling: str) -> np.ndarray:
    """The tokens a tower returns (`last_hidden_state`), pooled as the spec read from it pools them."""
    from tests.checkpoints_support import nchw

    if type(model).__name__ == "Siglip2VisionModel":  # its forward takes patches (NaFlex), not an image
        tokens = siglip2_call(model, images).last_hidden_state.numpy()
        return tokens.mean(1) if pooling == "mean" else tokens[:, 0]
    with torch.no_grad():  # Pixtral packs a batch into one sequence (block-diagonal): an image at a time
        tokens = np.concatenate([model(pixel_values=nchw(images[i:i + 1])).last_hidden_state.numpy()
                                 for i in range(len(images))])
    return tokens.mean(1) if pooling == "mean" else tokens[:, 0]


@pytest.mark.parametrize(("model_class", "config"), [c[1:] for c in TOWER_CASES],
                         ids=[c[0] for c in TOWER_CASES])
def test_hf_towers_both_directions(model_class: str, config: dict[str, Any], tmp_path: Path) -> None:
    """As the families above, from memory and from the saved folder, on the towers' tokens pooled as
    the spec pools them, in the reference and every port; the live model's spec read from it, and
    `verify --model` passes on the object with it, on its final tokens (the towers return no pooled
    output); exported, loaded with an empty load report."""
    from shared.core.presets import get_preset
    from shared.your_model.proposal import propose_spec

    torch.manual_seed(0)
    model = perturbed(hf_model(model_class, config), seed=1)
    converted = import_tensors("hf", state_dict(model), model.config.to_dict(), {})
    spec, images = converted.spec, images_for(converted.spec)
    if model_class == "Aimv2VisionModel":
        assert spec == get_preset("aimv2-tiny")
    expected = tower_output(model, images, spec.pooling)
    assert_ports_match(spec, converted.tensors, images, expected, ports.NATIVE)
    model.save_pretrained(tmp_path / "saved")
    saved = import_checkpoint("hf", tmp_path / "saved")
    assert saved.spec == spec
    assert_same_tensors(saved.tensors, converted.tensors)
    # SigLIP2's live reading is its NaFlex forward's (batching naflex), which the folder's says when asked
    given = {"batching": "naflex"} if model_class == "Siglip2VisionModel" else {}
    live = import_tensors("hf", state_dict(model), model.config.to_dict(), given).spec
    assert propose_spec(model).spec == live
    assert "on the final tokens" in assert_verified(model).explanation  # Pixtral's: its packed batch split
    tensors = init_weights(spec, seed=5)
    rebuilt = load_exported_hf(spec, tensors, tmp_path / "exported")
    expected = reference.forward(spec, tensors, images)
    back = np.abs(tower_output(rebuilt, images, spec.pooling) - expected).max()
    assert back <= ATOL, back


def test_hf_towers_refuse_what_the_spec_cannot_say_in_one_line() -> None:
    from shared.errors import SpecError

    aimv2, internvl = dict(HF_SMALL, intermediate_size=88), dict(HF_SMALL, intermediate_size=48)
    for model_class, config, key in (
        ("Aimv2VisionModel", aimv2, "use_head = True"),  # its attention-pooling head
        ("Aimv2VisionModel", dict(aimv2, use_head=False, is_native=True), "is_native = True"),
        ("InternVLVisionModel", dict(internvl, use_qk_norm=True), "use_qk_norm = True"),  # over all heads
        ("InternVLVisionModel", dict(internvl, norm_type="rms_norm", use_mean_pooling=False),
         "use_mean_pooling = False"),
        ("PixtralVisionModel", dict(HF_SMALL, intermediate_size=64, head_dim=16), "head_dim = 16"),  # not D/H
    ):
        model = hf_model(model_class, config)
        with pytest.raises(SpecError, match=f"^config {key}") as caught:
            import_tensors("hf", state_dict(model), model.config.to_dict(), {})
        assert "\n" not in str(caught.value)


# Each family built and saved by Transformers 4.x (its side directory, in a process of its own: every
# folder published before 5 has these names), written as the test's first argument's subfolders.
SAVE_WITH_TRANSFORMERS4 = """
import json, sys
import torch, transformers
from tests.checkpoints_support import perturbed
assert transformers.__version__.startswith("4."), transformers.__version__
for name, model_class, config in json.loads(sys.argv[2]):
    torch.manual_seed(0)
    cls = getattr(transformers, model_class)
    perturbed(cls(cls.config_class(**config)), seed=1).save_pretrained(f"{sys.argv[1]}/{name}")
"""


@background.task("transformers4-folders", "test_checkpoints_families.py::test_folders_saved_by_transformers4")
def transformers4_folders(start: background.Start) -> tuple[Path, subprocess.CompletedProcess]:
    """The folders saved by Transformers 4.x, in the background (tests/background.py)."""
    from shared import REPO_ROOT

    folder = Path(tempfile.mkdtemp(prefix="portbench-transformers4-"))
    env = background.transformers4_environ()
    env.update(USE_TF="0", USE_FLAX="0",
               PYTHONPATH=os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO_ROOT)) if p))
    proc = start(subprocess.Popen([sys.executable, "-c", SAVE_WITH_TRANSFORMERS4, str(folder),
                                   json.dumps(HF_CASES)], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True))
    stdout, stderr = proc.communicate(timeout=600)
    return folder, subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_folders_saved_by_transformers4_convert_and_load_with_the_installed_one() -> None:
    """A 4.x-era folder of each family converts (its names are the tables'), and the installed
    Transformers loads it with an empty report and gives the reference's output on the converted
    tensors."""
    import transformers

    from tests.checkpoints_support import nchw

    folder, saved = background.result("transformers4-folders")
    assert saved.returncode == 0, saved.stderr[-2000:]
    for name, model_class, _ in HF_CASES:
        converted = import_checkpoint("hf", folder / name)
        spec, images = converted.spec, images_for(converted.spec)
        model, report = getattr(transformers, model_class).from_pretrained(str(folder / name),
                                                                            output_loading_info=True)
        assert not any(report[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), report
        with torch.no_grad():
            out = model.eval()(pixel_values=nchw(images))
        expected = (out.logits if model_class.startswith("DeiT") else out.pooler_output).numpy()
        gap = np.abs(reference.forward(spec, converted.tensors, images) - expected).max()
        assert gap <= ATOL, (name, gap)


# preset -> the library's constructor, built on the meta device: no 90M-parameter init is paid
SOURCES = {
    "dinov2-s14-reg4": ("timm", "vit_small_patch14_reg4_dinov2"),
    "deit3-s16": ("timm", "deit3_small_patch16_224"),
    "siglip-b16": ("timm", "vit_base_patch16_siglip_224"),
    "siglip2-b16-256": ("timm", "vit_base_patch16_siglip_256"),
    "siglip2-b16-naflex": ("timm", "naflexvit_base_patch16_siglip"),
    "pixtral-12b-encoder": ("hf", "PixtralVisionModel"),
    "qwen2.5-vl-blocks-112": ("hf", "Qwen2_5_VisionTransformerPretrainedModel"),  # its Conv3d and blocks
    "clip-b16": ("hf", "CLIPVisionModel"),
    "deit-s16-distilled": ("timm", "deit_small_distilled_patch16_224"),
    "aimv2-l14": ("timm", "aimv2_large_patch14_224"),
    "internvit-300m": ("timm", "vit_intern300m_patch14_448"),
}


@pytest.mark.parametrize("preset", list(SOURCES))
def test_full_size_presets_count_the_libraries_parameters(preset: str) -> None:
    import timm
    import transformers

    from shared.core.presets import FULL_SIZE_PRESETS

    library, name = SOURCES[preset]
    with torch.device("meta"):
        if library == "timm":
            # the towers' presets have no classifier (timm's default num_classes=1000 would add one)
            tower = preset in ("aimv2-l14", "internvit-300m", "siglip2-b16-naflex")
            towers = {"num_classes": 0} if tower else {}
            model = timm.create_model(name, pretrained=False, **towers)
        elif name == "CLIPVisionModel":
            model = transformers.CLIPVisionModel(transformers.CLIPVisionConfig(patch_size=16))
        elif name == "PixtralVisionModel":  # Pixtral-12B's vision_config is the class's defaults
            model = transformers.PixtralVisionModel(transformers.PixtralVisionConfig(hidden_act="silu"))
        else:  # Qwen2.5-VL-7B's vision_config
            from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen

            config = transformers.Qwen2_5_VLVisionConfig(hidden_size=1280, out_hidden_size=3584)
            whole = qwen.Qwen2_5_VisionTransformerPretrainedModel(config)
            model = torch.nn.ModuleList([whole.patch_embed, whole.blocks])  # not its merger
    assert set(SOURCES) == set(FULL_SIZE_PRESETS)
    count = sum(p.numel() for p in model.parameters())
    spec = FULL_SIZE_PRESETS[preset].spec
    assert spec.derived.params == count
    if preset in ("aimv2-l14", "internvit-300m"):  # Transformers' tower from `convert --to hf`'s config
        from shared.checkpoints.libraries.hf import build_model

        with torch.device("meta"):
            tower = build_model(FULL_SIZE_PRESETS[preset].spec)
        assert type(tower).__name__ in ("Aimv2VisionModel", "InternVLVisionModel")
        assert sum(p.numel() for p in tower.parameters()) == count
    if preset == "siglip2-b16-256":  # and Transformers' Siglip2VisionModel with its table's 256 rows
        with torch.device("meta"):
            siglip2 = transformers.Siglip2VisionModel(transformers.Siglip2VisionConfig(num_patches=256))
        assert sum(p.numel() for p in siglip2.parameters()) == count


def siglip2_output(model: torch.nn.Module, images: np.ndarray) -> np.ndarray:
    """Siglip2VisionModel's pooler_output on NHWC images (`siglip2_call`)."""
    return siglip2_call(model, images).pooler_output.numpy()


def siglip2_call(model: torch.nn.Module, images: np.ndarray) -> Any:
    """Siglip2VisionModel's output on NHWC images, patchified as its image processor does
    ((ph, pw, C) per patch, row-major patches), every patch real, each image's grid given."""
    batch, height, width, channels = images.shape
    p = model.config.patch_size
    rows, cols = height // p, width // p
    patches = images.reshape(batch, rows, p, cols, p, channels).transpose(0, 1, 3, 2, 4, 5)
    with torch.no_grad():
        out = model(pixel_values=torch.from_numpy(patches.reshape(batch, rows * cols, -1).copy()),
                    pixel_attention_mask=torch.ones(batch, rows * cols, dtype=torch.long),
                    spatial_shapes=torch.tensor([[rows, cols]] * batch))
    return out


def test_siglip2_at_its_tables_size_both_from_memory_and_folder(tmp_path: Path) -> None:
    """SigLIP2 (Transformers 5's Siglip2VisionModel) on images of its table's grid: from memory (5.x's
    names) and from its folder, SigLIP's spec and function, the library's own pooled output in the
    reference and every port; the export is SigLIP's (the same function). A table that is no square
    grid is refused in one line. (Its NaFlex forward: tests/test_batching_libraries.py.)"""
    import transformers

    from shared.errors import SpecError

    torch.manual_seed(0)
    config = transformers.Siglip2VisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                              patch_size=4, num_patches=16, intermediate_size=48)
    model = perturbed(transformers.Siglip2VisionModel(config), seed=1)
    converted = import_tensors("hf", state_dict(model), model.config.to_dict(), {})
    spec, images = converted.spec, images_for(converted.spec, batch=3)
    assert (spec.image_height, spec.pooling, spec.class_token) == (16, "map", False)
    assert spec.derived.params == sum(p.numel() for p in model.parameters())
    assert_ports_match(spec, converted.tensors, images, siglip2_output(model, images), ports=ports.NATIVE)
    model.save_pretrained(tmp_path / "saved")
    saved = import_checkpoint("hf", tmp_path / "saved")
    assert saved.spec == spec
    assert_same_tensors(saved.tensors, converted.tensors)
    rebuilt = load_exported_hf(spec, converted.tensors, tmp_path / "exported")
    assert type(rebuilt).__name__ == "SiglipVisionModel"
    assert np.abs(library_logits(rebuilt, images) - siglip2_output(model, images)).max() <= ATOL
    with pytest.raises(SpecError, match=r"config num_patches = 12: expected a square number"):
        import_tensors("hf", state_dict(model), {**model.config.to_dict(), "num_patches": 12}, {})


# Qwen's towers at their tiny presets' sizes with one frame (temporal_patch_size=1): the class keeps its
# Conv3d's frame axis, (D, C, 1, ph, pw), where the canonical kernel of one frame has none (ph, pw, C, D)
QWEN_ONE_FRAME = {
    "qwen2.5-vl-tiny": ("Qwen2_5_VLVisionConfig", "Qwen2_5_VisionTransformerPretrainedModel",
                        dict(window_size=16, fullatt_block_indexes=[1], hidden_act="silu")),
    "qwen3-vl-tiny": ("Qwen3VLVisionConfig", "Qwen3VLVisionModel",
                      dict(num_position_embeddings=16, deepstack_visual_indexes=[0])),
}


@pytest.mark.parametrize("preset", list(QWEN_ONE_FRAME))
def test_a_qwen_tower_of_one_frame_converts_both_ways(preset: str, tmp_path: Path) -> None:
    """A Qwen tower of one frame, from memory and from its save_pretrained folder, is its preset's spec
    with temporal_patch_size 1 (the kernel's unit frame axis dropped); `convert --to hf` puts the axis
    back, so `from_pretrained` loads it strictly and gives the tower's own merged tokens."""
    import transformers

    from shared.core.presets import get_preset
    from shared.core.spec import tensor_fields_differ

    config_name, class_name, own = QWEN_ONE_FRAME[preset]
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(
        depth=2, hidden_size=32, num_heads=4, intermediate_size=64, patch_size=4, in_channels=3,
        spatial_merge_size=2, temporal_patch_size=1, out_hidden_size=24, **own)
    model = perturbed(getattr(transformers, class_name)(config), seed=1)
    batch = {"max_patches": 64, "pack_images": 3, "image_height": 32, "image_width": 32}  # the presets'
    converted = import_tensors("hf", state_dict(model), model.config.to_dict(), batch)
    spec = converted.spec
    wanted = get_preset(preset).replace(temporal_patch_size=1, num_classes=0, name=spec.name)
    assert not tensor_fields_differ(spec, wanted)
    assert converted.tensors["patch_embed.kernel"].shape == (4, 4, 3, 32)
    model.save_pretrained(tmp_path / "saved")
    saved = import_checkpoint("hf", tmp_path / "saved", overrides=[f"{k}={v}" for k, v in batch.items()])
    assert saved.spec == spec
    assert_same_tensors(saved.tensors, converted.tensors)
    raw = export_tensors("hf", spec, converted.tensors)
    theirs = state_dict(model)
    assert sorted(raw) == sorted(theirs) and all(np.array_equal(raw[k], theirs[k]) for k in raw)
    rebuilt = load_exported_hf(spec, converted.tensors, tmp_path / "exported")
    pixels = torch.randn(4 * 4 + 2 * 6, 3 * 4 * 4, generator=torch.Generator().manual_seed(2))
    thw = torch.tensor([[1, 4, 4], [1, 2, 6]])  # a still image per row: one frame each
    with torch.no_grad():
        assert torch.equal(rebuilt(pixels, thw).pooler_output, model(pixels, thw).pooler_output)
