"""keras-hub's `DINOV2Backbone` (v0.32) as a checkpoint family.

`embeddings/{cls_token (1, 1, D), mask_token, register_tokens (1, R, D), interpolated_position_embeddings,
position_embeddings (1, N+1, D), patch_embeddings/projection (Conv2D, HWIO)}`,
`encoder/layers_{i}/{norm1, attention/attention/{query,key,value,attention_output}, layer_scale1/lambda1,
norm2, mlp/{fc1, fc2} or mlp/{weights_in, weights_out}, layer_scale2/lambda1}` (0-based), and
`layernorm` on every token. Every LayerNorm's epsilon is fixed at 1e-6; the MLP's "gelu" is
Keras' exact one. The registers are inserted after the class token once the position table
(class row + patches) is added: they get no row. A backbone alone outputs every token: the spec
reads the class token (keras-hub 0.32 has no DINOv2 task).

- The embedding layer saves its trainable variables first, then `position_embeddings` (not
  trainable): which index holds which variable depends on `use_mask_token` and
  `num_register_tokens` (`variables`).
- `position_embeddings` is the table the model computes with: loading a preset rebuilds
  `interpolated_position_embeddings` from it (`load_own_variables`), so the saved copy is inert,
  and so is `mask_token` (used only with training masks). A `position_embedding_shape` other than
  `image_shape` makes keras-hub resize the table at load by `keras.ops.image.resize(bicubic)`,
  whose kernel depends on the Keras backend: no method of shared/core/resample.py is exactly
  that, so it is refused.
- The SwiGLU MLP (`use_swiglu_ffn`) packs its two first layers in `weights_in` (D, 2h), the
  SiLU half first, with h = (int(intermediate_dim * 2/3) + 7) // 8 * 8 (the spec's mlp_dim).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shared.checkpoints.common import Inference, Raw, require
from shared.checkpoints.hf_models import swiglu_width
from shared.checkpoints.keras_hub_models import (
    COMMON_VARIABLES,
    DENSE,
    NORM,
    Family,
    Variables,
    keras_object,
    layer_groups,
    size_facts,
    with_defaults,
)
from shared.core.spec import ModelSpec
from shared.errors import SpecError

EPS = 1e-6  # DINOV2Layer's and DINOV2Backbone's LayerNormalization(epsilon=1e-6): not configurable
DEFAULTS: dict[str, Any] = {  # DINOV2Backbone's keyword defaults
    "num_register_tokens": 0, "use_mask_token": True, "use_swiglu_ffn": False, "image_shape": [224, 224, 3],
    "position_embedding_shape": [518, 518, 3],
}
REQUIRED = ("patch_size", "num_layers", "hidden_dim", "num_heads", "intermediate_dim")
INERT = ("embeddings/mask_token", "embeddings/interpolated_position_embeddings")

EMBED_ROWS = """
cls_token                    embeddings/cls_token                               batch_token
reg_tokens                   embeddings/register_tokens                         batch
pos_embed                    embeddings/position_embeddings                     batch
patch_embed.{w:kernel|bias}  embeddings/patch_embeddings/projection/{w}
final_norm.{w:scale=gamma|bias=beta}  layernorm/{w}
blocks.{b}.{n:norm1|norm2}.{w:scale=gamma|bias=beta}  encoder/layers_{b}/{n}/{w}
blocks.{b}.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  {attn}/{p}/{w}
blocks.{b}.{g:ls1=layer_scale1|ls2=layer_scale2}.gamma  encoder/layers_{b}/{g}/lambda1
"""
MLP_ROWS = {
    "standard": "blocks.{b}.mlp.{fc:fc1|fc2}.{w:kernel|bias}  encoder/layers_{b}/mlp/{fc}/{w}\n",
    "gated": """
blocks.{b}.mlp.{p:gate|fc1}.kernel  encoder/layers_{b}/mlp/weights_in/kernel  stacked_dense
blocks.{b}.mlp.{p:gate|fc1}.bias    encoder/layers_{b}/mlp/weights_in/bias    stacked_bias
blocks.{b}.mlp.fc2.{w:kernel|bias}  encoder/layers_{b}/mlp/weights_out/{w}
""",
}


def rows(s: ModelSpec) -> str:
    return (EMBED_ROWS + MLP_ROWS[s.mlp]).replace("{attn}", "encoder/layers_{b}/attention/attention")


def variables(cfg: dict[str, Any]) -> Variables:
    """The embedding's trainable variables in creation order, then its one non-trainable one."""
    registers = int(cfg.get("num_register_tokens", DEFAULTS["num_register_tokens"]))
    embedding = ("cls_token", *(("mask_token",) if cfg.get("use_mask_token", True) else ()),
                 *(("register_tokens",) if registers else ()), "interpolated_position_embeddings",
                 "position_embeddings")
    return {**COMMON_VARIABLES, **dict.fromkeys(("norm1", "norm2", "layernorm"), NORM),
            **dict.fromkeys(("projection", "fc1", "fc2", "weights_in", "weights_out"), DENSE),
            **dict.fromkeys(("layer_scale1", "layer_scale2"), ("lambda1",)), "embeddings": embedding}


def infer(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    cfg = with_defaults(inf, "DINOV2Backbone", REQUIRED, DEFAULTS, backbone)
    source = cfg["position_embedding_shape"]
    if list(source)[:2] != list(cfg["image_shape"])[:2]:
        raise SpecError(f"keras_hub config position_embedding_shape = {source!r}: keras-hub resizes the "
                        f"table to image_shape {cfg['image_shape']!r} with keras.ops.image.resize(bicubic), "
                        "whose kernel depends on the Keras backend and is none of the spec's pos_resample "
                        "methods (expected position_embedding_shape equal to image_shape)")
    sizes = size_facts(inf, raw, cfg, "embeddings/patch_embeddings/projection/kernel",
                       "encoder/layers_{i}/norm1/gamma")
    gated = bool(cfg["use_swiglu_ffn"])
    width = int(cfg["intermediate_dim"])
    facts: dict[str, Any] = {
        **sizes, "mlp": "gated" if gated else "standard", "activation": "silu" if gated else "gelu",
        "mlp_dim": swiglu_width(width) if gated else width,
        "registers": int(cfg["num_register_tokens"]), "layer_norm_eps": EPS,
    }
    for name, value in facts.items():
        inf.fact(name, value, "config.json")
    fixed = {"class_token": True, "pos_embed_class_row": True, "pos_embed_register_rows": False,
             "layer_scale": True, "pooling": "cls", "final_norm": "tokens", "num_classes": 0,
             "patch_bias": True, "qkv_bias": True, "pos_embed": "learned", "pos_rows": None, "norm": "pre",
             "head_hidden": (), "remainder": "drop"}
    for name, value in fixed.items():
        inf.fact(name, value, "keras-hub DINOv2's architecture")
    if gated:
        inf.notes.append(f"keras-hub DINOv2 SwiGLU: intermediate_dim {width} -> hidden width "
                         f"{facts['mlp_dim']} ((int({width} * 2/3) + 7) // 8 * 8)")
    inf.notes.append("a DINOV2Backbone outputs every token: the spec reads the class token")


def check(target: str, s: ModelSpec) -> None:
    require(s.layer_scale, target, "layer_scale", s.layer_scale, "true (every block has its layer scales)")
    require(s.class_token and s.pooling == "cls" and not s.num_classes, target, "pooling", s.pooling,
            "cls with no head (a backbone alone: keras-hub 0.32 has no DINOv2 task)")
    require(s.pos_embed == "learned" and s.pos_embed_class_row and not s.pos_embed_register_rows, target,
            "pos_embed_register_rows", s.pos_embed_register_rows,
            "a learned table with a class row and none for the registers")
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens")
    require(s.layer_norm_eps == EPS, target, "layer_norm_eps", s.layer_norm_eps, f"{EPS:g} (fixed)")
    require(s.image_height == s.image_width and s.patch_height == s.patch_width, target, "image_height",
            s.image_height, "a square image cut into square patches")
    require(s.qkv_bias and s.patch_bias, target, "qkv_bias", s.qkv_bias, "true, with a patch bias")
    activation = "silu" if s.mlp == "gated" else "gelu"
    require(s.activation == activation, target, "activation", s.activation, f"{activation} with mlp {s.mlp}")
    require(s.mlp == "standard" or s.mlp_dim % 8 == 0, target, "mlp_dim", s.mlp_dim,
            "a multiple of 8 with a gated MLP (its hidden width is rounded up to one)")


def configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """config.json; a gated MLP's intermediate_dim is 3/2 of the hidden width (which rounds back)."""
    width = s.mlp_dim * 3 // 2 if s.mlp == "gated" else s.mlp_dim
    shape = [s.image_height, s.image_width, s.channels]
    return keras_object("dinov2.dinov2_backbone", "DINOV2Backbone", {
        "name": "dinov2_backbone", "trainable": True, "patch_size": s.patch_height, "num_layers": s.depth,
        "hidden_dim": s.dim, "num_heads": s.heads, "intermediate_dim": width, "layer_scale_init_value": 1.0,
        "num_register_tokens": s.registers, "use_mask_token": False, "use_swiglu_ffn": s.mlp == "gated",
        "dropout_rate": 0.0, "drop_path_rate": 0.0, "image_shape": shape, "position_embedding_shape": shape,
        "antialias_in_interpolation": False, "apply_layernorm": False}), None


def extras(s: ModelSpec, raw: Raw) -> Raw:
    """The interpolated table keras-hub rebuilds at load: written equal to the table (no resize)."""
    return {"embeddings/interpolated_position_embeddings": np.array(raw["embeddings/position_embeddings"])}


GROUPS = {
    "embeddings": "layers/dinov2_embedding", "encoder": "layers/dinov2_encoder",
    "layernorm": "layers/layer_normalization",
}
DINOV2 = Family("DINOV2Backbone", None, rows, infer, check, configs,
                layer_groups("layers_", "layers/dinov2_layer", 0, GROUPS), variables, inert=INERT,
                extras=extras, features=("registers", "layer_scale"))
