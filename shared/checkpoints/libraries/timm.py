"""timm, as one plug-in: its `VisionTransformer` (`timm/models/vision_transformer.py`), its
`Eva` (`timm/models/eva.py`: EVA-02, the `vit_*_rope_*` ViTs, DINOv3 and Perception Encoder, with
2-D RoPE) and its Qwen3-ViT encoder (`timm/models/qwen3_vit.py`) state dicts read and written (with
an optional timm config.json), a live timm model read (`read_live`), and the models the peers time
built (`build_model`). Sections: reading VisionTransformer, Eva, Qwen3-ViT, writing, a live model.

## VisionTransformer

Names: `cls_token (1, 1, D)` (absent with class_token=False), `pos_embed (1, R, D)` (absent with
pos_embed='none'; R = N + 1 with a class row, R = N with no_embed_class or no class token, and
then added before the class token, as big_vision), `patch_embed.proj` (OIHW, any patch and image
size), `blocks.i.{norm1, attn.qkv (packed, head-major), attn.proj, norm2, mlp.fc1, mlp.fc2}`,
then `norm` (final_norm on tokens) or `fc_norm` (on the pooled vector), and `head`.

Not in a state dict, so asked for unless a timm config.json (`--config`) states it: the head
count (`num_heads`). Conventions applied without asking, each printed as a note: LayerNorm eps
1e-6, exact GELU and, with a class token, timm's default pooling `global_pool='token'` (the class
token; `--set pooling=mean` for 'avg'). The image size is read from the position
table when its rows form a square grid; otherwise it is asked for. A config key that states what the
tensors state too (`STATED_KEYS`: `model_args.depth`, `embed_dim`, ...) must agree with them, and
push_to_hub's `global_pool` (informational: timm builds `model_args.global_pool`) with model_args'.

## Eva

Spelling, normalised on import to VisionTransformer's so that one table serves both:
`EvaAttention` keeps `attn.q_bias` and `attn.v_bias` beside a bias-free `attn.qkv` (its key bias is
a zero buffer, never saved: a zero key bias, exact), or unfused `attn.{q,k,v}_proj` (qkv_fused=False);
LayerScale is `gamma_1` / `gamma_2` (VisionTransformer's `ls1.gamma` / `ls2.gamma`). Export writes
`Eva(attn_type='rope')`, timm's `AttentionRope`: the same function with one packed, fully biased
qkv, so the spec's key bias is kept whatever it is (a spec without the key's bias alone, DINOv3's,
as `attn_type='eva'`: EvaAttention's q_bias and v_bias); LayerScale goes back to `gamma_1` / `gamma_2`.

RoPE: Eva's default `rope_type='cat'` (RotaryEmbeddingCat, in_pixels=False) is the spec's
`rope_coords='index'`, `rope_theta` = `rope_temperature` (default 1e4), `rope_ref_grid` =
`ref_feat_shape` (default none) and `rope='axial_interleaved'`, or `'axial_half'` with
`rope_rotate_half=True` (shared/core/rotary.py); `rope_type='dinov3'` (timm's DINOv3 models) is
`rope_coords='centered'`. `rope_grid_indexing='xy'` (Perception Encoder) puts the columns' angles
first: `rope_axes='cols_first'`. No tensor records any of it, nor whether RoPE is on: a timm config.json whose
`model_args` state them says so (push_to_hub writes only the caller's overrides there: an Eva or
VisionTransformer `architecture`'s own settings, heads and norm eps are read from timm's registry,
`with_registry_args`), or
`--set rope=...`; timm's defaults fill the rest, printed as conventions. A state dict spelled as
Eva's with neither is asked for. Eva's map pool reads every token, as the spec's (PE-core's, over
its class token), at the blocks' heads and MLP width.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any, Literal

import numpy as np

from shared.checkpoints.common import (
    Inference,
    Raw,
    naflex_table,
    require,
    require_plain_blocks,
    resampled_table,
    spelled,
    square_grid,
    width_per_head,
)
from shared.checkpoints.decoding import SIZE, Key, decode_config, pair, tensor_shape
from shared.checkpoints.live import Reading, is_identity, module_of, size_of
from shared.checkpoints.tensor_files import (
    TORCH_SUFFIXES,
    check_written_type,
    encode_tensors,
    read_config,
    read_tensors,
)
from shared.core.files import write_output
from shared.core.mapping import Table
from shared.core.record import shown
from shared.core.spec import MAX_TOKENS, NORM_EPS_FIELDS, ModelSpec
from shared.core.timm_names import timm_table
from shared.core.weights import patch_linear_to_oihw
from shared.errors import SpecError, WeightsError

# The plug-in's place in the format list, its formats (name -> what `convert --help` says), and
# whether its checkpoint is a folder: literals, read without importing the module.
ORDER = 20
FORMATS = {
    "timm": ("timm VisionTransformer state dict (.pth/.pt/.bin/.safetensors; optional timm config.json)"),
}
WRITES_FOLDER = False
# The file types `convert --to timm` writes: what timm's `load_checkpoint` reads as a state dict
# (safetensors by its suffix, anything else through torch.load), never `.npz` / `.npy`, which it
# hands to `load_pretrained` as a big_vision tree.
OUT_SUFFIXES = (".safetensors", *TORCH_SUFFIXES)

# Fragments of this library's layer names -> what it calls the layer, and the spec setting its place
# alone cannot say: how `verify --model` names a user's layer that fits no tensor (checkpoints.layer_terms).
LAYER_TERMS = (
    ("norm_pre", "timm's pre_norm=True", ""),
    ("fc_norm", "timm's fc_norm, on the pooled vector", "final_norm=pooled"),
    ("patch_embed.norm", "timm's embed_norm_layer", ""), ("ls1", "timm's LayerScale", ""),
    ("ls2", "timm's LayerScale", ""), ("q_norm", "timm's qk_norm=True", ""),
    ("k_norm", "timm's qk_norm=True", ""), ("reg_token", "timm's reg_tokens", ""),
    ("dist_token", "DeiT's distillation token", ""), ("head_dist", "DeiT's distillation head", ""),
    ("attn_pool", "timm's global_pool='map'", ""),
)

# ==== reading ========================================================================================
POOLS = {"token": "cls", "avg": "mean", "map": "map"}
ACT_LAYERS = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "quick_gelu": "quick_gelu", "silu": "silu",
              "swish": "silu"}  # timm's get_act_layer names -> the spec's
GLOBAL_POOLS = ("token", "avg", "map", "avgmax", "max", "merge", "")  # timm's (Qwen3-ViT's 'merge')
# The keys of a timm config.json (push_to_hub's; `pretrained_cfg` as timm writes it) that state what
# a state dict does not. Eva's own: EVA_KEYS below; those the tensors state too: STATED_KEYS.
TIMM_KEYS = (
    Key("model_args.num_heads", int, ("heads",)),
    Key("model_args.act_layer", Literal[tuple(ACT_LAYERS)], ("activation",)),
    Key("global_pool", Literal[GLOBAL_POOLS], ("pooling",)),  # push_to_hub's record of the model's
    Key("model_args.global_pool", Literal[GLOBAL_POOLS], ("pooling",)),  # what timm builds
    Key("model_args.pool_include_prefix", bool, ("pooling",)),  # avg and map over the prefix tokens too
    Key("model_args.img_size", int | tuple[int, int], ("image_height", "image_width")),
    Key("pretrained_cfg.input_size", tuple[int, int, int], ("image_height", "image_width")),  # (C, H, W)
    Key("architecture", str),
    # NaFlexVit's resize of its table to each image's grid (naflex_resize)
    Key("model_args.pos_embed_interp_mode", str, ("pos_resample",)),
    *(Key(f"model_args.{name}", bool, ("pos_resample",)) for name in (
        "pos_embed_antialias", "pos_embed_align_corners", "pos_embed_ar_preserving",
        "pos_embed_use_grid_sample")),
)
# The keys of a timm config that state what the tensors state too (VisionTransformer's and Eva's
# arguments, push_to_hub's num_classes): each held to its row, then to the tensors' fact.
STATED_KEYS = (
    Key("model_args.embed_dim", int, ("dim",)),
    Key("model_args.depth", int, ("depth",)),
    Key("model_args.in_chans", int, ("channels",)),
    Key("model_args.patch_size", SIZE, ("patch_height", "patch_width")),
    Key("num_classes", int, ("num_classes",), positive=False),
    Key("model_args.num_classes", int, ("num_classes",), positive=False),
    Key("model_args.qkv_bias", bool, ("qkv_bias",)),
    Key("model_args.class_token", bool, ("class_token",)),
    Key("model_args.reg_tokens", int, ("registers",), positive=False),  # VisionTransformer's
    Key("model_args.num_reg_tokens", int, ("registers",), positive=False),  # Eva's
    Key("model_args.qk_norm", bool, ("qk_norm",)),
    Key("model_args.mlp_ratio", float, ("mlp_dim",)),  # a plain Mlp's width is int(embed_dim * mlp_ratio)
)


def _config_values(config: dict[str, Any] | None) -> dict[str, Any]:
    """The few fields a timm config.json (push_to_hub / pretrained_cfg) states that a state
    dict does not, decoded: num_heads, global_pool, img_size, act_layer, the architecture's name and
    NaFlexVit's resize options."""
    values = decode_config(config, TIMM_KEYS)
    out = {short: values[key] for short, key in (("num_heads", "model_args.num_heads"),
                                                 ("act_layer", "model_args.act_layer")) if key in values}
    pool = _global_pool(values)
    if pool is not None:
        out["global_pool"], out["global_pool_key"] = pool
    out |= {key.rpartition(".")[2]: values[key] for key in values if key.startswith("model_args.pos_embed_")
            or key in ("architecture", "model_args.pool_include_prefix")}
    if "model_args.img_size" in values:
        out["img_size"] = pair(values["model_args.img_size"])
    elif "pretrained_cfg.input_size" in values:  # (channels, height, width)
        out["img_size"] = tuple(values["pretrained_cfg.input_size"][1:])
    return out


def _global_pool(values: dict[str, Any]) -> tuple[str, str] | None:
    """(pool, the key that states it): timm builds `model_args.global_pool` (its loader leaves the
    top-level `global_pool` out: push_to_hub writes it for information, from the model it saved, so the
    two agree); one contradicting the other is refused naming both."""
    built, recorded = values.get("model_args.global_pool"), values.get("global_pool")
    if built is not None and recorded is not None and built != recorded:
        raise SpecError(f"config model_args.global_pool = {shown(built)}: contradicts config global_pool = "
                        f"{shown(recorded)} (timm builds model_args' pool; push_to_hub records the pool of "
                        "the model it saved, so the two agree)")
    if built is not None:
        return built, "model_args.global_pool"
    return None if recorded is None else (recorded, "global_pool")


def _hold_stated(inf: Inference, config: dict[str, Any] | None) -> None:
    """A config key that states what the tensors state (`STATED_KEYS`) must agree with them: one that
    does not is refused naming the key, its value and the tensors' fact."""
    values = decode_config(config, STATED_KEYS)
    for key in STATED_KEYS:
        if key.name not in values:
            continue
        value = values[key.name]
        facts = tuple(inf.facts[name][0] for name in key.sets)
        stated = pair(value) if key.sets == ("patch_height", "patch_width") else (value,)
        if key.name.endswith(".mlp_ratio"):  # a gated MLP's width depends on its mlp_layer too: not checked
            width = inf.facts["dim"][0] * value  # int() of an infinite width would raise: it is named
            stated = (int(width) if math.isfinite(width) else width,) if inf.facts["mlp"][0] == "standard" \
                else facts
        if stated != facts:
            said = ", ".join(f"{name} = {fact!r}" for name, fact in zip(key.sets, facts, strict=True))
            made = f" (timm builds int(embed_dim * mlp_ratio) = {stated[0]})" if "mlp_dim" in key.sets else ""
            raise SpecError(f"config {key.name} = {shown(value)}: the tensors say {said} "
                            f"({inf.facts[key.sets[0]][1]}){made}")


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    inf = Inference(fmt)
    conv = tensor_shape(inf, raw, "patch_embed.proj.weight", "out, in, height, width")
    dim, channels, ph, pw = conv
    where = f"tensor 'patch_embed.proj.weight' {conv}"
    for name, value in (("dim", dim), ("channels", channels), ("patch_height", ph), ("patch_width", pw)):
        inf.fact(name, value, where)
    depth = sum(1 for k in raw if k.startswith("blocks.") and k.endswith(".norm1.weight"))
    inf.fact("depth", depth, f"{depth} 'blocks.*' blocks")
    config = with_registry_args(config, dim, depth)  # an architecture's own heads (an Eva's rotary settings)
    cfg = _config_values(config)
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
    inf.fact("patch_bias", "patch_embed.proj.bias" in raw, "presence of tensor 'patch_embed.proj.bias' "
             "(timm pre_norm=True builds none)")
    inf.convention("remainder", "drop", "timm's PatchEmbed (a valid conv)")
    _infer_tokens_and_head(inf, raw)
    _infer_mlp(inf, raw, cfg)
    _infer_norms_and_biases(inf, raw)
    _hold_stated(inf, config)
    arch = decode_config(config, QWEN3_KEYS[:1]).get("architecture")
    eps = registry_model(arch)[1] if isinstance(arch, str) else None
    if eps is not None:  # norm_layer=partial(LayerNorm or RmsNorm, eps=..) in the registry's model_args
        inf.convention("layer_norm_eps", eps, f"timm's registry builds {arch!r} with norm eps {eps:g}")
    elif "norm_pre.weight" in raw:
        inf.notes.append("timm's CLIP models (pre_norm) use LayerNorm eps 1e-5: --set layer_norm_eps=1e-5")
    _infer_heads(fmt, inf, cfg, dim, given)
    _infer_pooling(inf, cfg, raw, eva=is_eva(raw, eva_args(config), given))
    _infer_positions(fmt, inf, cfg, raw, ph, pw, given)
    if is_qwen3(config):  # timm's Qwen3-ViT encoder: its fixed rotary settings, its defaults
        infer_qwen3(inf, config, cfg.get("global_pool"))
    else:
        infer_eva(inf, raw, config, given)  # timm's Eva: its rotary settings, its defaults
    return inf


def _infer_tokens_and_head(inf: Inference, raw: Raw) -> None:
    inf.fact("class_token", "cls_token" in raw, "presence of tensor 'cls_token'")
    inf.fact("distill_token", "dist_token" in raw,
             "presence of tensor 'dist_token' (VisionTransformerDistilled)")
    registers = _registers(inf, raw)
    inf.fact("registers", registers, "tensor 'reg_token'" if registers else "no tensor 'reg_token'")
    if "head.weight" in raw:
        classes = tensor_shape(inf, raw, "head.weight", "classes, width")[0]
        inf.fact("num_classes", classes, "tensor 'head.weight'")
    else:
        inf.fact("num_classes", 0, "no tensor 'head.weight' (timm num_classes=0: the pooled vector)")


def _registers(inf: Inference, raw: Raw) -> int:
    return tensor_shape(inf, raw, "reg_token", "batch, tokens, width")[1] if "reg_token" in raw else 0


def _infer_mlp(inf: Inference, raw: Raw, cfg: dict[str, Any]) -> None:
    """A packed gated MLP's fc1 is twice as wide as its fc2 reads; a plain MLP's the same width."""
    fc1 = tensor_shape(inf, raw, "blocks.0.mlp.fc1.weight", "out, in")[0]
    fc2 = tensor_shape(inf, raw, "blocks.0.mlp.fc2.weight", "out, in")[1]
    gated = fc1 == 2 * fc2
    where = f"'blocks.0.mlp.fc1.weight' ({fc1} rows) vs 'blocks.0.mlp.fc2.weight' ({fc2} columns)"
    inf.fact("mlp", "gated" if gated else "standard", where)
    inf.fact("mlp_dim", fc2, where)
    if "act_layer" in cfg:
        act = cfg["act_layer"]
        inf.fact("activation", ACT_LAYERS[act], f"config model_args.act_layer = {act!r}")
    elif gated:
        inf.convention("activation", "silu",
                       "timm's SwiGLU models (act_layer silu); --set activation=.. otherwise")
    else:
        inf.convention("activation", "gelu",
                       "timm's nn.GELU; --set activation=quick_gelu for act_layer='quick_gelu'")


def _infer_norms_and_biases(inf: Inference, raw: Raw) -> None:
    """timm's RmsNorm has a weight and no bias (its LayerNorm both): the norm kind is read from block
    0's first norm. Its epsilon is in no tensor: timm's default for both, 1e-6, is a convention (AIMv2
    builds 1e-5). `proj_bias=False` (AIMv2) leaves the attention output and every MLP linear without
    a bias: each absent one is the spec's `bias_free`."""
    rms = "blocks.0.norm1.bias" not in raw and "blocks.0.norm1.weight" in raw
    inf.fact("norm_type", "rms_norm" if rms else "layer_norm",
             "presence of tensor 'blocks.0.norm1.bias' (timm's RmsNorm has none)")
    aimv2 = ("timm's RmsNorm default; AIMv2's is 1e-5: --set layer_norm_eps=1e-5 (or a config naming its "
             "architecture)")
    inf.convention("layer_norm_eps", 1e-6, aimv2 if rms else "timm's LayerNorm")
    gated = inf.facts["mlp"][0] == "gated"
    absent = {"attn.out": "blocks.0.attn.proj.bias", "mlp.fc1": "blocks.0.mlp.fc1.bias",
              "mlp.fc2": "blocks.0.mlp.fc2.bias"}
    free = [name for name, key in absent.items() if key not in raw]
    if gated and "mlp.fc1" in free:  # SwiGLU's packed fc1 is the gate and the linear half
        free.insert(free.index("mlp.fc1"), "mlp.gate")
    inf.fact("bias_free", tuple(free), "absence of tensors 'blocks.0.attn.proj.bias', "
             "'blocks.0.mlp.fc1.bias', 'blocks.0.mlp.fc2.bias' (timm proj_bias=False)")


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


def _infer_pooling(inf: Inference, cfg: dict[str, Any], raw: Raw, eva: bool = False) -> None:
    """VisionTransformer's avg and map pools read the patch tokens, unless pool_include_prefix=True
    (then every token: the spec's mean_all, and its map); Eva's map pool reads every token, as the
    spec's does (Perception Encoder's core models pool over their class token)."""
    pool, key = cfg.get("global_pool"), cfg.get("global_pool_key")
    prefix = [k for k in ("cls_token", "dist_token", "reg_token") if k in raw]
    include = bool(cfg.get("pool_include_prefix")) and bool(prefix)  # without prefix tokens: the same pool
    mean = ("mean_all", "config model_args.pool_include_prefix = True: the mean of every token") if include \
        else ("mean", None)
    if pool is not None and (pool == "map") != ("attn_pool.latent" in raw):
        has = "no tensor 'attn_pool.latent'" if pool == "map" else \
            "tensor 'attn_pool.latent' (global_pool='map')"
        raise SpecError(f"config {key} = {shown(pool)}: the checkpoint has {has}")
    if pool == "token" and "cls_token" not in raw:
        raise SpecError(f"config {key} = 'token': the checkpoint has no tensor 'cls_token' for it to read")
    if "attn_pool.latent" in raw:
        if prefix and not eva and not include:
            raise WeightsError(f"{inf.fmt} checkpoint: tensor 'attn_pool.latent' with tensor {prefix[0]!r}: "
                               "timm's map pool reads the patch tokens only (pool_include_prefix=False), the "
                               "spec's every token")
        inf.fact("pooling", "map", "tensor 'attn_pool.latent' (global_pool='map')")
        inf.fact("pool_qkv_bias", "attn_pool.q.bias" in raw, "presence of tensor 'attn_pool.q.bias'")
    elif "cls_token" not in raw:
        if pool not in (None, "avg") and not str(cfg.get("architecture", "")).startswith("qwen3_vit"):
            raise SpecError(f"config {key} = {shown(pool)}: with no class token the spec expresses 'avg'")
        inf.fact("pooling", mean[0], mean[1] or "no 'cls_token' (timm then needs global_pool='avg')")
    elif pool is not None:
        if pool not in ("token", "avg"):
            raise SpecError(f"config {key} = {shown(pool)}: with a class token the spec expresses "
                            "'token' and 'avg'")
        inf.fact("pooling", mean[0] if pool == "avg" else POOLS[pool],
                 mean[1] if pool == "avg" and include else f"config {key} = {pool!r}")
    else:  # not in a state dict: timm's own default applies, with a note (--set pooling=mean for 'avg')
        inf.convention("pooling", "cls", "timm's default global_pool='token'; --set pooling=mean for 'avg'")


def _infer_positions(fmt: str, inf: Inference, cfg: dict[str, Any], raw: Raw, ph: int, pw: int,
                     given: dict[str, Any]) -> None:
    """timm's table covers every prefix token (class, distillation, registers) or, with
    `no_embed_class=True` (DeiT-III, DINOv2-reg), the patches only."""
    class_token = "cls_token" in raw
    registers = "reg_token" in raw
    prefix = int(class_token) + int("dist_token" in raw) + _registers(inf, raw)
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
    rows = tensor_shape(inf, raw, "pos_embed", "batch, rows, width")[1]
    where = f"tensor 'pos_embed' ({rows} rows)"
    wanted = (given["image_height"], given["image_width"]) if {"image_height", "image_width"} <= set(given) \
        else None
    size = cfg.get("img_size") or wanted
    grid: tuple[int, int] | None = None  # the table's patch grid
    if size is not None:
        tokens = (size[0] // ph) * (size[1] // pw)
        if rows in (tokens, tokens + prefix):
            prefix_rows = bool(prefix) and rows == tokens + prefix  # else timm no_embed_class=True
            grid, evidence = (size[0] // ph, size[1] // pw), f"{where} vs {tokens} patches"
            if "img_size" in cfg and wanted is None:
                inf.fact("image_height", size[0], "config img_size")
                inf.fact("image_width", size[1], "config img_size")
        elif "img_size" in cfg:
            raise WeightsError(f"{fmt} checkpoint: {where} does not fit image {size[0]}x{size[1]} with "
                               f"{ph}x{pw} patches ({tokens} patches, {prefix} prefix tokens)")
    if grid is None:  # another image than the table's, or none given: the table read as a square grid
        side_with_rows = square_grid(rows - prefix) if prefix else None
        side = side_with_rows or square_grid(rows)
        if side is None and wanted is not None:
            raise WeightsError(f"{fmt} checkpoint: {where} fits neither image {wanted[0]}x{wanted[1]} with "
                               f"{ph}x{pw} patches nor a square grid to resample from; give a timm config "
                               "(--config) whose img_size states its grid")
        if side is None:
            inf.asks["image_height"] = f"{where} is not a square grid; give image_height and image_width"
            inf.asks["image_width"] = inf.asks["image_height"]
            return
        prefix_rows, grid, evidence = side_with_rows is not None, (side, side), f"{where}, a square grid"
        if wanted is None:
            inf.fact("image_height", side * ph, f"{where}, read as a square {side}x{side} grid")
            inf.fact("image_width", side * pw, f"{where}, read as a square {side}x{side} grid")
            inf.notes.append(f"image {side * ph}x{side * pw} read from {where} as a square {side}x{side} "
                             "grid; --set image_height=.. image_width=.. if the grid is not square")
    inf.fact("pos_embed_class_row", prefix_rows and class_token, evidence)
    inf.fact("pos_embed_register_rows", prefix_rows and registers, evidence)
    if given.get("batching") == "naflex":  # NaFlexVit's batch: the table resized to each image's grid
        naflex_table(inf, given, grid, (ph, pw), evidence, *naflex_resize(cfg))
        return
    if wanted is not None and grid != (int(wanted[0]) // ph, int(wanted[1]) // pw):
        resampled_table(inf, grid, evidence, "timm_bicubic_antialias",
                        "timm's resample_abs_pos_embed default antialias=True, as dynamic_img_size and "
                        "checkpoint_filter_fn call it; --set pos_resample=timm_bicubic for antialias=False")


# NaFlexEmbeds' resize options (model_args) -> what the spec computes; an option the spec has no method
# for is refused by name. Its naflexvit_*_siglip registry entries set pos_embed_interp_mode='bilinear'.
NAFLEX_MODES = {"bilinear": "bilinear_antialias", "bicubic": "timm_bicubic_antialias"}
NAFLEX_FIXED = {"pos_embed_antialias": True, "pos_embed_align_corners": False,
                "pos_embed_ar_preserving": False, "pos_embed_use_grid_sample": False}


def naflex_resize(cfg: dict[str, Any]) -> tuple[str, str]:
    """(pos_resample, why) for a NaFlexVit's batch, from its model_args (NaFlexVit's defaults unless
    stated; a naflexvit_*_siglip architecture's registry mode)."""
    arch = str(cfg.get("architecture", ""))
    mode = cfg.get("pos_embed_interp_mode", "bilinear" if arch.endswith("_siglip") else "bicubic")
    if mode not in NAFLEX_MODES:
        raise SpecError(f"config model_args.pos_embed_interp_mode = {mode!r}: expected one of "
                        f"{', '.join(NAFLEX_MODES)} (NaFlexEmbeds' antialiased resizes the spec computes)")
    for key, wanted in NAFLEX_FIXED.items():
        if cfg.get(key, wanted) != wanted:
            raise SpecError(f"config model_args.{key} = {cfg[key]!r}: expected {wanted!r} (the NaFlex "
                            "resize the spec computes)")
    return NAFLEX_MODES[mode], f"NaFlexEmbeds: F.interpolate({mode}, antialias=True) to each image's grid"


# ==== Eva ============================================================================================
EVA_TARGET = "timm Eva"
ROPE_ARGS = ("use_rot_pos_emb", "rope_type", "rope_rotate_half", "rope_temperature", "ref_feat_shape")
EVA_KEYS = (  # the Eva arguments a timm config's model_args may state, as Eva(**model_args) takes them
    Key("model_args.use_rot_pos_emb", bool, ("rope",)),
    Key("model_args.rope_type", str, ("rope",)),
    Key("model_args.rope_rotate_half", bool, ("rope",)),
    Key("model_args.rope_temperature", float, ("rope_theta",)),
    Key("model_args.ref_feat_shape", int | tuple[int, int] | None, ("rope_ref_grid",), at_most=MAX_TOKENS),
    Key("model_args.rope_grid_offset", float, ("rope_coords",), positive=False),
    Key("model_args.rope_grid_indexing", str, ("rope_axes",)),
    Key("model_args.use_post_norm", bool, ("norm",)),
    Key("model_args.scale_attn_inner", bool),
    Key("model_args.scale_mlp", bool),
    Key("model_args.num_kv_heads", int | None, ("heads",)),
    Key("model_args.attn_only_layer_scale", bool, ("layer_scale",)),
    Key("model_args.attn_pool_num_heads", int | None, ("heads",)),
)
# rope_type -> the spec's rope_coords: RotaryEmbeddingCat's index grid (in_pixels=False), or
# RotaryEmbeddingDinoV3's patch centres in [-1, 1] with 2 pi in the angles (timm's DINOv3 models)
ROPE_TYPES = {"cat": "index", "dinov3": "centered"}
REFUSED_ARGS = (  # Eva model_args -> (the values the spec can say, why another value is refused)
    ("rope_type", tuple(ROPE_TYPES), "'mixed' learns its frequencies, 'mrope' builds a 3-D grid"),
    ("rope_grid_offset", (0,), "the spec's grid starts at index 0 (or DINOv3's centre 0.5); Perception "
                               "Encoder's 1 moves every patch against the unrotated class token"),
    ("rope_grid_indexing", ("ij", "xy"), "'ij' and 'xy' are the two orders of the axes"),
    ("use_post_norm", (False,), "EvaBlockPostNorm normalises each branch's output (x + LN(f(x))), which "
                                "no spec norm placement computes"),
    ("scale_attn_inner", (False,), "a LayerNorm inside attention"),
    ("scale_mlp", (False,), "a LayerNorm inside the MLP"),
    ("num_kv_heads", (None,), "grouped-query attention"),
    ("attn_only_layer_scale", (False,), "LayerScale on the attention branch only"),
)


class EvaStateDict(dict[str, np.ndarray]):
    """A state dict normalised from Eva's spelling: `infer` then knows it is an Eva's (whose
    rotary settings no tensor records) although its names are now VisionTransformer's."""

    eva_names: tuple[str, ...] = ()  # the Eva-only names seen, for messages


def normalise_eva(raw: Raw, source: str) -> Raw:
    """Eva's spellings -> VisionTransformer's (the docstring's list); any other state dict as is."""
    eva = [k for k in raw if k.endswith((".attn.q_bias", ".gamma_1", ".attn.q_proj.weight"))]
    if not eva:
        return raw
    out = EvaStateDict(raw)
    out.eva_names = tuple(eva)
    for key in [k for k in raw if k.endswith(".attn.q_proj.weight")]:
        prefix = key.removesuffix("q_proj.weight")
        parts = [out.pop(f"{prefix}{p}_proj.weight", None) for p in "qkv"]
        if any(p is None or p.shape != parts[0].shape for p in parts):
            raise WeightsError(f"timm checkpoint {source}: tensor '{prefix}k_proj.weight' is missing or not "
                               f"the shape of '{key}': timm's num_kv_heads (grouped-query attention), "
                               "which the spec cannot express")
        out[f"{prefix}qkv.weight"] = np.concatenate(parts)
        biases = [out.pop(f"{prefix}{p}_proj.bias", None) for p in "qkv"]
        if biases[0] is not None:  # EvaAttention's k_proj has no bias: a zero one
            out[f"{prefix}qkv.bias"] = np.concatenate([b if b is not None else np.zeros_like(biases[0])
                                                       for b in biases])
    for key in [k for k in raw if k.endswith(".attn.q_bias")]:
        prefix = key.removesuffix("q_bias")
        if f"{prefix}v_bias" not in out:
            raise WeightsError(f"timm checkpoint {source}: tensor {key!r} has no '{prefix}v_bias' beside it")
        q, v = out.pop(key), out.pop(f"{prefix}v_bias")
        out[f"{prefix}qkv.bias"] = np.concatenate([q, np.zeros_like(q), v])  # the zero key buffer
    for key in [k for k in raw if k.endswith(".gamma_1")]:
        block = key.removesuffix("gamma_1")
        if f"{block}gamma_2" not in out:
            raise WeightsError(f"timm checkpoint {source}: tensor {key!r} has no '{block}gamma_2' beside it: "
                               "timm's attn_only_layer_scale=True, which the spec cannot express")
        out[f"{block}ls1.gamma"], out[f"{block}ls2.gamma"] = out.pop(key), out.pop(f"{block}gamma_2")
    return out


def with_registry_args(config: dict[str, Any] | None, dim: int, depth: int) -> dict[str, Any] | None:
    """push_to_hub's config.json keeps only the caller's overrides in `model_args` beside the
    architecture's registry name: the heads it leaves out (and an Eva architecture's rotary settings)
    are the registry's own, read from the model built on the meta device (no weights, nothing
    downloaded) as a live one is; the config's own model_args win. Only an architecture that builds
    the tensors' width and depth (with those overrides) lends them: another's heads are not these."""
    arch = decode_config(config, QWEN3_KEYS[:1]).get("architecture")
    stated = (config or {}).get("model_args", {})
    args = dict(registry_model(arch)[0]) if isinstance(arch, str) else {}
    if not args or not isinstance(stated, dict):
        return config
    built = {key: stated.get(key, args.pop(key)) for key in ("embed_dim", "depth")}
    if (built["embed_dim"], built["depth"]) != (dim, depth):
        raise SpecError(f"config architecture = {arch!r} builds embed_dim {built['embed_dim']!r} and depth "
                        f"{built['depth']!r}; the tensors hold {dim} and {depth}: its heads are not this "
                        "checkpoint's (state its model_args embed_dim, depth and num_heads, or name the "
                        "architecture it was built as)")
    return {**(config or {}), "model_args": {**args, **stated}}


@functools.lru_cache(maxsize=8)
def registry_model(arch: str) -> tuple[dict[str, Any], float | None]:
    """An Eva or VisionTransformer architecture's width, depth and heads (an Eva's with its rotary
    model_args) and its blocks' norm epsilon (a callable in its model_args, which no config.json
    holds: AIMv2's RmsNorm 1e-5, CLIP's 1e-5), read from timm's registry; ({}, None) for another."""
    try:
        import timm
        import torch
        from timm.models import is_model_in_modules

        eva = is_model_in_modules(arch, ["eva"])
        if not eva and not is_model_in_modules(arch, ["vision_transformer"]):
            return {}, None
        with torch.device("meta"):
            model = timm.create_model(arch, pretrained=False)
    except Exception:  # a name timm cannot build states nothing: the tensors are read as ever
        return {}, None
    rope = getattr(model, "rope", None)
    attn = getattr(model.blocks[0], "attn", None) if len(model.blocks) else None
    args = _eva_rope_args(model, rope) if rope is not None else {"use_rot_pos_emb": False} if eva else \
        {"num_heads": int(attn.num_heads)} if hasattr(attn, "num_heads") else {}
    args = {"embed_dim": int(model.embed_dim), "depth": len(model.blocks), **args} if args else {}
    eps = getattr(getattr(model.blocks[0], "norm1", None), "eps", None) if len(model.blocks) else None
    return args, None if eps is None else float(eps)


def eva_args(config: dict[str, Any] | None) -> dict[str, Any]:
    """The Eva arguments the config's model_args states, decoded (`EVA_KEYS`), by their names there."""
    decoded = decode_config(config, EVA_KEYS)
    return {name.removeprefix("model_args."): value for name, value in decoded.items()}


def is_eva(raw: Raw, args: dict[str, Any], given: dict[str, Any]) -> bool:
    """Eva's, not VisionTransformer's: its spelling, a config that states an Eva argument, or a
    rotary embedding asked for (timm's VisionTransformer has none)."""
    return isinstance(raw, EvaStateDict) or any(k in args for k in ROPE_ARGS) or \
        given.get("rope", "none") != "none"


def infer_eva(inf: Inference, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> None:
    """Eva's facts and conventions over VisionTransformer's (`infer` has read the VisionTransformer facts)."""
    args = eva_args(config)
    if not is_eva(raw, args, given):
        return
    prefix = inf.facts["class_token"][0] or inf.facts["registers"][0]
    if args.get("rope_grid_offset", 0) != 0 and not prefix:  # every rotated pair moves alike: it cancels
        inf.notes.append(f"config model_args.rope_grid_offset = {args.pop('rope_grid_offset')}: with no "
                         "class or register token every query and key moves by it alike, the same function")
    for key, allowed, why in REFUSED_ARGS:
        if key in args and args[key] not in allowed:
            raise SpecError(f"config model_args.{key} = {shown(args[key])}: expected "
                            f"{' or '.join(map(repr, allowed))} ({why}); the spec cannot express it")
    _infer_rope(inf, args, given)
    _infer_eva_pool(inf, raw, args, given)
    if "activation" in inf.conventions:  # no act_layer stated: Eva takes none (Mlp: nn.GELU, GluMlp: nn.SiLU)
        gated = inf.facts["mlp"][0] == "gated"
        inf.conventions.pop("activation", None)
        layer = "GluMlp with nn.SiLU" if gated else "Mlp with nn.GELU"
        inf.fact("activation", "silu" if gated else "gelu", f"timm's Eva ({layer}; no act_layer argument)")
    if "pooling" in inf.conventions:  # a class token, no global_pool stated
        pooled = "fc_norm.weight" in raw
        inf.convention("pooling", "mean" if pooled else "cls",
                       "timm's Eva builds fc_norm exactly when global_pool='avg' (its default): "
                       f"{'fc_norm' if pooled else 'norm, no fc_norm'} here; --set pooling=.. otherwise")


def _infer_rope(inf: Inference, args: dict[str, Any], given: dict[str, Any]) -> None:
    where = "config model_args"
    if "use_rot_pos_emb" in args:
        on, half = args["use_rot_pos_emb"], args.get("rope_rotate_half", False)
        inf.fact("rope", ("axial_half" if half else "axial_interleaved") if on else "none",
                 f"{where}.use_rot_pos_emb = {on}, rope_rotate_half = {half}")
        if not on:
            return
    elif given.get("rope") == "none":
        return
    elif "rope" not in given:
        inf.asks["rope"] = ("timm's Eva state dicts do not record rotary embeddings: axial_interleaved "
                            "(timm's default layout), axial_half (rope_rotate_half=True) or none "
                            "(use_rot_pos_emb=False)")
    kind = args.get("rope_type", "cat")
    embedding = "RotaryEmbeddingDinoV3" if kind == "dinov3" else "RotaryEmbeddingCat"
    inf.fact("rope_coords", ROPE_TYPES[kind], f"timm's {embedding} (rope_type={kind!r})")
    inf.fact("rope_bands", "shared", f"timm's {embedding} (the same bands on both axes)")
    if "rope_grid_indexing" in args:  # 'xy' (Perception Encoder): meshgrid puts the columns first
        indexing = args["rope_grid_indexing"]
        inf.fact("rope_axes", "cols_first" if indexing == "xy" else "rows_first",
                 f"{where}.rope_grid_indexing = {indexing!r}")
    else:
        inf.convention("rope_axes", "rows_first", "timm's default rope_grid_indexing='ij'")
    if "rope_temperature" in args:
        inf.fact("rope_theta", float(args["rope_temperature"]), f"{where}.rope_temperature")
    else:
        inf.convention("rope_theta", 10_000.0, "timm's default rope_temperature")
    ref = args.get("ref_feat_shape")
    if kind == "dinov3":  # Eva hands ref_feat_shape to RotaryEmbeddingCat only
        inf.fact("rope_ref_grid", (), "timm's RotaryEmbeddingDinoV3 (no ref_feat_shape)")
    elif "ref_feat_shape" in args:  # timm's to_2tuple: one side is both
        inf.fact("rope_ref_grid", () if ref is None else pair(ref), f"{where}.ref_feat_shape = {ref!r}")
    else:
        inf.convention("rope_ref_grid", (), "timm's default ref_feat_shape=None (the grid's own indices)")


def _infer_eva_pool(inf: Inference, raw: Raw, args: dict[str, Any], given: dict[str, Any]) -> None:
    """Eva's map pool (AttentionPoolLatent over every token, GELU Mlp, Eva's norm_layer) is the spec's
    when it has the blocks' heads and MLP width; its own (Perception Encoder's core models: 8 heads)
    is refused naming the key or tensor."""
    if "attn_pool.latent" not in raw:
        return
    heads = inf.facts.get("heads", (given.get("heads"),))[0]
    pool_heads = args.get("attn_pool_num_heads")
    if pool_heads is not None and pool_heads != heads:
        raise SpecError(f"config model_args.attn_pool_num_heads = {shown(pool_heads)}: expected null or "
                        f"num_heads {heads} (the spec's map pool attends with the blocks' heads); the spec "
                        "cannot express it")
    if "attn_pool_num_heads" not in args:
        inf.notes.append("timm's Eva map pool: attn_pool_num_heads is in no tensor, read as num_heads "
                         "(Perception Encoder's core models use 8: give their config)")
    width = tensor_shape(inf, raw, "attn_pool.mlp.fc1.weight", "out, in")[0]
    if inf.facts["mlp"][0] == "gated" or width != inf.facts["mlp_dim"][0]:
        raise WeightsError(f"{inf.fmt} checkpoint: tensor 'attn_pool.mlp.fc1.weight' ({width} rows): the "
                           f"spec's map pool MLP is the blocks' ({inf.facts['mlp'][0]}, "
                           f"{inf.facts['mlp_dim'][0]} wide), timm Eva's a GELU Mlp of attn_pool_mlp_ratio")


# ---- Qwen3-ViT -----------------------------------------------------------------------------------
# timm's `qwen3_vit.py`: Qwen3VitEncoder's blocks are EvaBlocks with AttentionRope (VisionTransformer's
# names), so only the config's architecture tells it from a VisionTransformer: RotaryEmbeddingCat
# with rotate_half=True on the index grid, GELU-tanh, no prefix token, its (1, G*G, D) table.
QWEN3_KEYS = (
    Key("architecture", str),
    Key("model_args.rope_temperature", float, ("rope_theta",)),
    Key("model_args.norm_eps", float, ("layer_norm_eps",)),
)
QWEN3_CLASS = "timm.models.qwen3_vit.Qwen3VitEncoder"


def is_qwen3(config: dict[str, Any] | None) -> bool:
    """A timm config whose architecture is a `qwen3_vit_*` (push_to_hub writes it beside model_args)."""
    return str(decode_config(config, QWEN3_KEYS[:1]).get("architecture", "")).startswith("qwen3_vit")


def infer_qwen3(inf: Inference, config: dict[str, Any] | None, pool: str | None) -> None:
    """Qwen3VitEncoder's facts over VisionTransformer's: its class fixes its rotary settings and
    activation; `pool` is the config's global_pool (push_to_hub writes none for '', the tokens)."""
    values = decode_config(config, QWEN3_KEYS)
    where = f"timm's Qwen3VitEncoder (config architecture = {values['architecture']!r})"
    if pool != "avg":  # 'merge' is refused by its tensors; '' returns the tokens
        raise SpecError(f"config global_pool = {shown(pool or '')}: expected 'avg' (Qwen3VitEncoder's mean "
                        "pool; '' returns its tokens, 'merge' its merger's)")
    for name, value in (("rope", "axial_half"), ("rope_coords", "index"), ("rope_bands", "shared"),
                        ("rope_axes", "rows_first"), ("rope_ref_grid", ()), ("activation", "gelu_tanh")):
        inf.conventions.pop(name, None)
        inf.fact(name, value, f"{where}: RotaryEmbeddingCat(rotate_half=True), its GELU(approximate='tanh')")
    if "model_args.rope_temperature" in values:
        inf.fact("rope_theta", values["model_args.rope_temperature"], "config model_args.rope_temperature")
    else:
        inf.convention("rope_theta", 10_000.0, f"{where}'s default rope_temperature")
    if "model_args.norm_eps" in values:
        inf.conventions.pop("layer_norm_eps", None)
        inf.fact("layer_norm_eps", values["model_args.norm_eps"], "config model_args.norm_eps")
    if "pos_resample" in inf.conventions:  # another image than the table's grid
        raise SpecError(f"{where} resamples its table by bilinear with align_corners=True, which no spec "
                        "pos_resample computes: give images of the table's grid")


def check_qwen3_exportable(s: ModelSpec) -> None:
    """What Qwen3VitEncoder(global_pool='avg') builds: the rotary spec with GELU-tanh timm writes."""
    where = "timm Qwen3VitEncoder"
    for name, expected in (("rope", "axial_half"), ("rope_axes", "rows_first"), ("rope_coords", "index"),
                           ("rope_ref_grid", ()), ("class_token", False), ("registers", 0),
                           ("pooling", "mean"), ("final_norm", "none"), ("num_classes", 0),
                           ("qkv_bias", True), ("bias_free", ()), ("layer_scale", False), ("qk_norm", False),
                           ("norm_before_blocks", False), ("patch_norm_out", False), ("patch_bias", True),
                           ("norm_type", "layer_norm"),
                           ("mlp", "standard"), ("pos_embed", "learned"), ("pos_resample", "none"),
                           ("patch_width", s.patch_height)):
        require(getattr(s, name) == expected, where, name, getattr(s, name),
                f"{expected!r} (Qwen3VitEncoder builds no other)")
    require(s.derived.grid_rows == s.derived.grid_cols, where, "image_width", s.image_width,
            f"a square patch grid ({s.derived.grid_rows} rows here: its table is G x G)")
    require(int(s.dim * (s.mlp_dim / s.dim)) == s.mlp_dim, where, "mlp_dim", s.mlp_dim,
            f"a width timm's int(dim * mlp_ratio) rebuilds from dim={s.dim}")


def qwen3_kwargs(s: ModelSpec) -> dict[str, Any]:
    """The `Qwen3VitEncoder(**kwargs)` that computes `s` (its table's grid is the image's)."""
    return {"img_size": (s.image_height, s.image_width), "patch_size": s.patch_height, "in_chans": s.channels,
            "global_pool": "avg", "embed_dim": s.dim, "depth": s.depth, "num_heads": s.heads,
            "mlp_ratio": s.mlp_dim / s.dim, "pos_embed_grid_size": s.derived.grid_rows,
            "rope_temperature": s.rope_theta, "norm_eps": s.layer_norm_eps}


# ---- export ------------------------------------------------------------------------------------
def check_eva_exportable(s: ModelSpec) -> None:
    """What `Eva(attn_type='rope')` builds, beyond what the timm exporter already checks."""
    require(s.norm_type == "layer_norm", EVA_TARGET, "norm_type", s.norm_type, "layer_norm (Eva's is built "
            "here with LayerNorm)")
    require(not s.bias_free or keyless_attention(s), EVA_TARGET, "bias_free", s.bias_free,
            "none or ['attn.key'] with qkv_bias (EvaAttention's q_bias, v_bias; Eva's proj_bias is not "
            "written here)")
    require(s.patch_norm_eps is None, EVA_TARGET, "patch_norm_eps", s.patch_norm_eps, "null")
    require(not s.distill_token, EVA_TARGET, "distill_token", s.distill_token,
            "none (Eva has no distillation token)")
    require(not s.patch_norm_out, EVA_TARGET, "patch_norm_out", s.patch_norm_out,
            "false (Eva has no embed norm)")
    require(s.pooling != "map" or (s.mlp == "standard" and s.pool_qkv_bias and s.pool_norm_eps is None),
            EVA_TARGET, "pooling", s.pooling, "cls (token), mean (avg), or map with a standard MLP, "
            "pool_qkv_bias and the blocks' epsilon (Eva's AttentionPoolLatent)")
    act = "silu" if s.mlp == "gated" else "gelu"
    layer = "GluMlp uses nn.SiLU" if act == "silu" else "Mlp uses nn.GELU"
    require(s.activation == act, EVA_TARGET, "activation", s.activation,
            f"{act} with mlp={s.mlp} (Eva's {layer})")
    require(int(s.dim * (s.mlp_dim / s.dim)) == s.mlp_dim, EVA_TARGET, "mlp_dim", s.mlp_dim,
            f"a width timm's int(dim * mlp_ratio) rebuilds from dim={s.dim}")


def eva_kwargs(s: ModelSpec, split: bool = False) -> dict[str, Any]:
    """The `timm.models.eva.Eva(**kwargs)` that computes `s` (a rotary spec); a gated MLP as
    GluMlp's one fc1, or with `split` as SwiGLU's fc1_g and fc1_x."""
    kwargs: dict[str, Any] = {
        "img_size": (s.image_height, s.image_width), "patch_size": (s.patch_height, s.patch_width),
        "in_chans": s.channels, "num_classes": s.num_classes, "embed_dim": s.dim, "depth": s.depth,
        "num_heads": s.heads, "mlp_ratio": s.mlp_dim / s.dim, "swiglu_mlp": s.mlp == "gated",
        "qkv_bias": s.qkv_bias, "qk_norm": s.qk_norm, "class_token": s.class_token,
        "attn_type": "eva" if keyless_attention(s) else "rope",  # EvaAttention: no key bias
        "global_pool": spelled(POOLS)[s.pooling], "num_reg_tokens": s.registers,
        "no_embed_class": s.derived.prefix_tokens > 0 and not (s.pos_embed_class_row
                                                               or s.pos_embed_register_rows),
        "use_abs_pos_emb": s.pos_embed == "learned", "init_values": 1.0 if s.layer_scale else None,
        "use_pre_transformer_norm": s.norm_before_blocks, "use_fc_norm": s.final_norm == "pooled",
        "use_post_transformer_norm": s.final_norm == "tokens", "use_rot_pos_emb": True,
        "rope_rotate_half": s.rope == "axial_half", "rope_temperature": s.rope_theta,
        "ref_feat_shape": tuple(s.rope_ref_grid) or None, "rope_type": spelled(ROPE_TYPES)[s.rope_coords],
        "rope_grid_indexing": "xy" if s.rope_axes == "cols_first" else "ij",
    }
    if split and s.mlp == "gated":  # Eva builds the split SwiGLU exactly when asked to align its width
        kwargs["swiglu_align_to"] = 1  # (DINOv3 S+/H+: 8); every width is a multiple of 1
    if s.layer_norm_eps != 1e-6:
        kwargs["norm_layer"] = f"functools.partial(timm.layers.LayerNorm, eps={s.layer_norm_eps!r})"
    return kwargs


def eva_state_dict(raw: Raw) -> Raw:
    """VisionTransformer's names -> Eva(attn_type='rope')'s: LayerScale as gamma_1 / gamma_2."""
    rename = {".ls1.gamma": ".gamma_1", ".ls2.gamma": ".gamma_2"}
    out: Raw = {}
    for key, value in raw.items():
        suffix = next((s for s in rename if key.endswith(s)), None)
        out[key.removesuffix(suffix) + rename[suffix] if suffix else key] = value
    return out


# ==== writing ========================================================================================
TARGET = "timm VisionTransformer"
UNSUPPORTED = (  # key fragment -> the timm option it comes from, which the spec cannot express
    (".mlp.norm.", "scale_mlp_norm=True or a normed GluMlp/SwiGLU (Eva: scale_mlp=True)"),
    (".attn.norm.", "scale_attn_norm=True (Eva: scale_attn_inner=True)"),
    (".attn.gate.", "gated attention (Eva / AttentionRope gated=True: a sigmoid gate before proj)"),
    (".attns.", "ParallelThingsBlock (parallel blocks)"),
    (".in_proj.", "ParallelScalingBlock (parallel blocks)"),
    ("relative_position", "relative position bias"),
    ("rope", "Eva rope_type='mixed' (learned rotary frequencies)"),
    ("merger.", "Qwen3-ViT patch merger (norm, 2x2 pixel-unshuffle, MLP to the LLM width, on a whole image's "
                "grid: the spec's merger reads a naflex or packed batch)"),
    ("attn_pool.pos_embed", "AttentionPoolLatent(pos_embed='abs')"),
    ("attn_pool.q_norm", "AttentionPoolLatent(qk_norm=True)"),
)
SPLIT_GATE, SPLIT_LINEAR = ".mlp.fc1_g.", ".mlp.fc1_x."  # timm's SwiGLU: the gate and the linear half


# timm's EvaAttention (Eva's attn_type='eva'): q_bias and v_bias beside a bias-free packed qkv, the
# key's a zero buffer never saved
KEYLESS_ROWS = "blocks.{i}.attn.{p:query=q_bias|value=v_bias}.bias  blocks.{i}.attn.{p}  heads_bias"


def table(fmt: str, spec: ModelSpec) -> Table:
    """The format's table (shared/core/timm_names.py, the torch port's too); a rotary spec without the
    key's bias is written as EvaAttention's q_bias and v_bias (eva_kwargs: attn_type='eva')."""
    base = timm_table(fmt, spec)
    return Table(KEYLESS_ROWS, fmt, base=base) if keyless_attention(spec) else base


def keyless_attention(s: ModelSpec) -> bool:
    """DINOv3's attention: q and v biased, k not; timm's EvaAttention, in Eva only."""
    return s.rope != "none" and s.qkv_bias and s.bias_free == ("attn.key",)


def read(path: Path, config: Path | None) -> tuple[Raw, dict[str, Any] | None, str]:
    return read_tensors(path), read_config(config), repr(str(path))


def normalise(raw: Raw, source: str, config: dict[str, Any] | None = None) -> Raw:
    """Two spellings of the same function become one: timm's split SwiGLU (`fc1_g`, `fc1_x`) is
    packed as SwiGLUPacked's one `fc1` (gate first); NaFlexVit's and Eva's spellings (`config`:
    NaFlexVit's channels)."""
    if "encoder.patch_embed.proj.weight" in raw:
        raise WeightsError(f"timm checkpoint {source}: tensor 'encoder.patch_embed.proj.weight' is timm's "
                           "Qwen3VitClassifier's, whose affine-free norm before its head the timm format "
                           f"does not read yet; its encoder built as {QWEN3_ENCODER} passes verify --model")
    out = dict(raw)
    for key in [k for k in raw if SPLIT_GATE in k]:
        linear = key.replace(SPLIT_GATE, SPLIT_LINEAR)
        if linear not in out:
            raise WeightsError(f"timm checkpoint {source}: tensor {key!r} has no {linear!r} beside it")
        out[key.replace(SPLIT_GATE, ".mlp.fc1.")] = np.concatenate([out.pop(key), out.pop(linear)])
    return normalise_eva(normalise_naflex(out, source, config), source)  # Eva's spelling (normalise_eva)


NAFLEX_CHANNELS = Key("model_args.in_chans", int, ("channels",))  # a Linear's width does not split by itself
NAFLEX_NAMES = {"embeds.proj.bias": "patch_embed.proj.bias", "embeds.cls_token": "cls_token",
                "embeds.reg_token": "reg_token"}


def normalise_naflex(raw: Raw, source: str, config: dict[str, Any] | None) -> Raw:
    """NaFlexVit's spellings -> VisionTransformer's, at the image size of its table: its patch
    projection, a Linear (D, ph*pw*C) on patches it flattens (ph, pw, C) (channels_last), is the
    Conv2d (D, C, ph, pw) that computes the same on the image; its (1, rows, cols, D) table is the
    patches' rows (no prefix row, as no_embed_class) and is resized by NaFlexEmbeds only at another
    grid. Its blocks, norm and attention pool already carry VisionTransformer's names."""
    if "embeds.proj.weight" not in raw:
        return raw
    out = {NAFLEX_NAMES.get(k, k): v for k, v in raw.items()
           if k not in ("embeds.proj.weight", "embeds.pos_embed")}
    weight = raw["embeds.proj.weight"]
    channels = decode_config(config, [NAFLEX_CHANNELS]).get(NAFLEX_CHANNELS.name, 3)  # timm's default
    side = math.isqrt(weight.shape[1] // channels) if weight.ndim == 2 else 0
    if weight.ndim != 2 or side * side * channels != weight.shape[1]:
        raise WeightsError(f"timm checkpoint {source}: tensor 'embeds.proj.weight' {tuple(weight.shape)}: "
                           f"expected (embed_dim, patch_size x patch_size x in_chans {channels}), square "
                           "patches")
    out["patch_embed.proj.weight"] = patch_linear_to_oihw(weight, side, side)
    if "embeds.pos_embed" in raw:
        table = raw["embeds.pos_embed"]
        if table.ndim != 4:
            raise WeightsError(f"timm checkpoint {source}: tensor 'embeds.pos_embed' {tuple(table.shape)}: "
                               "expected (1, rows, cols, embed_dim), NaFlexEmbeds' learned grid")
        out["pos_embed"] = table.reshape(1, -1, table.shape[-1])
    return out


def refuse_unsupported(fmt: str, source: str, raw: Raw) -> None:
    for fragment, option in UNSUPPORTED:
        hit = next((k for k in raw if fragment in k), None)
        if hit is not None:
            raise WeightsError(f"{fmt} checkpoint {source}: tensor {hit!r} comes from timm's {option}, "
                               "which the spec cannot express")


def check_exportable(fmt: str, s: ModelSpec) -> None:
    require(s.pos_embed in ("learned", "none"), TARGET, "pos_embed", s.pos_embed, "learned or none")
    require(s.pooling in (*POOLS.values(), "mean_all"), TARGET, "pooling", s.pooling,
            ", ".join(f"{value} ({name})" for name, value in POOLS.items()) + " or mean_all (avg with "
            "pool_include_prefix=True)")
    require(s.pooling != "mean_all" or s.rope == "none", TARGET, "pooling", s.pooling,
            "cls, mean or map with rope (timm's Eva has no pool_include_prefix)")
    # a rotary spec is exported as timm's Eva; RmsNorm is its norm_layer, the patch norm its own
    # embed_norm_layer (an epsilon of its own), proj_bias=False every non-q/k/v projection's bias
    require_plain_blocks(TARGET, s, rope=True, bias_free=True, rms_norm=True, own_eps=("patch",),
                         cols_first=True)
    no_proj_bias = tuple(n for n in ("attn.out", "mlp.gate", "mlp.fc1", "mlp.fc2") if n != "mlp.gate"
                         or s.mlp == "gated")
    require(s.bias_free in ((), no_proj_bias) or keyless_attention(s), TARGET, "bias_free", s.bias_free,
            f"none or {list(no_proj_bias)} (timm's proj_bias=False; q/k/v by qkv_bias), or ['attn.key'] "
            "with rope (Eva's EvaAttention)")
    if s.rope != "none" and s.activation == "gelu_tanh":  # Eva's MLPs are GELU or SiLU, Qwen3-ViT's tanh
        check_qwen3_exportable(s)
    elif s.rope != "none":
        check_eva_exportable(s)
    require(not s.patch_norm_in, TARGET, "patch_norm_in", s.patch_norm_in, "false (no LayerNorm before the "
            "patch projection)")
    require(s.patch_bias != s.norm_before_blocks, TARGET, "patch_bias", s.patch_bias,
            f"{not s.norm_before_blocks} with norm_before_blocks={s.norm_before_blocks} (timm builds the "
            "patch bias exactly when pre_norm is false)")
    # without a class token either is built: the registers' rows by no_embed_class=False, none by True
    require(not s.registers or s.pos_embed == "none" or not s.class_token
            or s.pos_embed_register_rows == s.pos_embed_class_row, TARGET,
            "pos_embed_register_rows", s.pos_embed_register_rows,
            "the same as pos_embed_class_row (timm's table covers every prefix token or none)")


def model_kwargs(s: ModelSpec, split: bool = False) -> dict[str, Any]:
    """The `timm.models.vision_transformer.VisionTransformer(**kwargs)` (`timm.models.deit.
    VisionTransformerDistilled` with a distillation token) that computes `s`, layers named as
    strings that timm resolves (`mlp_layer` and a non-default eps are spelled for the reader); a
    gated MLP as SwiGLUPacked's one fc1, or with `split` as SwiGLU's fc1_g and fc1_x.
    A rotary spec is timm's Eva's (`eva_kwargs`): refused here, never built without RoPE."""
    require(s.rope == "none", TARGET, "rope", s.rope, "none (timm's rotary ViTs are Eva: eva_kwargs)")
    prefix_rows = s.pos_embed_class_row or (s.registers > 0 and s.pos_embed_register_rows)
    kwargs: dict[str, Any] = {
        "img_size": (s.image_height, s.image_width), "patch_size": (s.patch_height, s.patch_width),
        "in_chans": s.channels, "num_classes": s.num_classes, "embed_dim": s.dim, "depth": s.depth,
        "num_heads": s.heads, "mlp_ratio": (2 if s.mlp == "gated" and not split else 1) * s.mlp_dim / s.dim,
        "qkv_bias": s.qkv_bias, "class_token": s.class_token,
        "global_pool": "avg" if s.pooling == "mean_all" else spelled(POOLS)[s.pooling],
        "no_embed_class": s.derived.prefix_tokens > 0 and not prefix_rows,
        "pos_embed": "learn" if s.pos_embed == "learned" else "none",
        "fc_norm": s.final_norm == "pooled", "final_norm": s.final_norm != "none",
        "act_layer": spelled(ACT_LAYERS)[s.activation], "reg_tokens": s.registers,
        "pre_norm": s.norm_before_blocks,
        "qk_norm": s.qk_norm, "init_values": 1.0 if s.layer_scale else None,
    }
    if s.derived.prefix_tokens and s.pooling in ("mean_all", "map"):  # pooled over every token, as the spec
        kwargs["pool_include_prefix"] = True
    eps = s.derived.norm_eps
    if s.patch_norm_out:
        kwargs["embed_norm_layer"] = norm_layer(s, eps["patch"]) or "layernorm"
    if s.mlp == "gated":  # SwiGLU's hidden width is one half's, SwiGLUPacked's both halves'
        kwargs["mlp_layer"] = "timm.layers.SwiGLU" if split else "timm.layers.SwiGLUPacked"
    if norm_layer(s, eps["blocks"]):
        kwargs["norm_layer"] = norm_layer(s, eps["blocks"])
    if s.bias_free:  # check_exportable: the attention output's and every MLP linear's
        kwargs["proj_bias"] = False
    if s.distill_token:
        del kwargs["class_token"], kwargs["reg_tokens"]
    return kwargs


def norm_layer(s: ModelSpec, eps: float) -> str | None:
    """timm's norm layer of `s`'s kind with epsilon `eps`, spelled for the reader (None: timm's
    default, LayerNorm with eps 1e-6)."""
    if s.norm_type == "layer_norm" and eps == 1e-6:
        return None
    kind = "RmsNorm" if s.norm_type == "rms_norm" else "LayerNorm"
    return f"functools.partial(timm.layers.{kind}, eps={eps!r})"


def finish_export(fmt: str, s: ModelSpec, raw: Raw) -> Raw:
    """A rotary spec is written as timm's Eva spells it (eva_kwargs)."""
    return eva_state_dict(raw) if s.rope != "none" else raw


def target(s: ModelSpec, split: bool = False) -> tuple[str, dict[str, Any]]:
    """The timm class that computes `s` and its keyword arguments: Eva for a rotary spec; `split`:
    a gated MLP as SwiGLU's two Linears."""
    if s.rope != "none" and s.activation == "gelu_tanh":
        return QWEN3_CLASS, qwen3_kwargs(s)
    if s.rope != "none":
        return "timm.models.eva.Eva", eva_kwargs(s, split)
    cls = "timm.models.deit.VisionTransformerDistilled" if s.distill_token else \
        "timm.models.vision_transformer.VisionTransformer"
    return cls, model_kwargs(s, split)


def check_buildable(s: ModelSpec) -> None:
    """What `build_model` builds: what the exporter writes (`target`'s class)."""
    check_exportable("timm", s)


def build_model(s: ModelSpec) -> Any:
    """The timm model that computes `s`, random-initialised (what a timing peer and the tests
    build): `target(s)`'s class and keyword arguments."""
    return construct(*target(s))


def construct(cls: str, kwargs: dict[str, Any]) -> Any:
    """timm's `cls` (a dotted path) built from keyword arguments as `target` spells them."""
    import importlib

    module, _, name = cls.rpartition(".")
    return getattr(importlib.import_module(module), name)(**resolve_layers(kwargs))


def resolve_layers(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`target`'s keyword arguments with the layers named as strings (`mlp_layer`, `norm_layer`)
    resolved to timm's own."""
    from functools import partial

    from timm import layers

    kwargs = dict(kwargs)
    if isinstance(kwargs.get("mlp_layer"), str):  # "timm.layers.SwiGLUPacked"
        kwargs["mlp_layer"] = getattr(layers, kwargs["mlp_layer"].rsplit(".", 1)[-1])
    for key in ("norm_layer", "embed_norm_layer"):
        norm = kwargs.get(key)
        if isinstance(norm, str) and norm.startswith("functools.partial(timm.layers."):
            kind, _, eps = norm.removeprefix("functools.partial(timm.layers.").rstrip(")").partition(", eps=")
            kwargs[key] = partial(getattr(layers, kind), eps=float(eps))  # "...(timm.layers.RmsNorm, eps=..)"
    return kwargs

def write(fmt: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    check_written_type(fmt, out, OUT_SUFFIXES)
    write_output(out, encode_tensors(out, raw), force=force)
    cls, kwargs = target(s)
    return [f"load with {cls}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"]


# ---- a registry architecture's own layout (`convert --to timm --arch NAME`) ------------------------
# The same function is held two ways in timm's registry: a gated MLP is SwiGLUPacked's one fc1 in
# DINOv2-g and TIPSv2-g, SwiGLU's fc1_g and fc1_x in AIMv2, DINOv3 S+/H+ and EVA-02. A file for
# `timm.create_model(NAME)` must hold the tensors as that architecture builds them.
BLOCK_FC1 = re.compile(r"^(blocks\.\d+)\.mlp\.fc1\.")  # the blocks' MLP, not the attention pool's


def write_registry(arch: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    """The state dict `timm.create_model(arch, pretrained=False, **kwargs)` loads strictly, where
    `kwargs` are `target`'s (the spec's arguments over the architecture's own): a gated MLP split as
    the architecture builds it, and every tensor's name and shape checked against that model built
    on the meta device (nothing allocated or downloaded) before anything is written."""
    check_written_type("timm", out, OUT_SUFFIXES)  # before the registry is asked: a wrong --out is cheap
    split = s.mlp == "gated" and any(SPLIT_GATE in name for name in built_registry(arch, {}).state_dict())
    cls, kwargs = target(s, split)
    model = built_registry(arch, kwargs, cls)
    expected = {name: tuple(value.shape) for name, value in model.state_dict().items()}
    written = split_swiglu(raw) if split else raw
    for name in sorted(set(expected) | set(written), key=lambda n: (n not in written, n)):
        have = tuple(written[name].shape) if name in written else None
        if have != expected.get(name):
            raise SpecError(f"--arch {arch}: timm's model holds tensor {name!r} as "
                            f"{expected.get(name) or 'nothing'}, the spec's export as {have or 'nothing'}")
    if cls == "timm.models.eva.Eva":
        check_registry_rotary(arch, model, kwargs)
    write_output(out, encode_tensors(out, written), force=force)
    return [f"load with timm.create_model({arch!r}, pretrained=False, "
            f"{', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"]


def built_registry(arch: str, kwargs: dict[str, Any], cls: str | None = None) -> Any:
    """`timm.create_model(arch, pretrained=False, **kwargs)` on the meta device; a name timm does not
    register, or an architecture of another class than `cls` (the one the spec is written as),
    refused in one line."""
    import timm
    import torch

    if not timm.is_model(arch):
        raise SpecError(f"--arch {arch!r}: not a timm architecture (timm.list_models() names them)")
    try:
        with torch.device("meta"):
            model = timm.create_model(arch, pretrained=False, **resolve_layers(kwargs))
    except TypeError as exc:  # an argument its class does not take
        raise SpecError(f"--arch {arch!r}: timm cannot build it with the spec's arguments ({exc}); the "
                        f"spec is written as {cls}") from None
    built = f"{type(model).__module__}.{type(model).__name__}"
    if cls is not None and built != cls:
        raise SpecError(f"--arch {arch!r}: timm builds it as {built}, the spec is written as {cls}")
    return model


def check_registry_rotary(arch: str, model: Any, kwargs: dict[str, Any]) -> None:
    """No tensor holds an Eva's rotary settings, and timm's create_model drops a None argument: where
    the spec has no ref_feat_shape, the architecture's own (Perception Encoder's) would stand. The
    built model's settings are read back and held to the spec's."""
    built = _eva_rope_args(model, model.rope)
    for key in ("rope_type", "rope_rotate_half", "rope_temperature", "ref_feat_shape", "rope_grid_indexing"):
        want = list(kwargs[key]) if isinstance(kwargs[key], tuple) else kwargs[key]
        if built[key] != want:
            raise SpecError(f"--arch {arch}: timm builds it with {key}={built[key]!r} (create_model drops a "
                            f"None argument: the architecture's own stands), the spec's is {want!r}")


def split_swiglu(raw: Raw) -> Raw:
    """SwiGLUPacked's one fc1 (gate first) as SwiGLU's fc1_g and fc1_x: `normalise`'s packing undone."""
    out: Raw = {}
    for key, value in raw.items():
        block = BLOCK_FC1.match(key)
        if block is None:
            out[key] = value
            continue
        head, tail = block.group(1), key[block.end():]
        out[f"{head}{SPLIT_GATE}{tail}"], out[f"{head}{SPLIT_LINEAR}{tail}"] = np.split(value, 2)
    return out


# ==== a live model ==================================================================================


def read_live(model: Any) -> Reading | None:
    """timm's VisionTransformer (and DeiT's distilled one): its constructor arguments live on as
    attributes (`global_pool`, `has_class_token`, `no_embed_class`, `patch_embed`, `blocks[i].attn`,
    `norm_pre`, `fc_norm`, `norm`), and `pretrained_cfg` when timm.create_model built it; a
    NaFlexVit's embedding is its NaFlexEmbeds (`embeds`)."""
    naflex = is_naflex(model)
    if not module_of(model).startswith("timm.") or not (hasattr(model, "patch_embed") or naflex) \
            or not hasattr(model, "blocks"):
        return None
    r = Reading(f"timm {type(model).__name__}", fmt="timm")
    if naflex:
        _naflex_embeds(r, model)
    _live_patch(r, model, "embeds" if naflex else "patch_embed")
    if hasattr(model, "embed_dim"):
        r.fact("dim", int(model.embed_dim), "timm: model.embed_dim")
    r.fact("depth", len(model.blocks), "timm: len(model.blocks)")
    attn = getattr(model.blocks[0], "attn", None) if len(model.blocks) else None
    if attn is not None and hasattr(attn, "num_heads"):
        r.fact("heads", int(attn.num_heads), "timm: model.blocks[0].attn.num_heads")
        if hasattr(attn, "head_dim"):
            r.fact("head_dim", int(attn.head_dim), "timm: model.blocks[0].attn.head_dim")
    if hasattr(model, "has_class_token"):
        r.fact("class_token", bool(model.has_class_token), "timm: model.has_class_token")
    r.fact("distill_token", getattr(model, "dist_token", None) is not None, "timm: model.dist_token")
    if hasattr(model, "num_reg_tokens"):
        r.fact("registers", int(model.num_reg_tokens), "timm: model.num_reg_tokens")
    pool = getattr(model, "global_pool", None)
    every = bool(getattr(model, "pool_include_prefix", False) and getattr(model, "num_prefix_tokens", 0))
    if pool == "avg" and every:  # the mean of every token, the prefix tokens included
        r.fact("pooling", "mean_all", "timm: model.global_pool = 'avg', model.pool_include_prefix = True")
    elif pool in POOLS:
        r.fact("pooling", POOLS[pool], f"timm: model.global_pool = {pool!r}")
    elif pool is not None:
        r.notes.append(f"timm: model.global_pool = {pool!r} has no spec pooling (expected token, avg or map)")
    if getattr(model, "pos_embed", None) is not None and hasattr(model, "no_embed_class"):
        prefix_rows = not model.no_embed_class
        # Eva keeps no has_class_token / num_reg_tokens: its cls_token and reg_token say it
        has_class = getattr(model, "has_class_token", getattr(model, "cls_token", None) is not None)
        registers = getattr(model, "num_reg_tokens", getattr(model, "reg_token", None) is not None)
        where = f"timm: model.no_embed_class = {model.no_embed_class}, its class and register tokens"
        r.fact("pos_embed_class_row", prefix_rows and bool(has_class), where)
        r.fact("pos_embed_register_rows", prefix_rows and bool(registers), where)
    if hasattr(model, "norm_pre"):
        r.fact("norm_before_blocks", not is_identity(model.norm_pre), "timm: model.norm_pre")
    if hasattr(model, "fc_norm") and hasattr(model, "norm"):
        final = "pooled" if not is_identity(model.fc_norm) else \
            "none" if is_identity(model.norm) else "tokens"
        r.fact("final_norm", final, "timm: model.fc_norm / model.norm")
    if hasattr(model, "num_classes"):
        r.fact("num_classes", int(model.num_classes), "timm: model.num_classes")
    if len(model.blocks):  # the activation and LayerNorms' eps: the torch layers' own reading
        _live_norms(r, model)
    rope = getattr(model, "rope", None)
    if rope is None:
        r.fact("rope", "none", "timm: no model.rope (timm's rotary embeddings are its Eva models')")
    elif naflex:
        raise SpecError(f"your model is a timm NaFlexVit with rotary embeddings ({type(rope).__name__}), "
                        "whose settings verify --model does not read yet: its state dict converts with "
                        "--from timm and a config stating them")
    else:  # an Eva: its constructor's rotary arguments, as a timm config's model_args states them
        r.config = {"model_args": _eva_rope_args(model, rope)}
        if type(model).__name__ == "Qwen3VitEncoder":  # EvaBlocks whose rotary settings are its class's
            r.config.update(architecture="qwen3_vit (Qwen3VitEncoder)", global_pool=model.global_pool)
        own = dict(model.blocks[0].attn.named_parameters(recurse=False)) if len(model.blocks) else {}
        if "q_bias" in own and "k_bias" not in own:  # the module holds no key bias to bind: the keyless table
            r.fact("bias_free", ("attn.key",), "timm: EvaAttention's k_bias is a zero buffer, no parameter "
                                               "(a state dict of it converts with that zero key bias)")
    return r


# NaFlexVit's own names for what VisionTransformer holds in patch_embed, pos_embed and the tokens
# (NaFlexEmbeds): its patch projection a Linear on (ph, pw, C) patches or a Conv2d, its table
# (1, rows, cols, D) over the patches only
NAFLEX_LIVE_ROWS = """
patch_embed.kernel                    embeds.proj.weight   {proj}
patch_embed.bias                      embeds.proj.bias
patch_norm_out.{w:scale=weight|bias}  embeds.norm.{w}
pos_embed                             embeds.pos_embed     square_grid
cls_token                             embeds.cls_token     batch_token
reg_tokens                            embeds.reg_token     batch
"""


# Eva's own spelling of LayerScale (normalise_eva reads a state dict's so)
EVA_LIVE_ROWS = "blocks.{i}.{n:ls1=gamma_1|ls2=gamma_2}.gamma  blocks.{i}.{n}"


def live_tables(model: Any, spec: ModelSpec) -> list[Any]:
    """A timm model built with the split SwiGLU (AIMv2's `mlp_layer=SwiGLU`) holds its gate and linear
    half as `fc1_g` and `fc1_x`, a NaFlexVit its embedding in NaFlexEmbeds' names, an Eva its
    LayerScale as gamma_1 and gamma_2 (and EvaAttention's q_bias and v_bias, the format's keyless
    table): the table in those names binds it (`verify --model`)."""
    refuse_qwen3_live(model)
    if not module_of(model).startswith("timm.") or not callable(getattr(model, "state_dict", None)):
        return []
    split = spec.mlp == "gated" and any(SPLIT_GATE in k for k in model.state_dict())
    if type(model).__name__ == "Eva":
        base = timm_table("timm", spec, split=split)
        return [Table(EVA_LIVE_ROWS, "timm Eva", base=Table(KEYLESS_ROWS, "timm", base=base)
                      if keyless_attention(spec) else base)]
    if is_naflex(model):
        proj = "patch_linear" if getattr(model.embeds, "is_linear", False) else "conv"
        return [Table(NAFLEX_LIVE_ROWS.replace("{proj}", proj), "timm NaFlexVit",
                      base=timm_table("timm", spec, split=split))]
    return [timm_table("timm (split SwiGLU)", spec, split=True)] if split else []


def is_naflex(model: Any) -> bool:
    return module_of(model).startswith("timm.") and type(model).__name__ == "NaFlexVit"


def _live_patch(r: Reading, model: Any, embedding: str) -> None:
    """The patch and, for a fixed-size model, the image (its patch embedding's img_size, else the
    pretrained_cfg's input size). A NaFlex batch's images each have their own size: the format's
    reading bounds them."""
    patch = getattr(model, embedding)
    size, where = size_of(getattr(patch, "img_size", None)), f"timm: model.{embedding}.img_size"
    if size is None and embedding == "patch_embed":
        cfg_size = (getattr(model, "pretrained_cfg", None) or {}).get("input_size")
        size = size_of(tuple(cfg_size[1:])) if cfg_size else None
        where = "timm: model.pretrained_cfg['input_size']"
    if size is not None:
        r.fact("image_height", size[0], where)
        r.fact("image_width", size[1], where)
    patch_size = size_of(getattr(patch, "patch_size", None))
    if patch_size is not None:
        r.fact("patch_height", patch_size[0], f"timm: model.{embedding}.patch_size")
        r.fact("patch_width", patch_size[1], f"timm: model.{embedding}.patch_size")


def _naflex_embeds(r: Reading, model: Any) -> None:
    """A NaFlexVit reads as a naflex spec: the state dict as the VisionTransformer it converts to
    (`normalise_naflex`: NaFlexEmbeds' Linear needs its in_chans), its table resized to each image's
    grid as NaFlexEmbeds' own attributes say (`naflex_resize`). What NaFlexEmbeds does beyond that
    spec is refused in one line naming the attribute."""
    embeds = model.embeds
    for attribute, value, expected in (
            ("embeds.pos_embed_type", getattr(embeds, "pos_embed_type", None), ("learned", "none")),
            ("embeds.norm_input", type(getattr(embeds, "norm_input", None)).__name__, ("NoneType",)),
            ("embeds.channels_last", bool(getattr(embeds, "channels_last", True)) or not embeds.is_linear,
             (True,)),
            ("pool_include_prefix", bool(getattr(model, "pool_include_prefix", False)), (False,))):
        if value not in expected:
            raise SpecError(f"your model is a timm NaFlexVit with model.{attribute} = {value!r}: expected "
                            f"{' or '.join(map(repr, expected))} (what the spec computes)")
    resize = {key: getattr(embeds, key) for key in ("pos_embed_interp_mode", *NAFLEX_FIXED)
              if hasattr(embeds, key)}
    r.config = {"model_args": {"in_chans": int(embeds.in_chans), **resize}}
    r.fact("batching", "naflex", "timm: NaFlexVit.forward(patches, patch_coord, patch_valid), each image at "
           "its own grid (called on images of the table's grid, it computes what batching='fixed' says)")


def caller_live(model: Any) -> Any | None:
    """A NaFlexVit's forward takes NaFlex's dict: the patches, each patch's (row, col) in its image
    and which are real. The module returned takes a naflex batch's (patches, valid, grids) (each
    image's patches in raster order from its start, flattened (ph, pw, C) as NaFlexEmbeds' Linear
    reads them) and gives the model's output for each image; None for any other model."""
    if not is_naflex(model):
        return None
    from torch import nn

    class NaFlexCall(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def batch_tokens(self, path: str, value: Any) -> Any:
            return value  # its tokens are the batch's: the prefix, then each image's patches padded

        def forward(self, patches: Any, valid: Any, grids: Any) -> Any:
            import torch

            coords = torch.zeros(*patches.shape[:2], 2, dtype=torch.long, device=patches.device)
            for b, (rows, cols) in enumerate(grids.reshape(len(patches), 2).tolist()):
                at = torch.arange(rows * cols, device=patches.device)
                coords[b, :rows * cols] = torch.stack([at // cols, at % cols], dim=-1)
            return self.model({"patches": patches, "patch_coord": coords, "patch_valid": valid.bool()})

    return NaFlexCall()


QWEN3_ENCODER = "Qwen3VitEncoder(global_pool='avg') (its blocks, mean-pooled: the spec's)"


def refuse_qwen3_live(model: Any) -> None:
    """timm's Qwen3-ViT (`qwen3_vit.py`): its encoder without the merger is a rotary ViT the spec says
    (EvaBlocks, axial_half RoPE on the index grid, gelu_tanh, no prefix token, mean pool); the merger
    and the classifier's affine-free norm before its head are refused, naming the module."""
    name = type(model).__name__
    if not module_of(model).startswith("timm.") or not name.startswith("Qwen3Vit"):
        return
    if name == "Qwen3VitClassifier":
        raise SpecError("your model is a timm Qwen3VitClassifier, whose model.norm (a LayerNorm without "
                        "scale or bias) before model.head no spec tensor binds yet; verify its encoder built "
                        f"as {QWEN3_ENCODER}")
    if getattr(model, "merger", None) is not None:
        raise SpecError("your model is a timm Qwen3VitEncoder with model.merger, Qwen3-ViT's patch merger "
                        "(2x2 pixel-unshuffle, MLP to the LLM width) on a whole image's grid, where the "
                        f"spec's merger reads a naflex or packed batch; verify it built as {QWEN3_ENCODER}")


# timm's norm layers by class name -> the spec's norm_type (LayerNorm2d and the like never stand in a ViT)
NORM_CLASSES = {"LayerNorm": "layer_norm", "LayerNormFp32": "layer_norm", "RmsNorm": "rms_norm",
                "RmsNormFp32": "rms_norm"}


def _live_norms(r: Reading, model: Any) -> None:
    """The norm kind, and an RmsNorm model's epsilon per place, read from the modules themselves (block
    0's norm1, and the patch, pre-block, qk, final and pool norms where they stand), never from a
    library default. A LayerNorm's epsilon is the torch layers' reading (`proposal_layers.py`), which
    knows no RmsNorm."""
    block = model.blocks[0]
    norm1 = getattr(block, "norm1", None)
    kind = NORM_CLASSES.get(type(norm1).__name__)
    if kind is None or not hasattr(norm1, "eps"):
        r.notes.append(f"timm: model.blocks[0].norm1 is a {type(norm1).__name__}, not a LayerNorm or RmsNorm")
        return
    eps = float(norm1.eps)
    r.fact("norm_type", kind, f"timm: model.blocks[0].norm1 is a {type(norm1).__name__}")
    if kind != "rms_norm":
        return
    r.fact("layer_norm_eps", eps, "timm: model.blocks[0].norm1.eps")
    attn = getattr(block, "attn", None)
    patch = "embeds" if is_naflex(model) else "patch_embed"
    places = {"patch": (f"model.{patch}.norm", getattr(getattr(model, patch), "norm", None)),
              "pre": ("model.norm_pre", getattr(model, "norm_pre", None)),
              "qk": ("model.blocks[0].attn.q_norm", getattr(attn, "q_norm", None)),
              "final": ("model.fc_norm", getattr(model, "fc_norm", None)) if not is_identity(
                  getattr(model, "fc_norm", None)) else ("model.norm", getattr(model, "norm", None)),
              "pool": ("model.attn_pool.norm", getattr(getattr(model, "attn_pool", None), "norm", None))}
    for place, (where, module) in places.items():
        own = None if is_identity(module) or getattr(module, "eps", eps) == eps else float(module.eps)
        if not is_identity(module) and NORM_CLASSES.get(type(module).__name__) not in (None, kind):
            r.notes.append(f"timm: {where} is a {type(module).__name__}, block 0's norm1 a "
                           f"{type(norm1).__name__}: the spec has one norm kind")
        r.fact(NORM_EPS_FIELDS[place], own, f"timm: {where}.eps" if not is_identity(module)
               else f"timm: no {where}")


def _eva_rope_args(model: Any, rope: Any) -> dict[str, Any]:
    """A timm Eva's rotary settings, read back from its modules in the form of the `model_args`
    the timm format's Eva inference reads (and refuses what the spec cannot say from), with the
    heads of its blocks and of its map pool."""
    attn = getattr(model.blocks[0], "attn", None) if len(model.blocks) else None
    ref = getattr(rope, "ref_feat_shape", None)
    kind = type(rope).__name__
    cat = kind == "RotaryEmbeddingCat" and not getattr(rope, "in_pixels", False) \
        and not getattr(rope, "linear_bands", False)  # the axial index grid the spec states
    dinov3 = kind == "RotaryEmbeddingDinoV3" and getattr(rope, "normalize_coords", "separate") == "separate" \
        and getattr(rope, "min_period", None) is None  # patch centres per axis, temperature's periods
    args = {"use_rot_pos_emb": True,
            "rope_type": "cat" if cat else "dinov3" if dinov3 else
            f"{kind} (in_pixels, linear bands, normalize_coords or min/max periods)",
            "rope_rotate_half": bool(getattr(attn, "rotate_half", False)),
            "rope_temperature": float(getattr(rope, "temperature", 10_000.0)),
            "ref_feat_shape": list(ref) if ref is not None else None,
            "rope_grid_offset": float(getattr(rope, "grid_offset", 0.0)),
            "rope_grid_indexing": getattr(rope, "grid_indexing", "ij")}
    if attn is not None and hasattr(attn, "num_heads"):
        args["num_heads"] = int(attn.num_heads)
    pool = getattr(model, "attn_pool", None)
    if pool is not None and hasattr(pool, "num_heads"):
        args["attn_pool_num_heads"] = int(pool.num_heads)
    return args
