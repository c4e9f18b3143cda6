"""Binding by structure, when no naming convention fits: a user's layers in definition order
against the canonical order, each layer's parameters told apart by their last name segment and
their shape, with the framework's layouts (torch Linear (out, in) and Conv2d OIHW; Keras and Flax
(in, out) and HWIO; MLX Linear (out, in) and Conv2d OHWI; packed q/k/v, `nn.MultiheadAttention`'s
`in_proj_weight`; Keras `MultiHeadAttention` and `nnx.MultiHeadAttention` per-head (D, H, hd)
kernels; MLX `MultiHeadAttention`'s query_proj / key_proj / value_proj / out_proj). Anything two ways
is refused, and so is a layer that fits nothing, by name (`structure_parts.misfit`).

The order: the patch embedding (and its LayerNorms), then the blocks (`structure_blocks`: an
indexed container's entries, else equal runs), then what lies before them (the LayerNorm before
the blocks) and after them (the final norm, the attention pool, the head layers, the distillation
head; a head or final norm defined before the blocks counts; a bias-free head may be a bare
`pooled @ proj` parameter), then the free parameters (tokens, positions, the pool's probe) by size
and name."""

from __future__ import annotations

import math
import re

from shared.core.layer import Layer
from shared.core.mapping import Link, Table
from shared.core.spec import ModelSpec
from shared.errors import WeightsError
from shared.your_model.structure_blocks import (
    BODY,
    attention_plan,
    bind_block,
    block_groups,
    emit,
    split_blocks,
)
from shared.your_model.structure_parts import Builder, Shape, Unit, misfit

FREE = ("other", "embedding")


def units_of(native: dict[str, Shape], layers: list[Layer]) -> list[Unit]:
    claimed: set[str] = set()
    units = []
    for layer in layers:
        mine = {p: native[p] for p in layer.params if p in native and p not in claimed}
        claimed |= set(mine)
        if mine:
            units.append(Unit(layer.path, layer.kind, mine, len(units)))
    free = {n: s for n, s in native.items() if n not in claimed}
    units += [Unit("", "other", {n: s}, len(units) + k) for k, (n, s) in enumerate(free.items())]
    return units


def fixed_links(spec: ModelSpec, native: dict[str, Shape], table: Table | None) -> list[Link]:
    """The links the user's rename rows make for the parameters they name (the rows win)."""
    found: dict[str, tuple[str, dict[tuple[int, ...], str]]] = {}
    for canonical in spec.derived.tensor_shapes if table is not None else ():
        hit = table.match(canonical)  # type: ignore[union-attr]
        if hit is not None and (name := hit[0].native_name(hit[1])) in native:
            found.setdefault(name, (hit[0].layout, {}))[1][hit[0].part(hit[1])] = canonical
    return [Link(name, tuple(parts[k] for k in sorted(parts)), lay) for name, (lay, parts) in found.items()]


def structural_links(spec: ModelSpec, native: dict[str, Shape], layers: list[Layer], framework: str,
                     rules: Table | None = None) -> tuple[list[Link], dict[str, str]]:
    """The links structure finds and why each (native name -> layer); `binding.bind`
    checks they are complete and makes them its Binding."""
    b = Builder(spec, framework)
    for link in fixed_links(spec, native, rules):
        b.add(link.native, link.canonical, link.layout, "map file")
    b.fixed = {c for link in b.links for c in link.canonical}
    units = units_of({n: s for n, s in native.items() if n not in b.why}, layers)
    patch = patch_embedding(b, spec, units) if "patch_embed.kernel" not in b.fixed else None
    groups = block_groups(spec, units)
    if groups is not None:
        inside = [u for g in groups for u in g]
        first, last = min(u.order for u in inside), max(u.order for u in inside)
        outside = [u for u in units if u not in inside]
        before, after = [u for u in outside if u.order < first], [u for u in outside if u.order > last]
        for unit in outside:
            if first < unit.order < last:
                raise misfit(spec, unit, "block", b.torch_like)
    else:
        before = after = units  # one list: the ends are taken from it, the blocks are what remains
    after_blocks(b, spec, after, before)
    if spec.norm_before_blocks:
        b.norm(take(before, "norm before the blocks", width=spec.dim), "norm_pre")
    if groups is None:
        body = [u for u in units if u.kind in BODY]
        inner = [u for u in units if u.kind in FREE and body and body[0].order < u.order < body[-1].order]
        groups = split_blocks(spec, [u for u in units if u in body or u in inner])
        before = after = [u for u in units if u not in body and u not in inner]
    outside = before if before is after else before + after
    tokens_and_positions(b, spec, [u for u in outside if u.kind in FREE])
    for unit in outside:
        if unit.kind not in FREE:
            place = "patch" if patch is not None and _beside(unit, patch, spec) else \
                "before" if unit.order < (groups[0][0].order if groups[0] else 0) else "after"
            raise misfit(spec, unit, place, b.torch_like)
    for i, group in enumerate(groups):
        bind_block(b, spec, i, group)
    return b.links, b.why


def take(units: list[Unit], where: str, last: bool = False, width: int | None = None) -> Unit:
    """The first (`last`: the last) LayerNorm of `units` (of that `width`, when given), taken out."""
    hits = [u for u in units if u.kind == "layer_norm" and (width is None or u.width() == width)]
    if not hits:
        raise WeightsError(f"your model has no layer_norm layer for the {where}")
    unit = hits[-1] if last else hits[0]
    units.remove(unit)
    return unit


def patch_embedding(b: Builder, spec: ModelSpec, units: list[Unit]) -> Unit:
    """A Conv2d / Conv, else the first Linear on flattened patches (their (ph, pw, C) order is
    the canonical one: another order does not bind differently, it computes differently, and
    verify says so); then its LayerNorms: one over the flattened patch, one right after it."""
    convs = [u for u in units if u.kind == "conv"]
    features = spec.derived.patch_features * spec.temporal_patch_size  # each frame's patch, side by side
    flat = [u for u in units if u.kind == "linear" and u.io(b.torch_like) == (features, spec.dim)]
    if not convs and not flat:
        raise WeightsError("your model has no conv layer, and no Linear on flattened patches "
                           f"({features} -> {spec.dim}), for the patch embedding")
    patch = (convs or flat)[0]
    b.dense(patch, "patch_embed", *((b.conv, b.conv_bias) if convs else (b.patch,)))
    at = units.index(patch)
    units.remove(patch)
    if spec.patch_norm_out:
        if at >= len(units) or units[at].kind != "layer_norm" or units[at].width() != spec.dim:
            raise WeightsError(f"your model has no LayerNorm right after its patch embedding {patch.label} "
                               "(patch_norm_out=true)")
        b.norm(units.pop(at), "patch_norm_out")
    if spec.patch_norm_in:
        b.norm(take(units, "LayerNorm on the flattened patches", width=spec.derived.patch_features),
               "patch_norm_in")
    return patch


def _beside(unit: Unit, patch: Unit, spec: ModelSpec) -> bool:
    """A LayerNorm that belongs to the patch embedding: over a flattened patch, or in its module."""
    parent = patch.path.rpartition(".")[0]
    return unit.kind == "layer_norm" and (unit.width() == spec.derived.patch_features
                                          or (bool(parent) and unit.path.startswith(parent + ".")))


def after_blocks(b: Builder, spec: ModelSpec, after: list[Unit], before: list[Unit]) -> None:
    """From the end: the distillation head, the head, its hidden layers, the attention pool (its
    MLP, LayerNorm and attention), the final norm. A head defined before the blocks counts."""
    def linear(where: str, hint: str | None = None) -> Unit:
        pool = [u for u in after if u.kind == "linear"] or [u for u in before if u.kind == "linear"]
        named = [u for u in pool if hint and u.hinted(hint)]
        if not pool:
            raise WeightsError(f"your model has no Linear layer for the {where}")
        unit = named[-1] if len(named) == 1 else pool[-1]
        (after if unit in after else before).remove(unit)
        return unit

    if spec.distill_token and spec.num_classes:
        b.dense(linear("distillation head", r"dist"), "head_dist.out", b.linear)
    bare = bare_projection([u for u in before + after if u.kind in FREE], spec.dim) \
        if "head.out" in spec.bias_free and not any(u.kind == "linear" for u in after) else None
    if bare is not None and bare[2][1] == spec.num_classes:  # its unit keeps the tokens beside it
        b.add(bare[1], ("head.out.kernel",), "same", f"{bare[1]} {bare[2]}, a bare (in, out) projection")
    elif spec.num_classes:
        b.dense(linear("head"), "head.out", b.linear)
    for j in reversed(range(len(spec.head_hidden))):
        b.dense(linear(f"head hidden layer {j}"), f"head.hidden.{j}", b.linear)
    if spec.pooling == "map":
        b.dense(linear("attention pool's MLP"), "pool.mlp.fc2", b.linear)
        b.dense(linear("attention pool's MLP"), "pool.mlp.fc1", b.linear)
        b.norm(take(after, "attention pool's LayerNorm", last=True), "pool.norm")
        pool_attention(b, spec, after)
    if spec.final_norm != "none":
        # vit-pytorch's Transformer registers its final norm before its layers; the LayerNorm before
        # the blocks is the spec's own only with norm_before_blocks (the logits judge a wrong guess)
        lone = not spec.norm_before_blocks and not any(u.kind == "layer_norm" for u in after)
        b.norm(take(before if lone else after, "final norm", last=True), "final_norm")


def pool_attention(b: Builder, spec: ModelSpec, after: list[Unit]) -> None:
    """The attention pool's attention: an attention layer, else its last Linears (q, k, v in one,
    two or three, then the output)."""
    attention = [u for u in after if u.kind == "attention"]
    if attention:
        after.remove(attention[-1])
        b.attention(attention[-1], "pool.attn")
        return
    linears = [u for u in after if u.kind == "linear"]
    for k in (2, 3, 4):
        plan = attention_plan(spec, linears[-k:], b.torch_like) if len(linears) >= k else None
        if plan is not None and len(plan) == k:
            for unit, _ in plan:
                after.remove(unit)
            emit(b, spec, "pool", plan)
            return
    raise WeightsError("your model has no attention layer, nor q / k / v and output Linears, for the "
                       "attention pool (pooling=map)")


def bare_projection(free: list[Unit], dim: int) -> tuple[Unit, str, Shape] | None:
    """CLIP's and open_clip's output, `pooled @ proj`: a free (dim, out) parameter named as a
    projection or head, in (in, out) order in every framework since no Linear holds it."""
    hits = [(u, n, s) for u in free for n, s in u.params.items()
            if len(s) == 2 and s[0] == dim and re.search(r"proj|head", n.lower())]
    return hits[0] if len(hits) == 1 else None


# the free parameters: canonical name -> the words that name it natively
TOKEN_HINTS = {"cls_token": r"cls|class", "dist_token": r"dist", "reg_tokens": r"reg", "pos_embed": r"pos",
               "pool.probe": r"probe|latent|query"}


def tokens_and_positions(b: Builder, spec: ModelSpec, free: list[Unit]) -> None:
    """Each free parameter the spec has, by its size; two of one size by their names, else in
    canonical order when there are exactly as many as the spec wants."""
    shapes = spec.derived.tensor_shapes
    wanted = [c for c in TOKEN_HINTS if c in shapes and c not in b.fixed]
    params = [(u, n, s) for u in free for n, s in u.params.items() if n not in b.why]
    for canonical in wanted:
        want = math.prod(shapes[canonical])
        hits = [p for p in params if math.prod(p[2]) == want]
        named = [p for p in hits if re.search(TOKEN_HINTS[canonical], p[1].lower())]
        alike = [c for c in wanted[wanted.index(canonical):] if math.prod(shapes[c]) == want]
        if len(hits) > 1 and len(named) == 1:
            hits = named
        elif len(hits) > 1 and len(hits) == len(alike):
            hits = hits[:1]
        if len(hits) != 1:
            what = "none" if not hits else ", ".join(n for _, n, _ in hits)
            raise WeightsError(f"your model's {canonical} (size {want}) is ambiguous or missing by "
                               f"structure: {what}; pass --map rules.toml")
        params.remove(hits[0])
        b.token(hits[0][1], hits[0][2], canonical)
    # one that could be a token or a position table the spec lacks is named with those fields;
    # any other stays unbound, and `bind` names it unused
    lacking = not (spec.class_token and spec.distill_token and spec.registers and spec.pos_embed == "learned")
    for unit, name, shape in params if lacking else []:
        if math.prod(shape) % spec.dim == 0:
            raise misfit(spec, Unit(name, "parameter", {name: shape}, unit.order), "outside", b.torch_like)
