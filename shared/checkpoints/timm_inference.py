"""What a timm `VisionTransformer` state dict (and an optional timm config.json) says about the
spec: facts read from the tensors' names and shapes, timm's conventions applied with a note, and
the fields that must be asked for (shared/checkpoints/common.py's `Inference`)."""

from __future__ import annotations

from typing import Any, Literal

from shared.checkpoints.common import Inference, Raw, resampled_table, square_grid, width_per_head
from shared.checkpoints.decoding import Key, decode_config, pair, tensor_shape
from shared.checkpoints.timm_eva import infer_eva
from shared.core.record import shown
from shared.errors import SpecError, WeightsError

POOLS = {"token": "cls", "avg": "mean", "map": "map"}
ACT_LAYERS = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "quick_gelu": "quick_gelu", "silu": "silu",
              "swish": "silu"}  # timm's get_act_layer names -> the spec's
# The keys of a timm config.json (push_to_hub's; `pretrained_cfg` as timm writes it) that state what
# a state dict does not; the rest are left to the tensors. Eva's own: timm_eva.py's EVA_KEYS.
TIMM_KEYS = (
    Key("model_args.num_heads", int, ("heads",)),
    Key("model_args.act_layer", Literal[tuple(ACT_LAYERS)], ("activation",)),
    Key("global_pool", str, ("pooling",)),
    Key("model_args.global_pool", str, ("pooling",)),
    Key("model_args.img_size", int | tuple[int, int], ("image_height", "image_width")),
    Key("pretrained_cfg.input_size", tuple[int, int, int], ("image_height", "image_width")),  # (C, H, W)
)


def _config_values(config: dict[str, Any] | None) -> dict[str, Any]:
    """The few fields a timm config.json (push_to_hub / pretrained_cfg) states that a state
    dict does not, decoded: num_heads, global_pool, img_size, act_layer."""
    values = decode_config(config, TIMM_KEYS)
    out = {short: values[key] for short, key in (("num_heads", "model_args.num_heads"),
                                                 ("act_layer", "model_args.act_layer")) if key in values}
    pool = values.get("global_pool", values.get("model_args.global_pool"))
    if pool is not None:
        out["global_pool"] = pool
    if "model_args.img_size" in values:
        out["img_size"] = pair(values["model_args.img_size"])
    elif "pretrained_cfg.input_size" in values:  # (channels, height, width)
        out["img_size"] = tuple(values["pretrained_cfg.input_size"][1:])
    return out


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    inf = Inference(fmt)
    cfg = _config_values(config)
    conv = tensor_shape(inf, raw, "patch_embed.proj.weight", "out, in, height, width")
    dim, channels, ph, pw = conv
    where = f"tensor 'patch_embed.proj.weight' {conv}"
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
    inf.fact("patch_bias", "patch_embed.proj.bias" in raw, "presence of tensor 'patch_embed.proj.bias' "
             "(timm pre_norm=True builds none)")
    if "norm_pre.weight" in raw:
        inf.notes.append("timm's CLIP models (pre_norm) use "
                         "LayerNorm eps 1e-5: --set layer_norm_eps=1e-5")
    inf.convention("layer_norm_eps", 1e-6, "timm's LayerNorm")
    inf.convention("remainder", "drop", "timm's PatchEmbed (a valid conv)")
    _infer_tokens_and_head(inf, raw)
    _infer_mlp(inf, raw, cfg)
    _infer_heads(fmt, inf, cfg, dim, given)
    _infer_pooling(inf, cfg, raw)
    _infer_positions(fmt, inf, cfg, raw, ph, pw, given)
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
            raise SpecError(f"config global_pool = {shown(pool)}: with a class token the spec expresses "
                            "'token' and 'avg'")
        inf.fact("pooling", POOLS[pool], f"config global_pool = {pool!r}")
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
    if wanted is not None and grid != (int(wanted[0]) // ph, int(wanted[1]) // pw):
        resampled_table(inf, grid, evidence, "timm_bicubic_antialias",
                        "timm's resample_abs_pos_embed default antialias=True, as dynamic_img_size and "
                        "checkpoint_filter_fn call it; --set pos_resample=timm_bicubic for antialias=False")

