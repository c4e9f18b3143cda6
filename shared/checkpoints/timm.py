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

timm's `Eva` (EVA-02 and the `vit_*_rope_*` ViTs: 2-D RoPE) is read and written here too, its own
spelling, rotary settings and refusals in timm_eva.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from shared.checkpoints.common import (
    Raw,
    encode_tensors,
    read_config,
    read_tensors,
    require,
    require_plain_blocks,
)
from shared.checkpoints.timm_eva import check_eva_exportable, eva_kwargs, eva_state_dict, normalise_eva
from shared.checkpoints.timm_inference import infer as infer  # the format's inference, in its own module
from shared.core.files import write_output
from shared.core.spec import ModelSpec
from shared.core.timm_names import timm_table
from shared.errors import WeightsError

TARGET = "timm VisionTransformer"
TIMM_ACT = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "quick_gelu": "quick_gelu", "silu": "silu"}
UNSUPPORTED = (  # key fragment -> the timm option it comes from, which the spec cannot express
    (".mlp.norm.", "scale_mlp_norm=True or a normed GluMlp/SwiGLU (Eva: scale_mlp=True)"),
    (".attn.norm.", "scale_attn_norm=True (Eva: scale_attn_inner=True)"),
    (".attn.gate.", "gated attention (Eva / AttentionRope gated=True: a sigmoid gate before proj)"),
    (".attns.", "ParallelThingsBlock (parallel blocks)"),
    (".in_proj.", "ParallelScalingBlock (parallel blocks)"),
    ("relative_position", "relative position bias"),
    ("rope", "Eva rope_type='mixed' (learned rotary frequencies)"),
    ("attn_pool.pos_embed", "AttentionPoolLatent(pos_embed='abs')"),
    ("attn_pool.q_norm", "AttentionPoolLatent(qk_norm=True)"),
)
SPLIT_GATE, SPLIT_LINEAR = ".mlp.fc1_g.", ".mlp.fc1_x."  # timm's SwiGLU: the gate and the linear half
table = timm_table  # the format's table (shared/core/timm_names.py), the torch port's too


def read(path: Path, config: Path | None) -> tuple[Raw, dict[str, Any] | None, str]:
    return read_tensors(path), read_config(config), repr(str(path))


def normalise(raw: Raw, source: str) -> Raw:
    """Two spellings of the same function become one: timm's split SwiGLU (`fc1_g`, `fc1_x`) is
    packed as SwiGLUPacked's one `fc1` (gate first)."""
    out = dict(raw)
    for key in [k for k in raw if SPLIT_GATE in k]:
        linear = key.replace(SPLIT_GATE, SPLIT_LINEAR)
        if linear not in out:
            raise WeightsError(f"timm checkpoint {source}: tensor {key!r} has no {linear!r} beside it")
        out[key.replace(SPLIT_GATE, ".mlp.fc1.")] = np.concatenate([out.pop(key), out.pop(linear)])
    return normalise_eva(out, source)  # Eva's spelling (timm_eva.py)


def refuse_unsupported(fmt: str, source: str, raw: Raw) -> None:
    for fragment, option in UNSUPPORTED:
        hit = next((k for k in raw if fragment in k), None)
        if hit is not None:
            raise WeightsError(f"{fmt} checkpoint {source}: tensor {hit!r} comes from timm's {option}, "
                               "which the spec cannot express")


def check_exportable(fmt: str, s: ModelSpec) -> None:
    require(s.pos_embed in ("learned", "none"), TARGET, "pos_embed", s.pos_embed, "learned or none")
    require(s.pooling in ("cls", "mean", "map"), TARGET, "pooling", s.pooling,
            "cls (token), mean (avg) or map")
    require(s.pooling != "map" or not s.derived.prefix_tokens, TARGET, "pooling", s.pooling,
            "no class, distillation or register tokens with map (timm's map pool reads the patches only)")
    require_plain_blocks(TARGET, s, rope=True)  # a rotary spec is exported as timm's Eva
    if s.rope != "none":
        check_eva_exportable(s)
    require(not s.patch_norm_in, TARGET, "patch_norm_in", s.patch_norm_in, "false (no LayerNorm before the "
            "patch projection)")
    require(s.patch_bias != s.norm_before_blocks, TARGET, "patch_bias", s.patch_bias,
            f"{not s.norm_before_blocks} with norm_before_blocks={s.norm_before_blocks} (timm builds the "
            "patch bias exactly when pre_norm is false)")
    positioned = s.pos_embed_class_row or not s.class_token
    require(not s.registers or s.pos_embed == "none" or s.pos_embed_register_rows == positioned, TARGET,
            "pos_embed_register_rows", s.pos_embed_register_rows,
            "the same as pos_embed_class_row (timm's table covers every prefix token or none)")


def model_kwargs(s: ModelSpec) -> dict[str, Any]:
    """The `timm.models.vision_transformer.VisionTransformer(**kwargs)` (`timm.models.deit.
    VisionTransformerDistilled` with a distillation token) that computes `s`, layers named as
    strings that timm resolves (`mlp_layer` and a non-default eps are spelled for the reader).
    A rotary spec is timm's Eva's (`timm_eva.eva_kwargs`): refused here, never built without RoPE."""
    require(s.rope == "none", TARGET, "rope", s.rope, "none (timm's rotary ViTs are Eva: eva_kwargs)")
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


def finish_export(fmt: str, s: ModelSpec, raw: Raw) -> Raw:
    """A rotary spec is written as timm's Eva spells it (timm_eva.py)."""
    return eva_state_dict(raw) if s.rope != "none" else raw


def target(s: ModelSpec) -> tuple[str, dict[str, Any]]:
    """The timm class that computes `s` and its keyword arguments: Eva for a rotary spec."""
    if s.rope != "none":
        return "timm.models.eva.Eva", eva_kwargs(s)
    cls = "timm.models.deit.VisionTransformerDistilled" if s.distill_token else \
        "timm.models.vision_transformer.VisionTransformer"
    return cls, model_kwargs(s)


def write(fmt: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    write_output(out, encode_tensors(out, raw), force=force)
    cls, kwargs = target(s)
    return [f"load with {cls}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"]
