"""The catalogue's alternative settings as runnable cases: what a port that took a framework
default (or made a classic porting slip) computes, expressed as the NumPy reference run on a
changed (spec, canonical weights, images) triple.

Used three ways: the catalogue's demonstrations (pinned vs unpinned gap), `compare.py diagnose`
(which alternative, alone or in a pair, reproduces a user's logits) and the mutation tests.

Some alternatives are spec fields (epsilon, GELU form, norm placement, pooling, remainder);
others have no field because the spec fixes a convention (patch flatten order, kernel layouts,
which rows of a larger position table are used), so they are written as the equivalent change
to the canonical weights or to the images. Each case says which catalogue entry it belongs to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from shared.core.spec import ModelSpec
from shared.core.weights import Tensors, first_shape_mismatch
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
    key: str  # unique, as printed: "layer_norm_eps=0.001"
    entry: str  # the catalogue entry it belongs to (shared/teaching/divergences.py)
    group: str  # variants of one group exclude each other in pairs (same knob)
    cause: str  # what a port that computes this did, for `diagnose`'s report
    transform: Transform

    def apply(self, case: Case) -> Case | None:
        return self.transform(case)


# Documented framework defaults (divergences.md rows 1 and 3). `shared/teaching/divergences.py` reads the
# installed frameworks' values at run time; tests/test_teaching_catalogue.py checks they agree,
# so diagnose can stay fast (no framework import) without drifting from the frameworks.
EPSILON_SOURCES: tuple[tuple[float, str], ...] = (
    (1e-3, "Keras' LayerNormalization default epsilon"),
    (1e-5, "torch's nn.LayerNorm default eps"),
    (1e-6, "Flax's nnx.LayerNorm default epsilon"),
    (1e-7, "keras.ops.layer_normalization's default (backend.epsilon())"),
    (1e-12, "the epsilon of BERT-style Hugging Face configs (layer_norm_eps=1e-12)"),
)


def _with_spec(case: Case, **changes: object) -> Case | None:
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


def _with_weights(case: Case, **replaced: np.ndarray) -> Case:
    weights = dict(case.weights)
    weights.update(replaced)
    return Case(case.spec, weights, case.images)


# ---- spec-field alternatives ----------------------------------------------------------------
def _epsilon(value: float) -> Transform:
    def run(case: Case) -> Case | None:
        if math.isclose(case.spec.layer_norm_eps, value, rel_tol=1e-9):
            return None
        return _with_spec(case, layer_norm_eps=value)
    return run


def _gelu(where: str) -> Transform:
    """Flip exact <-> tanh GELU in the MLPs, the head, or both."""
    def run(case: Case) -> Case | None:
        s = case.spec
        flip = {"gelu": "gelu_tanh", "gelu_tanh": "gelu"}
        changes: dict[str, str] = {}
        if where in ("mlp", "all"):
            changes["activation"] = flip[s.activation]
        if where in ("head", "all") and s.head_hidden:
            changes["head_activation"] = flip[s.head_activation]
        if where == "head" and not s.head_hidden:
            return None
        if where == "all" and not s.head_hidden:
            return None  # identical to "mlp"
        return _with_spec(case, **changes)
    return run


def _field(name: str, value: object) -> Transform:
    def run(case: Case) -> Case | None:
        if getattr(case.spec, name) == value:
            return None
        return _with_spec(case, **{name: value})
    return run


def _drop_final_norm(case: Case) -> Case | None:
    if case.spec.final_norm == "none":
        return None
    weights = {k: v for k, v in case.weights.items() if not k.startswith("final_norm.")}
    try:
        spec = case.spec.replace(final_norm="none")
    except SpecError:
        return None
    return Case(spec, weights, case.images)


# ---- head width and attention scale (no canonical weights fit key_dim = dim) ----------------
def _query_scaled(factor: Callable[[ModelSpec], float]) -> Transform:
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
            if s.qkv_bias:
                changed[p + "bias"] = (case.weights[p + "bias"] * f).astype(np.float32)
        return _with_weights(case, **changed)
    return run


def _heads_merged(case: Case) -> Case | None:
    """One head of width heads*head_dim over the same q/k/v/out weights: what torch's
    nn.MultiheadAttention(num_heads=1) or Keras MHA(num_heads=1, key_dim=dim) computes."""
    s = case.spec
    if s.heads == 1:
        return None
    inner = s.derived.attn_inner
    weights = dict(case.weights)
    for i in range(s.depth):
        p = f"blocks.{i}.attn."
        for proj in ("query", "key", "value"):
            weights[p + proj + ".kernel"] = weights[p + proj + ".kernel"].reshape(s.dim, 1, inner)
            if s.qkv_bias:
                weights[p + proj + ".bias"] = weights[p + proj + ".bias"].reshape(1, inner)
        weights[p + "out.kernel"] = weights[p + "out.kernel"].reshape(1, inner, s.dim)
    spec = s.replace(heads=1, head_dim=inner)
    return Case(spec, weights, case.images)


# ---- layouts (conventions fixed by the spec, so no field) -----------------------------------
def _patch_flatten_chw(case: Case) -> Case | None:
    """Patches flattened (C, ph, pw) (torch's F.unfold / Conv2d.weight.reshape(D, -1)) against
    a kernel stored for (ph, pw, C): the canonical kernel read in the other order."""
    s = case.spec
    if s.channels == 1:
        return None  # one channel: both orders are the same
    flat = case.weights["patch_embed.kernel"].reshape(-1, s.dim)
    kernel = flat.reshape(s.channels, s.patch_height, s.patch_width, s.dim).transpose(1, 2, 0, 3)
    return _with_weights(case, **{"patch_embed.kernel": np.ascontiguousarray(kernel)})


def _conv_kernel_reshaped(case: Case) -> Case | None:
    """HWIO -> OIHW done with reshape instead of transpose(3, 2, 0, 1)."""
    k = case.weights["patch_embed.kernel"]
    ph, pw, c, d = k.shape
    oihw = k.reshape(d, c, ph, pw)
    return _with_weights(case, **{"patch_embed.kernel": np.ascontiguousarray(oihw.transpose(2, 3, 1, 0))})


def _dense_reshaped(case: Case) -> Case | None:
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
    return _with_weights(case, **changed)


def _images_reshaped_nchw(case: Case) -> Case | None:
    """NHWC images turned into NCHW with reshape instead of a transpose."""
    b, h, w, c = case.images.shape
    if c == 1:
        return None
    images = case.images.reshape(b, c, h, w).transpose(0, 2, 3, 1)
    return Case(case.spec, case.weights, np.ascontiguousarray(images))


def _pos_last_rows(case: Case) -> Case | None:
    """A larger position table read from its end rather than its start."""
    d = case.spec.derived
    if case.spec.pos_embed != "learned" or d.pos_rows_unused == 0:
        return None
    table = case.weights["pos_embed"]
    shifted = np.concatenate([table[d.pos_rows_unused:], table[: d.pos_rows_unused]])
    return _with_weights(case, pos_embed=np.ascontiguousarray(shifted))


def _no_positions(case: Case) -> Case | None:
    if case.spec.pos_embed == "none":
        return None
    weights = {k: v for k, v in case.weights.items() if k != "pos_embed"}
    try:
        spec = case.spec.replace(pos_embed="none", pos_embed_class_row=False, pos_rows=None)
    except SpecError:
        return None
    return Case(spec, weights, case.images)


def all_variants() -> list[Variant]:
    """Every alternative, in catalogue order. Which apply depends on the case."""
    out = [
        Variant(f"layer_norm_eps={value:g}", "layer_norm_eps", "layer_norm_eps",
                f"your port uses {source} ({value:g})", _epsilon(value))
        for value, source in EPSILON_SOURCES
    ]
    out += [
        Variant("gelu form flipped (MLP)", "gelu", "activation",
                "your port's MLP uses the other GELU form (torch and keras.activations: exact; "
                "jax.nn.gelu, nnx.gelu and keras.ops.gelu: tanh by default)", _gelu("mlp")),
        Variant("gelu form flipped (head)", "gelu", "head_activation",
                "your port's head uses the other GELU form", _gelu("head")),
        Variant("gelu form flipped (MLP and head)", "gelu", "activation",
                "your port uses the other GELU form everywhere", _gelu("all")),
        Variant("norm=pre", "norm_placement", "norm", "your port normalises before each "
                "sub-block (pre-norm) where the spec says post-norm", _field("norm", "pre")),
        Variant("norm=post", "norm_placement", "norm", "your port normalises after each "
                "residual sum (post-norm, torch's TransformerEncoderLayer default)",
                _field("norm", "post")),
        Variant("pooling=cls", "pooling", "pooling", "your port reads the class token",
                _field("pooling", "cls")),
        Variant("pooling=mean", "pooling", "pooling", "your port averages the patch tokens",
                _field("pooling", "mean")),
        Variant("final_norm=pooled", "pooling", "final_norm", "your port applies the final "
                "LayerNorm after pooling (timm's fc_norm)", _field("final_norm", "pooled")),
        Variant("final_norm=tokens", "pooling", "final_norm", "your port applies the final "
                "LayerNorm to every token before pooling", _field("final_norm", "tokens")),
        Variant("final_norm=none", "pooling", "final_norm", "your port has no final LayerNorm",
                _drop_final_norm),
        Variant("remainder=pad", "remainder", "remainder", "your port zero-pads the image to "
                "whole patches (Keras/Flax padding='same')", _field("remainder", "pad")),
        Variant("remainder=drop", "remainder", "remainder", "your port drops the trailing "
                "pixels (a 'valid' conv, torch's unfold)", _field("remainder", "drop")),
        Variant("attention scaled by 1/sqrt(dim)", "attention_scale", "attention_scale",
                "your port's head width is dim, not dim/heads (the 'same integer' trap: Keras "
                "key_dim=dim, or a hand-written 1/sqrt(dim))",
                _query_scaled(lambda s: math.sqrt(s.head_dim / s.dim))),
        Variant("attention not scaled", "attention_scale", "attention_scale",
                "your port omits the 1/sqrt(head width) scale", _query_scaled(
                    lambda s: math.sqrt(s.head_dim))),
        Variant("heads merged into one", "head_width", "heads", "your port runs one head of "
                "width heads*head_dim (num_heads=1, or heads folded into key_dim)", _heads_merged),
        Variant("patches flattened (C, ph, pw)", "patch_layout", "patch_order",
                "your port flattens patches channel-first (F.unfold order) against a (ph, pw, C) "
                "kernel", _patch_flatten_chw),
        Variant("images reshaped to NCHW", "patch_layout", "image_layout",
                "your port reshapes NHWC images to NCHW instead of transposing them",
                _images_reshaped_nchw),
        Variant("patch kernel reshaped to OIHW", "conv_kernel_layout", "patch_kernel",
                "your port loads the HWIO patch kernel into an OIHW Conv2d with reshape "
                "instead of transpose(3, 2, 0, 1)", _conv_kernel_reshaped),
        Variant("dense kernels reshaped to (out, in)", "dense_kernel_layout", "dense_kernel",
                "your port loads (in, out) dense kernels into (out, in) weights with reshape "
                "instead of a transpose", _dense_reshaped),
        Variant("position rows taken from the end", "pos_table_rows", "pos_rows",
                "your port reads the last rows of the larger position table, not the first",
                _pos_last_rows),
        Variant("no position embedding", "pos_table_rows", "pos_embed",
                "your port never adds the position table", _no_positions),
    ]
    return out


def variant(key: str) -> Variant:
    for v in all_variants():
        if v.key == key:
            return v
    raise KeyError(key)


def applicable(case: Case) -> list[tuple[Variant, Case]]:
    out = []
    for v in all_variants():
        changed = v.apply(case)
        if changed is not None:
            out.append((v, changed))
    return out


def applicable_pairs(case: Case, singles: list[Variant] | None = None
                     ) -> list[tuple[tuple[Variant, Variant], Case]]:
    """Every pair of alternatives on different knobs, applied one after the other (from
    `singles` when given: callers drop alternatives that do not change this case's function)."""
    out = []
    chosen = singles if singles is not None else [v for v, _ in applicable(case)]
    for a, b in combinations(chosen, 2):
        if a.group == b.group:
            continue
        first = a.apply(case)
        second = b.apply(first) if first is not None else None
        if second is not None:
            out.append(((a, b), second))
    return out
