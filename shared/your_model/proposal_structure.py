"""The spec read from a model's structure (`proposal.py`'s fourth source): the fields its parameters'
shapes and its layers' order state, for a model whose names no library or format knows. It reads
with what binding by structure knows (`structure*.py`): the same units, the same framework layouts
(torch OIHW, Keras and Flax HWIO, MLX OHWI convs; (out, in) or (in, out) Linears), the same indexed
container of alike blocks, the same reading of a block's Linears as attention then MLP, and the same
names for tokens and the position table.

- the patch projection: a conv kernel gives dim, channels and the patch; else a Linear on flattened
  patches gives dim and, square patches assumed, the patch and channels; its bias `patch_bias`;
- the blocks: depth (the container of alike blocks), mlp_dim and a gated MLP (a block's Linears),
  which projections have a bias (`qkv_bias`, `bias_free`), LayerScale, qk-norm;
- the norms outside the blocks: over flattened patches, right after the patch projection in its
  module, before the blocks, after them (a final norm registered before the blocks, vit-pytorch's
  habit, when none follows them);
- the head: the classes of the last Linear after the blocks, or of a bare `pooled @ proj` (CLIP's);
- the class, distillation and register tokens and the position table (`proposal_tokens.py`): the
  table's rows, less the class row (and the registers' rows), make a square patch grid, so the
  image is grid x patch.

What the shapes cannot say (the heads that split a q/k/v Linear, pre or post norm, mean or class
pooling beside a class token) is not read here: it stays unread and is listed with its `--set`."""

from __future__ import annotations

import math
import re
from typing import Any

from shared.checkpoints.live import Fact
from shared.core.layer import Layer
from shared.core.spec import BIAS_FREE, QKV_PARTS, ModelSpec
from shared.errors import PortbenchError
from shared.your_model.proposal_tokens import token_facts
from shared.your_model.structure import FREE, bare_projection, units_of
from shared.your_model.structure_blocks import BODY, INDEXED, block_groups, emit, linear_plan
from shared.your_model.structure_parts import (
    BIAS,
    FRAMEWORK_LAYOUTS,
    Builder,
    Unit,
    library_terms,
)

# the conv kernel's axes per layout: (out, in, height, width) positions, counted so that they hold for
# a 2-D kernel and a 3-D one (Qwen's Conv3d over frames) alike, and the frames' axis of a 3-D one
CONV_AXES = {"conv": (0, 1, -2, -1), "same": (-1, -2, -4, -3), "conv_ohwi": (0, -1, -3, -2)}
FRAMES_AXIS = {"conv": 2, "same": 0, "conv_ohwi": 1}
CONV_NAMES = {"conv": ("OIHW", "OITHW"), "same": ("HWIO", "THWIO"), "conv_ohwi": ("OHWI", "OTHWI")}


def structure_facts(params: dict[str, Any], layers: list[Layer], family: str,
                    known: dict[str, Fact]) -> dict[str, Fact]:
    """The fields the model's structure states (module docstring), each with its source; `known`
    (what earlier sources read) gives the depth where the attention layers counted it."""
    if family not in FRAMEWORK_LAYOUTS:
        return {}
    shapes = {name: tuple(value.shape) for name, value in params.items()}
    units = units_of(shapes, layers)
    out: dict[str, Fact] = {}
    patch = _patch(units, family, out)
    if patch is None:
        return out
    dim = out["dim"][0]
    groups = _blocks(units, known, out) or _runs(units, patch, known, out)
    inside = [u for g in groups for u in g] if groups else []
    first = min((u.order for u in inside), default=len(units))
    last = max((u.order for u in inside), default=len(units))
    free = [u for u in units if u.kind in FREE and u not in inside]
    before = [u for u in units if u.order < first and u not in free and u is not patch]
    after = [u for u in units if u.order > last and u not in free]
    if groups:
        _block(groups[0], dim, family, out)
    _norms(patch, before, after, known, out)
    _head(after, free, dim, family, out)
    token_facts(free, dim, out)
    return out


def _patch(units: list[Unit], family: str, out: dict[str, Fact]) -> Unit | None:
    """dim, channels, patch and patch_bias from the conv kernel, else from the first Linear (a
    Linear on flattened patches: square patches assumed)."""
    layout = FRAMEWORK_LAYOUTS[family][1]
    for unit in units:
        kernel = next(((n, s) for n, s in unit.params.items() if len(s) in (4, 5)), None)
        if unit.kind == "conv" and kernel is not None:
            name, shape = kernel
            o, i, h, w = (shape[k] for k in CONV_AXES[layout])
            where = f"shape of {name} {shape} ({CONV_NAMES[layout][len(shape) - 4]})"
            out |= {"dim": (o, where), "channels": (i, where), "patch_height": (h, where),
                    "patch_width": (w, where)}
            if len(shape) == 5:  # a Conv3d over frames: an image is repeated to fill them
                out["temporal_patch_size"] = (shape[FRAMES_AXIS[layout]], where)
            out["patch_bias"] = (_has_bias(unit), _bias_source(unit))
            return unit
    torch_like = FRAMEWORK_LAYOUTS[family][0] == "linear"
    linear = next((u for u in units if u.kind == "linear"), None)
    if linear is None:
        return None
    features, dim = linear.io(torch_like)
    channels = next((c for c in (3, 1)
                     if features % c == 0 and math.isqrt(features // c) ** 2 == features // c), None)
    where = f"{linear.label} on flattened patches ({features} -> {dim})"
    out["dim"] = (dim, where)
    if channels is not None:
        side = math.isqrt(features // channels)
        square = f"{where}: {features} = {channels} channels x {side}x{side} (square patches assumed; " \
                 "--set channels, patch_height, patch_width state others)"
        out |= {"channels": (channels, square), "patch_height": (side, square), "patch_width": (side, square)}
    out["patch_bias"] = (_has_bias(linear), _bias_source(linear))
    return linear


def _blocks(units: list[Unit], known: dict[str, Fact], out: dict[str, Fact]) -> list[list[Unit]] | None:
    """The container of alike blocks binding by structure finds (`block_groups`), at the depth the
    attention layers counted, else at each index count a container has: the widest."""
    indices: dict[tuple[str, ...], set[int]] = {}
    for unit in units:
        segs = [s for s in re.split(r"[./]", unit.path) if s]
        for k, seg in enumerate(segs):
            if m := INDEXED.fullmatch(seg):
                indices.setdefault((*segs[:k], m[1]), set()).add(int(m[2]))
    counts = {len(found) for found in indices.values()}
    if isinstance(known.get("depth", (None,))[0], int):
        counts = {known["depth"][0]}
    best: tuple[int, list[list[Unit]]] | None = None
    for depth in sorted(counts):
        groups = block_groups(ModelSpec(depth=depth), units)
        cover = sum(len(g) for g in groups) if groups else 0
        if groups and (best is None or cover > best[0]):
            best = (cover, groups)
    if best is None:
        return None
    groups = best[1]
    container = _container(groups[0][0].path)
    out["depth"] = (len(groups), f"{len(groups)} alike blocks in {container}")
    return groups


def _runs(units: list[Unit], patch: Unit, known: dict[str, Fact],
          out: dict[str, Fact]) -> list[list[Unit]] | None:
    """Without an indexed container (Keras' flat `encoder_0_mlp_in` names), at the depth the
    attention layers counted: `depth` equal runs of alike layers after the patch projection, as
    binding by structure splits them (`split_blocks`), with a norm before them and up to a final
    norm and head layers after them left out."""
    depth = known.get("depth", (None,))[0]
    body = [u for u in units if u.kind in BODY and u.order > patch.order]
    if not isinstance(depth, int) or depth < 1:
        return None
    for lead in (0, 1):
        for tail in range(4):
            run = body[lead:len(body) - tail]
            per, extra = divmod(len(run), depth)
            if extra or not per:
                continue
            groups = [run[i * per:(i + 1) * per] for i in range(depth)]
            shapes = [[(u.kind, tuple(sorted(u.params.values()))) for u in g] for g in groups]
            if all(s == shapes[0] for s in shapes) and any(u.kind == "attention" for u in groups[0]):
                out["depth"] = (depth, f"{depth} equal runs of {per} layers from {groups[0][0].label}")
                return groups
    return None


def _block(group: list[Unit], dim: int, family: str, out: dict[str, Fact]) -> None:
    """mlp_dim and a gated MLP, the biases, LayerScale and qk-norm, from block 0 read as binding
    reads it (its Linears as attention then MLP, on one head as wide as the model, which binds
    the same Linears whatever the heads)."""
    where = _container(group[0].path)
    linears = [u for u in group if u.kind == "linear"]
    attention = [u for u in group if u.kind == "attention"]
    torch_like = FRAMEWORK_LAYOUTS[family][0] == "linear"
    fc2 = next((u for u in reversed(linears) if u.io(torch_like)[1] == dim), None)
    if fc2 is None:
        return
    hidden = fc2.io(torch_like)[0]
    plan = None
    for mlp in ("standard", "gated"):
        trial = ModelSpec(dim=dim, heads=1, head_dim=dim, mlp_dim=hidden, mlp=mlp, depth=1)
        b = Builder(trial, family)
        try:
            if attention:
                b.attention(attention[0], "blocks.0.attn")
            plan = linear_plan(b, trial, 0, linears, with_attention=not attention)
            emit(b, trial, "blocks.0", plan)
        except PortbenchError:
            plan = None
            continue
        break
    if plan is None:
        return
    source = f"the Linears of {where} ({', '.join(u.label for u in linears)})"
    out["mlp_dim"] = (hidden, f"{fc2.label} in features; {source}")
    out["mlp"] = (mlp, f"{source}: {'a gate beside fc1' if mlp == 'gated' else 'fc1 then fc2'}")
    bound = {c for link in b.links for c in link.canonical}
    missing = [name for name in BIAS_FREE if f"blocks.0.{name}.kernel" in bound
               and f"blocks.0.{name}.bias" not in bound]
    qkv = [name for name in QKV_PARTS if name in missing]
    out["qkv_bias"] = (len(qkv) < len(QKV_PARTS), f"the q, k, v biases of {where}")
    free = [name for name in missing if name not in QKV_PARTS or len(qkv) < len(QKV_PARTS)]
    but = " but q, k, v (qkv_bias)" if len(qkv) == len(QKV_PARTS) else ""
    out["bias_free"] = (tuple(free), f"the projections of {where} without a bias" if free else
                        f"every projection of {where}{but} has a bias")
    if not attention:  # bound on one head as wide as the model: k and v as wide as q, every head's
        out["kv_heads"] = (None, f"the k and v of {where} as wide as q (keys and values with every head)")
    scales = [u for u in group if u.kind in FREE and any(math.prod(s) == dim for s in u.params.values())]
    out["layer_scale"] = (len(scales) == 2, f"{len(scales)} per-channel scales of width {dim} in {where}")
    norms = [u for u in group if u.kind == "layer_norm" and u.width() != dim]
    out["qk_norm"] = (len(norms) == 2, f"{len(norms)} LayerNorms narrower than {dim} in {where}")


def _norms(patch: Unit, before: list[Unit], after: list[Unit], known: dict[str, Fact],
           out: dict[str, Fact]) -> None:
    """The LayerNorms outside the blocks, by place: the patch's, before the blocks, after them."""
    norms = [u for u in before if u.kind == "layer_norm"]
    features = [u for u in norms if u.order < patch.order]
    out["patch_norm_in"] = (bool(features), f"LayerNorm {features[0].label} before the patch projection"
                            if features else "no LayerNorm before the patch projection")
    parent = patch.path.rpartition(".")[0]
    beside = [u for u in norms if u.order == patch.order + 1 and parent and u.path.startswith(parent + ".")]
    out["patch_norm_out"] = (bool(beside), f"LayerNorm {beside[0].label} right after the patch projection, "
                             "in its module" if beside else "no LayerNorm in the patch projection's module")
    pre = [u for u in norms if u not in features and u not in beside]
    post = [u for u in after if u.kind == "layer_norm"]
    pool = next((u for u in after if u.kind == "attention"), None)
    if pool is not None and len(post) in (1, 2):  # an attention pool: the last LayerNorm is its own
        post = post[:-1]
    elif pool is not None or len(post) > 1:
        return  # two norms after the blocks and no pool: binding by structure says which
    if len(pre) > 1:
        return  # two norms before the blocks: binding by structure says which
    place = "after the blocks" if pool is None else f"between the blocks and the attention pool {pool.label}"
    if not post and pre and pool is None and known.get("final_norm", (None,))[0] != "none":
        # vit-pytorch's Transformer registers its final norm before its layers (unless a library said
        # there is none: CLIP's classifier leaves post_layernorm unread and keeps pre_layrnorm)
        place = "the only norm outside the blocks, registered before them, taken as the final norm"
        out["norm_before_blocks"] = (False, f"LayerNorm {pre[0].label}, {place}")
        post, pre = pre, []
    else:
        out["norm_before_blocks"] = (bool(pre), f"LayerNorm {pre[0].label} between the patch projection and "
                                     "the blocks" if pre else "no LayerNorm before the blocks")
    if not post:
        out["final_norm"] = ("none", "no LayerNorm after the blocks" if pool is None else
                             f"no LayerNorm {place} (the one after it is the pool's)")
        return
    named = next((f for fragment, _, f in library_terms() if f and fragment in post[0].path.lower()), "")
    if named:
        out["final_norm"] = (named.split("=")[1], f"LayerNorm {post[0].label}, {place}: its name says it")
    else:
        out["final_norm"] = ("tokens", f"LayerNorm {post[0].label}, {place}: on every token")


def _head(after: list[Unit], free: list[Unit], dim: int, family: str, out: dict[str, Fact]) -> None:
    """The classes: the last Linear after the blocks, from the width, else a bare `pooled @ proj`
    parameter (none: no classifier)."""
    torch_like = FRAMEWORK_LAYOUTS[family][0] == "linear"
    linears = [u for u in after if u.kind == "linear"]
    pool = next((u for u in after if u.kind == "attention"), None)
    if pool is not None:  # an attention pool (its MLP's two Linears), then the head
        out["pooling"] = ("map", f"{pool.label} after the blocks: an attention pool")
        if len(linears) == 3:
            fan_in, classes = linears[-1].io(torch_like)
            where = f"{linears[-1].label} ({fan_in} -> {classes}), the Linear after the attention pool's MLP"
            out |= {"num_classes": (classes, where), "head_hidden": ((), where)}
        elif len(linears) == 2:
            out |= {"num_classes": (0, "no Linear after the attention pool's MLP (no classifier)"),
                    "head_hidden": ((), "no Linear after the attention pool's MLP")}
        return
    bare = bare_projection(free, dim) if not linears else None
    if bare is not None:
        where = f"{bare[1]} {bare[2]}, a bare (in, out) projection with no Linear after the blocks"
        out |= {"num_classes": (bare[2][1], where), "head_hidden": ((), where)}
        out["bias_free"] = ((*out.get("bias_free", ((), ""))[0], "head.out"),
                            f"{out['bias_free'][1]}; {where}" if "bias_free" in out else where)
        return
    if not linears:
        out["num_classes"] = (0, "no Linear after the blocks (no classifier)")
        return
    head = linears[-1]
    fan_in, classes = head.io(torch_like)
    if len(linears) == 1:
        out["head_hidden"] = ((), f"{head.label} is the only Linear after the blocks")
    out["num_classes"] = (classes, f"{head.label} ({fan_in} -> {classes}), the last Linear after the blocks")
    if len(linears) == 1 and fan_in == dim and not _has_bias(head):
        out["bias_free"] = ((*out.get("bias_free", ((), ""))[0], "head.out"),
                            f"{out['bias_free'][1]}; {head.label} has no bias" if "bias_free" in out
                            else f"{head.label} has no bias")


def _has_bias(unit: Unit) -> bool:
    # a vector, or named as one (equinox's conv bias is (D, 1, 1))
    return any(len(s) == 1 or n.rsplit(".", 1)[-1] in BIAS for n, s in unit.params.items())


def _bias_source(unit: Unit) -> str:
    return f"{unit.label} {'has a' if _has_bias(unit) else 'has no'} bias"


def _container(path: str) -> str:
    """`blocks.0.attn` -> `blocks`, `encoderblock_0` -> `encoderblock`: what holds an indexed block."""
    segs = [s for s in re.split(r"[./]", path) if s]
    for k, seg in enumerate(segs):
        if m := INDEXED.fullmatch(seg):
            return ".".join([*segs[:k], *([m[1]] if m[1] else [])]) or path
    return path
