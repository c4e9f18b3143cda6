"""A Transformers config.json, read as its class reads it: every key the classes here read, its
type and the spec fields it sets (`HF_KEYS`, decoding.py's `Key`), the defaults `from_pretrained`
applies when a key is absent, and the refusal of a config that names custom code.

A class reads the keys its defaults name (shared/checkpoints/hf_models.py's `Architecture.defaults`,
`VIT_DEFAULTS`): those the config gives are held to their row here, the others are Transformers'
own defaults. A key no class here reads (dropout rates, `layerscale_value`) is not looked at.
"""

from __future__ import annotations

from typing import Any, Literal

from shared.checkpoints.decoding import Key, decode_config
from shared.core.record import field_types, shown
from shared.core.spec import ModelSpec
from shared.errors import SpecError

ACTIVATIONS = {"gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
               "gelu_fast": "gelu_tanh",  # these three compute the tanh approximation
               "quick_gelu": "quick_gelu", "silu": "silu", "swish": "silu"}
SIZE = int | tuple[int, int]  # Transformers' image_size and patch_size: one side, or (height, width)
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
    Key("query_bias", bool, ("qkv_bias",)),
    Key("key_bias", bool, ("qkv_bias",)),
    Key("value_bias", bool, ("qkv_bias",)),
    Key("proj_bias", bool),
    Key("mlp_bias", bool),
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
