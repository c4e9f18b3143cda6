"""Binding by structure, when no naming convention fits: a user's layers in definition order
against the canonical order, each layer's parameters told apart by their last name segment and
their shape, with the framework's layouts (torch Linear (out, in) and Conv2d OIHW; Keras and Flax
(in, out) and HWIO; `nn.MultiheadAttention`'s packed `in_proj_weight`; Keras `MultiHeadAttention`
and `nnx.MultiHeadAttention` per-head (D, H, hd) kernels). Anything two ways is refused."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shared.core.mapping import Link, Table
from shared.core.spec import ModelSpec
from shared.errors import WeightsError

KERNEL, BIAS = ("weight", "kernel", "scale", "gamma"), ("bias", "beta")
PARTS = ("query", "key", "value")
OUT_NAMES = ("out_proj", "attention_output", "out", "proj", "o_proj", "output")
Shape = tuple[int, ...]
# per framework: (linear weight, conv weight, packed qkv weight, one q/k/v weight, out weight,
# a Linear patch embedding's weight)
FRAMEWORK_LAYOUTS = {
    "torch": ("linear", "conv", "heads_linear", "heads_linear", "heads_out_linear", "patch_linear"),
    "keras": ("same", "same", None, "heads_dense", "heads_out_dense", "patch_dense"),
    "flax": ("same", "same", None, "heads_dense", "heads_out_dense", "patch_dense"),
    "mlx": ("linear", "same", "heads_linear", "heads_linear", "heads_out_linear", "patch_linear"),
}


@dataclass(frozen=True)
class Layer:
    """One layer of a user's model as its framework's `ports/<fw>/user.py` reports it, in
    definition order: what structure binds by (and `shared.core.binding.bind` takes)."""

    path: str
    kind: str
    params: tuple[str, ...]
    settings: dict[str, Any]


@dataclass
class Unit:
    """One layer with the parameters it is the first to own."""

    path: str
    kind: str
    params: dict[str, Shape]  # native name -> shape


def role(unit: Unit, name: str) -> list[str]:
    """The name's segments below the layer's path ('query/kernel' -> ['query', 'kernel'])."""
    rest = name[len(unit.path):] if unit.path and name.startswith(unit.path) else name
    return [s for s in re.split(r"[./]", rest) if s] or [name]


def units_of(native: dict[str, Shape], layers: list[Layer]) -> list[Unit]:
    claimed: set[str] = set()
    units = []
    for layer in layers:
        mine = {p: native[p] for p in layer.params if p in native and p not in claimed}
        claimed |= set(mine)
        if mine:
            units.append(Unit(layer.path, layer.kind, mine))
    free = {n: s for n, s in native.items() if n not in claimed}
    units += [Unit("", "other", {n: s}) for n, s in free.items()]
    return units


class Builder:
    def __init__(self, spec: ModelSpec, framework: str) -> None:
        if framework not in FRAMEWORK_LAYOUTS:
            raise WeightsError(f"no structural binding for framework {framework!r}")
        self.spec, self.links, self.why, self.fixed = spec, [], {}, set()
        (self.linear, self.conv, self.packed, self.one_head, self.out,
         self.patch) = FRAMEWORK_LAYOUTS[framework]

    def add(self, native: str, canonical: tuple[str, ...], layout: str, why: str) -> None:
        if self.fixed.issuperset(canonical):
            return  # a rename row already bound it; this native tensor stays unused (and is named)
        self.links.append(Link(native, canonical, layout))
        self.why[native] = why

    def dense(self, unit: Unit, prefix: str, kernel_layout: str, bias_layout: str = "same") -> None:
        for name, shape in unit.params.items():
            last = role(unit, name)[-1]
            if last in KERNEL and len(shape) >= 2:
                self.add(name, (f"{prefix}.kernel",), kernel_layout, f"{unit.kind} {unit.path}")
            elif last in BIAS or len(shape) == 1:
                self.add(name, (f"{prefix}.bias",), bias_layout, f"{unit.kind} {unit.path}")
            else:
                raise WeightsError(f"your parameter {name!r} of {unit.kind} {unit.path!r} is neither a "
                                   "kernel nor a bias")

    def norm(self, unit: Unit, prefix: str) -> None:
        for name, _ in unit.params.items():
            which = "bias" if role(unit, name)[-1] in BIAS else "scale"
            self.add(name, (f"{prefix}.{which}",), "same", f"layer_norm {unit.path}")

    def attention(self, unit: Unit, prefix: str) -> None:
        for name, shape in unit.params.items():
            segs = role(unit, name)
            is_bias = segs[-1] in BIAS or segs[-1].endswith("_bias")
            part = next((p for p in PARTS if p in segs or f"{p[0]}_proj" in segs), None)
            what = "bias" if is_bias else "kernel"
            if segs[-1].startswith("in_proj"):
                if self.packed is None:
                    raise WeightsError(f"your parameter {name!r}: a packed q/k/v is not this framework's "
                                       "layout")
                parts = tuple(f"{prefix}.{p}.{what}" for p in PARTS)
                self.add(name, parts, "heads_bias" if is_bias else self.packed, f"attention {unit.path}")
            elif part is not None:
                flat = len(shape) == (1 if is_bias else 2)
                lay = ("heads_bias" if is_bias else self.one_head) if flat else "same"
                self.add(name, (f"{prefix}.{part}.{what}",), lay, f"attention {unit.path}")
            elif any(o in segs for o in OUT_NAMES):
                lay = "same" if is_bias or len(shape) == 3 else self.out
                self.add(name, (f"{prefix}.out.{what}",), lay, f"attention {unit.path}")
            else:
                raise WeightsError(f"your parameter {name!r} of attention {unit.path!r} is none of "
                                   "query / key / value / in_proj / out")


def dense_io(unit: Unit, torch_like: bool) -> tuple[int, int]:
    """(in, out) features of a linear unit from its kernel."""
    kernel = next(s for s in unit.params.values() if len(s) == 2)
    return (kernel[1], kernel[0]) if torch_like else kernel


def take(units: list[Unit], kinds: tuple[str, ...], where: str, last: bool = False) -> Unit:
    hits = [u for u in units if u.kind in kinds]
    if not hits:
        raise WeightsError(f"your model has no {' or '.join(kinds)} layer for the {where}")
    unit = hits[-1] if last else hits[0]
    units.remove(unit)
    return unit


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
    """The links structure finds and why each (native name -> layer); `shared.core.binding.bind`
    checks they are complete and makes them its Binding."""
    b = Builder(spec, framework)
    for link in fixed_links(spec, native, rules):
        b.add(link.native, link.canonical, link.layout, "map file")
    b.fixed = {c for link in b.links for c in link.canonical}
    units = units_of({n: s for n, s in native.items() if n not in b.why}, layers)
    if "patch_embed.kernel" not in b.fixed:
        patch_embedding(b, spec, units)
    free = [u for u in units if u.kind in ("other", "embedding")]
    tokens_and_positions(b, spec, free)
    for u in free:
        units.remove(u)
    torch_like = b.linear == "linear"
    b.dense(take(units, ("linear",), "head", last=True), "head.out", b.linear)
    for j in reversed(range(len(spec.head_hidden))):
        b.dense(take(units, ("linear",), f"head hidden layer {j}", last=True), f"head.hidden.{j}", b.linear)
    if spec.final_norm != "none":
        b.norm(take(units, ("layer_norm",), "final norm", last=True), "final_norm")
    blocks(b, spec, [u for u in units if u.kind in ("layer_norm", "attention", "linear")], torch_like)
    leftover = [n for u in units if u.kind not in ("layer_norm", "attention", "linear") for n in u.params]
    if leftover:
        raise WeightsError(f"your parameters {', '.join(leftover[:4])} fit no canonical tensor (structure)")
    return b.links, b.why


def patch_embedding(b: Builder, spec: ModelSpec, units: list[Unit]) -> None:
    """A Conv2d / Conv, else the first Linear on flattened patches (their (ph, pw, C) order is
    the canonical one: another order does not bind differently, it computes differently, and
    verify says so)."""
    if any(u.kind == "conv" for u in units):
        b.dense(take(units, ("conv",), "patch embedding"), "patch_embed", b.conv)
        return
    torch_like = b.linear == "linear"
    flat = [u for u in units if u.kind == "linear"
            and dense_io(u, torch_like) == (spec.derived.patch_features, spec.dim)]
    if not flat:
        raise WeightsError("your model has no conv layer, and no Linear on flattened patches "
                           f"({spec.derived.patch_features} -> {spec.dim}), for the patch embedding")
    units.remove(flat[0])
    b.dense(flat[0], "patch_embed", b.patch)


def tokens_and_positions(b: Builder, spec: ModelSpec, free: list[Unit]) -> None:
    rows = spec.derived.tensor_shapes.get("pos_embed", (0,))[0]
    wanted = {"cls_token": spec.dim if spec.class_token else None,
              "pos_embed": rows * spec.dim if spec.pos_embed == "learned" else None}
    params = [(n, s) for u in free for n, s in u.params.items()]
    for canonical, size in wanted.items():
        if size is None or canonical in b.fixed:
            continue
        hits = [(n, s) for n, s in params if _size(s) == size]
        if len(hits) != 1:
            what = "none" if not hits else ", ".join(n for n, _ in hits)
            raise WeightsError(f"your model's {canonical} (size {size}) is ambiguous or missing by "
                               f"structure: {what}; pass --map rules.toml")
        name, shape = hits[0]
        lay = "same" if len(shape) == (1 if canonical == "cls_token" else 2) else \
            ("batch_token" if canonical == "cls_token" else "batch")
        b.add(name, (canonical,), lay, "free parameter by size")


def _size(shape: Shape) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def blocks(b: Builder, spec: ModelSpec, units: list[Unit], torch_like: bool) -> None:
    per, extra = divmod(len(units), spec.depth)
    if extra or per not in (5, 8):
        raise WeightsError(f"your model has {len(units)} norm / attention / linear layers between the "
                           f"patch embedding and the head; {spec.depth} blocks need 5 each (2 LayerNorms, "
                           "one attention, 2 MLP Linears) or 8 (separate q, k, v, out Linears)")
    for i in range(spec.depth):
        group, prefix = units[i * per:(i + 1) * per], f"blocks.{i}"
        norms = [u for u in group if u.kind == "layer_norm"]
        if len(norms) != 2:
            raise WeightsError(f"block {i} of your model has {len(norms)} LayerNorms, expected 2")
        b.norm(norms[0], f"{prefix}.norm1")
        b.norm(norms[1], f"{prefix}.norm2")
        linears = [u for u in group if u.kind == "linear"]
        fc1 = [u for u in linears if dense_io(u, torch_like) == (spec.dim, spec.mlp_dim)]
        fc2 = [u for u in linears if dense_io(u, torch_like) == (spec.mlp_dim, spec.dim)]
        if len(fc1) != 1 or len(fc2) != 1:
            raise WeightsError(f"block {i}: the MLP's Linears ({spec.dim} -> {spec.mlp_dim} -> {spec.dim}) "
                               "are ambiguous or missing by shape; pass --map rules.toml")
        b.dense(fc1[0], f"{prefix}.mlp.fc1", b.linear)
        b.dense(fc2[0], f"{prefix}.mlp.fc2", b.linear)
        attention = [u for u in group if u.kind == "attention"]
        if attention:
            b.attention(attention[0], f"{prefix}.attn")
            continue
        rest = [u for u in linears if u is not fc1[0] and u is not fc2[0]]
        for unit, part in zip(rest, PARTS, strict=False):
            b.dense(unit, f"{prefix}.attn.{part}", b.one_head, "heads_bias")
        b.dense(rest[3], f"{prefix}.attn.out", b.out)
