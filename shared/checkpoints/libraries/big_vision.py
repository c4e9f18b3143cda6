"""big_vision and google-research/vision_transformer (`vit_jax`) Flax parameter trees as `.npz`
(keys joined with '/', as both projects and timm's `_load_weights` read them).

Both name the encoder `Transformer/encoderblock_i/...` with per-head attention kernels
`query|key|value/kernel (D, H, Dh)`, biases `(H, Dh)`, `out/kernel (H, Dh, D)` (the canonical
layout, so no transform is needed), `embedding/kernel` (HWIO), `cls (1, 1, D)`,
`Transformer/encoder_norm` and `head` (absent: no classifier, num_classes 0). They differ in
two places:

- big_vision: blocks `LayerNorm_0, MultiHeadDotProductAttention_0, LayerNorm_1, MlpBlock_0`;
  position table `pos_embedding (1, N, D)` without a class row, added before the class token
  (absent for `posemb='sincos2d'`).
- vit_jax: blocks `LayerNorm_0, MultiHeadDotProductAttention_1, LayerNorm_2, MlpBlock_3`;
  position table `Transformer/posembed_input/pos_embedding (1, N+1, D)` with the class row.

big_vision's `pool_type='map'` (SigLIP's image tower) is `MAPHead_0/{probe (1, 1, D),
MultiHeadDotProductAttention_0/{query,key,value,out}, LayerNorm_0, MlpBlock_0/Dense_0|1}` after
the encoder norm: the spec's map pooling, attending every token (the class token too, if any).

A scanned big_vision tree (`Transformer/encoderblock/...` with a leading depth axis) is read too.
Conventions applied without asking: Flax LayerNorm eps 1e-6 and `nn.gelu`'s tanh approximation.
The head count comes from the kernels; the image size from the position table (a square grid),
or must be given for sincos positions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from shared.checkpoints.common import (
    LATER_FEATURES,
    Inference,
    Raw,
    require,
    require_defaults,
    require_plain_blocks,
    square_grid,
)
from shared.checkpoints.decoding import tensor_shape
from shared.checkpoints.tensor_files import check_written_type, encode_tensors, read_tensors
from shared.core.files import write_output
from shared.core.mapping import Table
from shared.core.spec import ModelSpec
from shared.errors import WeightsError

# The plug-in's place in the format list, its formats (name -> what `convert --help` says), and
# whether its checkpoint is a folder: literals, read without importing the module.
ORDER = 40
FORMATS = {
    "big_vision": ("big_vision ViT parameter tree as .npz (posemb without class row)"),
    "vit_jax": ("google-research/vision_transformer (vit_jax) parameter tree as .npz"),
}
WRITES_FOLDER = False
# The file type `convert --to big_vision / vit_jax` writes: both load a parameter tree with np.load
# (big_vision's `load_checkpoint_np`, vit_jax's `checkpoint.load`); a torch or safetensors file
# holding the tree's names is one neither reads.
OUT_SUFFIXES = (".npz",)

# Fragments of this library's layer names -> what it calls the layer, and the spec setting its place
# alone cannot say: how `verify --model` names a user's layer that fits no tensor (checkpoints.layer_terms).
LAYER_TERMS = (("map_head", "big_vision's MAPHead", ""),)

DIALECTS = {
    "big_vision": {"ln1": "LayerNorm_0", "attn": "MultiHeadDotProductAttention_0", "ln2": "LayerNorm_1",
                   "mlp": "MlpBlock_0", "pos": "pos_embedding"},
    "vit_jax": {"ln1": "LayerNorm_0", "attn": "MultiHeadDotProductAttention_1", "ln2": "LayerNorm_2",
                "mlp": "MlpBlock_3", "pos": "Transformer/posembed_input/pos_embedding"},
}
BLOCK = "Transformer/encoderblock_{}/"


def read(path: Path, config: Path | None) -> tuple[Raw, dict[str, Any] | None, str]:
    if config is not None:
        raise WeightsError("--config: big_vision / vit_jax trees carry no config file; use --set")
    return read_tensors(path), None, repr(str(path))


def normalise(raw: Raw, source: str, config: dict[str, Any] | None = None) -> Raw:
    """Strip a common prefix (`params/`, SigLIP's `params/img/`) and unstack a scanned encoder
    (`config`: not needed here)."""
    anchors = [k for k in raw if k.endswith("embedding/kernel") and "posembed" not in k]
    if len(anchors) != 1:
        raise WeightsError(f"checkpoint {source}: expected one 'embedding/kernel' (the patch embedding), "
                           f"found {len(anchors)}")
    prefix = anchors[0][: -len("embedding/kernel")]
    out = {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in raw.items()}
    scanned = [k for k in out if k.startswith("Transformer/encoderblock/")]
    for key in scanned:
        stacked = out.pop(key)
        for i, layer in enumerate(stacked):
            out[BLOCK.format(i) + key[len("Transformer/encoderblock/"):]] = np.ascontiguousarray(layer)
    return out


def refuse_unsupported(fmt: str, source: str, raw: Raw) -> None:
    for key in raw:
        if key.startswith("pre_logits/"):
            raise WeightsError(f"{fmt} checkpoint {source}: tensor {key!r} (representation_size: a Dense + "
                               "tanh before the head) has no spec field")
        if key.startswith("MAPHead") and fmt != "big_vision":
            raise WeightsError(f"{fmt} checkpoint {source}: tensor {key!r} (pool_type='map') is "
                               "big_vision's; use --from big_vision")


def _dialect(fmt: str, raw: Raw) -> str:
    found = "vit_jax" if any("MultiHeadDotProductAttention_1/" in k for k in raw) else "big_vision"
    if found != fmt:
        hint = next((k for k in raw if "MultiHeadDotProductAttention_" in k), "")
        raise WeightsError(f"{fmt} checkpoint: tensor {hint!r} uses {found} naming; use --from {found}")
    return found


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    names = DIALECTS[_dialect(fmt, raw)]
    inf = Inference(fmt)
    patch = tensor_shape(inf, raw, "embedding/kernel", "height, width, in, out")
    ph, pw, channels, dim = patch
    where = f"tensor 'embedding/kernel' {patch}"
    for name, value in (("dim", dim), ("channels", channels), ("patch_height", ph), ("patch_width", pw)):
        inf.fact(name, value, where)
    query_key = BLOCK.format(0) + names["attn"] + "/query/kernel"
    query = tensor_shape(inf, raw, query_key, "in, heads, head width")
    _, heads, head_dim = query
    inf.fact("heads", heads, f"tensor {query_key!r} {query}")
    inf.fact("head_dim", head_dim, f"tensor {query_key!r} {query}")
    inf.fact("qkv_bias", BLOCK.format(0) + names["attn"] + "/query/bias" in raw, "presence of query/bias")
    depth = sum(1 for k in raw if k.startswith("Transformer/encoderblock_") and k.endswith("/query/kernel"))
    inf.fact("depth", depth, f"{depth} 'Transformer/encoderblock_*' blocks")
    fc1 = BLOCK.format(0) + names["mlp"] + "/Dense_0/kernel"
    inf.fact("mlp_dim", tensor_shape(inf, raw, fc1, "in, out")[1], f"tensor {fc1!r}")
    if "head/kernel" in raw:
        classes = tensor_shape(inf, raw, "head/kernel", "in, classes")[1]
        inf.fact("num_classes", classes, "tensor 'head/kernel'")
    else:
        inf.fact("num_classes", 0, "no tensor 'head/kernel' (num_classes=0)")
    class_token = "cls" in raw
    inf.fact("class_token", class_token, "presence of tensor 'cls'")
    if "MAPHead_0/probe" in raw:
        inf.fact("pooling", "map", "tensor 'MAPHead_0/probe' (pool_type 'map')")
        inf.fact("pool_qkv_bias", "MAPHead_0/MultiHeadDotProductAttention_0/query/bias" in raw,
                 "presence of tensor 'MAPHead_0/MultiHeadDotProductAttention_0/query/bias'")
    else:
        inf.fact("pooling", "cls" if class_token else "mean",
                 "tensor 'cls' (pool_type 'tok')" if class_token else "no 'cls' (pool_type 'gap')")
    for name in LATER_FEATURES:
        inf.fact(name, 0 if name == "registers" else False, f"{fmt}'s ViT architecture")
    inf.fact("mlp", "standard", f"{fmt}'s ViT architecture")
    inf.fact("rope", "none", f"{fmt}'s ViT architecture (no rotary position embeddings)")
    inf.fact("patch_bias", "embedding/bias" in raw, "presence of tensor 'embedding/bias'")
    for name, value in (("norm", "pre"), ("final_norm", "tokens"), ("head_hidden", ()), ("pos_rows", None)):
        inf.fact(name, value, f"{fmt}'s ViT architecture")
    inf.convention("layer_norm_eps", 1e-6, "flax.linen.LayerNorm's default")
    inf.convention("activation", "gelu_tanh", "flax.linen.gelu's default (approximate=True)")
    inf.convention("remainder", "drop", "a VALID patch conv")
    _infer_positions(fmt, inf, raw, names["pos"], class_token, ph, pw, given)
    return inf


def _infer_positions(fmt: str, inf: Inference, raw: Raw, key: str, class_token: bool, ph: int, pw: int,
                     given: dict[str, Any]) -> None:
    class_row = fmt == "vit_jax" and class_token
    inf.fact("pos_embed_class_row", class_row, f"{fmt}'s position table")
    if key not in raw:
        if fmt == "vit_jax":
            inf.need(raw, key)  # refused: vit_jax always stores its table
        inf.fact("pos_embed", "sincos", f"no tensor {key!r} (posemb='sincos2d')")
        inf.asks["image_height"] = "sincos positions store no table to read the token grid from"
        inf.asks["image_width"] = inf.asks["image_height"]
        return
    inf.fact("pos_embed", "learned", f"tensor {key!r}")
    rows = tensor_shape(inf, raw, key, "batch, rows, width")[1]
    if "image_height" in given or "image_width" in given:
        return  # the user's size; the table's shape is then checked against it
    side = square_grid(rows - int(class_row))
    if side is None:
        inf.asks["image_height"] = f"tensor {key!r} ({rows} rows) is not a square grid"
        inf.asks["image_width"] = inf.asks["image_height"]
        return
    where = f"tensor {key!r} ({rows} rows), read as a square {side}x{side} grid"
    inf.fact("image_height", side * ph, where)
    inf.fact("image_width", side * pw, where)
    inf.notes.append(f"image {side * ph}x{side * pw} read from {where}; --set image_height=.. "
                     "image_width=.. if the grid is not square")


def check_exportable(fmt: str, s: ModelSpec) -> None:
    target = f"{fmt} ViT"
    if fmt == "big_vision":
        require(s.pos_embed in ("learned", "sincos"), target, "pos_embed", s.pos_embed, "learned or sincos")
        require(not s.pos_embed_class_row, target, "pos_embed_class_row", True,
                "false (big_vision adds positions before the class token; --to vit_jax has a class row)")
    else:
        require(s.pos_embed == "learned", target, "pos_embed", s.pos_embed, "learned")
        require(s.pos_embed_class_row == s.class_token, target, "pos_embed_class_row", s.pos_embed_class_row,
                "a class row exactly when there is a class token (--to big_vision has none)")
    maps = (("map", True), ("map", False)) if fmt == "big_vision" else ()
    pools = (("cls", True), ("mean", False), *maps)
    require((s.pooling, s.class_token) in pools, target, "pooling", s.pooling,
            "cls with a class token ('tok'/'token') or mean without one ('gap')"
            + (", or map" if fmt == "big_vision" else ""))
    require(s.pool_qkv_bias or s.pooling != "map", target, "pool_qkv_bias", False, "true (MAPHead's biases)")
    require_defaults(target, s)
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens (encoder_norm)")
    require_plain_blocks(target, s)
    require(s.qkv_bias, target, "qkv_bias", s.qkv_bias, "true")
    require(s.layer_norm_eps == 1e-6, target, "layer_norm_eps", s.layer_norm_eps, "1e-06 (flax LayerNorm)")
    require(s.activation == "gelu_tanh", target, "activation", s.activation, "gelu_tanh (flax nn.gelu)")


ROWS = """
cls_token                                       cls                                       batch_token
pos_embed                                       {pos}                                     batch
patch_embed.{w}                                 embedding/{w}
blocks.{i}.{n:norm1={ln1}|norm2={ln2}}.{w}      Transformer/encoderblock_{i}/{n}/{w}
blocks.{i}.attn.{p}.{w}                         Transformer/encoderblock_{i}/{attn}/{p}/{w}
blocks.{i}.mlp.{fc:fc1=Dense_0|fc2=Dense_1}.{w} Transformer/encoderblock_{i}/{mlp}/{fc}/{w}
final_norm.{w}                                  Transformer/encoder_norm/{w}
head.out.{w}                                    head/{w}
pool.probe                                      MAPHead_0/probe                           batch_token
pool.attn.{p}.{w}                               MAPHead_0/MultiHeadDotProductAttention_0/{p}/{w}
pool.norm.{w}                                   MAPHead_0/LayerNorm_0/{w}
pool.mlp.{fc:fc1=Dense_0|fc2=Dense_1}.{w}       MAPHead_0/MlpBlock_0/{fc}/{w}
"""


def table(fmt: str, s: ModelSpec) -> Table:
    # Per-head q/k/v kernels (D, H, hd), biases (H, hd) and out (H, hd, D) are the canonical
    # layout: every row but the class token's and the position table's is a plain rename.
    return Table(ROWS, fmt, **DIALECTS[fmt])


def write(fmt: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    check_written_type(fmt, out, OUT_SUFFIXES)
    write_output(out, encode_tensors(out, raw), force=force)
    pool = "map" if s.pooling == "map" else "tok" if s.class_token else "gap"
    if fmt == "big_vision":
        posemb = "learn" if s.pos_embed == "learned" else "sincos2d"
        return [f"big_vision ViT: width={s.dim}, depth={s.depth}, mlp_dim={s.mlp_dim}, num_heads={s.heads}, "
                f"patch_size=({s.patch_height}, {s.patch_width}), posemb={posemb!r}, pool_type={pool!r}, "
                f"num_classes={s.num_classes}"]
    return [f"vit_jax VisionTransformer: hidden_size={s.dim}, num_layers={s.depth}, mlp_dim={s.mlp_dim}, "
            f"num_heads={s.heads}, patches=({s.patch_height}, {s.patch_width}), "
            f"classifier={'token' if s.class_token else 'gap'!r}"]
