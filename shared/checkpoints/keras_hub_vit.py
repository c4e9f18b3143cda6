"""keras-hub's ViT-shaped families: ViTBackbone (+ ViTImageClassifier) and DeiTBackbone.

- `ViTBackbone` (+ `ViTImageClassifier`): `vit_patching_and_embedding/{class_token (1, 1, D),
  patch_embedding (Conv2D, HWIO), position_embedding (Embedding, (N[+1], D))}`,
  `vit_encoder/transformer_block_{k}/{ln_1, mha/{query,key,value,attention_output} (Keras
  MultiHeadAttention: (D, H, hd) kernels, the canonical layout), ln_2, mlp/{dense_1, dense_2}}`
  with k = block + 1 (Keras' own 1-based names), `vit_encoder/ln` on every token, then the task's
  `predictions`. The MLP's "gelu" is Keras' exact one; every LayerNorm has the config's
  `layer_norm_epsilon`. Pooling `token` reads the class token, `gap` averages every token, the
  class token included (`pooling=mean_all`). A backbone alone outputs every token: the spec reads
  the class token, ViTImageClassifier's default.
- `DeiTBackbone` (+ `DeiTImageClassifier`): the same blocks under `deit_encoder` (the MLP as
  `mlp/dense` and `output_layer/output`), with `deit_patching_and_embedding/{class_token,
  distillation_token, position_embedding (1, N+2, D)}`: the table covers both tokens. keras-hub
  gives the distillation token no head (its classifier reads the class token, or averages every
  token with `gap`), so it is not the spec's `distill_token` (whose output averages two heads):
  it is one learned token after the class token with its own position row, the spec's
  `registers=1` with `pos_embed_register_rows`. A backbone alone outputs every token: the spec
  reads the class token.
"""

from __future__ import annotations

from typing import Any

from shared.checkpoints.common import Inference, Raw, require
from shared.checkpoints.keras_hub_models import (
    COMMON_VARIABLES,
    DENSE,
    NORM,
    Family,
    Variables,
    keras_object,
    layer_groups,
    numbered_blocks,
    size_facts,
    with_defaults,
)
from shared.core.spec import ModelSpec
from shared.errors import SpecError

# ---- ViTBackbone (+ ViTImageClassifier) ------------------------------------------------------
VIT_VARIABLES: Variables = {
    **COMMON_VARIABLES,
    **dict.fromkeys(("ln_1", "ln_2", "ln"), NORM),
    **dict.fromkeys(("patch_embedding", "dense_1", "dense_2", "predictions"), DENSE),
    "position_embedding": ("embeddings",),
    "vit_patching_and_embedding": ("class_token",),
}

VIT_EMBED_ROWS = """
cls_token                        vit_patching_and_embedding/class_token                    batch_token
pos_embed                        vit_patching_and_embedding/position_embedding/embeddings
patch_embed.{w:kernel|bias}      vit_patching_and_embedding/patch_embedding/{w}
final_norm.{w:scale=gamma|bias=beta}  vit_encoder/ln/{w}
head.out.{w:kernel|bias}         predictions/{w}
"""
# A ViT and a DeiT block share their norms and attention names; their MLPs are named apart.
NORM_ATTENTION_ROWS = """
blocks.{b}.{n:norm1=ln_1|norm2=ln_2}.{w:scale=gamma|bias=beta}  {layer}/{n}/{w}
blocks.{b}.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  {layer}/mha/{p}/{w}
"""
VIT_BLOCK_ROWS = NORM_ATTENTION_ROWS + """
blocks.{b}.mlp.{fc:fc1=dense_1|fc2=dense_2}.{w:kernel|bias}  {layer}/mlp/{fc}/{w}
"""
VIT_DEFAULTS: dict[str, Any] = {  # ViTBackbone's and ViTImageClassifier's keyword defaults
    "layer_norm_epsilon": 1e-6, "use_mha_bias": True, "use_mlp_bias": True, "use_class_token": True,
    "use_patch_bias": True, "pooling": "token", "intermediate_dim": None, "activation": None,
}
VIT_REQUIRED = ("image_shape", "patch_size", "num_layers", "num_heads", "hidden_dim", "mlp_dim")
VIT_POOLING = {"token": "cls", "gap": "mean_all"}
VIT_FIXED: dict[str, Any] = {  # what keras-hub's ViT and DeiT build, whatever the config says
    "activation": "gelu", "pos_embed": "learned", "pos_rows": None, "norm": "pre", "final_norm": "tokens",
    "head_hidden": (), "remainder": "drop", "mlp": "standard",
}


def vit_rows(s: ModelSpec) -> str:
    return VIT_EMBED_ROWS + numbered_blocks(VIT_BLOCK_ROWS, s, "vit_encoder/transformer_block_{k}")


def refuse_output_activation(cfg: dict[str, Any]) -> None:
    """ViT's and DeiT's classifiers take an output activation; the spec's output is the logits."""
    if cfg["activation"] not in (None, "linear"):
        raise SpecError(f"keras_hub config activation = {cfg['activation']!r}: the spec's output is the "
                        "logits (expected null or 'linear')")


def state(inf: Inference, facts: dict[str, Any], task: dict[str, Any] | None, architecture: str) -> None:
    """The facts read from config.json (task.json for a classifier), then what ViT's block design
    fixes in both families."""
    for name, value in facts.items():
        inf.fact(name, value, "config.json" if task is None else "task.json")
    for name, value in VIT_FIXED.items():
        inf.fact(name, value, architecture)


def infer_vit(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    """ViTBackbone's get_config (and ViTImageClassifier's, if a task) -> facts and defaults."""
    cfg = with_defaults(inf, "ViTBackbone", VIT_REQUIRED, VIT_DEFAULTS, backbone, task)
    sizes = size_facts(inf, raw, cfg, "vit_patching_and_embedding/patch_embedding/kernel",
                       "vit_encoder/transformer_block_{i}/ln_1/gamma")
    for key, what in (("use_mha_bias", "attention"), ("use_mlp_bias", "MLP")):
        if not cfg[key]:
            raise SpecError(f"keras_hub config {key} = false: the spec's {what} layers always have biases")
    if cfg["intermediate_dim"] is not None:
        raise SpecError(f"keras_hub config intermediate_dim = {cfg['intermediate_dim']!r}: the pre_logits "
                        "Dense with tanh has no spec field (expected null)")
    refuse_output_activation(cfg)
    class_token = bool(cfg["use_class_token"])
    pooling = VIT_POOLING.get(cfg["pooling"])
    if pooling is None or (pooling == "cls" and not class_token):
        raise SpecError(f"keras_hub config pooling = {cfg['pooling']!r}: expected 'gap', or 'token' with "
                        "use_class_token true (token reads token 0)")
    head = raw.get("predictions/kernel")
    facts: dict[str, Any] = {
        **sizes, "mlp_dim": int(cfg["mlp_dim"]), "layer_norm_eps": float(cfg["layer_norm_epsilon"]),
        "class_token": class_token, "pos_embed_class_row": class_token, "pooling": pooling,
        "patch_bias": bool(cfg["use_patch_bias"]), "qkv_bias": True,
        "num_classes": 0 if head is None else int(head.shape[1]),
    }
    state(inf, facts, task, "keras-hub ViT's architecture")
    if task is None:
        inf.notes.append("a ViTBackbone alone outputs every token: the spec reads the class token "
                         "(ViTImageClassifier's default pooling='token'); --set pooling=mean_all for 'gap'")


def check_vit(target: str, s: ModelSpec) -> None:
    """What ViTBackbone + ViTImageClassifier build (beyond the plain blocks every library has)."""
    require(s.pooling in ("cls", "mean_all"), target, "pooling", s.pooling, "cls (token) or mean_all (gap)")
    require(s.class_token or s.pooling == "mean_all", target, "class_token", s.class_token,
            "a class token for pooling 'token'")
    require(s.pos_embed == "learned" and s.pos_embed_class_row == s.class_token, target, "pos_embed",
            s.pos_embed, "a learned table with a class row exactly when there is a class token")
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens")
    require(s.activation == "gelu", target, "activation", s.activation, "gelu (Keras' exact GELU)")
    require(s.qkv_bias, target, "qkv_bias", s.qkv_bias, "true (use_mha_bias also removes the output bias)")
    require(s.head_dim * s.heads == s.dim, target, "head_dim", s.head_dim, "hidden_dim // num_heads")


def vit_configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """config.json (the backbone) and task.json (the classifier, when the spec has a head)."""
    backbone = keras_object("vit.vit_backbone", "ViTBackbone", {
        "name": "vi_t_backbone", "trainable": True,
        "image_shape": [s.image_height, s.image_width, s.channels],
        "patch_size": [s.patch_height, s.patch_width], "num_layers": s.depth, "num_heads": s.heads,
        "hidden_dim": s.dim, "mlp_dim": s.mlp_dim, "dropout_rate": 0.0, "attention_dropout": 0.0,
        "layer_norm_epsilon": s.layer_norm_eps, "use_mha_bias": True, "use_mlp_bias": True,
        "use_class_token": s.class_token, "use_patch_bias": s.patch_bias})
    if not s.num_classes:
        return backbone, None
    pooling = {v: k for k, v in VIT_POOLING.items()}[s.pooling]
    task = keras_object("vit.vit_image_classifier", "ViTImageClassifier", {
        "backbone": backbone, "preprocessor": None, "name": "vi_t_image_classifier",
        "num_classes": s.num_classes, "pooling": pooling, "activation": None, "dropout": 0.0,
        "intermediate_dim": None})
    return backbone, task


VIT_GROUPS = {  # a layer's name -> its group in the h5 file (the attribute Keras saves it under)
    "vit_patching_and_embedding": "layers/vi_t_patching_and_embedding", "vit_encoder": "layers/vi_t_encoder",
    "predictions": "layers/dense", "ln_1": "layer_norm_1", "ln_2": "layer_norm_2", "ln": "layer_norm",
}


# ---- DeiTBackbone (+ DeiTImageClassifier) ------------------------------------------------------
DEIT_VARIABLES: Variables = {
    **COMMON_VARIABLES,
    **dict.fromkeys(("ln_1", "ln_2", "ln"), NORM),
    **dict.fromkeys(("patch_embedding", "dense", "output", "predictions"), DENSE),
    "deit_patching_and_embedding": ("class_token", "distillation_token", "position_embedding"),
}
DEIT_EMBED_ROWS = """
cls_token                    deit_patching_and_embedding/class_token          batch_token
reg_tokens                   deit_patching_and_embedding/distillation_token   batch
pos_embed                    deit_patching_and_embedding/position_embedding   batch
patch_embed.{w:kernel|bias}  deit_patching_and_embedding/patch_embedding/{w}
final_norm.{w:scale=gamma|bias=beta}  deit_encoder/ln/{w}
head.out.{w:kernel|bias}     predictions/{w}
"""
DEIT_BLOCK_ROWS = NORM_ATTENTION_ROWS + """
blocks.{b}.mlp.fc1.{w:kernel|bias}  {layer}/mlp/dense/{w}
blocks.{b}.mlp.fc2.{w:kernel|bias}  {layer}/output_layer/output/{w}
"""
DEIT_DEFAULTS: dict[str, Any] = {"layer_norm_epsilon": 1e-6, "use_mha_bias": True, "pooling": "token",
                                 "activation": None}
DEIT_REQUIRED = ("image_shape", "patch_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim")


def deit_rows(s: ModelSpec) -> str:
    return DEIT_EMBED_ROWS + numbered_blocks(DEIT_BLOCK_ROWS, s, "deit_encoder/transformer_block_{k}")


def infer_deit(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    """DeiTBackbone's get_config (and DeiTImageClassifier's, if a task) -> facts and defaults."""
    cfg = with_defaults(inf, "DeiTBackbone", DEIT_REQUIRED, DEIT_DEFAULTS, backbone, task)
    sizes = size_facts(inf, raw, cfg, "deit_patching_and_embedding/patch_embedding/kernel",
                       "deit_encoder/transformer_block_{i}/ln_1/gamma")
    if not cfg["use_mha_bias"]:
        raise SpecError("keras_hub config use_mha_bias = false: it also removes the attention output's "
                        "bias, which the spec always has")
    refuse_output_activation(cfg)
    pooling = VIT_POOLING.get(cfg["pooling"])
    if pooling is None:
        raise SpecError(f"keras_hub config pooling = {cfg['pooling']!r}: expected 'token' or 'gap'")
    head = raw.get("predictions/kernel")
    facts: dict[str, Any] = {
        **sizes, "mlp_dim": int(cfg["intermediate_dim"]), "layer_norm_eps": float(cfg["layer_norm_epsilon"]),
        "class_token": True, "registers": 1, "pos_embed_class_row": True, "pos_embed_register_rows": True,
        "distill_token": False, "pooling": pooling, "patch_bias": True, "qkv_bias": True,
        "num_classes": 0 if head is None else int(head.shape[1]),
    }
    state(inf, facts, task, "keras-hub DeiT's architecture")
    inf.notes.append("keras-hub DeiT's distillation token has no head of its own: it is a learned token with "
                     "a position row after the class token (registers=1, pos_embed_register_rows=true)")
    if task is None:
        inf.notes.append("a DeiTBackbone alone outputs every token: the spec reads the class token")


def check_deit(target: str, s: ModelSpec) -> None:
    require(s.registers == 1 and s.pos_embed_register_rows and s.class_token, target, "registers",
            s.registers, "1 with its position row, after a class token (the distillation token)")
    require(s.pooling in ("cls", "mean_all"), target, "pooling", s.pooling, "cls (token) or mean_all (gap)")
    require(s.pos_embed == "learned" and s.pos_embed_class_row, target, "pos_embed", s.pos_embed,
            "a learned table with the class and distillation rows")
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens")
    require(s.activation == "gelu", target, "activation", s.activation, "gelu (Keras' exact GELU)")
    require(s.qkv_bias and s.patch_bias, target, "qkv_bias", s.qkv_bias, "true, with a patch bias")


def deit_configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    backbone = keras_object("deit.deit_backbone", "DeiTBackbone", {
        "name": "dei_t_backbone", "trainable": True,
        "image_shape": [s.image_height, s.image_width, s.channels],
        "patch_size": [s.patch_height, s.patch_width], "num_layers": s.depth, "num_heads": s.heads,
        "hidden_dim": s.dim, "intermediate_dim": s.mlp_dim, "dropout_rate": 0.0, "attention_dropout": 0.0,
        "layer_norm_epsilon": s.layer_norm_eps, "use_mha_bias": True})
    if not s.num_classes:
        return backbone, None
    pooling = {v: k for k, v in VIT_POOLING.items()}[s.pooling]
    return backbone, keras_object("deit.deit_image_classifier", "DeiTImageClassifier", {
        "backbone": backbone, "preprocessor": None, "name": "dei_t_image_classifier",
        "num_classes": s.num_classes, "pooling": pooling, "activation": None, "dropout": 0.0})


DEIT_GROUPS = {
    "deit_patching_and_embedding": "layers/dei_t_embeddings", "deit_encoder": "layers/dei_t_encoder",
    "predictions": "layers/dense", "ln_1": "layer_norm_1", "ln_2": "layer_norm_2", "ln": "layer_norm",
    "output": "dense",
}


VIT = Family("ViTBackbone", "ViTImageClassifier", vit_rows, infer_vit, check_vit, vit_configs,
             layer_groups("transformer_block_", "encoder_layers/vi_t_encoder_block", 1, VIT_GROUPS),
             lambda cfg: VIT_VARIABLES, task_layers=("predictions",))
DEIT = Family("DeiTBackbone", "DeiTImageClassifier", deit_rows, infer_deit, check_deit, deit_configs,
              layer_groups("transformer_block_", "encoder_layers/dei_t_encoder_block", 1, DEIT_GROUPS),
              lambda cfg: DEIT_VARIABLES, task_layers=("predictions",), features=("registers",))
