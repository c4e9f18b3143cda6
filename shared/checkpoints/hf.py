"""Hugging Face `ViTForImageClassification` (PyTorch) state dicts + `config.json`.

Names: `vit.embeddings.{cls_token (1, 1, D), position_embeddings (1, N+1, D),
patch_embeddings.projection (OIHW)}`, `vit.encoder.layer.i.{layernorm_before,
attention.attention.{query,key,value} (separate (D, D) Linears), attention.output.dense,
layernorm_after, intermediate.dense, output.dense}`, `vit.layernorm`, `classifier`.

The config states what the tensors cannot: the head count, LayerNorm eps (HF's own default is
1e-12, not timm's 1e-6: the config value is used, never a guess), hidden_act, image and patch
size. A field the config omits takes `ViTConfig`'s default, as `from_pretrained` does.

The config's `model_type` picks the class: `vit` (above) or one of the vision models in
`shared/checkpoints/hf_models.py` (DINOv2 with and without registers, SigLIP's and CLIP's vision
towers, DeiT with its distillation head); on export the spec picks it (see `model_type_for`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from shared.checkpoints.common import (
    Inference,
    Raw,
    asks_another_grid,
    encode_tensors,
    read_config,
    read_tensors,
    require,
    require_class_token_readout,
    require_plain_blocks,
    resampled_table,
    width_per_head,
)
from shared.checkpoints.decoding import pair, tensor_shape
from shared.checkpoints.hf_config import (
    ACTIVATIONS,
    VIT_DEFAULTS,
    class_config,
    config_model_type,
    refuse_custom_code,
)
from shared.checkpoints.hf_dinov3 import REGISTER_TOKENS
from shared.checkpoints.hf_models import (
    ARCHITECTURES,
    ENCODER_ROWS,
    HF_ACT,
    MASK_TOKEN,
    PATCH_ROWS,
    VIT_STYLE,
    config_for_model,
    infer_architecture,
    swiglu_width,
)
from shared.core.files import write_folder
from shared.core.mapping import Table
from shared.core.record import shown
from shared.core.spec import ModelSpec
from shared.errors import SpecError, WeightsError

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


def normalise(raw: Raw, source: str) -> Raw:
    """DINOv3's default key_bias=False leaves its attention a query and value bias only: the
    missing key bias is a zero one (exact), so the spec's qkv_bias places all three."""
    out = dict(raw)
    for key in [k for k in raw if k.endswith(".attention.q_proj.bias")]:
        missing = key.replace(".q_proj.", ".k_proj.")
        if missing not in out and missing.replace(".bias", ".weight") in out:
            out[missing] = np.zeros_like(raw[key])
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
                    "head_hidden": (), "remainder": "drop"}


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    """The class the config's model_type names, from its config (every key it reads decoded
    first: hf_config.py) and the tensors."""
    refuse_custom_code(config, given)
    kind = config_model_type(config)
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
    if s.rope != "none":
        return "dinov3_vit"
    if s.distill_token:
        return "deit"
    if s.pooling == "map":
        return "siglip_vision_model"
    if s.norm_before_blocks:
        return "clip_vision_model"
    if s.layer_scale:
        return "dinov2_with_registers" if s.registers else "dinov2"
    return "vit"


def check_exportable(fmt: str, s: ModelSpec) -> None:
    model_type = model_type_for(s)
    if model_type == "vit":
        require_class_token_readout(TARGET, s)
        require_plain_blocks(TARGET, s)
        for name in ("registers", "qk_norm", "patch_norm_in", "patch_norm_out"):
            require(not getattr(s, name), TARGET, name, getattr(s, name), "none")
        require(s.num_classes > 0, TARGET, "num_classes", 0, "a classifier (num_classes > 0)")
        require(s.patch_bias, TARGET, "patch_bias", s.patch_bias, "true (its patch projection has a bias)")
        require(s.mlp == "standard", TARGET, "mlp", s.mlp, "standard")
        require(s.activation in ("gelu", "gelu_tanh"), TARGET, "activation", s.activation,
                "gelu or gelu_tanh")
        return
    arch = ARCHITECTURES[model_type]
    target = f"Hugging Face {arch.model_class}"
    require_plain_blocks(target, s, rope=model_type == "dinov3_vit")
    for name, value in arch.fixed.items():
        require(getattr(s, name) == value, target, name, getattr(s, name), repr(value))
    for name in ("qk_norm", "patch_norm_in", "patch_norm_out"):
        require(not getattr(s, name), target, name, getattr(s, name), "false")
    only = (("layer_scale", ("dinov2", "dinov3")), ("norm_before_blocks", ("clip",)),
            ("registers", ("dinov2_with", "dinov3")))
    for name, owners in only:
        require(not getattr(s, name) or model_type.startswith(owners), target, name, getattr(s, name), "none")
    require(s.activation in HF_ACT, target, "activation", s.activation, ", ".join(HF_ACT))
    require(s.image_height == s.image_width and s.patch_height == s.patch_width, target, "image_width",
            s.image_width, "square images and patches (the config's image_size and patch_size are integers)")
    if s.mlp == "gated" and model_type != "dinov3_vit":  # DINOv3's gate_proj takes any hidden_act
        require(model_type.startswith("dinov2") and s.activation == "silu", target, "mlp", s.mlp,
                "standard (only DINOv2's SwiGLU, with silu, is gated)")
        rebuilt = swiglu_width(int(s.dim * (1.5 * s.mlp_dim / s.dim)))  # from config_for's mlp_ratio
        require(rebuilt == s.mlp_dim, target, "mlp_dim", s.mlp_dim,
                "a multiple of 8 (Dinov2SwiGLUFFN rounds its width up to one)")


def config_for(s: ModelSpec) -> dict[str, Any]:
    """The config.json the class that computes `s` needs (`ViTForImageClassification` or one of
    hf_models.py's)."""
    model_type = model_type_for(s)
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


ROWS = PATCH_ROWS + ENCODER_ROWS + """
cls_token                                   {embed}.cls_token                         batch_token
pos_embed                                   {embed}.position_embeddings               batch
blocks.{i}.mlp.{fc:fc1=intermediate|fc2=output}.kernel  {layer}.{fc}.dense.weight  linear
blocks.{i}.mlp.{fc:fc1=intermediate|fc2=output}.bias    {layer}.{fc}.dense.bias
final_norm.{w:scale=weight|bias}            vit.layernorm.{w}
head.out.kernel                             classifier.weight                         linear
head.out.bias                               classifier.bias
"""


def table(fmt: str, s: ModelSpec) -> Table:
    model_type = model_type_for(s)
    if model_type == "vit":
        return Table(ROWS, fmt, layer="vit.encoder.layer.{i}", **VIT_STYLE, embed="vit.embeddings",
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
