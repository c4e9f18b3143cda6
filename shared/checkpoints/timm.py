"""timm `VisionTransformer` state dicts (`timm/models/vision_transformer.py`).

Names: `cls_token (1, 1, D)` (absent with class_token=False), `pos_embed (1, R, D)` (absent with
pos_embed='none'; R = N + 1 with a class row, R = N with no_embed_class or no class token, and
then added before the class token, as big_vision), `patch_embed.proj` (OIHW, any patch and image
size), `blocks.i.{norm1, attn.qkv (packed, head-major), attn.proj, norm2, mlp.fc1, mlp.fc2}`,
then `norm` (final_norm on tokens) or `fc_norm` (on the pooled vector), and `head`.

Not in a state dict, so asked for unless a timm config.json (`--config`) states it: the head
count (`num_heads`). Conventions applied without asking, each printed as a note: LayerNorm eps
1e-6, exact GELU and, with a class token, timm's default pooling `global_pool='token'` (the class
token; `--set pooling=mean` for 'avg'). The image size is read from the position
table when its rows form a square grid; otherwise it is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.checkpoints.common import (
    Inference,
    Raw,
    encode_tensors,
    read_config,
    read_tensors,
    require,
    require_plain_blocks,
    square_grid,
    width_per_head,
)
from shared.core.files import write_output
from shared.core.mapping import Table
from shared.core.spec import ModelSpec
from shared.core.timm_names import timm_table
from shared.errors import SpecError, WeightsError

TARGET = "timm VisionTransformer"
POOLS = {"token": "cls", "avg": "mean"}
UNSUPPORTED = (  # key fragment -> the timm option it comes from, which the spec cannot express
    ("norm_pre.", "pre_norm=True (a LayerNorm before the blocks)"),
    ("reg_token", "reg_tokens (register tokens)"),
    ("attn_pool.", "global_pool='map' (attention pooling)"),
    (".ls1.", "init_values (LayerScale)"),
    (".ls2.", "init_values (LayerScale)"),
    (".q_norm.", "qk_norm=True"),
    (".k_norm.", "qk_norm=True"),
    (".mlp.norm.", "scale_mlp_norm=True"),
    (".attn.norm.", "scale_attn_norm=True"),
)


def read(path: Path, config: Path | None) -> tuple[Raw, dict[str, Any] | None, str]:
    return read_tensors(path), read_config(config), repr(str(path))


def refuse_unsupported(fmt: str, source: str, raw: Raw) -> None:
    for fragment, option in UNSUPPORTED:
        hit = next((k for k in raw if fragment in k), None)
        if hit is not None:
            raise WeightsError(f"{fmt} checkpoint {source}: tensor {hit!r} comes from timm's {option}, "
                               "which the spec cannot express")


def _config_values(config: dict[str, Any] | None) -> dict[str, Any]:
    """The few fields a timm config.json (push_to_hub / pretrained_cfg) states that a state
    dict does not: num_heads, global_pool, img_size."""
    if not config:
        return {}
    args = config.get("model_args") or {}
    out: dict[str, Any] = {}
    if "num_heads" in args:
        out["num_heads"] = args["num_heads"]
    pool = config.get("global_pool", args.get("global_pool"))
    if pool is not None:
        out["global_pool"] = pool
    size = args.get("img_size") or (config.get("pretrained_cfg") or {}).get("input_size", [None])[1:]
    if size:
        out["img_size"] = (size, size) if isinstance(size, int) else tuple(size)
    return out


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    inf = Inference(fmt)
    cfg = _config_values(config)
    conv = inf.need(raw, "patch_embed.proj.weight")
    dim, channels, ph, pw = (int(x) for x in conv.shape)
    where = f"tensor 'patch_embed.proj.weight' {conv.shape}"
    for name, value in (("dim", dim), ("channels", channels), ("patch_height", ph), ("patch_width", pw)):
        inf.fact(name, value, where)
    class_token = "cls_token" in raw
    inf.fact("class_token", class_token, "presence of tensor 'cls_token'")
    depth = sum(1 for k in raw if k.startswith("blocks.") and k.endswith(".norm1.weight"))
    inf.fact("depth", depth, f"{depth} 'blocks.*' blocks")
    inf.fact("mlp_dim", int(inf.need(raw, "blocks.0.mlp.fc1.weight").shape[0]),
             "tensor 'blocks.0.mlp.fc1.weight'")
    head = inf.need(raw, "head.weight", " (timm num_classes=0 has no classifier; the spec needs one)")
    inf.fact("num_classes", int(head.shape[0]), "tensor 'head.weight'")
    inf.fact("qkv_bias", "blocks.0.attn.qkv.bias" in raw, "presence of tensor 'blocks.0.attn.qkv.bias'")
    final = "pooled" if "fc_norm.weight" in raw else "tokens" if "norm.weight" in raw else "none"
    inf.fact("final_norm", final, "presence of tensor 'norm.weight' / 'fc_norm.weight'")
    for name, value in (("norm", "pre"), ("head_hidden", ()), ("pos_rows", None)):
        inf.fact(name, value, "timm's VisionTransformer architecture")
    inf.convention("layer_norm_eps", 1e-6, "timm's LayerNorm")
    inf.convention("activation", "gelu", "timm's nn.GELU")
    inf.convention("remainder", "drop", "timm's PatchEmbed (a valid conv)")
    _infer_heads(fmt, inf, cfg, dim, given)
    _infer_pooling(inf, cfg, class_token)
    _infer_positions(fmt, inf, cfg, raw, class_token, ph, pw, given)
    return inf


def _infer_heads(fmt: str, inf: Inference, cfg: dict[str, Any], dim: int, given: dict[str, Any]) -> None:
    if "num_heads" in cfg:
        heads = cfg["num_heads"]
        inf.fact("heads", heads, f"config model_args.num_heads = {heads}")
        inf.fact("head_dim", width_per_head(fmt, dim, "tensor 'patch_embed.proj.weight'", heads,
                                            "config model_args.num_heads"), "width / num_heads")
        return
    inf.asks["heads"] = "timm state dicts do not record num_heads; head width = width / heads"
    if "heads" in given and given.get("dim", dim) == dim:  # a contradicting dim is reported first
        inf.fact("head_dim", width_per_head(fmt, dim, "tensor 'patch_embed.proj.weight'", given["heads"],
                                            "spec field heads"), "width / heads (timm Attention)")


def _infer_pooling(inf: Inference, cfg: dict[str, Any], class_token: bool) -> None:
    if not class_token:
        inf.fact("pooling", "mean", "no 'cls_token' (timm then needs global_pool='avg')")
    elif "global_pool" in cfg:
        pool = cfg["global_pool"]
        if pool not in POOLS:
            raise SpecError(f"config global_pool = {pool!r}: the spec expresses only 'token' and 'avg'")
        inf.fact("pooling", POOLS[pool], f"config global_pool = {pool!r}")
    else:  # not in a state dict: timm's own default applies, with a note (--set pooling=mean for 'avg')
        inf.convention("pooling", "cls", "timm's default global_pool='token'; --set pooling=mean for 'avg'")


def _infer_positions(fmt: str, inf: Inference, cfg: dict[str, Any], raw: Raw, class_token: bool,
                     ph: int, pw: int, given: dict[str, Any]) -> None:
    if "pos_embed" not in raw:
        inf.fact("pos_embed", "none", "no tensor 'pos_embed' (timm pos_embed='none')")
        inf.fact("pos_embed_class_row", False, "no tensor 'pos_embed'")
        if "img_size" in cfg:
            h, w = cfg["img_size"]
            inf.fact("image_height", h, "config img_size")
            inf.fact("image_width", w, "config img_size")
        else:
            inf.asks["image_height"] = "no position table to read the token grid from"
            inf.asks["image_width"] = "no position table to read the token grid from"
        return
    inf.fact("pos_embed", "learned", "tensor 'pos_embed'")
    rows = int(raw["pos_embed"].shape[1])
    where = f"tensor 'pos_embed' ({rows} rows)"
    size = cfg.get("img_size")
    if size is None and "image_height" in given and "image_width" in given:
        size = (given["image_height"], given["image_width"])
    if size is not None:
        tokens = (int(size[0]) // ph) * (int(size[1]) // pw)
        if rows == tokens + int(class_token):
            class_row = class_token
        elif class_token and rows == tokens:
            class_row = False  # timm no_embed_class=True
        else:
            raise WeightsError(f"{fmt} checkpoint: {where} does not fit image {size[0]}x{size[1]} with "
                               f"{ph}x{pw} patches ({tokens} patches{' + class row' if class_token else ''})")
        if "img_size" in cfg:
            inf.fact("image_height", int(size[0]), "config img_size")
            inf.fact("image_width", int(size[1]), "config img_size")
        inf.fact("pos_embed_class_row", class_row, f"{where} vs {tokens} patches")
        return
    side_with_row = square_grid(rows - 1) if class_token else None
    side = side_with_row or square_grid(rows)
    if side is None:
        inf.asks["image_height"] = f"{where} is not a square grid; give image_height and image_width"
        inf.asks["image_width"] = inf.asks["image_height"]
        return
    class_row = side_with_row is not None
    inf.fact("pos_embed_class_row", class_row, where)
    inf.fact("image_height", side * ph, f"{where}, read as a square {side}x{side} grid")
    inf.fact("image_width", side * pw, f"{where}, read as a square {side}x{side} grid")
    inf.notes.append(f"image {side * ph}x{side * pw} read from {where} as a square {side}x{side} grid; "
                     "--set image_height=.. image_width=.. if the grid is not square")


def check_exportable(fmt: str, s: ModelSpec) -> None:
    require(s.pos_embed in ("learned", "none"), TARGET, "pos_embed", s.pos_embed, "learned or none")
    require(s.pooling in ("cls", "mean"), TARGET, "pooling", s.pooling, "cls (token) or mean (avg)")
    require_plain_blocks(TARGET, s)
    require(s.layer_norm_eps == 1e-6, TARGET, "layer_norm_eps", s.layer_norm_eps, "1e-06")
    require(s.activation == "gelu", TARGET, "activation", s.activation, "gelu (exact)")


def model_kwargs(s: ModelSpec) -> dict[str, Any]:
    """The `timm.models.vision_transformer.VisionTransformer(**kwargs)` that computes `s`."""
    return {
        "img_size": (s.image_height, s.image_width), "patch_size": (s.patch_height, s.patch_width),
        "in_chans": s.channels, "num_classes": s.num_classes, "embed_dim": s.dim, "depth": s.depth,
        "num_heads": s.heads, "mlp_ratio": s.mlp_dim / s.dim, "qkv_bias": s.qkv_bias,
        "class_token": s.class_token, "global_pool": "token" if s.pooling == "cls" else "avg",
        "no_embed_class": s.class_token and not s.pos_embed_class_row,
        "pos_embed": "learn" if s.pos_embed == "learned" else "none",
        "fc_norm": s.final_norm == "pooled", "final_norm": s.final_norm != "none",
    }


def table(fmt: str, s: ModelSpec) -> Table:
    return timm_table(fmt, s)


def write(fmt: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    write_output(out, encode_tensors(out, raw), force=force)
    kwargs = ", ".join(f"{k}={v!r}" for k, v in model_kwargs(s).items())
    return [f"load with timm.models.vision_transformer.VisionTransformer({kwargs})"]
