"""Hugging Face Transformers, as one plug-in: its PyTorch vision classes' `save_pretrained` folders
(or weights + `--config`) read and written, a live Transformers model read (`read_live`) and bound
by the names the installed version holds it under (`live_tables`), and the models the peers time
built (`build_model`: PyTorch, and 4.x's TF and Flax ViT). Sections: the config, DINOv3, the vision
models, ViTForImageClassification, Transformers 5's names, a live model.

## The config

A config.json is read as its class reads it: every key the classes here read, its
type and the spec fields it sets (`HF_KEYS`, decoding.py's `Key`), the defaults `from_pretrained`
applies when a key is absent, and the refusal of a config that names custom code.

A class reads the keys its defaults name (`Architecture.defaults`,
`VIT_DEFAULTS`): those the config gives are held to their row here, the others are Transformers'
own defaults. A key no class here reads (dropout rates, `layerscale_value`) is not looked at.

## ViTForImageClassification

Hugging Face `ViTForImageClassification` (PyTorch) state dicts + `config.json`.

Names: `vit.embeddings.{cls_token (1, 1, D), position_embeddings (1, N+1, D),
patch_embeddings.projection (OIHW)}`, `vit.encoder.layer.i.{layernorm_before,
attention.attention.{query,key,value} (separate (D, D) Linears), attention.output.dense,
layernorm_after, intermediate.dense, output.dense}`, `vit.layernorm`, `classifier`.

The config states what the tensors cannot: the head count, LayerNorm eps (HF's own default is
1e-12, not timm's 1e-6: the config value is used, never a guess), hidden_act, image and patch
size. A field the config omits takes `ViTConfig`'s default, as `from_pretrained` does.

The config's `model_type` picks the class: `vit` (above) or one of the vision models
above (DINOv2 with and without registers, SigLIP's and CLIP's vision
towers, DeiT with its distillation head); on export the spec picks it (see `model_type_for`).

## The vision models beside ViT

The Hugging Face Transformers vision models beside ViT (PyTorch classes, v4.57): each one's
state-dict names as a mapping table, its config defaults (what `from_pretrained` applies when a
key is absent), what its architecture fixes, and the config.json that rebuilds it.

- `Dinov2Model` / `Dinov2WithRegistersModel`: LayerScale always (`layer_scale1.lambda1`), the
  position table has the class row and no register rows (registers are inserted after it),
  `Dinov2SwiGLUFFN` packs [activated, linear] halves in `weights_in`, with hidden width
  `(int(int(D*mlp_ratio)*2/3)+7)//8*8`; `mask_token` is used only with `bool_masked_pos`
  (masked pre-training), so it is not converted (zeros on export). Output: `pooler_output`, the
  normed class token. Its interpolate_pos_encoding reads the table as a square grid, so only a
  square config image_size converts; at another image size (`--set image_height=.. image_width=..`)
  the table is kept and resampled by the class's own method (`DINOV2_RESAMPLE`: they differ).
- `SiglipVisionModel`: no class token, positions over the patches, final norm on every token
  (`post_layernorm`), then the MAP head (`head.probe`, `head.attention` an nn.MultiheadAttention
  with in_proj packed q, k, v, `head.layernorm`, `head.mlp`). Output: `pooler_output`. Built with
  `vision_use_head=False` (SigLIP's or SigLIP2's) it has no head and returns its tokens, as AIMv2's
  tower does: the spec's pooling is then a printed convention (`HEAD_KEYS`), and a spec without an
  attention pool exports so.
- `CLIPVisionModel`: `class_embedding`, a patch projection without bias (`patch_bias` false),
  `pre_layrnorm` before the blocks, `post_layernorm` on the pooled class token. Output:
  `pooler_output` (the projection to the joint space lives in CLIPModel, not here).
- `DINOv3ViTModel` (2-D RoPE): the DINOv3 section.
- `Aimv2VisionModel` and `InternVLVisionModel` (Transformers 5 only): the section "AIMv2 and InternVL's
  vision tower". Both return their tokens; the spec's pooling is a printed convention (`verify
  --model` holds their tokens to the reference's final tokens, as it does PixtralVisionModel's).
- `DeiTForImageClassificationWithTeacher`: ViT's names under `deit.`, a `distillation_token`
  with a position row, `cls_classifier` and `distillation_classifier`; logits are their mean.

## DINOv3

Transformers' `DINOv3ViTModel` (v4.57, `models/dinov3_vit/modeling_dinov3_vit.py`), the
architecture the vision models' table lists: its names, config defaults, the facts it fixes and the
config.json fields of its own.

No position table; 2-D RoPE on each head's patch queries and keys (`DINOv3ViTRopePositionEmbedding`:
patch centres in [-1, 1], angles 2 pi x coordinate x `1 / rope_theta ** arange(0, 1, 4 / head_dim)`,
`rotate_half` pairs; `apply_rotary_pos_emb` leaves the class and register tokens unrotated), which
is the spec's `rope='axial_half'`, `rope_coords='centered'`. LayerScale (`layer_scale1.lambda1`);
q/k/v/o projections, each with a bias switch (`key_bias` off by default: the spec's
`bias_free=[attn.key]`); MLP `up_proj`/`down_proj`, or gated with `gate_proj`. `register_tokens` is a
(1, 0, D) tensor without registers and `mask_token` is pre-training's: neither is converted.
Output: `pooler_output`, the normed class token. Training-only coordinate augmentation
(`pos_embed_shift`, `pos_embed_jitter`, `pos_embed_rescale`) takes no part at inference.

## Transformers 5's names

Every name above is Transformers 4.x's: what every folder published before Transformers 5 holds and
what 5's `save_pretrained` still writes (but for a freshly built SigLIP or CLIP tower). Transformers 5
holds its models by names of its own and states the renames as rules; a live model or a folder in
5's names is read through the installed library's rules, and a live model is bound by the table in
its own names (the section "Transformers 5's names"). An export is in the 4.x names, which 5 loads
with an empty load report.

"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from shared.checkpoints.common import (
    Inference,
    Raw,
    asks_another_grid,
    naflex_table,
    require,
    require_class_token_readout,
    require_defaults,
    require_plain_blocks,
    resampled_table,
    spelled,
    swiglu_width,
    width_per_head,
)
from shared.checkpoints.decoding import SIZE, Key, decode_config, pair, tensor_shape
from shared.checkpoints.live import Reading, module_of, size_of
from shared.checkpoints.tensor_files import encode_tensors, read_config, read_tensors
from shared.core.files import write_folder
from shared.core.mapping import Table
from shared.core.record import field_types, shown
from shared.core.spec import BIAS_FREE, FIELD_BOUNDS, NORM_EPS_FIELDS, ModelSpec
from shared.core.weights import patch_linear_to_oihw
from shared.errors import FrameworkUnavailable, SpecError, WeightsError
from shared.runtime.process_env import TRANSFORMERS4_NEEDED

# The plug-in's place in the format list, its formats (name -> what `convert --help` says), and
# whether its checkpoint is a folder: literals, read without importing the module.
ORDER = 30
FORMATS = {
    "hf": ("Hugging Face ViTForImageClassification: a directory with config.json and "
           "model.safetensors/pytorch_model.bin, or a weights file with --config"),
}
WRITES_FOLDER = True

# Fragments of this library's layer names -> what it calls the layer, and the spec setting its place
# alone cannot say: how `verify --model` names a user's layer that fits no tensor (checkpoints.layer_terms).
LAYER_TERMS = (
    ("pre_layrnorm", "CLIP's pre_layrnorm", ""),
    ("post_layernorm", "CLIP's post_layernorm, on the pooled vector", "final_norm=pooled"),
    ("layer_scale", "DINOv2's LayerScale", ""), ("register", "DINOv2's registers", ""),
)

# ==== config.json, read as its classes read it =======================================================
ACTIVATIONS = {"gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
               "gelu_fast": "gelu_tanh",  # these three compute the tanh approximation
               "quick_gelu": "quick_gelu", "silu": "silu", "swish": "silu"}
HF_KEYS: dict[str, Key] = {key.name: key for key in (
    Key("hidden_size", int, ("dim",)),
    Key("num_hidden_layers", int, ("depth",)),
    Key("num_attention_heads", int, ("heads",)),
    Key("num_channels", int, ("channels",)),
    Key("image_size", SIZE, ("image_height", "image_width")),
    Key("patch_size", SIZE, ("patch_height", "patch_width")),
    Key("intermediate_size", int, ("mlp_dim",)),
    Key("mlp_ratio", float, ("mlp_dim",)),  # DINOv2: the width is int(hidden_size * mlp_ratio)
    Key("hidden_act", Literal[tuple(ACTIVATIONS)], ("activation",)),
    Key("layer_norm_eps", float, ("layer_norm_eps",)),
    Key("qkv_bias", bool, ("qkv_bias",)),
    Key("use_swiglu_ffn", bool, ("mlp",)),  # DINOv2
    Key("num_register_tokens", int, ("registers",), positive=False),
    Key("rope_theta", float, ("rope_theta",)),  # DINOv3
    Key("use_gated_mlp", bool, ("mlp",)),
    Key("query_bias", bool, ("qkv_bias", "bias_free")),
    Key("key_bias", bool, ("qkv_bias", "bias_free")),
    Key("value_bias", bool, ("qkv_bias", "bias_free")),
    Key("proj_bias", bool, ("bias_free",)),
    Key("mlp_bias", bool, ("bias_free",)),
    Key("head_dim", int, ("head_dim",)),  # Pixtral's rotary reads it; its attention takes hidden / heads
    Key("rope_parameters.rope_theta", float, ("rope_theta",)),  # Pixtral
    Key("num_patches", int, ("image_height", "image_width")),  # SigLIP2: the table's rows, a square grid
    Key("vision_use_head", bool, ("pooling",)),  # SigLIP's and SigLIP2's: the MAP head, or the tokens
    # AIMv2's (Aimv2VisionConfig) and InternVL's (InternVLVisionConfig)
    Key("rms_norm_eps", float, ("layer_norm_eps",)),
    Key("use_head", bool, ("pooling",)),
    Key("is_native", bool, ("pos_embed",)),
    Key("attention_bias", bool, ("qkv_bias",)),
    Key("norm_type", Literal["layer_norm", "rms_norm"], ("norm_type",)),
    Key("use_qk_norm", bool, ("qk_norm",)),
    Key("use_mean_pooling", bool, ("final_norm",)),
    Key("use_absolute_position_embeddings", bool, ("pos_embed",)),
    # Qwen2.5-VL's (Qwen2_5_VLVisionConfig) and Qwen3-VL's (Qwen3VLVisionConfig) vision towers
    Key("depth", int, ("depth",)),
    Key("num_heads", int, ("heads",)),
    Key("in_channels", int, ("channels",)),
    Key("spatial_merge_size", int, ("merge_size",), at_most=16),
    Key("temporal_patch_size", int, ("temporal_patch_size",)),
    Key("out_hidden_size", int, ("merger_dim",)),
    Key("window_size", int, ("window_size",), at_most=1 << 20),
    Key("fullatt_block_indexes", tuple[int, ...], ("full_attention_blocks",), positive=False,
        at_most=1 << 10),
    Key("num_position_embeddings", int, ("pos_grid_height", "pos_grid_width"), at_most=1 << 20),
    Key("deepstack_visual_indexes", tuple[int, ...], ("deepstack_blocks",), positive=False, at_most=1 << 10),
)}
MODEL_TYPE = Key("model_type", str)
COMMON_DEFAULTS: dict[str, Any] = {
    "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "num_channels": 3,
    "image_size": 224,
}
VIT_DEFAULTS: dict[str, Any] = {  # transformers.ViTConfig()'s, and DeiTConfig()'s
    **COMMON_DEFAULTS, "patch_size": 16, "intermediate_size": 3072, "hidden_act": "gelu",
    "layer_norm_eps": 1e-12, "qkv_bias": True,
}


def config_model_type(config: dict[str, Any] | None) -> str:
    """The config's `model_type` (Transformers' ViT when absent)."""
    return decode_config(config, [MODEL_TYPE]).get(MODEL_TYPE.name, "vit")


def class_config(config: dict[str, Any] | None, defaults: dict[str, Any]) -> dict[str, Any]:
    """The keys a class reads (those `defaults` names), each from the config, decoded, or its default."""
    return {**defaults, **decode_config(config, [HF_KEYS[name] for name in defaults])}


def refuse_custom_code(config: dict[str, Any] | None, given: dict[str, Any]) -> None:
    """A config with `auto_map` names a class of its own (code beside the checkpoint, which
    portbench never runs): its tensors carry a standard class's names, but nothing says it
    computes that class's function. It is read only when the user states the whole spec
    (`--spec`): then the tensors are mapped by the standard names and every fact is checked
    against the stated fields."""
    if not config or "auto_map" not in config or set(field_types(ModelSpec)) <= set(given):
        return
    raise SpecError(f"config auto_map = {shown(config['auto_map'])} names custom code, which portbench never "
                    "runs, and the standard class's function may not be the one it computes; state the spec "
                    "it computes with --spec (a preset, spec file or JSON document) to read its tensors by "
                    "the standard names")


# ==== DINOv3 =========================================================================================
DINOV3_STYLE = dict(ln1="norm1", ln2="norm2", q="query=q_proj", k="key=k_proj", v="value=v_proj",
                    attn="attention", out="attention.o_proj", ffn="mlp")
# The MLP of the newer classes, gated or not (gate_proj, up_proj, down_proj), under the name each
# gives it: DINOv3's `mlp`, AIMv2's `ffn`, Pixtral's `feed_forward` (the style's `ffn`).
UP_DOWN_MLP_ROWS = """
blocks.{i}.mlp.{fc:gate=gate_proj|fc1=up_proj|fc2=down_proj}.kernel  {layer}.{ffn}.{fc}.weight  linear
blocks.{i}.mlp.{fc:gate=gate_proj|fc1=up_proj|fc2=down_proj}.bias    {layer}.{ffn}.{fc}.bias
"""
DINOV3_ROWS = UP_DOWN_MLP_ROWS + """
cls_token                                embeddings.cls_token        batch_token
reg_tokens                               embeddings.register_tokens  batch
patch_embed.kernel                       embeddings.patch_embeddings.weight  conv
patch_embed.bias                         embeddings.patch_embeddings.bias
blocks.{i}.{n:ls1=layer_scale1|ls2=layer_scale2}.gamma  {layer}.{n}.lambda1
final_norm.{w:scale=weight|bias}         norm.{w}
"""
DINOV3_DEFAULTS: dict[str, Any] = {
    "patch_size": 16, "hidden_size": 384, "num_attention_heads": 6, "intermediate_size": 1536,
    "hidden_act": "gelu", "layer_norm_eps": 1e-5, "rope_theta": 100.0, "query_bias": True,
    "key_bias": False, "value_bias": True, "proj_bias": True, "mlp_bias": True, "use_gated_mlp": False,
    "num_register_tokens": 0,
}
DINOV3_FIXED: dict[str, Any] = {
    "class_token": True, "pos_embed": "none", "pos_embed_class_row": False, "pooling": "cls",
    "layer_scale": True, "final_norm": "tokens", "num_classes": 0, "patch_bias": True,
    "rope": "axial_half", "rope_coords": "centered", "rope_ref_grid": (), "rope_bands": "shared",
    "rope_axes": "rows_first",
}
REGISTER_TOKENS = "embeddings.register_tokens"  # a (1, 0, D) tensor without registers


# DINOv3ViTConfig's bias switches -> the projection each one leaves without a bias (the spec's
# `bias_free` names; a gated MLP's gate follows mlp_bias too)
DINOV3_BIASES = {"query_bias": ("attn.query",), "key_bias": ("attn.key",), "value_bias": ("attn.value",),
                 "proj_bias": ("attn.out",), "mlp_bias": ("mlp.gate", "mlp.fc1", "mlp.fc2")}


def dinov3_facts(cfg: dict[str, Any]) -> dict[str, Any]:
    """What a DINOv3ViTConfig (decoded: `class_config`) says beyond the common fields: its bias
    switches are the spec's `qkv_bias` (off when q, k and v all have none) and `bias_free` (each
    projection without one: DINOv3's default is no key bias)."""
    gated = bool(cfg["use_gated_mlp"])
    off = [name for key, names in DINOV3_BIASES.items() if not cfg[key] for name in names
           if gated or name != "mlp.gate"]
    qkv = ("attn.query", "attn.key", "attn.value")
    qkv_bias = not all(name in off for name in qkv)
    bias_free = tuple(name for name in BIAS_FREE if name in off and (qkv_bias or name not in qkv))
    return {"qkv_bias": qkv_bias, "bias_free": bias_free, "mlp": "gated" if gated else "standard",
            "registers": cfg["num_register_tokens"], "rope_theta": float(cfg["rope_theta"])}


def dinov3_config(s: ModelSpec) -> dict[str, Any]:
    """The DINOv3ViTConfig fields of its own that rebuild `s` (`config_for_model` writes the common ones)."""
    has = s.derived.has_bias
    biases = {key: all(has[name] for name in names if name in has) for key, names in DINOV3_BIASES.items()}
    return {"use_gated_mlp": s.mlp == "gated", "rope_theta": s.rope_theta, "num_register_tokens": s.registers,
            **biases, "layerscale_value": 1.0, "drop_path_rate": 0.0}


# ==== AIMv2 and InternVL's vision tower ===========================================================
# Transformers' Aimv2VisionModel and InternVLVisionModel (5.x): each returns its tokens
# (`last_hidden_state`; no pooler), so the spec's pooling is a convention printed as one.
AIMV2_ROWS = UP_DOWN_MLP_ROWS + """
patch_norm_out.scale                     embeddings.rms_norm.weight
pos_embed                                embeddings.position_embedding.weight
final_norm.scale                         rms_norm.weight
"""
INTERNVL_ROWS = """
cls_token                                embeddings.cls_token        batch_token
pos_embed                                embeddings.position_embeddings batch
blocks.{i}.{n:ls1=lambda_1|ls2=lambda_2}.gamma  {layer}.{n}
final_norm.{w:scale=weight|bias}         layernorm.{w}
"""
PIXTRAL_ROWS = UP_DOWN_MLP_ROWS + """
patch_embed.kernel                       patch_conv.weight           conv
norm_pre.scale                           ln_pre.weight
"""
PIXTRAL_STYLE = dict(ln1="attention_norm", ln2="ffn_norm", q="query=q_proj", k="key=k_proj", v="value=v_proj",
                     attn="attention", out="attention.o_proj", ffn="feed_forward")
AIMV2_STYLE = dict(ln1="rms_norm1", ln2="rms_norm2", q="query=q_proj", k="key=k_proj", v="value=v_proj",
                   attn="attention", out="attention.out_proj", embed="embeddings", patch="patch_embed",
                   ffn="ffn")
INTERNVL_STYLE = dict(AIMV2_STYLE, ln1="layernorm_before", ln2="layernorm_after",
                      out="attention.projection_layer", patch="patch_embeddings.projection")
AIMV2_MLP = ("mlp.gate", "mlp.fc1", "mlp.fc2")
PIXTRAL_BIAS_FREE = ("attn.out", *AIMV2_MLP)  # no bias anywhere (q, k, v: qkv_bias false)
# the config key -> the value the spec can say, and why another is refused (one line, naming the key)
TOWER_REFUSED = {
    "aimv2_vision_model": (("use_head", False, "Aimv2AttentionPoolingHead (a class token attending over the "
                                               "tokens through k/v without a query projection)"),
                           ("is_native", False, "the native-resolution model's half-swapped sine-cosine "
                                                "table")),
    "pixtral": (),
    "internvl_vision": (("use_qk_norm", False, "InternVL's q_norm and k_norm each normalise all heads "
                                               "together (an RMSNorm over hidden_size); the spec's qk_norm "
                                               "is per head"),),
}


def tower_facts(model_type: str, cfg: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, str]]:
    """What an Aimv2VisionConfig or InternVLVisionConfig (decoded) says beyond the common keys, and the
    pooling convention (its value, why). Each refused key is one line naming it."""
    for key, expected, why in TOWER_REFUSED[model_type]:
        if cfg[key] != expected:
            raise SpecError(f"config {key} = {cfg[key]!r}: expected {expected!r}; {why}, which the spec "
                            "cannot express")
    if model_type == "aimv2_vision_model":  # qkv_bias: q, k, v and out_proj; mlp_bias: the SwiGLU's three
        free = (() if cfg["qkv_bias"] else ("attn.out",)) + (() if cfg["mlp_bias"] else AIMV2_MLP)
        return ({"norm_type": "rms_norm", "layer_norm_eps": float(cfg["rms_norm_eps"]),
                 "qkv_bias": cfg["qkv_bias"], "bias_free": free, "mlp": "gated"},
                ("mean", "the mean of Aimv2VisionModel's tokens (use_head=False returns them all), as timm's "
                         "aimv2_* global_pool='avg'; --set pooling=.. otherwise"))
    if model_type == "pixtral":  # RMSNorm eps 1e-5 and no bias are its code's (the architecture's facts)
        if cfg["head_dim"] * cfg["num_attention_heads"] != cfg["hidden_size"]:
            raise SpecError(f"config head_dim = {cfg['head_dim']!r}: expected hidden_size / "
                            f"num_attention_heads = {cfg['hidden_size'] / cfg['num_attention_heads']:g} "
                            "(PixtralAttention's head width; its rotary would take head_dim)")
        return ({"mlp": "gated", "qkv_bias": False, "bias_free": PIXTRAL_BIAS_FREE,
                 "rope_theta": float(cfg["rope_parameters.rope_theta"])},
                ("mean", "the mean of PixtralVisionModel's tokens (it returns them all, one image's "
                         "sequence after another); --set pooling=.. otherwise"))
    if cfg["norm_type"] == "rms_norm" and not cfg["use_mean_pooling"]:
        raise SpecError("config use_mean_pooling = False with norm_type = 'rms_norm': InternVLVisionModel's "
                        "final norm is then a LayerNorm after RMSNorm blocks, and the spec has one norm kind")
    learned = bool(cfg["use_absolute_position_embeddings"])
    return ({"norm_type": cfg["norm_type"], "qkv_bias": cfg["attention_bias"], "bias_free": (),
             "final_norm": "none" if cfg["use_mean_pooling"] else "tokens",
             "pos_embed": "learned" if learned else "none", "pos_embed_class_row": learned},
            ("cls", "the class token of InternVLVisionModel's tokens, as InternVL's own InternVisionModel "
                    "pools (last_hidden_state[:, 0]) and timm's vit_intern300m (global_pool='token'); "
                    "--set pooling=mean otherwise"))


def tower_config(model_type: str, s: ModelSpec) -> dict[str, Any]:
    """The config keys of its own that rebuild `s` as an Aimv2VisionModel or InternVLVisionModel."""
    if model_type == "pixtral":
        return {"head_dim": s.head_dim, "rope_parameters": {"rope_type": "axial", "rope_theta": s.rope_theta}}
    if model_type == "aimv2_vision_model":
        return {"rms_norm_eps": s.layer_norm_eps, "qkv_bias": s.qkv_bias,
                "mlp_bias": "mlp.fc1" not in s.bias_free, "use_head": False, "is_native": False}
    return {"attention_bias": s.qkv_bias, "norm_type": s.norm_type, "use_qk_norm": False,
            "use_mean_pooling": s.final_norm == "none", "layer_scale_init_value": 1.0,
            "use_absolute_position_embeddings": s.pos_embed == "learned", "use_mask_token": False,
            "hidden_dropout_prob": 0.0, "projection_dropout": 0.0,
            "image_size": [s.image_height, s.image_width], "patch_size": [s.patch_height, s.patch_width]}


def check_tower_exportable(model_type: str, target: str, s: ModelSpec) -> None:
    """What Aimv2VisionModel, InternVLVisionModel and PixtralVisionModel build beyond the common checks."""
    if model_type == "pixtral":
        require(s.pooling == "mean", target, "pooling", s.pooling, "mean (the tokens it returns, averaged)")
        require(s.bias_free == PIXTRAL_BIAS_FREE, target, "bias_free", s.bias_free,
                f"{list(PIXTRAL_BIAS_FREE)} (no bias anywhere)")
        require(s.mlp == "gated", target, "mlp", s.mlp, "gated (its SwiGLU feed_forward)")
        return
    if model_type == "aimv2_vision_model":
        require(s.pooling == "mean", target, "pooling", s.pooling, "mean (the tokens it returns, averaged)")
        want = (() if s.qkv_bias else ("attn.out",)) + (AIMV2_MLP if "mlp.fc1" in s.bias_free else ())
        require(s.bias_free == want, target, "bias_free", s.bias_free,
                f"{list(want)} (qkv_bias covers q, k, v and out_proj; mlp_bias the SwiGLU's three linears)")
        return
    require(s.pooling == "cls", target, "pooling", s.pooling, "cls (its class token)")
    require(not s.bias_free, target, "bias_free", s.bias_free,
            "none (attention_bias covers q, k and v)")
    require(s.final_norm == "none" or s.norm_type == "layer_norm", target, "final_norm", s.final_norm,
            "none with RMSNorm (use_mean_pooling=False adds a LayerNorm)")
    require(s.final_norm in ("none", "tokens"), target, "final_norm", s.final_norm, "none or tokens")
    require(s.pos_embed != "sincos", target, "pos_embed", s.pos_embed, "learned or none")


# ==== Qwen2.5-VL's and Qwen3-VL's vision towers =====================================================
# Transformers' Qwen2_5_VisionTransformerPretrainedModel and Qwen3VLVisionModel (5.x): every image of a
# call packed into one sequence in the processor's merge-block order, a two-frame Conv3d patch
# projection (a still image repeated to fill the frames), 2-D RoPE, the 2x2 patch merger (its output,
# pooler_output, is the tower's); Qwen2.5-VL's window attention, Qwen3-VL's table resized per image.
QWEN_CLASSES = {"qwen2_5_vl_vision": "Qwen2_5_VisionTransformerPretrainedModel",
                "qwen3_vl_vision": "Qwen3VLVisionModel"}
QWEN_DEFAULTS: dict[str, dict[str, Any]] = {  # Qwen2_5_VLVisionConfig()'s and Qwen3VLVisionConfig()'s
    "qwen2_5_vl_vision": {
        "depth": 32, "hidden_size": 3584, "hidden_act": "silu", "intermediate_size": 3420, "num_heads": 16,
        "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
        "window_size": 112, "out_hidden_size": 3584, "fullatt_block_indexes": (7, 15, 23, 31),
        "rope_parameters.rope_theta": 10_000.0},
    "qwen3_vl_vision": {
        "depth": 27, "hidden_size": 1152, "hidden_act": "gelu_pytorch_tanh", "intermediate_size": 4304,
        "num_heads": 16, "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2,
        "temporal_patch_size": 2, "out_hidden_size": 3584, "num_position_embeddings": 2304,
        "deepstack_visual_indexes": (8, 16, 24),
        "rope_parameters.rope_theta": 10_000.0},
}
# What each class's code fixes whatever its config says: its norms' epsilon (1e-6 in the blocks and
# the merger), the biases, no class token, the rotary layout, no final norm (the merger's norm stands
# there), merge-block order and the merger's output as the tower's.
QWEN_FIXED = {"class_token": False, "pos_embed_class_row": False, "layer_norm_eps": 1e-6, "norm": "pre",
              "qkv_bias": True, "bias_free": (), "rope": "axial_half", "rope_bands": "shared",
              "rope_axes": "rows_first", "rope_coords": "index", "rope_ref_grid": (), "final_norm": "none",
              "token_order": "merge_block", "num_classes": 0, "head_hidden": (), "registers": 0,
              "distill_token": False, "layer_scale": False, "qk_norm": False, "remainder": "drop",
              "kv_heads": None}
QWEN_OWN = {
    "qwen2_5_vl_vision": {"norm_type": "rms_norm", "mlp": "gated", "patch_bias": False, "pos_embed": "none",
                          "deepstack_blocks": ()},
    "qwen3_vl_vision": {"norm_type": "layer_norm", "mlp": "standard", "patch_bias": True,
                        "pos_embed": "learned", "pos_resample": "big_vision_zoom", "window_size": 0,
                        "full_attention_blocks": ()},
}
QWEN_ROWS = """
patch_embed.kernel                       patch_embed.proj.weight     conv3d
patch_embed.bias                         patch_embed.proj.bias
pos_embed                                pos_embed.weight
blocks.{i}.{n:norm1|norm2}.{w:scale=weight|bias}  blocks.{i}.{n}.{w}
blocks.{i}.attn.{p:query|key|value}.kernel  blocks.{i}.attn.qkv.weight  heads_linear
blocks.{i}.attn.{p:query|key|value}.bias    blocks.{i}.attn.qkv.bias    heads_bias
blocks.{i}.attn.out.kernel               blocks.{i}.attn.proj.weight heads_out_linear
blocks.{i}.attn.out.bias                 blocks.{i}.attn.proj.bias
blocks.{i}.mlp.{fc:{mlp}}.kernel         blocks.{i}.mlp.{fc}.weight  linear
blocks.{i}.mlp.{fc:{mlp}}.bias           blocks.{i}.mlp.{fc}.bias
merger.norm.{w:scale=weight|bias}        merger.{merger_norm}.{w}
merger.{fc:{merger}}.kernel              merger.{fc}.weight          linear
merger.{fc:{merger}}.bias                merger.{fc}.bias
deepstack.{j}.norm.{w:scale=weight|bias}  deepstack_merger_list.{j}.norm.{w}
deepstack.{j}.{fc:{merger}}.kernel       deepstack_merger_list.{j}.{fc}.weight  linear
deepstack.{j}.{fc:{merger}}.bias         deepstack_merger_list.{j}.{fc}.bias
"""
QWEN_STYLE = {  # Qwen2.5-VL's Qwen2_5_VLMLP and PatchMerger (an nn.Sequential), Qwen3-VL's linear_fc*
    "qwen2_5_vl_vision": dict(mlp="gate=gate_proj|fc1=up_proj|fc2=down_proj", merger_norm="ln_q",
                              merger="fc1=mlp.0|fc2=mlp.2"),
    "qwen3_vl_vision": dict(mlp="fc1=linear_fc1|fc2=linear_fc2", merger_norm="norm",
                            merger="fc1=linear_fc1|fc2=linear_fc2"),
}
# the spec fields a Qwen tower's config.json states (the others are its class's code)
QWEN_CONFIG_FIELDS = frozenset({"dim", "channels", "depth", "heads", "head_dim", "mlp_dim", "activation",
                                "patch_height", "patch_width", "merge_size", "merger_dim", "rope_theta",
                                "temporal_patch_size",
                                "window_size", "full_attention_blocks", "pos_grid_height", "pos_grid_width",
                                "deepstack_blocks"})


def qwen_type_for(s: ModelSpec) -> str | None:
    """The Qwen tower that computes `s` (a patch merger), by the feature only it has (a learned table)."""
    if s.merge_size == 1:
        return None
    return "qwen3_vl_vision" if s.pos_embed == "learned" else "qwen2_5_vl_vision"


def packed_class(s: ModelSpec) -> str | None:
    """The Qwen tower class that takes the packed batch and computes `s` whole (its windows, merger
    and frames), where `s` is one (the export checks the rest); no other class here packs images."""
    qwen = qwen_type_for(s)
    return None if qwen is None else QWEN_CLASSES[qwen]


def check_qwen_exportable(model_type: str, s: ModelSpec) -> None:
    """What a Qwen tower's class builds: its code's facts (QWEN_FIXED, QWEN_OWN), one epsilon, its
    config's integers (a square patch and table, windows of whole merge units)."""
    target = f"Hugging Face {QWEN_CLASSES[model_type]}"
    for name, value in {**QWEN_FIXED, **QWEN_OWN[model_type]}.items():
        require(getattr(s, name) == value, target, name, getattr(s, name), repr(value))
    for name in NORM_EPS_FIELDS.values():
        require(getattr(s, name) in (None, s.layer_norm_eps), target, name, getattr(s, name),
                f"null or layer_norm_eps ({s.layer_norm_eps:g}): its code's one epsilon")
    for name in ("patch_norm_in", "patch_norm_out", "norm_before_blocks", "head_hidden"):
        require(not getattr(s, name), target, name, getattr(s, name), "none (it has no such layer)")
    require(s.derived.attn_inner == s.dim, target, "head_dim", s.head_dim,
            f"dim / heads = {s.dim / s.heads:g}")
    require(s.patch_height == s.patch_width, target, "patch_width", s.patch_width,
            f"patch_height = {s.patch_height} (its config's patch_size is one integer)")
    require(s.activation in HF_ACT, target, "activation", s.activation, ", ".join(HF_ACT))
    if model_type == "qwen2_5_vl_vision":
        require(s.window_size > 0 and s.window_size % s.merge_size == 0, target, "window_size",
                s.window_size, f"a positive multiple of merge_size = {s.merge_size} (its windows are whole "
                "merge units; full attention everywhere is every block in full_attention_blocks)")
    else:
        require(s.pos_grid_height == s.pos_grid_width and s.derived.pos_rows_unused == 0, target,
                "pos_grid_width", s.pos_grid_width, f"pos_grid_height = {s.pos_grid_height} and every row "
                "used (num_position_embeddings is one square grid)")


def qwen_config(model_type: str, s: ModelSpec) -> dict[str, Any]:
    """The config.json that rebuilds `s` as the Qwen tower's class (Qwen3-VL's with its deepstack
    mergers)."""
    out = {"architectures": [QWEN_CLASSES[model_type]], "model_type": model_type, "depth": s.depth,
           "hidden_size": s.dim, "hidden_act": HF_ACT[s.activation], "intermediate_size": s.mlp_dim,
           "num_heads": s.heads, "in_channels": s.channels, "patch_size": s.patch_height,
           "spatial_merge_size": s.merge_size, "temporal_patch_size": s.temporal_patch_size,
           "out_hidden_size": s.merger_dim,
           "rope_parameters": {"rope_type": "axial", "rope_theta": s.rope_theta}}
    if model_type == "qwen2_5_vl_vision":  # its window in pixels
        return out | {"window_size": s.window_size * s.patch_height,
                      "fullatt_block_indexes": list(s.full_attention_blocks)}
    return out | {"num_position_embeddings": s.pos_grid_height * s.pos_grid_width,
                  "deepstack_visual_indexes": list(s.deepstack_blocks)}


def deepstack_blocks(indexes: tuple[int, ...], depth: int) -> tuple[int, ...]:
    """Qwen3-VL's deepstack_visual_indexes as the spec's deepstack_blocks: its J-th merger reads block
    indexes[J] and its outputs come in block order, so the spec's order is the config's only when
    the blocks are listed once each, in order, and each exists (a merger of a block its loop never
    meets would be a tensor that computes nothing)."""
    if list(indexes) != sorted(set(indexes)) or any(i >= depth for i in indexes):
        raise SpecError(f"config deepstack_visual_indexes = {list(indexes)}: expected block indices below "
                        f"depth {depth}, each once, in order")
    return tuple(indexes)


def infer_qwen(fmt: str, model_type: str, raw: Raw, config: dict[str, Any] | None,
               given: dict[str, Any]) -> Inference:
    """A Qwen vision tower's spec: the config's keys and its class's facts (QWEN_FIXED, QWEN_OWN); the
    batch it is compared on is a convention (a packed batch of `pack_images` images a sequence, each at
    most the table's grid or two windows a side), printed, and `--set` wins."""
    cfg = class_config(config, QWEN_DEFAULTS[model_type])
    name = QWEN_CLASSES[model_type]
    inf = Inference(fmt)
    shape = tensor_shape(inf, raw, "patch_embed.proj.weight", "out, in, frames, height, width")
    dim, channels, patch, merge = shape[0], shape[1], cfg["patch_size"], cfg["spatial_merge_size"]
    for key, value in (("hidden_size", dim), ("in_channels", channels), ("temporal_patch_size", shape[2]),
                       ("patch_size", shape[3])):
        if cfg[key] != value:
            raise SpecError(f"config {key} = {cfg[key]!r} contradicts tensor 'patch_embed.proj.weight' "
                            f"{shape}")
    depth = sum(1 for k in raw if re.fullmatch(r"blocks\.\d+\.norm1\.weight", k))
    if cfg["depth"] != depth:
        raise SpecError(f"config depth = {cfg['depth']!r} contradicts the {depth} 'blocks.*' in the "
                        "checkpoint")
    facts = {"dim": dim, "channels": channels, "depth": depth, "heads": cfg["num_heads"],
             "head_dim": width_per_head(fmt, dim, "config hidden_size", cfg["num_heads"], "config num_heads"),
             "mlp_dim": cfg["intermediate_size"], "activation": ACTIVATIONS[cfg["hidden_act"]],
             "patch_height": patch, "patch_width": patch, "merge_size": merge,
             "merger_dim": cfg["out_hidden_size"], "rope_theta": float(cfg["rope_parameters.rope_theta"]),
             "temporal_patch_size": cfg["temporal_patch_size"], "merger_norm_eps": None,  # its code's 1e-6
             **QWEN_FIXED, **QWEN_OWN[model_type]}
    if model_type == "qwen2_5_vl_vision":
        unit = patch * merge  # its window_size is in pixels, whole merge units
        if cfg["window_size"] % unit:
            raise SpecError(f"config window_size = {cfg['window_size']!r}: expected a multiple of "
                            f"patch_size x spatial_merge_size = {unit} (its windows are whole merge units)")
        side = cfg["window_size"] // patch
        listed = set(cfg["fullatt_block_indexes"])  # a set of blocks, in any order there
        full = tuple(sorted(i for i in listed if i < depth))  # its loop never meets the others
        if len(full) < len(listed):
            inf.notes.append(f"config fullatt_block_indexes {sorted(listed)}: only blocks below depth "
                             f"{depth} exist, so {list(full)} attend over the whole image")
        facts |= {"window_size": side, "full_attention_blocks": full}
        bounds, why = 2 * side, f"two of its {cfg['window_size']}-pixel windows a side"
    else:
        grid = math.isqrt(cfg["num_position_embeddings"])
        if grid * grid != cfg["num_position_embeddings"]:
            raise SpecError(f"config num_position_embeddings = {cfg['num_position_embeddings']!r}: "
                            f"expected a square ({name} reads its table as a square grid)")
        facts |= {"pos_grid_height": grid, "pos_grid_width": grid}
        bounds, why = grid, f"its {grid}x{grid} position table's grid"
        facts["deepstack_blocks"] = deepstack_blocks(cfg["deepstack_visual_indexes"], depth)
    for field_name, value in facts.items():
        inf.fact(field_name, value, "config.json" if field_name in QWEN_CONFIG_FIELDS else f"{name}'s code")
    batching = given.get("batching", "packed")
    inf.convention("batching", "packed", f"{name} packs every image of a call into one sequence")
    inf.convention("pack_images", 2 if batching == "packed" else 1, "two images a sequence")
    bounds = max(merge, bounds - bounds % merge)
    for field_name in ("image_height", "image_width"):
        inf.convention(field_name, bounds * patch, f"an image of at most {why}")
    images = given.get("pack_images", 2 if batching == "packed" else 1)
    inf.convention("max_patches", images * bounds * bounds, "every image of a sequence at its largest")
    inf.convention("pooling", "mean", f"the mean of {name}'s merged tokens (pooler_output)")
    return inf


# ==== the vision models ==============================================================================
HF_ACT = spelled(ACTIVATIONS)  # each spec activation as Transformers names it first



ENCODER_ROWS = """
blocks.{i}.{n:norm1={ln1}|norm2={ln2}}.{w:scale=weight|bias}  {layer}.{n}.{w}
blocks.{i}.attn.{p:{q}|{k}|{v}}.kernel   {layer}.{attn}.{p}.weight   heads_linear
blocks.{i}.attn.{p:{q}|{k}|{v}}.bias     {layer}.{attn}.{p}.bias     heads_bias
blocks.{i}.attn.out.kernel               {layer}.{out}.weight        heads_out_linear
blocks.{i}.attn.out.bias                 {layer}.{out}.bias
"""
VIT_LAYER = "vit.encoder.layer.{i}"  # block i's prefix
VIT_STYLE = dict(ln1="layernorm_before", ln2="layernorm_after", q="query", k="key", v="value",
                 attn="attention.attention", out="attention.output.dense")
DINOV2_STYLE = dict(VIT_STYLE, ln1="norm1", ln2="norm2", embed="embeddings",
                    patch="patch_embeddings.projection")
CLIP_STYLE = dict(ln1="layer_norm1", ln2="layer_norm2", q="query=q_proj", k="key=k_proj", v="value=v_proj",
                  attn="self_attn", out="self_attn.out_proj")
PATCH_ROWS = """
patch_embed.kernel                       {embed}.{patch}.weight      conv
patch_embed.bias                         {embed}.{patch}.bias
"""
MLP_ROWS = """
blocks.{i}.mlp.{fc:fc1|fc2}.kernel       {layer}.mlp.{fc}.weight     linear
blocks.{i}.mlp.{fc:fc1|fc2}.bias         {layer}.mlp.{fc}.bias
"""
DINOV2_ROWS = """
cls_token                                {embed}.cls_token           batch_token
reg_tokens                               {embed}.register_tokens     batch
pos_embed                                {embed}.position_embeddings batch
blocks.{i}.{n:ls1=layer_scale1|ls2=layer_scale2}.gamma  {layer}.{n}.lambda1
final_norm.{w:scale=weight|bias}         layernorm.{w}
"""
DINOV2_SWIGLU_ROWS = """
blocks.{i}.mlp.{h:gate|fc1}.kernel       {layer}.mlp.weights_in.weight  stacked_linear
blocks.{i}.mlp.{h:gate|fc1}.bias         {layer}.mlp.weights_in.bias    stacked_bias
blocks.{i}.mlp.fc2.kernel                {layer}.mlp.weights_out.weight linear
blocks.{i}.mlp.fc2.bias                  {layer}.mlp.weights_out.bias
"""
SIGLIP_ROWS = """
pos_embed                                {embed}.position_embedding.weight
final_norm.{w:scale=weight|bias}         vision_model.post_layernorm.{w}
pool.probe                               vision_model.head.probe     batch_token
pool.attn.{p:query|key|value}.kernel     vision_model.head.attention.in_proj_weight  heads_linear
pool.attn.{p:query|key|value}.bias       vision_model.head.attention.in_proj_bias    heads_bias
pool.attn.out.kernel                     vision_model.head.attention.out_proj.weight heads_out_linear
pool.attn.out.bias                       vision_model.head.attention.out_proj.bias
pool.norm.{w:scale=weight|bias}          vision_model.head.layernorm.{w}
pool.mlp.{fc:fc1|fc2}.kernel             vision_model.head.mlp.{fc}.weight  linear
pool.mlp.{fc:fc1|fc2}.bias               vision_model.head.mlp.{fc}.bias
"""
CLIP_ROWS = """
cls_token                                {embed}.class_embedding
pos_embed                                {embed}.position_embedding.weight
norm_pre.{w:scale=weight|bias}           vision_model.pre_layrnorm.{w}
final_norm.{w:scale=weight|bias}         vision_model.post_layernorm.{w}
"""
VIT_MLP_ROWS = """
blocks.{i}.mlp.{fc:fc1=intermediate|fc2=output}.kernel  {layer}.{fc}.dense.weight  linear
blocks.{i}.mlp.{fc:fc1=intermediate|fc2=output}.bias    {layer}.{fc}.dense.bias
"""  # ViT's and DeiT's MLP, named as their `ViTLayer` names it
DEIT_ROWS = VIT_MLP_ROWS + """
cls_token                                {embed}.cls_token           batch_token
dist_token                               {embed}.distillation_token  batch_token
pos_embed                                {embed}.position_embeddings batch
final_norm.{w:scale=weight|bias}         deit.layernorm.{w}
head.out.kernel                          cls_classifier.weight       linear
head.out.bias                            cls_classifier.bias
head_dist.out.kernel                     distillation_classifier.weight  linear
head_dist.out.bias                       distillation_classifier.bias
"""


@dataclass(frozen=True)
class Architecture:
    """One Transformers model class: its names, config defaults and the facts it fixes."""

    model_class: str
    patch_key: str  # the patch projection's weight: dim and channels are read from it
    layer_key: str  # `{i}`: block i's prefix
    defaults: dict[str, Any]
    fixed: dict[str, Any]  # spec fields the architecture fixes
    fill: dict[str, str] = field(default_factory=dict)

    def rows(self, s: ModelSpec) -> str:
        name = self.model_class
        if name.startswith("Dinov2"):
            mlp = DINOV2_SWIGLU_ROWS if s.mlp == "gated" else MLP_ROWS
            return PATCH_ROWS + ENCODER_ROWS + mlp + DINOV2_ROWS
        if name in ("SiglipVisionModel", "Siglip2VisionModel"):
            return PATCH_ROWS + ENCODER_ROWS + MLP_ROWS + SIGLIP_ROWS
        if name == "CLIPVisionModel":
            return PATCH_ROWS + ENCODER_ROWS + MLP_ROWS + CLIP_ROWS
        if name == "DINOv3ViTModel":
            return ENCODER_ROWS + DINOV3_ROWS
        if name == "Aimv2VisionModel":
            return PATCH_ROWS + ENCODER_ROWS + AIMV2_ROWS
        if name == "PixtralVisionModel":
            return PIXTRAL_ROWS + ENCODER_ROWS
        if name == "InternVLVisionModel":
            return PATCH_ROWS + ENCODER_ROWS + MLP_ROWS + INTERNVL_ROWS
        return PATCH_ROWS + ENCODER_ROWS + DEIT_ROWS


TOWER = ("vision_model.embeddings.patch_embedding.weight", "vision_model.encoder.layers.{i}")
DINOV2_FIXED = {"class_token": True, "pos_embed": "learned", "pos_embed_class_row": True, "pooling": "cls",
                "layer_scale": True, "final_norm": "tokens", "num_classes": 0, "patch_bias": True}
ARCHITECTURES: dict[str, Architecture] = {  # config model_type -> the class
    "dinov2": Architecture(
        "Dinov2Model", "embeddings.patch_embeddings.projection.weight", "encoder.layer.{i}",
        {**COMMON_DEFAULTS, "patch_size": 14, "mlp_ratio": 4, "hidden_act": "gelu", "layer_norm_eps": 1e-6,
         "qkv_bias": True, "use_swiglu_ffn": False},
        {**DINOV2_FIXED, "registers": 0}, DINOV2_STYLE),
    "dinov2_with_registers": Architecture(
        "Dinov2WithRegistersModel", "embeddings.patch_embeddings.projection.weight", "encoder.layer.{i}",
        {**COMMON_DEFAULTS, "patch_size": 16, "mlp_ratio": 4, "hidden_act": "gelu", "layer_norm_eps": 1e-6,
         "qkv_bias": True, "use_swiglu_ffn": False, "num_register_tokens": 4},
        {**DINOV2_FIXED, "pos_embed_register_rows": False},
        DINOV2_STYLE),
    "siglip_vision_model": Architecture(
        "SiglipVisionModel", *TOWER,
        {**COMMON_DEFAULTS, "patch_size": 16, "intermediate_size": 3072, "hidden_act": "gelu_pytorch_tanh",
         "layer_norm_eps": 1e-6, "vision_use_head": True},
        {"class_token": False, "pos_embed": "learned", "pos_embed_class_row": False, "pooling": "map",
         "pool_qkv_bias": True, "final_norm": "tokens", "num_classes": 0, "qkv_bias": True,
         "patch_bias": True},
        dict(CLIP_STYLE, embed="vision_model.embeddings", patch="patch_embedding")),
    # SigLIP2 at one fixed size: SigLIP's names, function and MAP head; its patch projection is a Linear on
    # patches flattened (ph, pw, C) (read as the conv it equals: `siglip2_patches_as_conv`), its table
    # has num_patches rows, a square grid resized to each image's (antialiased bilinear, the identity at
    # the table's own size), and a forward takes patches, a mask and each image's grid (NaFlex).
    "siglip2_vision_model": Architecture(
        "Siglip2VisionModel", *TOWER,
        {**{k: v for k, v in COMMON_DEFAULTS.items() if k != "image_size"}, "patch_size": 16,
         "num_patches": 256, "intermediate_size": 3072, "hidden_act": "gelu_pytorch_tanh",
         "layer_norm_eps": 1e-6, "vision_use_head": True},
        {"class_token": False, "pos_embed": "learned", "pos_embed_class_row": False, "pooling": "map",
         "pool_qkv_bias": True, "final_norm": "tokens", "num_classes": 0, "qkv_bias": True,
         "patch_bias": True},
        dict(CLIP_STYLE, embed="vision_model.embeddings", patch="patch_embedding")),
    "clip_vision_model": Architecture(
        "CLIPVisionModel", *TOWER,
        {**COMMON_DEFAULTS, "patch_size": 32, "intermediate_size": 3072, "hidden_act": "quick_gelu",
         "layer_norm_eps": 1e-5},
        {"class_token": True, "pos_embed": "learned", "pos_embed_class_row": True, "pooling": "cls",
         "norm_before_blocks": True, "patch_bias": False, "final_norm": "pooled", "num_classes": 0,
         "qkv_bias": True},
        dict(CLIP_STYLE, embed="vision_model.embeddings", patch="patch_embedding")),
    "deit": Architecture(
        "DeiTForImageClassificationWithTeacher", "deit.embeddings.patch_embeddings.projection.weight",
        "deit.encoder.layer.{i}", VIT_DEFAULTS,
        {"class_token": True, "distill_token": True, "pos_embed": "learned", "pos_embed_class_row": True,
         "pooling": "cls", "final_norm": "tokens", "patch_bias": True},
        dict(VIT_STYLE, embed="deit.embeddings", patch="patch_embeddings.projection")),
    "dinov3_vit": Architecture(
        "DINOv3ViTModel", "embeddings.patch_embeddings.weight", "layer.{i}",
        {**COMMON_DEFAULTS, **DINOV3_DEFAULTS}, DINOV3_FIXED, DINOV3_STYLE),
    "aimv2_vision_model": Architecture(  # Transformers 5 (Aimv2VisionConfig's defaults)
        "Aimv2VisionModel", "embeddings.patch_embed.weight", "encoder.layers.{i}",
        {**COMMON_DEFAULTS, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 8,
         "patch_size": 14, "intermediate_size": 2816, "hidden_act": "silu", "rms_norm_eps": 1e-5,
         "qkv_bias": False, "mlp_bias": False, "use_head": True, "is_native": False},
        {"class_token": False, "pos_embed": "learned", "pos_embed_class_row": False, "patch_norm_out": True,
         "layer_scale": False, "final_norm": "tokens", "num_classes": 0, "patch_bias": True}, AIMV2_STYLE),
    "internvl_vision": Architecture(  # Transformers 5 (InternVLVisionConfig's defaults)
        "InternVLVisionModel", "embeddings.patch_embeddings.projection.weight", "encoder.layer.{i}",
        {**COMMON_DEFAULTS, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
         "image_size": (448, 448), "patch_size": (14, 14), "intermediate_size": 4096, "hidden_act": "gelu",
         "layer_norm_eps": 1e-6, "attention_bias": False, "norm_type": "layer_norm", "use_qk_norm": False,
         "use_mean_pooling": True, "use_absolute_position_embeddings": True},
        {"class_token": True, "layer_scale": True, "num_classes": 0, "patch_bias": True}, INTERNVL_STYLE),
    "pixtral": Architecture(  # Transformers 5 (PixtralVisionConfig's defaults: Pixtral-12B's but hidden_act)
        "PixtralVisionModel", "patch_conv.weight", "transformer.layers.{i}",
        {**COMMON_DEFAULTS, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
         "image_size": 1024, "patch_size": 16, "intermediate_size": 4096, "hidden_act": "gelu",
         "head_dim": 64, "rope_parameters.rope_theta": 10_000.0},
        {"class_token": False, "pos_embed": "none", "pos_embed_class_row": False, "norm_before_blocks": True,
         "norm_type": "rms_norm", "layer_norm_eps": 1e-5, "rope": "axial_half", "rope_bands": "alternating",
         "rope_axes": "rows_first", "rope_coords": "index", "rope_ref_grid": (), "layer_scale": False,
         "final_norm": "none", "num_classes": 0, "patch_bias": False}, PIXTRAL_STYLE),
}
TOWERS = ("aimv2_vision_model", "internvl_vision", "pixtral")
# The config key that keeps a class's attention-pool head (SigLIP's and SigLIP2's, true by default).
# Without the head the class returns its tokens (last_hidden_state, after post_layernorm; pooler_output
# None), as AIMv2's use_head=False tower does: its pooling is then no fact of the architecture but a
# convention printed as one (the towers' too, `tower_facts`), and a spec without an attention pool
# exports as that class with the key false.
HEAD_KEYS = {"siglip_vision_model": "vision_use_head", "siglip2_vision_model": "vision_use_head"}
HEADLESS_POOLING = ("mean", "the mean of {}'s tokens ({}=False returns them all, after post_layernorm, "
                            "and no pooler_output), as SiglipForImageClassification pools them; "
                            "--set pooling=.. otherwise")


def has_head(model_type: str, cfg: dict[str, Any]) -> bool:
    """Whether the class builds its attention-pool head (`HEAD_KEYS`; a class without the key: always)."""
    key = HEAD_KEYS.get(model_type)
    return key is None or bool(cfg[key])


def architecture_fixed(model_type: str, head: bool) -> dict[str, Any]:
    """The spec fields the class fixes: without its head, not the pooling (a convention then)."""
    fixed = ARCHITECTURES[model_type].fixed
    return fixed if head else {name: value for name, value in fixed.items() if name != "pooling"}


# What each DINOv2 class's `interpolate_pos_encoding` computes (Transformers 4.57), called in every
# forward whose image is not the table's (no flag): the float32 cast around it is no step for float32
# weights, and neither passes the original DINOv2's +0.1 scale factor (`dinov2_legacy`), only a size.
DINOV2_RESAMPLE = {
    "dinov2": ("hf_bicubic", "Transformers' Dinov2Embeddings.interpolate_pos_encoding (torch's bicubic at "
               "the new size, align_corners=False, no antialias), as every forward at another size calls it"),
    "dinov2_with_registers": (
        "timm_bicubic_antialias", "Transformers' Dinov2WithRegistersEmbeddings.interpolate_pos_encoding "
        "(torch's bicubic at the new size with antialias=True), as every forward at another size calls it"),
}
MASK_TOKEN = "embeddings.mask_token"  # DINOv2's and DINOv3's, used only with bool_masked_pos


def mlp_width(dim: int, ratio: float) -> int:
    """DINOv2's MLP width, `int(hidden_size * mlp_ratio)`, within the spec's bound: a ratio that
    makes none (or one too wide to build) is named as the config's."""
    width, bound = dim * ratio, FIELD_BOUNDS["mlp_dim"]  # a float: int() of an infinite one would raise
    if not 1 <= width < bound + 1:
        raise SpecError(f"config mlp_ratio = {ratio!r} makes an MLP width of {dim} x {ratio!r} = "
                        f"{shown(width)}: expected a ratio that makes one from 1 to {bound:,}")
    return int(width)



def siglip2_image_size(cfg: dict[str, Any]) -> int:
    """The one image size a SigLIP2 table serves unresized: its num_patches rows are a square grid
    (`int(num_patches ** 0.5)` a side), each row a patch_size square."""
    side = math.isqrt(cfg["num_patches"])
    if side * side != cfg["num_patches"]:
        raise SpecError(f"config num_patches = {cfg['num_patches']!r}: expected a square number "
                        "(Siglip2VisionModel reads its position table as a square grid)")
    return side * pair(cfg["patch_size"])[0]


def siglip2_patches_as_conv(raw: Raw, source: str, config: dict[str, Any] | None) -> Raw:
    """SigLIP2's patch projection, a Linear (D, ph*pw*C) on patches its image processor flattens
    (ph, pw, C), as the Conv2d (D, C, ph, pw) that computes the same on the image: SigLIP's tensor."""
    key = TOWER[0]
    weight = raw.get(key)
    if weight is None or weight.ndim != 2:
        return raw
    cfg = class_config(config, ARCHITECTURES["siglip2_vision_model"].defaults)
    (ph, pw), channels = pair(cfg["patch_size"]), cfg["num_channels"]
    if weight.shape[1] != ph * pw * channels:
        raise WeightsError(f"hf checkpoint {source}: tensor {key!r} {tuple(weight.shape)}: expected "
                           f"(hidden_size, {ph * pw * channels}) = patch_size {ph}x{pw} x num_channels "
                           f"{channels}")
    return {**raw, key: patch_linear_to_oihw(weight, ph, pw)}


def mlp_ratio_for(s: ModelSpec) -> int | None:
    """The integer mlp_ratio a DINOv2 config rebuilds `s.mlp_dim` from (`int(dim * ratio)`, two
    thirds of that rounded up to a multiple of 8 when gated): Transformers 5's Dinov2Config takes
    integers only; None when none does."""
    gated = s.mlp == "gated"
    near = 1.5 * s.mlp_dim / s.dim if gated else s.mlp_dim / s.dim
    for ratio in range(max(1, int(near) - 1), int(near) + 3):
        width = swiglu_width(s.dim * ratio) if gated else s.dim * ratio
        if width == s.mlp_dim:
            return ratio
    return None


def config_for_model(model_type: str, s: ModelSpec, act: str) -> dict[str, Any]:
    """The config.json the architecture's `from_pretrained` needs for `s`."""
    arch = ARCHITECTURES[model_type]
    out: dict[str, Any] = {
        "architectures": [arch.model_class], "model_type": model_type, "hidden_size": s.dim,
        "num_hidden_layers": s.depth, "num_attention_heads": s.heads, "hidden_act": act,
        "layer_norm_eps": s.layer_norm_eps, "image_size": s.image_height, "patch_size": s.patch_height,
        "num_channels": s.channels, "attention_dropout": 0.0,
    }
    if model_type.startswith("dinov2"):
        gated = s.mlp == "gated"
        out |= {"mlp_ratio": mlp_ratio_for(s), "use_swiglu_ffn": gated,
                "qkv_bias": s.qkv_bias, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
        if model_type == "dinov2_with_registers":
            out["num_register_tokens"] = s.registers
    else:
        out["intermediate_size"] = s.mlp_dim
    if model_type == "dinov3_vit":
        out |= dinov3_config(s)
    if model_type in HEAD_KEYS and s.pooling != "map":  # the default (true) stays unwritten, as before
        out[HEAD_KEYS[model_type]] = False
    if model_type in TOWERS:
        out |= tower_config(model_type, s)
        if model_type == "aimv2_vision_model":
            del out["layer_norm_eps"]  # its rms_norm_eps
    if model_type == "deit":
        out |= {"qkv_bias": s.qkv_bias, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                "encoder_stride": s.patch_height,
                "id2label": {str(i): f"LABEL_{i}" for i in range(s.num_classes)},
                "label2id": {f"LABEL_{i}": i for i in range(s.num_classes)}}
    return out


def infer_architecture(fmt: str, model_type: str, raw: Raw, cfg: dict[str, Any],
                       given: dict[str, Any]) -> Inference:
    """`cfg`: the class's config, decoded (`class_config`)."""
    arch = ARCHITECTURES[model_type]
    inf = Inference(fmt)
    shape = tensor_shape(inf, raw, arch.patch_key, "out, in, height, width")
    dim, channels = shape[:2]
    for key, value in (("hidden_size", dim), ("num_channels", channels)):
        if cfg[key] != value:
            raise SpecError(f"config {key} = {cfg[key]!r} contradicts tensor {arch.patch_key!r} {shape}")
    layer = re.escape(arch.layer_key).replace(r"\{i\}", r"\d+")
    block = re.compile(layer + r"\." + re.escape(arch.fill["ln1"]) + r"\.weight")
    depth = sum(1 for k in raw if block.fullmatch(k))
    if cfg["num_hidden_layers"] != depth:
        raise SpecError(f"config num_hidden_layers = {cfg['num_hidden_layers']!r} contradicts the {depth} "
                        f"'{arch.layer_key}' blocks in the checkpoint")
    heads = cfg["num_attention_heads"]
    (h, w), (ph, pw) = pair(cfg.get("image_size") or siglip2_image_size(cfg)), pair(cfg["patch_size"])
    facts: dict[str, Any] = {
        "dim": dim, "channels": channels, "depth": depth, "heads": heads,
        "head_dim": width_per_head(fmt, dim, "config hidden_size", heads, "config num_attention_heads"),
        "activation": ACTIVATIONS[cfg["hidden_act"]],
        # AIMv2's key is rms_norm_eps; Pixtral has none (its code's 1e-5: the architecture's fact)
        "image_height": h, "image_width": w, "patch_height": ph, "patch_width": pw, "mlp": "standard",
        "qkv_bias": cfg.get("qkv_bias", True),
    }
    if model_type.startswith("dinov2"):
        if h != w:
            raise SpecError(f"config image_size = {cfg['image_size']!r}: {arch.model_class} interpolates its "
                            "position table for a non-square image; only square ones convert")
        if asks_another_grid(given, (h // ph, w // pw), (ph, pw)):
            del facts["image_height"], facts["image_width"]  # the image asked for, the table resampled to it
            resampled_table(inf, (h // ph, w // pw), f"config image_size {cfg['image_size']!r}",
                            *DINOV2_RESAMPLE[model_type])
        width = mlp_width(dim, cfg["mlp_ratio"])
        if cfg["use_swiglu_ffn"]:  # Dinov2SwiGLUFFN: F.silu whatever hidden_act says
            facts |= {"mlp": "gated", "activation": "silu", "mlp_dim": swiglu_width(width)}
        else:
            facts["mlp_dim"] = width
        if model_type == "dinov2_with_registers":
            facts["registers"] = cfg["num_register_tokens"]
        inf.notes.append(f"{MASK_TOKEN} not converted: {arch.model_class} uses it only with bool_masked_pos")
    else:
        facts["mlp_dim"] = cfg["intermediate_size"]
    if model_type == "siglip2_vision_model" and given.get("batching") == "naflex":
        grid = (h // ph, w // pw)
        del facts["image_height"], facts["image_width"]  # each image's own grid, within the patch budget
        naflex_table(inf, given, grid, (ph, pw), f"config num_patches {cfg['num_patches']}",
                     "bilinear_antialias", "Siglip2VisionEmbeddings.resize_positional_embeddings: "
                     "antialiased bilinear to each image's grid")
    if model_type == "dinov3_vit":
        facts |= dinov3_facts(cfg)
        inf.notes.append(f"{MASK_TOKEN} not converted: {arch.model_class} uses it only with bool_masked_pos")
    if model_type == "deit":
        facts["num_classes"] = tensor_shape(inf, raw, "cls_classifier.weight", "classes, width")[0]
    if model_type in TOWERS:
        tower, pooling = tower_facts(model_type, cfg)
        facts |= tower
        inf.convention("pooling", *pooling)
        if h != w and model_type == "internvl_vision":
            raise SpecError(f"config image_size = {cfg['image_size']!r}: InternVLVisionModel interpolates "
                            "its position table for a non-square image; only square ones convert")
    head = has_head(model_type, cfg)
    if not head:  # its tokens returned: the pooling a convention, as the towers' above
        value, why = HEADLESS_POOLING
        inf.convention("pooling", value, why.format(arch.model_class, HEAD_KEYS[model_type]))
    facts |= {"norm": "pre", "pos_rows": None, "head_hidden": (), "remainder": "drop"}
    eps = cfg.get("layer_norm_eps", cfg.get("rms_norm_eps"))
    if eps is not None:
        facts["layer_norm_eps"] = float(eps)
    for name, value in facts.items():
        inf.fact(name, value, "config.json")
    for name, value in architecture_fixed(model_type, head).items():
        inf.fact(name, value, f"{arch.model_class}'s architecture")
    return inf


# ==== ViTForImageClassification, read and written ====================================================
TARGET = "Hugging Face ViTForImageClassification"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def read(path: Path, config: Path | None) -> tuple[Raw, dict[str, Any] | None, str]:
    """`path` is a save_pretrained directory (config.json + weights) or a weights file."""
    if path.is_dir():
        config = config or path / "config.json"
        found = [path / f for f in WEIGHT_FILES if (path / f).is_file()]
        if not found:
            raise WeightsError(f"hf checkpoint {str(path)!r}: no {' or '.join(WEIGHT_FILES)} in the "
                               "directory (sharded checkpoints are not supported)")
        path = found[0]
    if config is None or not config.exists():  # a directory or FIFO is named by read_config
        raise SpecError(f"hf checkpoint {str(path)!r}: config.json is needed (pass --config PATH); it "
                        "holds the head count and LayerNorm eps the tensors cannot tell")
    return read_tensors(path), read_config(config), repr(str(path))


def normalise(raw: Raw, source: str, config: dict[str, Any] | None = None) -> Raw:
    """The tensors by Transformers 4.x's names, the tables' (`in_old_names`: a model or folder of
    Transformers 5, renamed back by the installed library's own rules; `config` names the class, and
    without one the names are taken as they are)."""
    out = dict(raw)
    if config is not None and config_model_type(config) in QWEN_CLASSES:  # read by their own names
        return out
    if config is not None:
        out = in_old_names(out, source, config_model_type(config))
        if config_model_type(config) == "siglip2_vision_model":
            out = siglip2_patches_as_conv(out, source, config)
    return out


def refuse_unsupported(fmt: str, source: str, raw: Raw) -> None:
    """Every tensor the spec has no place for is refused by the mapping (unused); this names
    the Transformers options that leave such tensors, first."""
    for key in raw:
        if "relative_position" in key or "rotary" in key:
            raise WeightsError(f"{fmt} checkpoint {source}: tensor {key!r} (relative or rotary positions) "
                               "has no spec field")


# What Transformers' ViT fixes in every framework (its PyTorch, TensorFlow and Flax classes alike).
VIT_ARCHITECTURE = {"class_token": True, "pos_embed": "learned", "pos_embed_class_row": True,
                    "pos_rows": None, "norm": "pre", "final_norm": "tokens", "pooling": "cls",
                    "head_hidden": (), "remainder": "drop", "kv_heads": None}


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    """The class the config's model_type names, from its config (every key it reads decoded
    first: `class_config`) and the tensors."""
    refuse_custom_code(config, given)
    kind = config_model_type(config)
    if kind in QWEN_CLASSES:
        return infer_qwen(fmt, kind, raw, config, given)
    if kind in ARCHITECTURES:
        return infer_architecture(fmt, kind, raw, class_config(config, ARCHITECTURES[kind].defaults), given)
    if kind != "vit":
        raise SpecError(f"config model_type = {shown(kind)}: expected one of vit, {', '.join(ARCHITECTURES)}")
    cfg = class_config(config, VIT_DEFAULTS)
    inf = Inference(fmt)
    proj = "vit.embeddings.patch_embeddings.projection.weight"
    shape = tensor_shape(inf, raw, proj, "out, in, height, width")
    dim, channels = shape[:2]
    for key, value in (("hidden_size", dim), ("num_channels", channels)):
        if cfg[key] != value:
            raise SpecError(f"config {key} = {cfg[key]!r} contradicts tensor {proj!r} {shape}")
    depth = sum(1 for k in raw if k.endswith(".layernorm_before.weight"))
    if cfg["num_hidden_layers"] != depth:
        raise SpecError(f"config num_hidden_layers = {cfg['num_hidden_layers']!r} contradicts the "
                        f"{depth} 'vit.encoder.layer.*' blocks in the checkpoint")
    heads = cfg["num_attention_heads"]
    head_dim = width_per_head(fmt, dim, "config hidden_size", heads, "config num_attention_heads")
    (h, w), (ph, pw) = pair(cfg["image_size"]), pair(cfg["patch_size"])
    facts = {
        "dim": dim, "channels": channels, "depth": depth, "heads": heads, "head_dim": head_dim,
        "mlp_dim": cfg["intermediate_size"], "activation": ACTIVATIONS[cfg["hidden_act"]],
        "layer_norm_eps": float(cfg["layer_norm_eps"]), "image_height": h, "image_width": w,
        "patch_height": ph, "patch_width": pw, "qkv_bias": cfg["qkv_bias"],
    }
    grid = (h // ph, w // pw)
    if asks_another_grid(given, grid, (ph, pw)):
        if grid[0] != grid[1]:
            raise SpecError(f"config image_size = {cfg['image_size']!r}: Transformers' ViT "
                            "interpolate_pos_encoding reads its table as a square grid; this one is not")
        del facts["image_height"], facts["image_width"]  # the image asked for, the table resampled to it
        resampled_table(inf, grid, f"config image_size {cfg['image_size']!r}", "hf_bicubic",
                        "Transformers' ViTEmbeddings.interpolate_pos_encoding, as "
                        "model(pixel_values, interpolate_pos_encoding=True) calls it")
    for name, value in facts.items():
        inf.fact(name, value, "config.json")
    classes = tensor_shape(inf, raw, "classifier.weight", "classes, width",
                           " (a ViTModel without a classification head?)")[0]
    labels = (config or {}).get("id2label")
    if isinstance(labels, dict) and len(labels) != classes:
        raise SpecError(f"config id2label has {len(labels)} labels, tensor 'classifier.weight' has "
                        f"{classes} rows")
    inf.fact("num_classes", classes, "tensor 'classifier.weight'")
    for name, value in VIT_ARCHITECTURE.items():
        inf.fact(name, value, "HF ViT's architecture")
    return inf


def model_type_for(s: ModelSpec) -> str:
    """The Transformers class that computes `s`, by the feature only it has."""
    if (qwen := qwen_type_for(s)) is not None:
        return qwen
    if s.rope_bands == "alternating":
        return "pixtral"
    if s.rope != "none":
        return "dinov3_vit"
    if s.distill_token:
        return "deit"
    if s.pooling == "map":
        return "siglip_vision_model"
    if s.norm_before_blocks:
        return "clip_vision_model"
    if s.patch_norm_out:  # AIMv2's RMSNorm on the embedded patches
        return "aimv2_vision_model"
    if s.layer_scale and not s.registers and (s.final_norm == "none" or s.norm_type == "rms_norm"):
        return "internvl_vision"  # DINOv2's final norm is a LayerNorm on every token
    if s.layer_scale:
        return "dinov2_with_registers" if s.registers else "dinov2"
    if not s.class_token and not s.num_classes:  # no class token, no classifier: SigLIP's headless tower
        return "siglip_vision_model"  # (ViTForImageClassification needs both)
    return "vit"


def check_vit_exportable(s: ModelSpec, target: str = TARGET) -> None:
    """What ViTForImageClassification (in any framework) computes: none of the later features."""
    require_class_token_readout(target, s)
    require_plain_blocks(target, s)
    require_defaults(target, s)
    require(s.num_classes > 0, target, "num_classes", 0, "a classifier (num_classes > 0)")
    require(s.activation in ("gelu", "gelu_tanh"), target, "activation", s.activation, "gelu or gelu_tanh")


def check_exportable(fmt: str, s: ModelSpec) -> None:
    model_type = model_type_for(s)
    if model_type in QWEN_CLASSES:
        check_qwen_exportable(model_type, s)
        return
    if model_type == "vit":
        check_vit_exportable(s)
        return
    arch = ARCHITECTURES[model_type]
    target = f"Hugging Face {arch.model_class}"
    require_plain_blocks(target, s, rope=model_type in ("dinov3_vit", "pixtral"),
                         bias_free=model_type in ("dinov3_vit", "aimv2_vision_model", "pixtral"),
                         rms_norm=model_type in TOWERS, alternating=model_type == "pixtral")
    head = s.pooling == "map"
    for name, value in architecture_fixed(model_type, head or model_type not in HEAD_KEYS).items():
        require(getattr(s, name) == value, target, name, getattr(s, name), repr(value))
    if model_type in HEAD_KEYS and not head:
        require(s.pooling == "mean", target, "pooling", s.pooling,
                f"map (its attention-pool head) or mean (the tokens {HEAD_KEYS[model_type]}=False returns, "
                "averaged)")
    for name in ("qk_norm", "patch_norm_in", "patch_norm_out"):
        aimv2_own = (name, model_type) == ("patch_norm_out", "aimv2_vision_model")  # its embeddings.rms_norm
        require(not getattr(s, name) or aimv2_own, target, name, getattr(s, name), "false")
    if model_type in TOWERS:
        check_tower_exportable(model_type, target, s)
    only = (("layer_scale", ("dinov2", "dinov3", "internvl")), ("norm_before_blocks", ("clip", "pixtral")),
            ("registers", ("dinov2_with", "dinov3")))
    for name, owners in only:
        require(not getattr(s, name) or model_type.startswith(owners), target, name, getattr(s, name), "none")
    require(s.activation in HF_ACT, target, "activation", s.activation, ", ".join(HF_ACT))
    require(s.image_height == s.image_width and s.patch_height == s.patch_width, target, "image_width",
            s.image_width, "square images and patches (the config's image_size and patch_size are integers)")
    if s.mlp == "gated" and model_type not in ("dinov3_vit", "aimv2_vision_model", "pixtral"):  # any act
        require(model_type.startswith("dinov2") and s.activation == "silu", target, "mlp", s.mlp,
                "standard (only DINOv2's SwiGLU, with silu, is gated)")
    if model_type.startswith("dinov2"):
        require(mlp_ratio_for(s) is not None, target, "mlp_dim", s.mlp_dim,
                f"a width {arch.model_class} builds from an integer mlp_ratio x dim {s.dim} (Transformers 5 "
                "reads only an integer ratio; Dinov2SwiGLUFFN then takes two thirds, rounded up to a "
                "multiple of 8)")


def config_for(s: ModelSpec) -> dict[str, Any]:
    """The config.json the class that computes `s` needs (`ViTForImageClassification` or one of
    the vision models')."""
    model_type = model_type_for(s)
    if model_type in QWEN_CLASSES:
        return qwen_config(model_type, s)
    if model_type != "vit":
        return config_for_model(model_type, s, HF_ACT[s.activation])
    return {
        "architectures": ["ViTForImageClassification"], "model_type": "vit",
        "hidden_size": s.dim, "num_hidden_layers": s.depth, "num_attention_heads": s.heads,
        "intermediate_size": s.mlp_dim, "hidden_act": HF_ACT[s.activation],
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        "layer_norm_eps": s.layer_norm_eps, "image_size": [s.image_height, s.image_width],
        "patch_size": [s.patch_height, s.patch_width], "num_channels": s.channels,
        "qkv_bias": s.qkv_bias, "encoder_stride": s.patch_height,
        "id2label": {str(i): f"LABEL_{i}" for i in range(s.num_classes)},
        "label2id": {f"LABEL_{i}": i for i in range(s.num_classes)},
    }


ROWS = PATCH_ROWS + ENCODER_ROWS + VIT_MLP_ROWS + """
cls_token                                   {embed}.cls_token                         batch_token
pos_embed                                   {embed}.position_embeddings               batch
final_norm.{w:scale=weight|bias}            vit.layernorm.{w}
head.out.kernel                             classifier.weight                         linear
head.out.bias                               classifier.bias
"""


def table(fmt: str, s: ModelSpec) -> Table:
    if (qwen := qwen_type_for(s)) is not None:
        return Table(QWEN_ROWS, fmt, **QWEN_STYLE[qwen])
    model_type = model_type_for(s)
    if model_type == "vit":
        return Table(ROWS, fmt, layer=VIT_LAYER, **VIT_STYLE, embed="vit.embeddings",
                     patch="patch_embeddings.projection")
    arch = ARCHITECTURES[model_type]
    inert = (MASK_TOKEN,) if model_type.startswith(("dinov2", "dinov3")) else ()
    if model_type == "dinov3_vit" and not s.registers:
        inert += (REGISTER_TOKENS,)
    return Table(arch.rows(s), fmt, inert=inert, layer=arch.layer_key, **arch.fill)


def finish_export(fmt: str, s: ModelSpec, raw: Raw) -> Raw:
    """What the class holds and the spec has no tensor for, or the other way round: DINOv2's
    mask token (zeros: unused at inference)."""
    model_type = model_type_for(s)
    if model_type.startswith("dinov2"):
        raw[MASK_TOKEN] = np.zeros((1, s.dim), np.float32)
    if model_type == "dinov3_vit":
        raw[MASK_TOKEN] = np.zeros((1, 1, s.dim), np.float32)
        if not s.registers:
            raw[REGISTER_TOKENS] = np.zeros((1, 0, s.dim), np.float32)
    return raw


# The spec's activations as Transformers 4.x's TensorFlow ACT2FN spells them, where it differs
# from HF_ACT's first spelling (gelu_new is the tanh approximation gelu_pytorch_tanh computes)
TF_ACT = {"gelu_tanh": "gelu_new"}

# Transformers 4.x names its TensorFlow and Flax classes so (5.x has PyTorch only: a process needing them
# gets 4.x's side directory, shared/runtime/process_env.py's `transformers4_env`)
CLASS_PREFIX = {"torch": "", "tf": "TF", "flax": "Flax"}


def check_buildable(s: ModelSpec, framework: str = "torch", **options: Any) -> None:
    """What `build_model` builds in `framework`: in PyTorch, the class the exporter writes for `s`;
    in TensorFlow and Flax (Transformers 4.x), ViTForImageClassification only (a peer reads its
    logits), at one image and one patch size."""
    if framework == "torch":
        check_exportable("hf", s)
        return
    target = f"Hugging Face {CLASS_PREFIX[framework]}{MODEL_CLASSES['vit']}"
    check_vit_exportable(s, target)
    require(qwen_type_for(s) is None, target, "merge_size", s.merge_size, "1 (no patch merger)")
    require(s.qkv_bias or framework != "tf", target, "qkv_bias", s.qkv_bias,
            "true (TFViTSelfAttention reads no qkv_bias: its query, key and value always have one)")
    # the TensorFlow and Flax classes read image_size and patch_size as one side
    require(s.image_height == s.image_width and s.patch_height == s.patch_width, target, "image_width",
            s.image_width, "square images and patches")


def build_model(s: ModelSpec, framework: str = "torch", **options: Any) -> Any:
    """The Transformers model that computes `s`, random-initialised (what a timing peer and the
    tests build): the class `config_for(s)` names, in `framework` (the TensorFlow and Flax classes
    exist in Transformers 4.x only; `check_buildable` says which), built from that config; `options`
    go to the class (Flax's `input_shape`, `seed`)."""
    import transformers

    config = config_for(s)
    name = CLASS_PREFIX[framework] + config["architectures"][0]
    model_class = getattr(transformers, name, None)
    if model_class is None:
        needs = TRANSFORMERS4_NEEDED if framework != "torch" else "a Transformers that has it"
        raise FrameworkUnavailable(f"transformers {transformers.__version__} has no {name}: it needs {needs}")
    if framework != "torch":
        check_buildable(s, framework)
        config |= {"image_size": s.image_height, "patch_size": s.patch_height}
    if framework == "tf":  # 4.x's TensorFlow activations have no gelu_pytorch_tanh: the same function
        config["hidden_act"] = TF_ACT.get(s.activation, config["hidden_act"])
    return model_class(transformers.AutoConfig.for_model(**config), **options)

def write(fmt: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    """A save_pretrained-style directory: config.json + model.safetensors, published whole (a new
    folder: an existing one is never replaced, --force or not)."""
    if out.exists() and not out.is_dir():
        raise WeightsError(f"output {str(out)!r}: hf export writes a directory (config.json + "
                           "model.safetensors), and a file is in the way")
    weights = encode_tensors(out / "model.safetensors", raw, metadata={"format": "pt"})
    config = config_for(s)
    write_folder(out, {"model.safetensors": weights,
                       "config.json": (json.dumps(config, indent=2) + "\n").encode()})
    return [f"load with transformers.{config['architectures'][0]}.from_pretrained({str(out)!r})"]


# ==== Transformers 5's names ========================================================================
# Transformers 5 renamed the modules of every class here (ViT's and DeiT's `layers.N.attention.q_proj`,
# `o_proj`, `mlp.fc1`/`fc2`; DINOv2's attention alike, its SwiGLU `weights_in` cut into `gate_proj` and
# `up_proj`; SigLIP's and CLIP's towers without `vision_model.`; DINOv3's `model.layer.N`) and states
# each class's renames as rules, which `from_pretrained` applies to a folder in the 4.x names (every one
# saved before 5, and what 5's `save_pretrained` writes, but for a freshly built SigLIP or CLIP tower).
# The tables above keep the 4.x names, the one table; the 5.x names are the installed library's rules
# applied to them (`transformers.conversion_mapping`), read from it, never copied here.
MODEL_CLASSES = {"vit": "ViTForImageClassification",
                 **{model_type: arch.model_class for model_type, arch in ARCHITECTURES.items()}}


@dataclass(frozen=True)
class Renames:
    """A Transformers model's renaming rules, as the installed library states them: 4.x name ->
    its name in the model (`names`), and a state dict in the model's names -> the 4.x names
    (`to_old`, each rule reversed, as `save_pretrained` reverses them)."""

    library: str  # "transformers 5.25.0": how a binding names the convention
    transforms: tuple[Any, ...]  # the library's WeightTransform objects, in its order
    own: frozenset[str]  # the model's own names: no rule is applied to one (DINOv3's is not idempotent)

    def names(self, old: str) -> list[str]:
        """The model's name for the 4.x tensor `old`, or one per part where a rule cuts it (DINOv2's
        `weights_in` into `gate_proj` and `up_proj`: the library's Chunk on the first axis)."""
        from transformers.core_model_loading import rename_source_key

        if old in self.own:
            return [old]
        renamings, converters = _split(self.transforms)
        new, pattern = rename_source_key(old, renamings, converters, base_model_prefix=None,
                                         meta_state_dict=None, reverse=False)
        if pattern is None:
            return [new]
        rule = next(c for c in converters if pattern in c.source_patterns)
        _require_op(self, rule, "Chunk")
        first = rule.target_patterns[0]
        at = new.rindex(first)
        return [new[:at] + target + new[at + len(first):] for target in rule.target_patterns]

    def to_old(self, raw: Raw, source: str) -> Raw:
        """`raw` in the model's names -> the 4.x names: renames reversed, a cut tensor's parts
        joined again (the library's Concatenate, the Chunk reversed)."""
        from transformers.core_model_loading import rename_source_key

        renamings, converters = _split([t.reverse_transform() for t in reversed(self.transforms)])
        out: Raw = {}
        parts: dict[str, tuple[Any, dict[int, np.ndarray]]] = {}
        for key, value in raw.items():
            old, pattern = rename_source_key(key, renamings, converters, base_model_prefix=None,
                                             meta_state_dict=None, reverse=True)
            if pattern is None:
                out[old] = value
                continue
            rule = next(c for c in converters if pattern in c.source_patterns)
            _require_op(self, rule, "Concatenate")
            parts.setdefault(old, (rule, {}))[1][rule.source_patterns.index(pattern)] = value
        for old, (rule, found) in parts.items():
            if len(found) != len(rule.source_patterns):
                absent = [p for i, p in enumerate(rule.source_patterns) if i not in found]
                raise WeightsError(f"hf checkpoint {source}: {old!r} ({self.library}'s rule joins "
                                   f"{' and '.join(rule.source_patterns)}) has no {absent[0]!r} tensor")
            out[old] = np.concatenate([found[i] for i in sorted(found)], axis=rule.operations[0].dim)
        return out


def _split(transforms: Any) -> tuple[list[Any], list[Any]]:
    """(renamings, converters): `rename_source_key` takes them apart."""
    from transformers.core_model_loading import WeightConverter

    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    return [t for t in transforms if not isinstance(t, WeightConverter)], converters


def _require_op(renames: Renames, rule: Any, name: str) -> None:
    """Only a cut or a join on one axis of equal parts is followed (what the classes here use); any
    other operation a rule names is refused naming it, never guessed."""
    ops = [type(op).__name__ for op in rule.operations]
    if ops != [name] or (name == "Chunk" and rule.operations[0].dim != 0):
        raise WeightsError(f"{renames.library}'s rule {rule.source_patterns} -> {rule.target_patterns} "
                           f"applies {', '.join(ops) or 'no operation'}; portbench follows a rule that "
                           f"renames, or one {name} on the first axis")


def library_names(model: Any) -> Renames | None:
    """A Transformers model's renaming rules, read from the installed library
    (`get_model_conversion_mapping`, which a model on the meta device answers too); None where it
    states none: Transformers 4.x, whose names are the tables'."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
    except ImportError:  # Transformers 4.x
        return None
    import transformers

    transforms = get_model_conversion_mapping(model, key_mapping=None, hf_quantizer=None, add_legacy=False)
    if not transforms:
        return None
    own = frozenset(model.state_dict())
    return Renames(f"transformers {transformers.__version__}", tuple(transforms), own)


@functools.cache
def class_names(model_type: str) -> Renames | None:
    """`library_names` of the class a config's `model_type` names, built on the meta device (no
    memory, no initialisation): a folder's or state dict's class, without its model."""
    try:
        import transformers.conversion_mapping  # Transformers 5: it states its renames
    except ImportError:
        return None
    import torch
    import transformers

    model_class = getattr(transformers, MODEL_CLASSES[model_type])
    with torch.device("meta"):
        return library_names(model_class(model_class.config_class(num_hidden_layers=1)))


def first_block_names(model_type: str) -> tuple[str, str]:
    """Block 0's first norm weight and query weight by the 4.x names: a state dict holding both is
    in those names (Transformers 5 renames the query of every class here, DINOv2's norms not)."""
    arch = ARCHITECTURES.get(model_type)
    style = arch.fill if arch else VIT_STYLE
    block = (arch.layer_key if arch else VIT_LAYER).format(i=0)
    query = style["q"].rpartition("=")[2]  # `query=q_proj`: the native spelling
    return f"{block}.{style['ln1']}.weight", f"{block}.{style['attn']}.{query}.weight"


def in_old_names(raw: Raw, source: str, model_type: str) -> Raw:
    """`raw` by the 4.x names: as it is when it holds them, else renamed by the installed
    Transformers' rules for the class; where it states none (4.x), the names are kept and a
    missing tensor is named by `infer`."""
    if model_type not in MODEL_CLASSES or all(name in raw for name in first_block_names(model_type)):
        return raw
    renames = class_names(model_type)
    return raw if renames is None else renames.to_old(raw, source)


def live_tables(model: Any, spec: ModelSpec) -> list[Table]:
    """A Transformers 5 model's own names as a table: the hf table for `spec`, each native name
    renamed by the model's rules, so `verify --model` binds it by the library's names (none for
    a 4.x model, whose names are the hf table's, or a spec that table cannot name)."""
    if not module_of(model).startswith("transformers.") or not callable(getattr(model, "state_dict", None)):
        return []
    renames = library_names(model)
    if renames is None or type(model).__name__ == "Siglip2VisionModel":  # its Linear patch projection:
        return []  # not the table's convolution; structure binds it (a `patch_linear`)
    try:
        old = table("hf", spec)
        old.bind(spec.derived.tensor_shapes)
    except (SpecError, WeightsError):  # not a spec the hf classes compute: structure binds it
        return []
    return [old.renamed(spec.derived.tensor_shapes, renames.names, f"hf in {renames.library}'s names")]


# ==== a live model ==================================================================================
@dataclass(frozen=True)
class Classifier:
    """What a Transformers class's forward reads from its tower, beyond the tower's config: how it
    pools the tokens (the spec's facts, and fields read from config keys), the tensors it computes
    for an output it never compares (set aside at binding), or why no spec computes it (refused in
    one line)."""

    facts: dict[str, Any] = field(default_factory=dict)
    unread: tuple[str, ...] = ()  # native name prefixes: computed, never reaching the output compared
    why: str = ""  # what the output compared reads
    refused: str = ""  # what to verify instead, where no spec computes it
    keys: dict[str, str] = field(default_factory=dict)  # spec field -> the config key stating it
    output: str | None = None  # the output compared, where another would be taken for the logits


TOKENS_AND_MEAN = ("its classifier reads the class token concatenated with the patch tokens' mean (2 x "
                   "hidden_size wide), which no pooling of the spec computes")
CLASSIFIERS = {  # class name -> what its forward reads, from each class's forward (Transformers 5)
    "CLIPForImageClassification": Classifier(
        {"pooling": "mean", "final_norm": "none"}, ("vision_model.post_layernorm.",),
        "its logits read the mean of the patch tokens before post_layernorm, which only its pooler_output "
        "reads"),
    "SiglipForImageClassification": Classifier(
        {"pooling": "mean", "final_norm": "tokens", "class_token": False}, ("vision_model.head.",),
        "its logits read the mean of all tokens after post_layernorm; its attention-pool head feeds only "
        "pooler_output"),
    # a base model's pooler_output is a dense layer and tanh on the class token, which no spec head
    # computes: it is set aside and the tokens (last_hidden_state) are compared
    "ViTModel": Classifier({"num_classes": 0}, ("pooler.",), "last_hidden_state is compared; its "
                           "pooler_output (a Linear and tanh) is not", output="last_hidden_state"),
    "CLIPVisionModelWithProjection": Classifier(
        {"bias_free": ("head.out",), "final_norm": "pooled"}, keys={"num_classes": "projection_dim"},
        why="its image_embeds are the class token after post_layernorm, projected by the bias-free "
            "visual_projection"),
    "DeiTModel": Classifier(why="its tokens carry a distillation token whose head it lacks (the spec's "
                                "distill_token is the mean of two heads)",
                            refused="verify DeiTForImageClassificationWithTeacher"),
    "DeiTForImageClassification": Classifier(
        why="its classifier reads the class token alone beside a distillation token (the spec's "
            "distill_token is the mean of two heads)",
        refused="verify DeiTForImageClassificationWithTeacher, which averages both"),
    "Dinov2ForImageClassification": Classifier(why=TOKENS_AND_MEAN,
                                               refused="verify its Dinov2Model (model.dinov2), whose tokens "
                                                       "are compared"),
    "Dinov2WithRegistersForImageClassification": Classifier(
        why=TOKENS_AND_MEAN, refused="verify its Dinov2WithRegistersModel (model.dinov2_with_registers), "
                                     "whose tokens are compared"),
}


# model types whose every class computes what no spec states, and why
REFUSED_TYPES = {
    "beit": "BEiT's attention adds a learned relative position bias in every block, which no spec states",
    "data2vec-vision": "Data2Vec-Vision (BEiT's blocks) adds a learned relative position bias in every "
                       "block, which no spec states",
}


def classifier_of(model: Any) -> Classifier | None:
    """What the model's forward reads, from `CLASSIFIERS` (None: not one of them), refused in one
    line where no spec computes it (`REFUSED_TYPES` too)."""
    if not module_of(model).startswith("transformers."):
        return None
    name = type(model).__name__
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type in REFUSED_TYPES:
        raise SpecError(f"your model is a {name}: {REFUSED_TYPES[model_type]}; portbench cannot verify it")
    found = CLASSIFIERS.get(name)
    if found is not None and found.refused:
        raise SpecError(f"your model is a {name}: {found.why}; {found.refused}")
    return found


def caller_live(model: Any) -> Any | None:
    """A Qwen tower's forward takes its processor's arguments: every image's patches one after another,
    each flattened (C, frame, ph, pw) with the still image repeated over the frames, and each image's
    (frames 1, rows, cols); its pooler_output is the merged tokens, image after image. The module
    returned takes a patch batch's (patches, valid, grids) and gives each image's mean merged token
    (the spec's pooling), a row per image; None for any other model. Its blocks' tokens are one
    sequence of every image's (Qwen2.5-VL's in window order): `batch_tokens` lays them out as the
    batch's, each image's patches where the batch has them."""
    if not module_of(model).startswith("transformers.") or type(model).__name__ not in QWEN_CLASSES.values():
        return None
    from torch import nn

    cfg = model.config
    ph = pw = cfg.patch_size
    frames, merge = cfg.temporal_patch_size, cfg.spatial_merge_size

    class QwenCall(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            self.valid: Any = None  # the last call's valid patches, (B, max_patches)
            self.window_order: Any = None  # Qwen2.5-VL's: the merge units' order in its blocks

        def forward(self, patches: Any, valid: Any, grids: Any) -> Any:
            import torch

            grids = grids.reshape(len(patches), -1, 2)  # a naflex batch: one image a sequence
            shapes = [(b, rows, cols) for b in range(len(grids)) for rows, cols in grids[b].tolist()]
            pixels, at = [], {b: 0 for b in range(len(grids))}
            for b, rows, cols in shapes:  # each image's patches, in the batch's order
                x = patches[b, at[b]:at[b] + rows * cols].reshape(rows * cols, ph, pw, -1)
                at[b] += rows * cols
                x = x.permute(0, 3, 1, 2)[:, :, None].expand(-1, -1, frames, -1, -1)  # (C, T, ph, pw)
                pixels.append(x.reshape(rows * cols, -1))
            thw = torch.tensor([[1, rows, cols] for _, rows, cols in shapes], device=patches.device)
            self.valid = valid.cpu().numpy().astype(bool)
            if type(self.model).__name__ == QWEN_CLASSES["qwen2_5_vl_vision"]:  # its blocks' order
                from transformers.vision_utils import get_vision_window_index

                order, _ = get_vision_window_index(thw, spatial_merge_size=merge, window_size=cfg.window_size,
                                                   patch_size=ph)
                self.window_order = order.cpu().numpy()
            merged = self.model(torch.cat(pixels), thw).pooler_output
            counts = [rows * cols // merge**2 for _, rows, cols in shapes]
            return torch.stack([t.mean(dim=0) for t in torch.split(merged, counts)])

        def batch_tokens(self, path: str, value: Any) -> Any:
            tokens = np.asarray(value)  # every image's, one sequence (its Conv3d's (N, D, 1, 1, 1))
            tokens = tokens.reshape(len(tokens), -1)
            valid = self.valid  # each patch's row, or a merger's: each merge unit's (its first patch's)
            merged = len(tokens) * merge**2 == valid.sum()
            valid = valid[:, ::merge**2] if merged else valid
            if self.window_order is not None and path.startswith(("blocks.", "merger.")):  # window order
                units = tokens.reshape(len(self.window_order), -1, tokens.shape[-1])
                tokens = units[np.argsort(self.window_order)].reshape(tokens.shape)
            out = np.zeros((*valid.shape, tokens.shape[-1]), tokens.dtype)
            out[valid] = tokens
            return out

    return QwenCall()


def output_live(model: Any) -> str | None:
    """The output of a Transformers class that is compared, where the logits picker would take
    another (ViTModel's pooler_output): `CLASSIFIERS`."""
    found = classifier_of(model)
    return None if found is None else found.output


def inert_live(model: Any) -> dict[str, str]:
    """The tensors a Transformers classifier computes for an output its logits never read, each
    with why (`CLASSIFIERS`): binding sets them aside."""
    found = classifier_of(model)
    if found is None or not found.unread:
        return {}
    why = f"{type(model).__name__}: {found.why}"
    return {n: why for n, _ in model.named_parameters() if n.startswith(found.unread)}



HF_VIT_KEYS = {  # ViTConfig key -> spec field(s)
    "hidden_size": ("dim",), "num_hidden_layers": ("depth",), "num_attention_heads": ("heads",),
    "intermediate_size": ("mlp_dim",), "layer_norm_eps": ("layer_norm_eps",), "num_channels": ("channels",),
    "qkv_bias": ("qkv_bias",), "image_size": ("image_height", "image_width"),
    "patch_size": ("patch_height", "patch_width"),
}


def read_live(model: Any) -> Reading | None:
    """A Transformers model carries its `config`: for a ViT its keys are spec fields
    (`config.layer_norm_eps`, ...); the hf format's `infer` reads the rest (and the other vision
    models' configs) with the state dict. That `infer` reads PyTorch's tensor names: for the
    TensorFlow and Flax classes the ViT's config and architecture say everything, and another
    model type is read from its layers."""
    config = getattr(model, "config", None)
    if not module_of(model).startswith("transformers.") or not hasattr(config, "to_dict"):
        return None
    values = config.to_dict()
    class_name = type(model).__name__
    classifier = classifier_of(model)
    if classifier is not None and "vision_config" in values:  # a classifier on a CLIP or SigLIP tower
        return classifier_reading(class_name, classifier, values)
    torch_names = not class_name.startswith(("TF", "Flax"))
    # its modules took the heads and eps from `config` when built; `config` may have been edited since
    r = Reading(f"transformers {class_name}", fmt="hf" if torch_names else None, config=values,
                config_keys={"heads": "num_attention_heads", "layer_norm_eps": "layer_norm_eps"})
    if not torch_names and values.get("model_type") != "vit":
        r.notes.append(f"transformers {class_name}: a {values.get('model_type')} config is read with "
                       "PyTorch's tensor names; its PyTorch class, or --spec, states every field")
    if class_name == "Siglip2VisionModel":  # its forward takes no image: only a NaFlex batch
        r.fact("batching", "naflex", "Siglip2VisionModel.forward(pixel_values, pixel_attention_mask, "
                                     "spatial_shapes)")
    if values.get("model_type") not in ("dinov3_vit", "pixtral", *QWEN_CLASSES):  # their rotaries: infer's
        r.fact("rope", "none", f"transformers {values.get('model_type')}: no rotary position embeddings")
    if values.get("model_type") == "vit":
        r.plain_vit("transformers ViT's architecture")
        if values.get("hidden_act") in ACTIVATIONS:
            act = values["hidden_act"]
            r.fact("activation", ACTIVATIONS[act], f"config.hidden_act = {act!r}")
        heads, dim = values.get("num_attention_heads"), values.get("hidden_size")
        if isinstance(heads, int) and isinstance(dim, int) and heads and dim % heads == 0:
            r.fact("head_dim", dim // heads, "config.hidden_size / config.num_attention_heads")
        for key, names in HF_VIT_KEYS.items():
            value = values.get(key)
            pair = size_of(value) if len(names) == 2 else None
            for i, name in enumerate(names):
                if pair is not None:
                    r.fact(name, pair[i], f"config.{key}")
                elif len(names) == 1 and value is not None:
                    r.fact(name, float(value) if name == "layer_norm_eps" else value, f"config.{key}")
        if not torch_names:  # what the hf format's infer would add from PyTorch's tensor names
            for field_name, value in VIT_ARCHITECTURE.items():
                r.fact(field_name, value, "transformers ViT's architecture")
            if class_name.endswith("ForImageClassification"):
                r.fact("num_classes", int(config.num_labels), "config.num_labels")
    if classifier is not None:  # what its forward reads, beyond the config
        for name, value in classifier.facts.items():
            r.fact(name, value, f"{class_name}.forward: {classifier.why}")
        for name, key in classifier.keys.items():
            r.fact(name, values[key], f"config.{key} ({class_name}.forward: {classifier.why})")
    return r


def classifier_reading(class_name: str, classifier: Classifier, values: dict[str, Any]) -> Reading:
    """A classifier on a CLIP or SigLIP tower: the tower's sizes from `vision_config`, the head's
    pooling from the class's forward (`CLASSIFIERS`); its layers and structure say the rest."""
    r = Reading(f"transformers {class_name}", config=values,
                config_keys={"heads": "num_attention_heads", "layer_norm_eps": "layer_norm_eps"})
    vision = values.get("vision_config") or {}
    r.fact("rope", "none", f"transformers {class_name}: no rotary position embeddings")
    for key, names in HF_VIT_KEYS.items():
        value, pair_of = vision.get(key), size_of(vision.get(key))
        for i, name in enumerate(names):
            if len(names) == 2 and pair_of is not None:
                r.fact(name, pair_of[i], f"config.vision_config.{key}")
            elif len(names) == 1 and value is not None and key != "qkv_bias":
                stated = float(value) if name == "layer_norm_eps" else value
                r.fact(name, stated, f"config.vision_config.{key}")
    if vision.get("hidden_act") in ACTIVATIONS:
        r.fact("activation", ACTIVATIONS[vision["hidden_act"]], f"config.vision_config.hidden_act = "
                                                                 f"{vision['hidden_act']!r}")
    heads, dim = vision.get("num_attention_heads"), vision.get("hidden_size")
    if isinstance(heads, int) and isinstance(dim, int) and heads and dim % heads == 0:
        r.fact("head_dim", dim // heads, "config.vision_config: hidden_size / num_attention_heads")
    classes = int(values.get("num_labels") or len(values.get("id2label") or {}))
    r.fact("num_classes", classes, "config.num_labels")
    for name, value in classifier.facts.items():
        r.fact(name, value, f"{class_name}.forward: {classifier.why}")
    return r
