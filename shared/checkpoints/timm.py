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

import numpy as np

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
POOLS = {"token": "cls", "avg": "mean", "map": "map"}
ACT_LAYERS = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "quick_gelu": "quick_gelu", "silu": "silu",
              "swish": "silu"}  # timm's get_act_layer names -> the spec's
TIMM_ACT = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "quick_gelu": "quick_gelu", "silu": "silu"}
UNSUPPORTED = (  # key fragment -> the timm option it comes from, which the spec cannot express
    (".mlp.norm.", "scale_mlp_norm=True or a normed GluMlp/SwiGLU"),
    (".attn.norm.", "scale_attn_norm=True"),
    (".attns.", "ParallelThingsBlock (parallel blocks)"),
    (".in_proj.", "ParallelScalingBlock (parallel blocks)"),
    ("relative_position", "relative position bias"),
    ("rope", "rotary position embeddings"),
    ("attn_pool.pos_embed", "AttentionPoolLatent(pos_embed='abs')"),
    ("attn_pool.q_norm", "AttentionPoolLatent(qk_norm=True)"),
)
SPLIT_GATE, SPLIT_LINEAR = ".mlp.fc1_g.", ".mlp.fc1_x."  # timm's SwiGLU: the gate and the linear half


def read(path: Path, config: Path | None) -> tuple[Raw, dict[str, Any] | None, str]:
    return read_tensors(path), read_config(config), repr(str(path))


def normalise(raw: Raw, source: str) -> Raw:
    """Two spellings of the same function become one: timm's split SwiGLU (`fc1_g`, `fc1_x`) is
    packed as SwiGLUPacked's one `fc1` (gate first), and the patch projection of a `pre_norm=True`
    model (CLIP), which timm builds without a bias, gets a zero bias (adding 0 is exact)."""
    out = dict(raw)
    for key in [k for k in raw if SPLIT_GATE in k]:
        linear = key.replace(SPLIT_GATE, SPLIT_LINEAR)
        if linear not in out:
            raise WeightsError(f"timm checkpoint {source}: tensor {key!r} has no {linear!r} beside it")
        out[key.replace(SPLIT_GATE, ".mlp.fc1.")] = np.concatenate([out.pop(key), out.pop(linear)])
    if "norm_pre.weight" in out and "patch_embed.proj.bias" not in out and "patch_embed.proj.weight" in out:
        out["patch_embed.proj.bias"] = np.zeros(out["patch_embed.proj.weight"].shape[0], np.float32)
    return out


def refuse_unsupported(fmt: str, source: str, raw: Raw) -> None:
    for fragment, option in UNSUPPORTED:
        hit = next((k for k in raw if fragment in k), None)
        if hit is not None:
            raise WeightsError(f"{fmt} checkpoint {source}: tensor {hit!r} comes from timm's {option}, "
                               "which the spec cannot express")


def _config_values(config: dict[str, Any] | None) -> dict[str, Any]:
    """The few fields a timm config.json (push_to_hub / pretrained_cfg) states that a state
    dict does not: num_heads, global_pool, img_size, act_layer."""
    if not config:
        return {}
    args = config.get("model_args") or {}
    out: dict[str, Any] = {}
    for key in ("num_heads", "act_layer"):
        if key in args:
            out[key] = args[key]
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
    depth = sum(1 for k in raw if k.startswith("blocks.") and k.endswith(".norm1.weight"))
    inf.fact("depth", depth, f"{depth} 'blocks.*' blocks")
    inf.fact("qkv_bias", "blocks.0.attn.qkv.bias" in raw, "presence of tensor 'blocks.0.attn.qkv.bias'")
    final = "pooled" if "fc_norm.weight" in raw else "tokens" if "norm.weight" in raw else "none"
    inf.fact("final_norm", final, "presence of tensor 'norm.weight' / 'fc_norm.weight'")
    for name, value in (("norm", "pre"), ("head_hidden", ()), ("pos_rows", None), ("patch_norm_in", False)):
        inf.fact(name, value, "timm's VisionTransformer architecture")
    for name, key, option in (
        ("layer_scale", "blocks.0.ls1.gamma", "init_values"),
        ("qk_norm", "blocks.0.attn.q_norm.weight", "qk_norm"),
        ("norm_before_blocks", "norm_pre.weight", "pre_norm"),
        ("patch_norm_out", "patch_embed.norm.weight", "embed_norm_layer"),
    ):
        inf.fact(name, key in raw, f"presence of tensor {key!r} (timm {option})")
    if "norm_pre.weight" in raw:
        inf.notes.append("patch_embed.proj.bias: timm's pre_norm=True patch projection has none; "
                         "converted as zeros (the same function)")
    inf.convention("layer_norm_eps", 1e-6, "timm's LayerNorm; --set layer_norm_eps=1e-5 for its CLIP models")
    inf.convention("remainder", "drop", "timm's PatchEmbed (a valid conv)")
    _infer_tokens_and_head(inf, raw)
    _infer_mlp(inf, raw, cfg)
    _infer_heads(fmt, inf, cfg, dim, given)
    _infer_pooling(inf, cfg, raw)
    _infer_positions(fmt, inf, cfg, raw, ph, pw, given)
    return inf


def _infer_tokens_and_head(inf: Inference, raw: Raw) -> None:
    inf.fact("class_token", "cls_token" in raw, "presence of tensor 'cls_token'")
    inf.fact("distill_token", "dist_token" in raw,
             "presence of tensor 'dist_token' (VisionTransformerDistilled)")
    registers = int(raw["reg_token"].shape[1]) if "reg_token" in raw else 0
    inf.fact("registers", registers, "tensor 'reg_token'" if registers else "no tensor 'reg_token'")
    head = raw.get("head.weight")
    inf.fact("num_classes", 0 if head is None else int(head.shape[0]),
             "no tensor 'head.weight' (timm num_classes=0: the pooled vector)" if head is None
             else "tensor 'head.weight'")


def _infer_mlp(inf: Inference, raw: Raw, cfg: dict[str, Any]) -> None:
    """A packed gated MLP's fc1 is twice as wide as its fc2 reads; a plain MLP's the same width."""
    fc1 = int(inf.need(raw, "blocks.0.mlp.fc1.weight").shape[0])
    fc2 = int(inf.need(raw, "blocks.0.mlp.fc2.weight").shape[1])
    gated = fc1 == 2 * fc2
    where = f"'blocks.0.mlp.fc1.weight' ({fc1} rows) vs 'blocks.0.mlp.fc2.weight' ({fc2} columns)"
    inf.fact("mlp", "gated" if gated else "standard", where)
    inf.fact("mlp_dim", fc2, where)
    if "act_layer" in cfg:
        act = cfg["act_layer"]
        if act not in ACT_LAYERS:
            raise SpecError(f"config model_args.act_layer = {act!r}: expected one of {', '.join(ACT_LAYERS)}")
        inf.fact("activation", ACT_LAYERS[act], f"config model_args.act_layer = {act!r}")
    elif gated:
        inf.convention("activation", "silu",
                       "timm's SwiGLU models (act_layer silu); --set activation=.. otherwise")
    else:
        inf.convention("activation", "gelu",
                       "timm's nn.GELU; --set activation=quick_gelu for act_layer='quick_gelu'")


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


def _infer_pooling(inf: Inference, cfg: dict[str, Any], raw: Raw) -> None:
    if "attn_pool.latent" in raw:
        prefix = [k for k in ("cls_token", "dist_token", "reg_token") if k in raw]
        if prefix:
            raise WeightsError(f"{inf.fmt} checkpoint: tensor 'attn_pool.latent' with tensor {prefix[0]!r}: "
                               "timm's map pool reads the patch tokens only, the spec's every token")
        inf.fact("pooling", "map", "tensor 'attn_pool.latent' (global_pool='map')")
        inf.fact("pool_qkv_bias", "attn_pool.q.bias" in raw, "presence of tensor 'attn_pool.q.bias'")
    elif "cls_token" not in raw:
        inf.fact("pooling", "mean", "no 'cls_token' (timm then needs global_pool='avg')")
    elif "global_pool" in cfg:
        pool = cfg["global_pool"]
        if pool not in ("token", "avg"):
            raise SpecError(f"config global_pool = {pool!r}: with a class token the spec expresses 'token' "
                            "and 'avg'")
        inf.fact("pooling", POOLS[pool], f"config global_pool = {pool!r}")
    else:  # not in a state dict: timm's own default applies, with a note (--set pooling=mean for 'avg')
        inf.convention("pooling", "cls", "timm's default global_pool='token'; --set pooling=mean for 'avg'")


def _infer_positions(fmt: str, inf: Inference, cfg: dict[str, Any], raw: Raw, ph: int, pw: int,
                     given: dict[str, Any]) -> None:
    """timm's table covers every prefix token (class, distillation, registers) or, with
    `no_embed_class=True` (DeiT-III, DINOv2-reg), the patches only."""
    class_token = "cls_token" in raw
    registers = "reg_token" in raw
    prefix = int(class_token) + int("dist_token" in raw)
    prefix += int(raw["reg_token"].shape[1]) if registers else 0
    if "pos_embed" not in raw:
        inf.fact("pos_embed", "none", "no tensor 'pos_embed' (timm pos_embed='none')")
        inf.fact("pos_embed_class_row", False, "no tensor 'pos_embed'")
        inf.fact("pos_embed_register_rows", False, "no tensor 'pos_embed'")
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
        if prefix and rows == tokens + prefix:
            prefix_rows = True
        elif rows == tokens:
            prefix_rows = False  # timm no_embed_class=True (or no prefix tokens)
        else:
            raise WeightsError(f"{fmt} checkpoint: {where} does not fit image {size[0]}x{size[1]} with "
                               f"{ph}x{pw} patches ({tokens} patches, {prefix} prefix tokens)")
        if "img_size" in cfg:
            inf.fact("image_height", int(size[0]), "config img_size")
            inf.fact("image_width", int(size[1]), "config img_size")
        evidence = f"{where} vs {tokens} patches"
    else:
        side_with_rows = square_grid(rows - prefix) if prefix else None
        side = side_with_rows or square_grid(rows)
        if side is None:
            inf.asks["image_height"] = f"{where} is not a square grid; give image_height and image_width"
            inf.asks["image_width"] = inf.asks["image_height"]
            return
        prefix_rows = side_with_rows is not None
        evidence = where
        inf.fact("image_height", side * ph, f"{where}, read as a square {side}x{side} grid")
        inf.fact("image_width", side * pw, f"{where}, read as a square {side}x{side} grid")
        inf.notes.append(f"image {side * ph}x{side * pw} read from {where} as a square {side}x{side} grid; "
                         "--set image_height=.. image_width=.. if the grid is not square")
    inf.fact("pos_embed_class_row", prefix_rows and class_token, evidence)
    inf.fact("pos_embed_register_rows", prefix_rows and registers, evidence)


def check_exportable(fmt: str, s: ModelSpec) -> None:
    require(s.pos_embed in ("learned", "none"), TARGET, "pos_embed", s.pos_embed, "learned or none")
    require(s.pooling in ("cls", "mean", "map"), TARGET, "pooling", s.pooling,
            "cls (token), mean (avg) or map")
    require(s.pooling != "map" or not s.derived.prefix_tokens, TARGET, "pooling", s.pooling,
            "no class, distillation or register tokens with map (timm's map pool reads the patches only)")
    require_plain_blocks(TARGET, s)
    require(not s.patch_norm_in, TARGET, "patch_norm_in", s.patch_norm_in, "false (no LayerNorm before the "
            "patch projection)")
    positioned = s.pos_embed_class_row or not s.class_token
    require(not s.registers or s.pos_embed == "none" or s.pos_embed_register_rows == positioned, TARGET,
            "pos_embed_register_rows", s.pos_embed_register_rows,
            "the same as pos_embed_class_row (timm's table covers every prefix token or none)")


def model_kwargs(s: ModelSpec) -> dict[str, Any]:
    """The `timm.models.vision_transformer.VisionTransformer(**kwargs)` (`timm.models.deit.
    VisionTransformerDistilled` with a distillation token) that computes `s`, layers named as
    strings that timm resolves (`mlp_layer` and a non-default eps are spelled for the reader)."""
    prefix_rows = s.pos_embed_class_row or (s.registers > 0 and s.pos_embed_register_rows)
    kwargs: dict[str, Any] = {
        "img_size": (s.image_height, s.image_width), "patch_size": (s.patch_height, s.patch_width),
        "in_chans": s.channels, "num_classes": s.num_classes, "embed_dim": s.dim, "depth": s.depth,
        "num_heads": s.heads, "mlp_ratio": (2 if s.mlp == "gated" else 1) * s.mlp_dim / s.dim,
        "qkv_bias": s.qkv_bias, "class_token": s.class_token,
        "global_pool": {"cls": "token", "mean": "avg", "map": "map"}[s.pooling],
        "no_embed_class": s.derived.prefix_tokens > 0 and not prefix_rows,
        "pos_embed": "learn" if s.pos_embed == "learned" else "none",
        "fc_norm": s.final_norm == "pooled", "final_norm": s.final_norm != "none",
        "act_layer": TIMM_ACT[s.activation], "reg_tokens": s.registers, "pre_norm": s.norm_before_blocks,
        "qk_norm": s.qk_norm, "init_values": 1.0 if s.layer_scale else None,
    }
    if s.patch_norm_out:
        kwargs["embed_norm_layer"] = "layernorm"
    if s.mlp == "gated":
        kwargs["mlp_layer"] = "timm.layers.SwiGLUPacked"
    if s.layer_norm_eps != 1e-6:
        kwargs["norm_layer"] = f"functools.partial(timm.layers.LayerNorm, eps={s.layer_norm_eps!r})"
    if s.distill_token:
        del kwargs["class_token"], kwargs["reg_tokens"]
    return kwargs


def table(fmt: str, s: ModelSpec) -> Table:
    return timm_table(fmt, s)


def finish_export(fmt: str, s: ModelSpec, raw: Raw) -> Raw:
    """timm's pre_norm=True patch projection has no bias: a zero one is dropped, any other refused."""
    if s.norm_before_blocks:
        bias = raw.pop("patch_embed.proj.bias")
        if np.any(bias):
            raise SpecError(f"cannot export to {TARGET}: tensor 'patch_embed.bias' is not zero, and timm's "
                            "pre_norm=True patch projection has no bias")
    return raw


def write(fmt: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    write_output(out, encode_tensors(out, raw), force=force)
    kwargs = ", ".join(f"{k}={v!r}" for k, v in model_kwargs(s).items())
    cls = "timm.models.deit.VisionTransformerDistilled" if s.distill_token else \
        "timm.models.vision_transformer.VisionTransformer"
    return [f"load with {cls}({kwargs})"]
