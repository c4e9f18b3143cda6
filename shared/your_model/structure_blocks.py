"""The blocks of a user's model by structure: which layers form block i (an indexed container,
`blocks.3` / `layers_3` / `transformer.layers.3`, else equal runs in definition order), and one
block's layers against the canonical block (norms, attention, qk-norm, LayerScale, MLP)."""

from __future__ import annotations

import math
import re

from shared.core.spec import ModelSpec
from shared.errors import WeightsError
from shared.your_model.structure_parts import PARTS, Builder, Unit, misfit

BODY = ("layer_norm", "attention", "linear")
INDEXED = re.compile(r"(.*?)_?(\d+)")
Plan = list[tuple[Unit, tuple[str, ...]]]  # a Linear and the canonical parts it holds


def block_groups(spec: ModelSpec, units: list[Unit]) -> list[list[Unit]] | None:
    """The units under each index of the container that holds `depth` alike blocks (indexed 0..
    depth-1 or 1..depth, every block the same layers and shapes), the widest such; None if none."""
    keyed: dict[tuple[tuple[str, ...], str], dict[int, list[Unit]]] = {}
    for unit in units:
        segs = [s for s in re.split(r"[./]", unit.path) if s]
        for k, seg in enumerate(segs):
            if m := INDEXED.fullmatch(seg):
                keyed.setdefault((tuple(segs[:k]), m[1]), {}).setdefault(int(m[2]), []).append(unit)
    best: tuple[int, list[list[Unit]]] | None = None
    for groups in keyed.values():
        if sorted(groups) not in (list(range(spec.depth)), list(range(1, spec.depth + 1))):
            continue
        ordered = [groups[i] for i in sorted(groups)]
        shapes = [sorted((u.kind, tuple(sorted(u.params.values()))) for u in g) for g in ordered]
        cover = sum(len(g) for g in ordered)
        if all(s == shapes[0] for s in shapes) and any(u.kind in BODY for u in ordered[0]) and \
                (best is None or cover > best[0]):
            best = (cover, ordered)
    return best[1] if best else None


def split_blocks(spec: ModelSpec, body: list[Unit]) -> list[list[Unit]]:
    """Without an indexed container: `depth` equal runs of the layers in definition order."""
    per, extra = divmod(len(body), spec.depth)
    if extra or not per:
        shown = ", ".join(u.label for u in body[:3])
        more = ", ..." if len(body) > 3 else ""
        raise WeightsError(f"your model's {len(body)} layers between the patch embedding and the head "
                           f"({shown}{more}) do not split into {spec.depth} equal blocks, and no container "
                           f"indexed 0..{spec.depth - 1} holds them; pass --map rules.toml")
    return [body[i * per:(i + 1) * per] for i in range(spec.depth)]


def bind_block(b: Builder, spec: ModelSpec, i: int, group: list[Unit]) -> None:
    """Block i's layers: two LayerNorms of the width (and qk-norm's two of the head width), one
    attention layer or its Linears, the MLP's Linears, LayerScale's two gammas."""
    p, d, hd = f"blocks.{i}", spec.dim, spec.head_dim
    norms = [u for u in group if u.kind == "layer_norm"]
    qk = [u for u in norms if u.width() == hd] if spec.qk_norm and hd != d else []
    if spec.qk_norm and hd == d and len(norms) == 4:  # one head as wide as the model: definition order
        qk = norms[1:3]
    main = [u for u in norms if u not in qk]
    for unit in main[2:] + qk[2:]:
        raise misfit(spec, unit, "block", b.torch_like)
    if len(main) < 2 or len(qk) < (2 if spec.qk_norm else 0):
        raise WeightsError(f"block {i} of your model has {len(main)} LayerNorms of width {d}"
                           + (f" and {len(qk)} of width {hd} (qk-norm)" if spec.qk_norm else "")
                           + f", expected 2 each; its layers: {', '.join(u.label for u in group[:6])}")
    b.norm(main[0], f"{p}.norm1")
    b.norm(main[1], f"{p}.norm2")
    for unit, which in zip(qk, ("q_norm", "k_norm"), strict=False):
        b.norm(unit, f"{p}.attn.{which}")
    attention = [u for u in group if u.kind == "attention"]
    for unit in attention[1:]:
        raise misfit(spec, unit, "block", b.torch_like)
    if attention:
        b.attention(attention[0], f"{p}.attn")
    linears = [u for u in group if u.kind == "linear"]
    emit(b, spec, p, linear_plan(b, spec, i, linears, with_attention=not attention))
    layer_scale(b, spec, i, [u for u in group if u.kind in ("other", "embedding")])
    for unit in group:
        if unit.kind not in (*BODY, "other", "embedding"):
            raise misfit(spec, unit, "block", b.torch_like)


def linear_plan(b: Builder, spec: ModelSpec, i: int, linears: list[Unit], with_attention: bool) -> Plan:
    """The block's Linears, attention's then the MLP's (or the MLP's first): the one reading of
    them by shape that uses each once, else the first Linear no reading fits is named."""
    readings, stuck = [], []
    orders = [(attention_plan, mlp_plan), (mlp_plan, attention_plan)] if with_attention else [(mlp_plan,)]
    for order in orders:
        plan: Plan = []
        for parse in order:
            got = parse(spec, linears[len(plan):], b.torch_like)
            if got is None:
                break
            plan += got
        if got is not None and len(plan) == len(linears):
            readings.append(plan)
        stuck.append(len(plan))  # the first Linear this reading could not place
    if len(readings) > 1 and readings[0] != readings[1]:
        shown = ", ".join(u.label for u in linears)
        raise WeightsError(f"block {i}: your model's Linears ({shown}) read two "
                           "ways by shape (attention first or MLP first); pass --map rules.toml")
    if readings:
        return readings[0]
    at = max(stuck)
    if at < len(linears):
        raise misfit(spec, linears[at], "block", b.torch_like)
    raise WeightsError(f"block {i} of your model lacks Linears: {spec.dim} -> {spec.mlp_dim} -> {spec.dim} "
                       "(the MLP)" + ("" if not with_attention else " and q, k, v, out (the attention)"))


def attention_plan(spec: ModelSpec, linears: list[Unit], torch_like: bool) -> Plan | None:
    """q, k, v Linears (three, q and a packed kv, or one packed qkv: their outputs add up to
    3 x heads x head_dim), then the output Linear."""
    inner, d, plan, filled = spec.derived.attn_inner, spec.dim, [], 0
    for unit in linears:
        fan_in, fan_out = unit.io(torch_like)
        if filled == 3:
            return by_part_names([*plan, (unit, ("out",))]) if (fan_in, fan_out) == (inner, d) else None
        if fan_in != d or fan_out % inner or not 0 < fan_out // inner <= 3 - filled:
            return None
        plan.append((unit, PARTS[filled:filled + fan_out // inner]))
        filled += fan_out // inner
    return None


# a q, k or v Linear named as one (q_proj, to_k, wv, query): three so named bind by their names, not
# their order (Transformers' CLIP and SigLIP define k_proj, v_proj, then q_proj)
PART_NAMES = {"query": r"(^|[._/])(q|q_proj|to_q|wq|query)$", "key": r"(^|[._/])(k|k_proj|to_k|wk|key)$",
              "value": r"(^|[._/])(v|v_proj|to_v|wv|value)$"}


def by_part_names(plan: Plan) -> Plan:
    """Three single q, k, v Linears as their names say, where each names exactly one part."""
    singles = [(unit, parts) for unit, parts in plan if len(parts) == 1 and parts[0] in PARTS]
    if len(singles) != 3:
        return plan
    named = {part: [u for u, _ in singles if re.search(PART_NAMES[part], u.path.lower())] for part in PARTS}
    if any(len(units) != 1 for units in named.values()) or len({id(u[0]) for u in named.values()}) != 3:
        return plan
    part_of = {id(units[0]): part for part, units in named.items()}
    return [(unit, (part_of[id(unit)],) if id(unit) in part_of else parts) for unit, parts in plan]


def mlp_plan(spec: ModelSpec, linears: list[Unit], torch_like: bool) -> Plan | None:
    """fc1 then fc2; gated: the gate and fc1 as two Linears (the one named gate, else the first)
    or packed in one (gate first, as timm's SwiGLUPacked), then fc2."""
    d, h = spec.dim, spec.mlp_dim
    io = [u.io(torch_like) for u in linears[:3]]
    if spec.mlp == "standard" and io[:2] == [(d, h), (h, d)]:
        return [(linears[0], ("fc1",)), (linears[1], ("fc2",))]
    if spec.mlp == "gated" and io[:2] == [(d, 2 * h), (h, d)]:
        return [(linears[0], ("gate", "fc1")), (linears[1], ("fc2",))]
    if spec.mlp == "gated" and io[:3] == [(d, h), (d, h), (h, d)]:
        named = [u for u in linears[:2] if u.hinted(r"gate|fc1_g|w1\b")]
        gate = named[0] if len(named) == 1 else linears[0]
        other = linears[1] if gate is linears[0] else linears[0]
        return [(gate, ("gate",)), (other, ("fc1",)), (linears[2], ("fc2",))]
    return None


def emit(b: Builder, spec: ModelSpec, p: str, plan: Plan) -> None:
    for unit, parts in plan:
        if parts == ("out",):
            b.dense(unit, f"{p}.attn.out", b.out)
        elif parts[0] in PARTS:
            b.dense(unit, tuple(f"{p}.attn.{x}" for x in parts), b.one_head if len(parts) == 1 else b.packed,
                    "heads_bias")
        elif len(parts) == 2:
            b.dense(unit, tuple(f"{p}.mlp.{x}" for x in parts), b.stacked, "stacked_bias")
        else:
            b.dense(unit, f"{p}.mlp.{parts[0]}", b.linear)


def layer_scale(b: Builder, spec: ModelSpec, i: int, loose: list[Unit]) -> None:
    """LayerScale's gammas: parameters of the width a block holds outside its layers (its own,
    or a tiny module's), ls1 then ls2 in definition order."""
    found = [(u, n, s) for u in loose for n, s in u.params.items()]
    wanted = [f"blocks.{i}.ls1.gamma", f"blocks.{i}.ls2.gamma"] if spec.layer_scale else []
    def one(at: int) -> Unit:
        unit, name, shape = found[at]
        return Unit(name, "parameter", {name: shape}, unit.order)

    for at, canonical in enumerate(wanted[:len(found)]):
        if math.prod(found[at][2]) != spec.dim or len(found[at][2]) not in (1, 3):
            raise misfit(spec, one(at), "block", b.torch_like)
        b.token(found[at][1], found[at][2], canonical, found[at][0].label)
    if len(found) > len(wanted):
        raise misfit(spec, one(len(wanted)), "block", b.torch_like)
    if len(found) < len(wanted):
        raise WeightsError(f"block {i} of your model has {len(found)} per-channel scales, LayerScale "
                           "(layer_scale=true) needs 2 (ls1 on the attention, ls2 on the MLP)")
