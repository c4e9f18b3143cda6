"""The spec's canonical tensors: names and shapes in a fixed order, and which group each counts
in. Derived once here (through `ModelSpec.derived`), never in a port: every weight file, mapping
table and parameter count starts from this list. Layouts are documented in weights.py.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.core.spec import ModelSpec


def patch_grid(s: ModelSpec) -> tuple[int, int]:
    """(rows, cols) of patches: whole patches only under `drop`, the padded image's under `pad`."""
    if s.remainder == "drop":
        return s.image_height // s.patch_height, s.image_width // s.patch_width
    return math.ceil(s.image_height / s.patch_height), math.ceil(s.image_width / s.patch_width)


def positioned_prefix(s: ModelSpec) -> int:
    """Prefix tokens that get a row of the position table (the class and distillation tokens with
    `pos_embed_class_row`, the registers with `pos_embed_register_rows`)."""
    rows = int(s.class_token) + int(s.distill_token) if s.pos_embed_class_row else 0
    return rows + (s.registers if s.pos_embed_register_rows else 0)


def canonical_shapes(
    s: ModelSpec, *, num_patches: int, pos_total: int, pooled: int
) -> dict[str, tuple[int, ...]]:
    """Canonical tensor names and shapes, in a fixed order. Layouts (documented in weights.py):
    dense kernels (in, out); patch kernel (ph, pw, C, D) = HWIO; q/k/v kernels (D, H, hd) and
    biases (H, hd); attention output kernel (H, hd, D); LayerNorm `scale`/`bias` (D,)."""
    d = s.dim
    out: dict[str, tuple[int, ...]] = {}
    features = s.patch_height * s.patch_width * s.channels
    if s.patch_norm_in:
        out |= _norm("patch_norm_in", features)
    out["patch_embed.kernel"] = (s.patch_height, s.patch_width, s.channels, d)
    if s.patch_bias:
        out["patch_embed.bias"] = (d,)
    if s.patch_norm_out:
        out |= _norm("patch_norm_out", d)
    if s.class_token:
        out["cls_token"] = (d,)
    if s.distill_token:
        out["dist_token"] = (d,)
    if s.registers:
        out["reg_tokens"] = (s.registers, d)
    if s.pos_embed == "learned":
        out["pos_embed"] = (pos_total, d)
    if s.norm_before_blocks:
        out |= _norm("norm_pre", d)
    for i in range(s.depth):
        p = f"blocks.{i}."
        out |= _norm(p + "norm1", d)
        out |= _attention(s, p + "attn.", s.qkv_bias)
        if s.qk_norm:
            out |= _norm(p + "attn.q_norm", s.head_dim) | _norm(p + "attn.k_norm", s.head_dim)
        if s.layer_scale:
            out[p + "ls1.gamma"] = (d,)
        out |= _norm(p + "norm2", d)
        if s.mlp == "gated":
            out[p + "mlp.gate.kernel"] = (d, s.mlp_dim)
            out[p + "mlp.gate.bias"] = (s.mlp_dim,)
        out |= _mlp(s, p + "mlp.")
        if s.layer_scale:
            out[p + "ls2.gamma"] = (d,)
    if s.final_norm != "none":
        out |= _norm("final_norm", pooled if s.final_norm == "pooled" else d)
    if s.pooling == "map":  # after the final norm: big_vision and timm pool the normed tokens
        out["pool.probe"] = (d,)
        out |= _attention(s, "pool.attn.", s.pool_qkv_bias)
        out |= _norm("pool.norm", d) | _mlp(s, "pool.mlp.")
    width = pooled
    for j, hidden in enumerate(s.head_hidden):
        out[f"head.hidden.{j}.kernel"] = (width, hidden)
        out[f"head.hidden.{j}.bias"] = (hidden,)
        width = hidden
    if s.num_classes:
        out["head.out.kernel"] = (width, s.num_classes)
        out["head.out.bias"] = (s.num_classes,)
    if s.distill_token and s.num_classes:
        out["head_dist.out.kernel"] = (d, s.num_classes)
        out["head_dist.out.bias"] = (s.num_classes,)
    return out


def _norm(prefix: str, width: int) -> dict[str, tuple[int, ...]]:
    return {prefix + ".scale": (width,), prefix + ".bias": (width,)}


def _attention(s: ModelSpec, p: str, bias: bool) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for proj in ("query", "key", "value"):
        out[p + f"{proj}.kernel"] = (s.dim, s.heads, s.head_dim)
        if bias:
            out[p + f"{proj}.bias"] = (s.heads, s.head_dim)
    out[p + "out.kernel"] = (s.heads, s.head_dim, s.dim)
    out[p + "out.bias"] = (s.dim,)
    return out


def _mlp(s: ModelSpec, p: str) -> dict[str, tuple[int, ...]]:
    return {p + "fc1.kernel": (s.dim, s.mlp_dim), p + "fc1.bias": (s.mlp_dim,),
            p + "fc2.kernel": (s.mlp_dim, s.dim), p + "fc2.bias": (s.dim,)}


def param_group(name: str) -> str:
    """The parameter group a canonical tensor counts in (`compare.py spec`, the parameter table)."""
    if name.startswith("blocks."):
        part = name.split(".")[2]
        groups = {"norm1": "blocks.norms", "norm2": "blocks.norms", "ls1": "blocks.layer_scale",
                  "ls2": "blocks.layer_scale"}
        return groups.get(part, f"blocks.{part}")
    return name.split(".")[0]
