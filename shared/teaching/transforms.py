"""The changes behind the catalogue's alternatives (`Variant`, declared in the rows of
`shared.teaching.divergences`): each turns one run of the reference (a `Case`) into what a port
that took a framework default, or made a classic porting slip, computes, or None when it does not
apply to that case.

Spec-field changes come first; then the changes with no field, because the spec fixes a
convention (patch flatten order, kernel layouts, which rows of a larger position table are used),
written as the equivalent change to the canonical weights or to the images.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from shared.core.spec import NORM_EPS_FIELDS, ModelSpec
from shared.core.weights import Tensors, conv_oihw_to_hwio, first_shape_mismatch
from shared.errors import SpecError


@dataclass(frozen=True)
class Case:
    """One run of the reference: a spec, canonical weights that fit it, and NHWC images."""

    spec: ModelSpec
    weights: Tensors
    images: np.ndarray


Transform = Callable[[Case], "Case | None"]  # None: the alternative does not apply to this case


@dataclass(frozen=True)
class Variant:
    """One alternative, as `diagnose` reports it and the demonstrations and the rung table run it:
    declared in its catalogue entry's row (shared/teaching/divergences.py), which fills in `entry`
    and, left empty, `group`."""

    key: str  # unique, as printed: "layer_norm_eps=0.001"
    cause: str  # what a port that computes this did, for `diagnose`'s report
    transform: Transform
    group: str = ""  # its knob: variants of one group exclude each other in pairs ("": its entry's own)
    entry: str = ""  # the catalogue entry that declares it

    def apply(self, case: Case) -> Case | None:
        return self.transform(case)


def with_spec(case: Case, **changes: object) -> Case | None:
    """The case under a changed spec, or None when the spec is invalid or the weights no longer
    fit it (the alternative cannot be what the user ran with these weights)."""
    try:
        spec = case.spec.replace(**changes)
        _ = spec.derived
    except (SpecError, TypeError, ValueError):
        return None
    if first_shape_mismatch(spec, case.weights) is not None:
        return None
    return Case(spec, case.weights, case.images)


def with_weights(case: Case, **replaced: np.ndarray) -> Case:
    weights = dict(case.weights)
    weights.update(replaced)
    return Case(case.spec, weights, case.images)


# ---- spec-field alternatives ----------------------------------------------------------------
def epsilon(value: float, norm_type: str = "layer_norm") -> Transform:
    """The blocks' norms (and every norm without an epsilon of its own) at `value`: on specs whose
    norms are `norm_type` only, so a LayerNorm default and an RMSNorm default are told apart."""
    def run(case: Case) -> Case | None:
        s = case.spec
        if s.norm_type != norm_type or math.isclose(s.layer_norm_eps, value, rel_tol=1e-9):
            return None
        return with_spec(case, layer_norm_eps=value)
    return run


def place_epsilon(place: str, value: float) -> Transform:
    """One place's norms (`<place>_norm_eps`) at `value` while the others keep the spec's: a port
    that passes its epsilon to the blocks and leaves, say, the patch norms at a framework default."""
    def run(case: Case) -> Case | None:
        if math.isclose(case.spec.derived.norm_eps[place], value, rel_tol=1e-9):
            return None
        return with_spec(case, **{NORM_EPS_FIELDS[place]: value})  # None where no such norm stands
    return run


def gelu(where: str) -> Transform:
    """Flip exact <-> tanh GELU in the MLPs, the head, or both."""
    def run(case: Case) -> Case | None:
        s = case.spec
        flip = {"gelu": "gelu_tanh", "gelu_tanh": "gelu"}
        if where != "mlp" and not s.head_hidden:
            return None  # no head MLP: "head" has nothing to flip, "all" is identical to "mlp"
        if (where != "head" and s.activation not in flip) or (
                where != "mlp" and s.head_activation not in flip):
            return None  # QuickGELU and SiLU have no tanh form (quick_gelu_swapped is their slip)
        changes: dict[str, str] = {}
        if where in ("mlp", "all"):
            changes["activation"] = flip[s.activation]
        if where in ("head", "all"):
            changes["head_activation"] = flip[s.head_activation]
        return with_spec(case, **changes)
    return run


def spec_field(name: str, value: object) -> Transform:
    def run(case: Case) -> Case | None:
        if getattr(case.spec, name) == value:
            return None
        return with_spec(case, **{name: value})
    return run


def drop_final_norm(case: Case) -> Case | None:
    if case.spec.final_norm == "none":
        return None
    weights = {k: v for k, v in case.weights.items() if not k.startswith("final_norm.")}
    try:
        spec = case.spec.replace(final_norm="none")
    except SpecError:
        return None
    return Case(spec, weights, case.images)


# ---- head width and attention scale (no canonical weights fit key_dim = dim) ----------------
def query_scaled(factor: Callable[[ModelSpec], float]) -> Transform:
    """Scores scaled by 1/sqrt(w) instead of 1/sqrt(head_dim) equal scores from a query kernel
    and bias multiplied by sqrt(head_dim / w): the reference runs that."""
    def run(case: Case) -> Case | None:
        s = case.spec
        f = factor(s)
        if math.isclose(f, 1.0):
            return None
        changed: dict[str, np.ndarray] = {}
        for i in range(s.depth):
            p = f"blocks.{i}.attn.query."
            changed[p + "kernel"] = (case.weights[p + "kernel"] * f).astype(np.float32)
            if p + "bias" in case.weights:  # qkv_bias, unless bias_free names the query
                changed[p + "bias"] = (case.weights[p + "bias"] * f).astype(np.float32)
        return with_weights(case, **changed)
    return run


def heads_merged(case: Case) -> Case | None:
    """One head of width heads*head_dim over the same q/k/v/out weights: what torch's
    nn.MultiheadAttention(num_heads=1) or Keras MHA(num_heads=1, key_dim=dim) computes."""
    s = case.spec
    if s.heads == 1 or s.qk_norm:
        return None  # qk-norm's per-head scale (head_dim,) fits no merged head
    inner, group = s.derived.attn_inner, s.heads // s.derived.kv_heads
    weights = dict(case.weights)
    for i in range(s.depth):
        p = f"blocks.{i}.attn."
        for proj in ("query", "key", "value"):
            # grouped-query k/v: each head repeated to its query heads, then merged with them
            repeat = 1 if proj == "query" else group
            kernel = np.repeat(weights[p + proj + ".kernel"], repeat, axis=1)
            weights[p + proj + ".kernel"] = kernel.reshape(s.dim, 1, inner)
            if p + proj + ".bias" in weights:  # qkv_bias, unless bias_free names this part
                bias = np.repeat(weights[p + proj + ".bias"], repeat, axis=0)
                weights[p + proj + ".bias"] = bias.reshape(1, inner)
        weights[p + "out.kernel"] = weights[p + "out.kernel"].reshape(1, inner, s.dim)
    spec = s.replace(heads=1, head_dim=inner, kv_heads=None)
    return Case(spec, weights, case.images)


# ---- layouts (conventions fixed by the spec, so no field) -----------------------------------
def patch_flatten_chw(case: Case) -> Case | None:
    """Patches flattened (C, ph, pw) (torch's F.unfold / Conv2d.weight.reshape(D, -1)) against
    a kernel stored for (ph, pw, C): the canonical kernel read in the other order."""
    s = case.spec
    if s.channels == 1:
        return None  # one channel: both orders are the same
    k = case.weights["patch_embed.kernel"]  # each frame's (ph, pw, C) read as (C, ph, pw)
    chw = k.reshape(*k.shape[:-4], s.channels, s.patch_height, s.patch_width, s.dim)
    return with_weights(case, **{"patch_embed.kernel": np.ascontiguousarray(np.moveaxis(chw, -4, -2))})


def conv_kernel_reshaped(case: Case) -> Case | None:
    """HWIO -> OIHW (a Conv3d's THWIO -> OITHW) done with reshape instead of a transpose."""
    k = case.weights["patch_embed.kernel"]
    native = k.reshape(np.moveaxis(k, (-1, -2), (0, 1)).shape)
    return with_weights(case, **{"patch_embed.kernel": conv_oihw_to_hwio(native)})


def dense_reshaped(case: Case) -> Case | None:
    """Every (in, out) dense kernel loaded into a torch (out, in) weight with reshape instead of
    .T: same shape, scrambled values (a square layer hides even the shape)."""
    changed: dict[str, np.ndarray] = {}
    for name, k in case.weights.items():
        if not name.endswith(".kernel") or name == "patch_embed.kernel":
            continue
        if ".attn." in name and not name.endswith("attn.out.kernel"):
            continue  # q/k/v go through the packed layout, a separate slip
        flat = k.reshape(-1, k.shape[-1])  # (in, out)
        n_in, n_out = flat.shape
        changed[name] = np.ascontiguousarray(flat.reshape(n_out, n_in).T.reshape(k.shape))
    return with_weights(case, **changed)


def attention_biases_zeroed(case: Case) -> Case | None:
    """Every attention bias (q, k, v and output) zero: what an MLX nn.MultiHeadAttention left at
    its default bias=False computes with canonical weights."""
    if not case.spec.qkv_bias:
        return None
    zeroed = {name: np.zeros_like(value) for name, value in case.weights.items()
              if ".attn." in name and name.endswith(".bias")}
    return with_weights(case, **zeroed)


def images_reshaped_nchw(case: Case) -> Case | None:
    """NHWC images turned into NCHW with reshape instead of a transpose."""
    if case.spec.batching != "fixed":  # a naflex or packed batch is patches: no image layout to slip
        return None
    b, h, w, c = case.images.shape
    if c == 1:
        return None
    images = case.images.reshape(b, c, h, w).transpose(0, 2, 3, 1)
    return Case(case.spec, case.weights, np.ascontiguousarray(images))


def pos_last_rows(case: Case) -> Case | None:
    """A larger position table read from its end rather than its start."""
    d = case.spec.derived
    if case.spec.pos_embed != "learned" or d.pos_rows_unused == 0:
        return None
    table = case.weights["pos_embed"]
    shifted = np.concatenate([table[d.pos_rows_unused:], table[: d.pos_rows_unused]])
    return with_weights(case, pos_embed=np.ascontiguousarray(shifted))


def no_positions(case: Case) -> Case | None:
    if case.spec.pos_embed == "none":
        return None
    weights = {k: v for k, v in case.weights.items() if k != "pos_embed"}
    try:
        spec = case.spec.replace(pos_embed="none", pos_embed_class_row=False, pos_rows=None)
    except SpecError:
        return None
    return Case(spec, weights, case.images)
