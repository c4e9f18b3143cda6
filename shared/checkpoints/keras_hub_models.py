"""The keras-hub vision models (v0.32, Keras 3) as checkpoint families: each one's variable paths
as a mapping table, what its `get_config()` states (keras-hub's own defaults where a key is
absent, applied and printed), what its architecture fixes, and how its `.weights.h5` groups are
named when portbench writes one.

- `ViTBackbone` (+ `ViTImageClassifier`): `vit_patching_and_embedding/{class_token (1, 1, D),
  patch_embedding (Conv2D, HWIO), position_embedding (Embedding, (N[+1], D))}`,
  `vit_encoder/transformer_block_{k}/{ln_1, mha/{query,key,value,attention_output} (Keras
  MultiHeadAttention: (D, H, hd) kernels, the canonical layout), ln_2, mlp/{dense_1, dense_2}}`
  with k = block + 1 (Keras' own 1-based names), `vit_encoder/ln` on every token, then the task's
  `predictions`. The MLP's "gelu" is Keras' exact one; every LayerNorm has the config's
  `layer_norm_epsilon`. Pooling `token` reads the class token, `gap` averages every token, the
  class token included (`pooling=mean_all`). A backbone alone outputs every token: the spec reads
  the class token, ViTImageClassifier's default.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.checkpoints.common import Inference, Raw, require
from shared.checkpoints.hf_models import size_pair
from shared.core.spec import ModelSpec
from shared.errors import SpecError

# A layer's variables in creation order, by the layer's name: the h5 file stores them by index
# (`vars/0`, `vars/1`), and Keras names them `<layer path>/<name>`. A layer without a bias holds
# the first name only.
VARIABLE_NAMES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("ln_1", "ln_2", "ln"), ("gamma", "beta")),
    **dict.fromkeys(("patch_embedding", "query", "key", "value", "attention_output", "dense_1", "dense_2",
                     "predictions"), ("kernel", "bias")),
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
VIT_BLOCK_ROWS = """
blocks.{b}.{n:norm1=ln_1|norm2=ln_2}.{w:scale=gamma|bias=beta}  {layer}/{n}/{w}
blocks.{b}.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  {layer}/mha/{p}/{w}
blocks.{b}.mlp.{fc:fc1=dense_1|fc2=dense_2}.{w:kernel|bias}  {layer}/mlp/{fc}/{w}
"""
VIT_DEFAULTS: dict[str, Any] = {  # ViTBackbone's and ViTImageClassifier's keyword defaults
    "layer_norm_epsilon": 1e-6, "use_mha_bias": True, "use_mlp_bias": True, "use_class_token": True,
    "use_patch_bias": True, "pooling": "token", "intermediate_dim": None, "activation": None,
}
VIT_REQUIRED = ("image_shape", "patch_size", "num_layers", "num_heads", "hidden_dim", "mlp_dim")
VIT_POOLING = {"token": "cls", "gap": "mean_all"}


def vit_rows(s: ModelSpec) -> str:
    """The table text: the block rows once per block (Keras numbers its blocks from 1)."""
    blocks = [VIT_BLOCK_ROWS.replace("{b}", str(i))
              .replace("{layer}", f"vit_encoder/transformer_block_{i + 1}") for i in range(s.depth)]
    return VIT_EMBED_ROWS + "".join(blocks)


def infer_vit(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    """ViTBackbone's get_config (and ViTImageClassifier's, if a task) -> facts and defaults."""
    for key in VIT_REQUIRED:
        if key not in backbone:
            raise SpecError(f"keras_hub config: ViTBackbone's {key!r} is missing (a required argument)")
    cfg = {**VIT_DEFAULTS, **backbone, **(task or {})}
    for key, value in VIT_DEFAULTS.items():
        if key not in backbone and key not in (task or {}):
            inf.notes.append(f"keras-hub default applied: {key}={value!r}")
    dim, depth, heads = int(cfg["hidden_dim"]), int(cfg["num_layers"]), int(cfg["num_heads"])
    shape = cfg["image_shape"]
    if not (isinstance(shape, (list, tuple)) and len(shape) == 3):
        raise SpecError(f"keras_hub config image_shape = {shape!r}: expected [height, width, channels]")
    kernel = inf.need(raw, "vit_patching_and_embedding/patch_embedding/kernel")
    if tuple(kernel.shape[2:]) != (shape[2], dim):
        raise SpecError(f"keras_hub config image_shape = {shape!r} and hidden_dim = {dim} contradict "
                        f"tensor 'vit_patching_and_embedding/patch_embedding/kernel' {kernel.shape} "
                        "(channels_last HWIO)")
    block = re.compile(r"vit_encoder/transformer_block_\d+/ln_1/gamma")
    found = sum(1 for k in raw if block.fullmatch(k))
    if found != depth:
        raise SpecError(f"keras_hub config num_layers = {depth} contradicts the {found} "
                        "'vit_encoder/transformer_block_*' blocks in the checkpoint")
    for key, what in (("use_mha_bias", "attention"), ("use_mlp_bias", "MLP")):
        if not cfg[key]:
            raise SpecError(f"keras_hub config {key} = false: the spec's {what} layers always have biases")
    if cfg["intermediate_dim"] is not None:
        raise SpecError(f"keras_hub config intermediate_dim = {cfg['intermediate_dim']!r}: the pre_logits "
                        "Dense with tanh has no spec field (expected null)")
    if cfg["activation"] not in (None, "linear"):
        raise SpecError(f"keras_hub config activation = {cfg['activation']!r}: the spec's output is the "
                        "logits (expected null or 'linear')")
    class_token = bool(cfg["use_class_token"])
    pooling = VIT_POOLING.get(cfg["pooling"])
    if pooling is None or (pooling == "cls" and not class_token):
        raise SpecError(f"keras_hub config pooling = {cfg['pooling']!r}: expected 'gap', or 'token' with "
                        "use_class_token true (token reads token 0)")
    (h, w), (ph, pw) = (int(shape[0]), int(shape[1])), size_pair(cfg["patch_size"], "patch_size")
    head = raw.get("predictions/kernel")
    facts: dict[str, Any] = {
        "dim": dim, "channels": int(shape[2]), "depth": depth, "heads": heads, "head_dim": dim // heads,
        "mlp_dim": int(cfg["mlp_dim"]), "layer_norm_eps": float(cfg["layer_norm_epsilon"]),
        "image_height": h, "image_width": w, "patch_height": ph, "patch_width": pw,
        "class_token": class_token, "pos_embed_class_row": class_token, "pooling": pooling,
        "patch_bias": bool(cfg["use_patch_bias"]), "qkv_bias": True,
        "num_classes": 0 if head is None else int(head.shape[1]),
    }
    for name, value in facts.items():
        inf.fact(name, value, "config.json" if task is None else "task.json")
    fixed = {"activation": "gelu", "pos_embed": "learned", "pos_rows": None, "norm": "pre",
             "final_norm": "tokens", "head_hidden": (), "remainder": "drop", "mlp": "standard"}
    for name, value in fixed.items():
        inf.fact(name, value, "keras-hub ViT's architecture")
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
    backbone = {
        "module": "keras_hub.src.models.vit.vit_backbone", "class_name": "ViTBackbone",
        "registered_name": "keras_hub>ViTBackbone",
        "config": {"name": "vi_t_backbone", "trainable": True, "image_shape": [s.image_height, s.image_width,
                                                                               s.channels],
                   "patch_size": [s.patch_height, s.patch_width], "num_layers": s.depth, "num_heads": s.heads,
                   "hidden_dim": s.dim, "mlp_dim": s.mlp_dim, "dropout_rate": 0.0, "attention_dropout": 0.0,
                   "layer_norm_epsilon": s.layer_norm_eps, "use_mha_bias": True, "use_mlp_bias": True,
                   "use_class_token": s.class_token, "use_patch_bias": s.patch_bias},
    }
    if not s.num_classes:
        return backbone, None
    pooling = {v: k for k, v in VIT_POOLING.items()}[s.pooling]
    task = {"module": "keras_hub.src.models.vit.vit_image_classifier", "class_name": "ViTImageClassifier",
            "registered_name": "keras_hub>ViTImageClassifier",
            "config": {"backbone": backbone, "preprocessor": None, "name": "vi_t_image_classifier",
                       "num_classes": s.num_classes, "pooling": pooling, "activation": None, "dropout": 0.0,
                       "intermediate_dim": None}}
    return backbone, task


VIT_GROUPS = {  # a layer's name -> its group in the h5 file (the attribute Keras saves it under)
    "vit_patching_and_embedding": "layers/vi_t_patching_and_embedding", "vit_encoder": "layers/vi_t_encoder",
    "predictions": "layers/dense", "ln_1": "layer_norm_1", "ln_2": "layer_norm_2", "ln": "layer_norm",
    "query": "query_dense", "key": "key_dense", "value": "value_dense", "attention_output": "output_dense",
}


def vit_group(name: str) -> str:
    """One segment of a variable's layer path -> its h5 group; Keras saves the list of blocks
    under the class name, deduplicated: `vi_t_encoder_block`, `vi_t_encoder_block_1`, ..."""
    if name.startswith("transformer_block_"):
        k = int(name.rpartition("_")[2])
        return "encoder_layers/vi_t_encoder_block" + (f"_{k - 1}" if k > 1 else "")
    return VIT_GROUPS.get(name, name)


@dataclass(frozen=True)
class Family:
    """One keras-hub backbone class (and the task class that holds it), as a checkpoint family."""

    backbone: str
    task: str
    rows: Callable[[ModelSpec], str]
    infer: Callable[[Inference, Raw, dict[str, Any], dict[str, Any] | None], None]
    check: Callable[[str, ModelSpec], None]
    configs: Callable[[ModelSpec], tuple[dict[str, Any], dict[str, Any] | None]]
    group: Callable[[str], str]
    task_layers: tuple[str, ...]  # the task's own layers (task.weights.h5); the rest is the backbone's


FAMILIES = {"ViTBackbone": Family("ViTBackbone", "ViTImageClassifier", vit_rows, infer_vit, check_vit,
                                  vit_configs, vit_group, ("predictions",))}
