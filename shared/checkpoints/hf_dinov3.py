"""Transformers' `DINOv3ViTModel` (v4.57, `models/dinov3_vit/modeling_dinov3_vit.py`), the
architecture hf_models.py's table lists: its names, config defaults, the facts it fixes and the
config.json fields of its own.

No position table; 2-D RoPE on each head's patch queries and keys (`DINOv3ViTRopePositionEmbedding`:
patch centres in [-1, 1], angles 2 pi x coordinate x `1 / rope_theta ** arange(0, 1, 4 / head_dim)`,
`rotate_half` pairs; `apply_rotary_pos_emb` leaves the class and register tokens unrotated), which
is the spec's `rope='axial_half'`, `rope_coords='centered'`. LayerScale (`layer_scale1.lambda1`);
q/k/v/o projections with `key_bias` off by default (a zero key bias on import, hf.py's
`normalise`); MLP `up_proj`/`down_proj`, or gated with `gate_proj`. `register_tokens` is a
(1, 0, D) tensor without registers and `mask_token` is pre-training's: neither is converted.
Output: `pooler_output`, the normed class token. Training-only coordinate augmentation
(`pos_embed_shift`, `pos_embed_jitter`, `pos_embed_rescale`) takes no part at inference.
"""

from __future__ import annotations

from typing import Any

from shared.core.spec import ModelSpec
from shared.errors import SpecError

DINOV3_STYLE = dict(ln1="norm1", ln2="norm2", q="query=q_proj", k="key=k_proj", v="value=v_proj",
                    attn="attention", out="attention.o_proj")
DINOV3_ROWS = """
cls_token                                embeddings.cls_token        batch_token
reg_tokens                               embeddings.register_tokens  batch
patch_embed.kernel                       embeddings.patch_embeddings.weight  conv
patch_embed.bias                         embeddings.patch_embeddings.bias
blocks.{i}.mlp.{fc:gate=gate_proj|fc1=up_proj|fc2=down_proj}.kernel  {layer}.mlp.{fc}.weight  linear
blocks.{i}.mlp.{fc:gate=gate_proj|fc1=up_proj|fc2=down_proj}.bias    {layer}.mlp.{fc}.bias
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
    "rope": "axial_half", "rope_coords": "centered", "rope_ref_grid": (),
}
REGISTER_TOKENS = "embeddings.register_tokens"  # a (1, 0, D) tensor without registers


def dinov3_facts(cfg: dict[str, Any]) -> dict[str, Any]:
    """What a DINOv3ViTConfig (decoded: hf_config.py) says beyond the common fields; its biases the
    spec cannot place are refused naming the config field (the spec's attention has q, k and v
    biases together or none, and always an output bias; a missing key bias alone is a zero one,
    added on import)."""
    for key in ("proj_bias", "mlp_bias"):
        if not cfg[key]:
            raise SpecError(f"config {key} = {cfg[key]!r}: the spec's output projection and MLP always "
                            "have biases; expected true")
    if cfg["query_bias"] != cfg["value_bias"] or (cfg["key_bias"] and not cfg["query_bias"]):
        raise SpecError(f"config query_bias = {cfg['query_bias']!r}, key_bias = {cfg['key_bias']!r}, "
                        f"value_bias = {cfg['value_bias']!r}: expected query and value biases alike "
                        "(the spec's qkv_bias), with the key bias among them or off")
    return {"qkv_bias": cfg["query_bias"], "mlp": "gated" if cfg["use_gated_mlp"] else "standard",
            "registers": cfg["num_register_tokens"], "rope_theta": float(cfg["rope_theta"])}


def dinov3_config(s: ModelSpec) -> dict[str, Any]:
    """The DINOv3ViTConfig fields of its own that rebuild `s` (hf_models.py writes the common ones)."""
    return {"use_gated_mlp": s.mlp == "gated", "rope_theta": s.rope_theta, "num_register_tokens": s.registers,
            "query_bias": s.qkv_bias, "key_bias": s.qkv_bias, "value_bias": s.qkv_bias, "proj_bias": True,
            "mlp_bias": True, "layerscale_value": 1.0, "drop_path_rate": 0.0}
