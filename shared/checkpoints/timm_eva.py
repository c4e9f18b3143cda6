"""timm's `Eva` (`timm/models/eva.py`: EVA-02, the `vit_*_rope_*` ViTs) in the timm format: what
its state dict spells differently from `VisionTransformer`'s, its rotary settings (which no
tensor records), and the refusals of what the spec cannot say.

Spelling, normalised on import to VisionTransformer's so that one table serves both:
`EvaAttention` keeps `attn.q_bias` and `attn.v_bias` beside a bias-free `attn.qkv` (its key bias is
a zero buffer, never saved: a zero key bias, exact), or unfused `attn.{q,k,v}_proj` (qkv_fused=False);
LayerScale is `gamma_1` / `gamma_2` (VisionTransformer's `ls1.gamma` / `ls2.gamma`). Export writes
`Eva(attn_type='rope')`, timm's `AttentionRope`: the same function with one packed, fully biased
qkv, so the spec's key bias is kept whatever it is; LayerScale goes back to `gamma_1` / `gamma_2`.

RoPE: Eva's default `rope_type='cat'` (RotaryEmbeddingCat, in_pixels=False) is the spec's
`rope_coords='index'`, `rope_theta` = `rope_temperature` (default 1e4), `rope_ref_grid` =
`ref_feat_shape` (default none) and `rope='axial_interleaved'`, or `'axial_half'` with
`rope_rotate_half=True` (shared/core/rotary.py). No tensor records any of it, nor whether RoPE is
on: a timm config.json whose `model_args` state them says so, or `--set rope=...`; timm's defaults
fill the rest, printed as conventions. A state dict spelled as Eva's with neither is asked for.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shared.checkpoints.common import Inference, Raw, require
from shared.checkpoints.decoding import Key, decode_config, pair
from shared.core.record import shown
from shared.core.spec import MAX_TOKENS, ModelSpec
from shared.errors import SpecError, WeightsError

TARGET = "timm Eva"
ROPE_ARGS = ("use_rot_pos_emb", "rope_type", "rope_rotate_half", "rope_temperature", "ref_feat_shape")
EVA_KEYS = (  # the Eva arguments a timm config's model_args may state, as Eva(**model_args) takes them
    Key("model_args.use_rot_pos_emb", bool, ("rope",)),
    Key("model_args.rope_type", str, ("rope",)),
    Key("model_args.rope_rotate_half", bool, ("rope",)),
    Key("model_args.rope_temperature", float, ("rope_theta",)),
    Key("model_args.ref_feat_shape", int | tuple[int, int] | None, ("rope_ref_grid",), at_most=MAX_TOKENS),
    Key("model_args.rope_grid_offset", float, ("rope_coords",), positive=False),
    Key("model_args.rope_grid_indexing", str, ("rope",)),
    Key("model_args.use_post_norm", bool, ("norm",)),
    Key("model_args.scale_attn_inner", bool),
    Key("model_args.scale_mlp", bool),
    Key("model_args.num_kv_heads", int | None, ("heads",)),
    Key("model_args.attn_only_layer_scale", bool, ("layer_scale",)),
)
REFUSED_ARGS = (  # Eva model_args -> (what the spec can say, why another value is refused)
    ("rope_type", "cat", "only RotaryEmbeddingCat's axial index grid ('mixed' learns its frequencies, "
                         "'mrope' and 'dinov3' build other grids)"),
    ("rope_grid_offset", 0, "the spec's index grid starts at 0"),
    ("rope_grid_indexing", "ij", "the spec's angles are [rows, columns] ('xy' swaps them)"),
    ("use_post_norm", False, "EvaBlockPostNorm normalises each branch's output (x + LN(f(x))), which "
                             "no spec norm placement computes"),
    ("scale_attn_inner", False, "a LayerNorm inside attention"),
    ("scale_mlp", False, "a LayerNorm inside the MLP"),
    ("num_kv_heads", None, "grouped-query attention"),
    ("attn_only_layer_scale", False, "LayerScale on the attention branch only"),
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
    """Eva's facts and conventions over VisionTransformer's (`timm_inference.infer` has run)."""
    args = eva_args(config)
    if not is_eva(raw, args, given):
        return
    for key, expected, why in REFUSED_ARGS:
        if key in args and args[key] != expected:
            raise SpecError(f"config model_args.{key} = {shown(args[key])}: expected {expected!r} ({why}); "
                            "the spec cannot express it")
    _infer_rope(inf, args, given)
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
    inf.fact("rope_coords", "index", "timm's RotaryEmbeddingCat (rope_type='cat', in_pixels=False)")
    if "rope_temperature" in args:
        inf.fact("rope_theta", float(args["rope_temperature"]), f"{where}.rope_temperature")
    else:
        inf.convention("rope_theta", 10_000.0, "timm's default rope_temperature")
    ref = args.get("ref_feat_shape")
    if "ref_feat_shape" in args:  # timm's to_2tuple: one side is both
        inf.fact("rope_ref_grid", () if ref is None else pair(ref), f"{where}.ref_feat_shape = {ref!r}")
    else:
        inf.convention("rope_ref_grid", (), "timm's default ref_feat_shape=None (the grid's own indices)")


# ---- export ------------------------------------------------------------------------------------
def check_eva_exportable(s: ModelSpec) -> None:
    """What `Eva(attn_type='rope')` builds, beyond what the timm exporter already checks."""
    require(s.rope_coords == "index", TARGET, "rope_coords", s.rope_coords,
            "index (RotaryEmbeddingCat's grid; its 'dinov3' type is not built here)")
    require(not s.distill_token, TARGET, "distill_token", s.distill_token,
            "none (Eva has no distillation token)")
    require(not s.patch_norm_out, TARGET, "patch_norm_out", s.patch_norm_out, "false (Eva has no embed norm)")
    require(s.pooling != "map", TARGET, "pooling", s.pooling, "cls (token) or mean (avg)")
    act = "silu" if s.mlp == "gated" else "gelu"
    layer = "GluMlp uses nn.SiLU" if act == "silu" else "Mlp uses nn.GELU"
    require(s.activation == act, TARGET, "activation", s.activation,
            f"{act} with mlp={s.mlp} (Eva's {layer})")
    require(int(s.dim * (s.mlp_dim / s.dim)) == s.mlp_dim, TARGET, "mlp_dim", s.mlp_dim,
            f"a width timm's int(dim * mlp_ratio) rebuilds from dim={s.dim}")


def eva_kwargs(s: ModelSpec) -> dict[str, Any]:
    """The `timm.models.eva.Eva(**kwargs)` that computes `s` (a rotary spec)."""
    kwargs: dict[str, Any] = {
        "img_size": (s.image_height, s.image_width), "patch_size": (s.patch_height, s.patch_width),
        "in_chans": s.channels, "num_classes": s.num_classes, "embed_dim": s.dim, "depth": s.depth,
        "num_heads": s.heads, "mlp_ratio": s.mlp_dim / s.dim, "swiglu_mlp": s.mlp == "gated",
        "qkv_bias": s.qkv_bias, "qk_norm": s.qk_norm, "attn_type": "rope", "class_token": s.class_token,
        "global_pool": {"cls": "token", "mean": "avg"}[s.pooling], "num_reg_tokens": s.registers,
        "no_embed_class": s.derived.prefix_tokens > 0 and not (s.pos_embed_class_row
                                                               or s.pos_embed_register_rows),
        "use_abs_pos_emb": s.pos_embed == "learned", "init_values": 1.0 if s.layer_scale else None,
        "use_pre_transformer_norm": s.norm_before_blocks, "use_fc_norm": s.final_norm == "pooled",
        "use_post_transformer_norm": s.final_norm == "tokens", "use_rot_pos_emb": True,
        "rope_rotate_half": s.rope == "axial_half", "rope_temperature": s.rope_theta,
        "ref_feat_shape": tuple(s.rope_ref_grid) or None,
    }
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
