"""The Hugging Face Transformers vision models beside ViT (PyTorch classes, v4.57): each one's
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
  with in_proj packed q, k, v, `head.layernorm`, `head.mlp`). Output: `pooler_output`.
- `CLIPVisionModel`: `class_embedding`, a patch projection without bias (`patch_bias` false),
  `pre_layrnorm` before the blocks, `post_layernorm` on the pooled class token. Output:
  `pooler_output` (the projection to the joint space lives in CLIPModel, not here).
- `DINOv3ViTModel` (2-D RoPE): `shared/checkpoints/hf_dinov3.py`.
- `DeiTForImageClassificationWithTeacher`: ViT's names under `deit.`, a `distillation_token`
  with a position row, `cls_classifier` and `distillation_classifier`; logits are their mean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from shared.checkpoints.common import Inference, Raw, asks_another_grid, resampled_table, width_per_head
from shared.checkpoints.decoding import pair, tensor_shape
from shared.checkpoints.hf_config import ACTIVATIONS, COMMON_DEFAULTS, HF_KEYS, VIT_DEFAULTS
from shared.checkpoints.hf_dinov3 import (
    DINOV3_DEFAULTS,
    DINOV3_FIXED,
    DINOV3_ROWS,
    DINOV3_STYLE,
    dinov3_config,
    dinov3_facts,
)
from shared.core.record import shown
from shared.core.spec import FIELD_BOUNDS, ModelSpec
from shared.errors import SpecError

HF_ACT = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "quick_gelu": "quick_gelu", "silu": "silu"}


def size_pair(value: Any, key: str) -> tuple[int, int]:
    """A config's `image_size` or `patch_size` (one side, or [height, width]; keras-hub's patch_size
    is spelled so too) as (height, width), held to its row of HF_KEYS first: 8.9 is not a size of 8."""
    size = HF_KEYS[key]
    if not size.holds(value):
        raise size.refuse(value)
    return pair(value)


ENCODER_ROWS = """
blocks.{i}.{n:norm1={ln1}|norm2={ln2}}.{w:scale=weight|bias}  {layer}.{n}.{w}
blocks.{i}.attn.{p:{q}|{k}|{v}}.kernel   {layer}.{attn}.{p}.weight   heads_linear
blocks.{i}.attn.{p:{q}|{k}|{v}}.bias     {layer}.{attn}.{p}.bias     heads_bias
blocks.{i}.attn.out.kernel               {layer}.{out}.weight        heads_out_linear
blocks.{i}.attn.out.bias                 {layer}.{out}.bias
"""
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
DEIT_ROWS = """
cls_token                                {embed}.cls_token           batch_token
dist_token                               {embed}.distillation_token  batch_token
pos_embed                                {embed}.position_embeddings batch
blocks.{i}.mlp.{fc:fc1=intermediate|fc2=output}.kernel  {layer}.{fc}.dense.weight  linear
blocks.{i}.mlp.{fc:fc1=intermediate|fc2=output}.bias    {layer}.{fc}.dense.bias
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
        if name == "SiglipVisionModel":
            return PATCH_ROWS + ENCODER_ROWS + MLP_ROWS + SIGLIP_ROWS
        if name == "CLIPVisionModel":
            return PATCH_ROWS + ENCODER_ROWS + MLP_ROWS + CLIP_ROWS
        if name == "DINOv3ViTModel":
            return ENCODER_ROWS + DINOV3_ROWS
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
         "layer_norm_eps": 1e-6},
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
}
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


def swiglu_width(width: int) -> int:
    """Dinov2SwiGLUFFN's hidden width (keras-hub's DINOV2SwiGLUFFN's too): two thirds of the
    configured `width`, rounded up to a multiple of 8."""
    return (int(width * 2 / 3) + 7) // 8 * 8


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
        out |= {"mlp_ratio": 1.5 * s.mlp_dim / s.dim if gated else s.mlp_dim / s.dim, "use_swiglu_ffn": gated,
                "qkv_bias": s.qkv_bias, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
        if model_type == "dinov2_with_registers":
            out["num_register_tokens"] = s.registers
    else:
        out["intermediate_size"] = s.mlp_dim
    if model_type == "dinov3_vit":
        out |= dinov3_config(s)
    if model_type == "deit":
        out |= {"qkv_bias": s.qkv_bias, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                "encoder_stride": s.patch_height,
                "id2label": {str(i): f"LABEL_{i}" for i in range(s.num_classes)},
                "label2id": {f"LABEL_{i}": i for i in range(s.num_classes)}}
    return out


def infer_architecture(fmt: str, model_type: str, raw: Raw, cfg: dict[str, Any],
                       given: dict[str, Any]) -> Inference:
    """`cfg`: the class's config, decoded (hf_config.py's `class_config`)."""
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
    (h, w), (ph, pw) = pair(cfg["image_size"]), pair(cfg["patch_size"])
    facts: dict[str, Any] = {
        "dim": dim, "channels": channels, "depth": depth, "heads": heads,
        "head_dim": width_per_head(fmt, dim, "config hidden_size", heads, "config num_attention_heads"),
        "activation": ACTIVATIONS[cfg["hidden_act"]], "layer_norm_eps": float(cfg["layer_norm_eps"]),
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
    if model_type == "dinov3_vit":
        facts |= dinov3_facts(cfg)
        inf.notes.append(f"{MASK_TOKEN} not converted: {arch.model_class} uses it only with bool_masked_pos")
    if model_type == "deit":
        facts["num_classes"] = tensor_shape(inf, raw, "cls_classifier.weight", "classes, width")[0]
    facts |= {"norm": "pre", "pos_rows": None, "head_hidden": (), "remainder": "drop"}
    for name, value in facts.items():
        inf.fact(name, value, "config.json")
    for name, value in arch.fixed.items():
        inf.fact(name, value, f"{arch.model_class}'s architecture")
    return inf

