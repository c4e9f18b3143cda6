"""A user's model bound to canonical tensors: `bind` (the order below) and the `Binding` it
returns (both directions). Binding by structure is `structure.py`; the `--map` rules file is
read by `rules.py` (in the parent, before any worker starts); the `Layer` record each
framework's `ports/<fw>/user.py` reports is `shared/core/layer.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shared.core import mapping
from shared.core.layer import Layer
from shared.core.mapping import Link, Table, listed
from shared.core.spec import ModelSpec
from shared.errors import SpecError, WeightsError
from shared.your_model.structure import Shape, structural_links
from shared.your_model.structure_parts import MisfitError

# ---- the binding --------------------------------------------------------------------------------
# A user's parameters (native name -> shape, plus `layers()`) are bound to the spec's canonical
# tensors in this order, the first that binds every tensor exactly winning:
#  (a) a naming convention: a `shared.core.mapping.Table` (a port's transfer table, timm,
#      torchvision, Hugging Face, big_vision / vit_jax), or the user's `--map rules.toml` rows
#      alone when they name every tensor, or those rows over each convention (the rows win);
#  (b) structure (structure.py): the layers in definition order against the
#      canonical order (patch embedding, class token, positions, each block's norms / attention /
#      MLP, final norm, head), each layer's parameters by their last name segment and shape,
#      with the framework's layouts; the `--map` rows win for the parameters they name.
# A model held in the user's own module (every name under `net.`) binds by a convention on its
# names without that prefix, as well. Two conventions that bind differently are refused (a `--map`
# file chooses).
# Every native tensor must land on exactly one canonical one and every canonical tensor must be
# filled; otherwise the refusal names what is missing, unused or ambiguous in one line.

@dataclass
class Binding:
    """User name -> canonical names, the layout between them and the rule that chose it."""

    spec: ModelSpec
    links: list[Link]
    rule: str  # the convention, "structure" or "map file"
    why: dict[str, str]  # native name -> which row or layer bound it
    # native name -> why it is set aside: tensors the forward never reads (inert.py), bound to nothing
    inert: dict[str, str] = field(default_factory=dict)

    def to_canonical(self, native: dict[str, np.ndarray], consume: bool = False) -> dict[str, np.ndarray]:
        """The user's arrays -> canonical float32 tensors in canonical order. With `consume`, each
        native array leaves `native` as it is converted, so a model's worth of arrays exists once
        (a plain rename keeps the very array; a transpose frees the old one)."""
        shapes, out = self.spec.derived.tensor_shapes, {}
        for link in self.links:
            array = native.pop(link.native) if consume else native[link.native]
            parts = mapping.LAYOUTS[link.layout][1](array, [shapes[c] for c in link.canonical])
            del array
            out.update({c: np.ascontiguousarray(p, dtype=np.float32) for c, p in zip(link.canonical, parts,
                                                                                    strict=True)})
        return {name: out[name] for name in shapes}

    def to_native(self, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Canonical tensors -> the user's names and layouts, for `user.assign`."""
        def native(link: Link) -> np.ndarray:
            return np.ascontiguousarray(mapping.LAYOUTS[link.layout][0]([tensors[c] for c in link.canonical]))

        return {link.native: native(link) for link in self.links}

    def canonical_of(self) -> dict[str, str]:
        """Canonical tensor -> the native name holding it."""
        return {c: link.native for link in self.links for c in link.canonical}

    def table(self) -> list[list[str]]:
        return [[link.native, ", ".join(link.canonical), link.layout, self.why.get(link.native, self.rule)]
                for link in self.links]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "links": [{"native": n, "canonical": c, "layout": lay, "why": w}
                                             for n, c, lay, w in self.table()],
                "inert": dict(self.inert)}


def check_complete(spec: ModelSpec, native: dict[str, Shape], links: list[Link], rule: str) -> None:
    """Every native tensor used once, every canonical tensor filled, each at its shape."""
    used = [link.native for link in links]
    filled = [c for link in links for c in link.canonical]
    twice = sorted({n for n in used if used.count(n) > 1} | {c for c in filled if filled.count(c) > 1})
    if twice:
        raise WeightsError(f"your model's parameters bind two ways ({rule}): {', '.join(twice[:4])}")
    missing = [c for c in spec.derived.tensor_shapes if c not in filled]
    unused = [n for n in native if n not in used]
    problems = [listed(what, names) for what, names in (("canonical tensors missing", missing),
                                                         ("of your parameters unused", unused)) if names]
    if problems:
        raise WeightsError(f"your model's parameters do not bind to spec {spec.name!r} ({rule}): "
                           + "; ".join(problems))
    for link in links:
        want = native_shape(spec, link)
        if tuple(native[link.native]) != want:
            raise WeightsError(f"your parameter {link.native!r} has shape {tuple(native[link.native])}, "
                               f"bound to {', '.join(link.canonical)} ({rule}) it must be {want}")


def native_shape(spec: ModelSpec, link: Link) -> Shape:
    """The shape `link`'s native tensor must have: its layout run on zero-stride placeholders,
    without touching a model's worth of bytes."""
    placeholders = [np.broadcast_to(np.False_, spec.derived.tensor_shapes[c]) for c in link.canonical]
    return tuple(mapping.LAYOUTS[link.layout][0](placeholders).shape)


def by_table(spec: ModelSpec, native: dict[str, Shape], table: Table) -> Binding | None:
    """The table's binding when it binds every tensor exactly, else None."""
    try:
        plan = table.bind(spec.derived.tensor_shapes)
    except WeightsError:  # the table cannot name this spec's tensors (e.g. no qkv bias)
        return None
    native = {n: s for n, s in native.items() if n not in table.inert}
    if {link.native for link in plan.links} != set(native):  # names first: shapes cost a pass
        return None
    check_complete(spec, native, plan.links, table.name)  # names match: a wrong shape is an error
    return Binding(spec, plan.links, table.name, {link.native: f"{table.name} table" for link in plan.links})


def check_rows_used(spec: ModelSpec, native: dict[str, Shape], rules: Table) -> None:
    """Every `--map` row names parameters the model has: a row that matches nothing would be
    ignored, and the binding (and a PASS) would come from a convention instead."""
    for row in rules.rows:
        names = {row.native_name(m.groupdict()) for c in spec.derived.tensor_shapes
                 if (m := row.pattern.fullmatch(c))}
        if not names:
            raise WeightsError(f"map file row {row.native!r} = {row.canonical!r} names no tensor of spec "
                               f"{spec.name!r}")
        missing = sorted(names - set(native))
        if missing:
            count = f" ({len(missing)} of the {len(names)} it names missing)" if len(names) > 1 else ""
            raise WeightsError(f"map file row {row.native!r} = {row.canonical!r}: your model has no "
                               f"parameter {missing[0]!r}{count}; its parameters are e.g. "
                               f"{', '.join(list(native)[:3])}")


def wrapper_prefix(native: dict[str, Shape]) -> str:
    """The path every native name starts with (`net.` when the user's module holds a timm model
    as `self.net`), up to a separator; "" when there is none."""
    names = list(native)
    common = min(names, default="")
    for name in names:  # character by character is right here: the cut below is at a separator
        while not name.startswith(common):
            common = common[:-1]
    return common[:max(common.rfind("."), common.rfind("/")) + 1] if len(names) > 1 else ""


def under(binding: Binding, prefix: str) -> Binding:
    """A binding found on the names without `prefix`, for the names with it."""
    links = [Link(prefix + link.native, link.canonical, link.layout) for link in binding.links]
    why = {prefix + n: f"{w} (under {prefix})" for n, w in binding.why.items()}
    return Binding(binding.spec, links, binding.rule, why)


def bind(spec: ModelSpec, native: dict[str, Shape], layers: list[Layer], framework: str,
         conventions: list[Table], rules: str | None = None) -> Binding:
    """The binding of a user's parameters: conventions, then structure, then the rename rows."""
    native = {n: tuple(int(d) for d in s) for n, s in native.items()}
    user = Table(rules, "map file") if rules else None
    if user is not None:
        check_rows_used(spec, native, user)
    # the rows alone first: when they name every tensor, that is what the user said
    tables = ([user] if user else []) + [Table(rules, f"map file over {t.name}", base=t) if rules else t
                                         for t in conventions]
    found = [b for t in tables if (b := by_table(spec, native, t))]
    prefix = wrapper_prefix(native)
    if prefix and not rules:  # a library model held in the user's module: its names under `prefix`
        inner = {n[len(prefix):]: s for n, s in native.items()}
        found += [under(b, prefix) for t in conventions if (b := by_table(spec, inner, t))]
    distinct: dict[tuple[Link, ...], Binding] = {}
    for one in found:
        distinct.setdefault(tuple(one.links), one)
    if len(distinct) > 1:
        names = [b.rule for b in distinct.values()]
        raise WeightsError(f"your model's parameters bind two ways: by {names[0]} and by {names[1]}; "
                           "pass --map rules.toml to choose")
    if distinct:
        return next(iter(distinct.values()))
    try:
        links, why = structural_links(spec, native, layers, framework, user)
    except MisfitError as misfit:
        # a hint is said only where it places the layer: each tried on the binding itself
        raise misfit.checked(lambda overrides: by_structure(spec, overrides, native, layers, framework,
                                                             user)) from None
    check_complete(spec, native, links, "structure")
    return Binding(spec, links, "structure", why)


def by_structure(spec: ModelSpec, overrides: dict[str, Any], native: dict[str, Shape], layers: list[Layer],
                 framework: str, user: Table | None) -> set[str]:
    """The native names binding by structure places, at their shapes, on `spec` with `overrides`
    set: none when it refuses (or the overrides make the spec invalid)."""
    try:
        changed = spec.replace(**overrides)
        links, _ = structural_links(changed, native, layers, framework, user)
    except (WeightsError, SpecError):
        return set()
    return {link.native for link in links if tuple(native[link.native]) == native_shape(changed, link)}
