"""keras-hub's image towers of its contrastive models (v0.32) as checkpoint families: the
`SigLIPVisionEncoder` and the `CLIPVisionEncoder`, each saved alone (`save_to_preset` on the
encoder). Their output is the pooled image embedding (the spec with `num_classes = 0`).

- SigLIP: `embedding/{patch_embedding (Conv2D, HWIO), position_embedding (Embedding, (N, D): the
  patches only, no class token), position_ids}`, `encoder_block_{i}/{layer_norm1, self_attn,
  layer_norm2, mlp/{fc1, fc2}}` (0-based), `post_layer_norm` on every token, then the MAP head
  `head/{variable (the probe, (1, 1, D): keras-hub's add_weight gives it no name), attention,
  layernorm, mlp/{fc1, fc2}}` with the blocks' heads, width and activation (`map` pooling, the
  attention's biases on). The blocks' and the head's LayerNorms have `layer_norm_epsilon`, but
  `post_layer_norm`'s is fixed at 1e-6: another epsilon is refused (the spec has one).
  `intermediate_activation` "gelu_approximate" (its default) is the tanh GELU, "gelu" the exact one.
- CLIP: `embedding/{class_embedding (D,), position_ids, patch_embedding (no bias),
  position_embedding ((N+1, D))}`, `pre_layer_norm` (the spec's `norm_before_blocks`),
  `encoder_block_{i}/{layer_norm_1, attention, layer_norm_2, dense_1, dense_2}` and `layer_norm`
  on every token; every epsilon is fixed at 1e-5. The encoder outputs every token: the spec reads
  the class token (what CLIPBackbone's vision pooler does). "quick_gelu" (its default) is
  x * sigmoid(1.702 x).
- `position_ids` (an int64 (1, rows) variable) picks the table row each token reads. The spec
  adds row i to token i, so it must hold 0 .. rows-1 and is then inert. SigLIP fills it at build;
  CLIP builds it as zeros and leaves it so (a preset converted from another library brings its
  ids), so a random-initialised keras-hub CLIP gives every token row 0: such a file is refused
  naming the tensor. Export writes 0 .. rows-1.
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
    check_position_ids,
    keras_object,
    layer_groups,
    position_ids,
    size_facts,
    with_defaults,
)
from shared.core.spec import ModelSpec
from shared.errors import SpecError

REQUIRED = ("patch_size", "hidden_dim", "num_layers", "num_heads", "intermediate_dim")
PLAIN_FACTS: dict[str, Any] = {"pos_embed": "learned", "pos_rows": None, "norm": "pre", "head_hidden": (),
                               "remainder": "drop", "mlp": "standard", "final_norm": "tokens",
                               "num_classes": 0, "qkv_bias": True}


def tower_facts(inf: Inference, raw: Raw, cfg: dict[str, Any], kernel: str, blocks: str, cls: str) -> None:
    """What both towers' configs state: the sizes, checked against the tensors."""
    facts = {**size_facts(inf, raw, cfg, kernel, blocks), "mlp_dim": int(cfg["intermediate_dim"])}
    for name, value in facts.items():
        inf.fact(name, value, "config.json")
    for name, value in PLAIN_FACTS.items():
        inf.fact(name, value, f"keras-hub {cls}'s architecture")


def check_tower(target: str, s: ModelSpec, eps: float) -> None:
    require(not s.num_classes, target, "num_classes", s.num_classes, "0 (an image tower: no classifier)")
    require(s.image_height == s.image_width and s.patch_height == s.patch_width, target, "image_height",
            s.image_height, "a square image cut into square patches")
    require(s.pos_embed == "learned", target, "pos_embed", s.pos_embed, "learned")
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens")
    require(s.qkv_bias, target, "qkv_bias", s.qkv_bias, "true")
    require(s.layer_norm_eps == eps, target, "layer_norm_eps", s.layer_norm_eps, f"{eps:g}")


def tower_config(cls: str, module: str, name: str, s: ModelSpec, activation: str) -> dict[str, Any]:
    return keras_object(module, cls, {
        "name": name, "trainable": True, "patch_size": s.patch_height, "hidden_dim": s.dim,
        "num_layers": s.depth, "num_heads": s.heads, "intermediate_dim": s.mlp_dim,
        "intermediate_activation": activation, "image_shape": [s.image_height, s.image_width, s.channels]})


# ---- SigLIPVisionEncoder -----------------------------------------------------------------------
SIGLIP_EPS = 1e-6  # post_layer_norm's, fixed
SIGLIP_ACTIVATIONS = {"gelu_approximate": "gelu_tanh", "gelu": "gelu"}
SIGLIP_ROWS = """
patch_embed.{w:kernel|bias}  embedding/patch_embedding/{w}
pos_embed                    embedding/position_embedding/embeddings
blocks.{b}.{n:norm1=layer_norm1|norm2=layer_norm2}.{w:scale=gamma|bias=beta}  encoder_block_{b}/{n}/{w}
blocks.{b}.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  encoder_block_{b}/self_attn/{p}/{w}
blocks.{b}.mlp.{fc:fc1|fc2}.{w:kernel|bias}  encoder_block_{b}/mlp/{fc}/{w}
final_norm.{w:scale=gamma|bias=beta}  post_layer_norm/{w}
pool.probe                   head/variable                                    batch_token
pool.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  head/attention/{p}/{w}
pool.norm.{w:scale=gamma|bias=beta}  head/layernorm/{w}
pool.mlp.{fc:fc1|fc2}.{w:kernel|bias}  head/mlp/{fc}/{w}
"""
SIGLIP_VARIABLES: Variables = {
    **COMMON_VARIABLES, **dict.fromkeys(("layer_norm1", "layer_norm2", "post_layer_norm", "layernorm"), NORM),
    **dict.fromkeys(("patch_embedding", "fc1", "fc2"), DENSE), "position_embedding": ("embeddings",),
    "embedding": ("position_ids",), "head": ("variable",),
}


def siglip_infer(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    cfg = with_defaults(inf, "SigLIPVisionEncoder", REQUIRED, {"intermediate_activation": "gelu_approximate",
                        "layer_norm_epsilon": 1e-6, "image_shape": [224, 224, 3]}, backbone)
    activation = SIGLIP_ACTIVATIONS.get(cfg["intermediate_activation"])
    if activation is None:
        raise SpecError(f"keras_hub config intermediate_activation = {cfg['intermediate_activation']!r}: "
                        f"expected one of {', '.join(SIGLIP_ACTIVATIONS)}")
    if float(cfg["layer_norm_epsilon"]) != SIGLIP_EPS:
        raise SpecError(f"keras_hub config layer_norm_epsilon = {cfg['layer_norm_epsilon']!r}: SigLIP's "
                        f"post_layer_norm keeps epsilon {SIGLIP_EPS:g}, and the spec has one epsilon "
                        f"(expected {SIGLIP_EPS:g})")
    tower_facts(inf, raw, cfg, "embedding/patch_embedding/kernel", "encoder_block_{i}/layer_norm1/gamma",
                "SigLIP")
    rows = (int(cfg["image_shape"][0]) // int(cfg["patch_size"])) ** 2
    check_position_ids(raw, "embedding/position_ids", rows)
    facts = {"activation": activation, "layer_norm_eps": SIGLIP_EPS,
             "class_token": False, "pos_embed_class_row": False, "pooling": "map", "pool_qkv_bias": True,
             "patch_bias": True}
    for name, value in facts.items():
        inf.fact(name, value, "config.json")


def siglip_check(target: str, s: ModelSpec) -> None:
    check_tower(target, s, SIGLIP_EPS)
    require(s.pooling == "map" and s.pool_qkv_bias and not s.class_token, target, "pooling", s.pooling,
            "map (its attention-pool head, biases on) over the patch tokens, no class token")
    require(s.patch_bias, target, "patch_bias", s.patch_bias, "true")
    require(s.activation in SIGLIP_ACTIVATIONS.values(), target, "activation", s.activation,
            "gelu_tanh or gelu")


def siglip_configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    activation = {v: k for k, v in SIGLIP_ACTIVATIONS.items()}[s.activation]
    config = tower_config("SigLIPVisionEncoder", "siglip.siglip_vision_encoder", "sig_lip_vision_encoder", s,
                          activation)
    config["config"]["layer_norm_epsilon"] = s.layer_norm_eps
    return config, None


SIGLIP_GROUPS = {
    "embedding": "layers/sig_lip_vision_embedding", "post_layer_norm": "layers/layer_normalization",
    "head": "layers/sig_lip_multi_head_attention_pooling", "layernorm": "layer_norm",
}


# ---- CLIPVisionEncoder -------------------------------------------------------------------------
CLIP_EPS = 1e-5  # every LayerNormalization of the tower, fixed
CLIP_ACTIVATIONS = {"quick_gelu": "quick_gelu", "gelu": "gelu"}
CLIP_ROWS = """
cls_token                    embedding/class_embedding
patch_embed.kernel           embedding/patch_embedding/kernel
pos_embed                    embedding/position_embedding/embeddings
norm_pre.{w:scale=gamma|bias=beta}  pre_layer_norm/{w}
blocks.{b}.{n:norm1=layer_norm_1|norm2=layer_norm_2}.{w:scale=gamma|bias=beta}  encoder_block_{b}/{n}/{w}
blocks.{b}.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  encoder_block_{b}/attention/{p}/{w}
blocks.{b}.mlp.{fc:fc1=dense_1|fc2=dense_2}.{w:kernel|bias}  encoder_block_{b}/{fc}/{w}
final_norm.{w:scale=gamma|bias=beta}  layer_norm/{w}
"""
CLIP_VARIABLES: Variables = {
    **COMMON_VARIABLES,
    **dict.fromkeys(("pre_layer_norm", "layer_norm_1", "layer_norm_2", "layer_norm"), NORM),
    **dict.fromkeys(("dense_1", "dense_2"), DENSE), "patch_embedding": ("kernel",),
    "position_embedding": ("embeddings",), "embedding": ("class_embedding", "position_ids"),
}


def clip_infer(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    cfg = with_defaults(inf, "CLIPVisionEncoder", REQUIRED, {"intermediate_activation": "quick_gelu",
                        "intermediate_output_index": None, "image_shape": [224, 224, 3]}, backbone)
    activation = CLIP_ACTIVATIONS.get(cfg["intermediate_activation"])
    if activation is None:
        raise SpecError(f"keras_hub config intermediate_activation = {cfg['intermediate_activation']!r}: "
                        f"expected one of {', '.join(CLIP_ACTIVATIONS)}")
    if cfg["intermediate_output_index"] is not None:
        raise SpecError(f"keras_hub config intermediate_output_index = {cfg['intermediate_output_index']!r}: "
                        "the spec's output is the pooled embedding alone (expected null)")
    tower_facts(inf, raw, cfg, "embedding/patch_embedding/kernel", "encoder_block_{i}/layer_norm_1/gamma",
                "CLIP")
    rows = (int(cfg["image_shape"][0]) // int(cfg["patch_size"])) ** 2 + 1
    check_position_ids(raw, "embedding/position_ids", rows)
    facts = {"activation": activation, "layer_norm_eps": CLIP_EPS, "class_token": True,
             "pos_embed_class_row": True, "pooling": "cls", "patch_bias": False, "norm_before_blocks": True}
    for name, value in facts.items():
        inf.fact(name, value, "config.json")
    inf.notes.append("a CLIPVisionEncoder outputs every token: the spec reads the class token "
                     "(CLIPBackbone's vision pooler)")


def clip_check(target: str, s: ModelSpec) -> None:
    check_tower(target, s, CLIP_EPS)
    require(s.norm_before_blocks, target, "norm_before_blocks", s.norm_before_blocks, "true (pre_layer_norm)")
    require(s.class_token and s.pooling == "cls" and s.pos_embed_class_row, target, "pooling", s.pooling,
            "cls (a class token with its position row)")
    require(not s.patch_bias, target, "patch_bias", s.patch_bias, "false (its patch projection has no bias)")
    require(s.activation in CLIP_ACTIVATIONS.values(), target, "activation", s.activation,
            "quick_gelu or gelu")


def clip_configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    config = tower_config("CLIPVisionEncoder", "clip.clip_vision_encoder", "clip_vision_encoder", s,
                          s.activation)
    config["config"]["intermediate_output_index"] = None
    return config, None


CLIP_GROUPS = {
    "embedding": "layers/clip_vision_embedding", "pre_layer_norm": "layers/layer_normalization",
    "layer_norm": "layers/layer_normalization_1",
}


SIGLIP = Family("SigLIPVisionEncoder", None, lambda s: SIGLIP_ROWS, siglip_infer, siglip_check,
                siglip_configs,
                layer_groups("encoder_block_", "layers/sig_lip_encoder_layer", 0, SIGLIP_GROUPS),
                lambda cfg: SIGLIP_VARIABLES, inert=("embedding/position_ids",),
                extras=lambda s, raw: position_ids("embedding/position_ids", s))
CLIP = Family("CLIPVisionEncoder", None, lambda s: CLIP_ROWS, clip_infer, clip_check, clip_configs,
              layer_groups("encoder_block_", "layers/clip_encoder_layer", 0, CLIP_GROUPS),
              lambda cfg: CLIP_VARIABLES, inert=("embedding/position_ids",),
              extras=lambda s, raw: position_ids("embedding/position_ids", s),
              features=("norm_before_blocks",))
