"""Weight-name mappings as declarative tables: a naming convention (a port, a library's state
dict, a parameter tree) is one table, and one engine derives both directions from it.

A table is text, one row per line: `canonical-pattern  native-pattern  [layout]  [# why]`:

    blocks.{i}.{n:norm1=ln_1|norm2=ln_2}.{w:scale=weight|bias}  encoder.layers.encoder_layer_{i}.{n}.{w}
    blocks.{i}.attn.{p:query|key|value}.kernel                   blocks.{i}.attn.qkv.weight  heads_linear

- `{i}` matches one segment of a canonical name (no '.') and is written as it is natively.
- `{n:a=x|b}` matches one of the listed values; `a=x` is spelled `x` in the native name.
- A choice the native pattern leaves out packs: the native tensor holds one part per choice, in
  the listed order (`{p:query|key|value}` above is torch's packed qkv weight: one row).
- The layout (default `same`) names a pair of transforms in LAYOUTS, applied canonical -> native
  and back; the transforms themselves live in shared/core/weights.py.
- `{name}` given as a keyword to `Table` is replaced by its text first: the spec-dependent part
  of a native name (timm's `norm` or `fc_norm`) stays a cell of the table.

A table may extend a `base` table: its rows win for the canonical names they match. Every
canonical tensor must match exactly one row of a table; a name no row matches, a name two rows
match and a native name two rows produce are refused in one line, and so are native tensors that
are missing, unused or misshapen.

`Table.bind(shapes)` gives a `Plan` for one spec's canonical names: `to_native`, `from_native`
(checked first) and, for a table that only renames, `paths()`: native names that are attribute
paths of a model (`lookup`), as the Keras and Flax ports bind their variables.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from shared.core import weights as W  # noqa: N812 (looked up at call time: a test may patch one)
from shared.errors import WeightsError

Arrays = dict[str, np.ndarray]
Shape = tuple[int, ...]
ToNative = Callable[[list[np.ndarray]], np.ndarray]  # canonical parts -> one native tensor
FromNative = Callable[[np.ndarray, list[Shape]], list[np.ndarray]]  # and back, given their shapes

LAYOUTS: dict[str, tuple[ToNative, FromNative]] = {
    "same": (lambda p: p[0], lambda x, s: [x]),
    # (rows, D) <-> (1, rows, D): a position table with a batch axis
    "batch": (lambda p: p[0][None], lambda x, s: [x[0]]),
    # (D,) <-> (1, 1, D): a class token with batch and sequence axes
    "batch_token": (lambda p: p[0].reshape(1, 1, -1), lambda x, s: [x.reshape(s[0])]),
    # dense (in, out) <-> torch Linear (out, in)
    "linear": (lambda p: W.dense_to_out_in(p[0]), lambda x, s: [W.dense_from_out_in(x)]),
    # HWIO <-> torch Conv2d OIHW
    "conv": (lambda p: W.conv_hwio_to_oihw(p[0]), lambda x, s: [W.conv_oihw_to_hwio(x)]),
    # [T]HWIO <-> a Conv3d's (D, C, T, ph, pw), whose frame axis stays at T = 1 (Qwen's patch
    # projection), where the canonical kernel of one frame has none
    "conv3d": (lambda p: W.conv_hwio_to_oihw(p[0] if p[0].ndim == 5 else p[0][None]),
               lambda x, s: [W.conv_oihw_to_hwio(x).reshape(s[0])]),
    # HWIO <-> MLX Conv2d OHWI
    "conv_ohwi": (lambda p: W.conv_hwio_to_ohwi(p[0]), lambda x, s: [W.conv_ohwi_to_hwio(x)]),
    # (D,) <-> (D, 1, 1): a conv bias broadcast over (C, H, W) (equinox's Conv2d)
    "channel_bias": (lambda p: p[0].reshape(-1, 1, 1), lambda x, s: [x.reshape(s[0])]),
    # per-head (D, H, hd) kernels <-> one Linear (n*H*hd, D): q, k, v packed, or one of them
    "heads_linear": (lambda p: W.qkv_pack(*p), lambda x, s: W.qkv_unpack(x, s)),
    # per-head (H, hd) biases <-> (n*H*hd,)
    "heads_bias": (lambda p: W.qkv_bias_pack(*p), lambda x, s: W.qkv_bias_unpack(x, s)),
    # attention output (H, hd, D) <-> Linear (D, H*hd)
    "heads_out_linear": (lambda p: W.attn_out_to_out_in(p[0]),
                         lambda x, s: [W.attn_out_from_out_in(x, *s[0][:2])]),
    # dense (in, out) kernels <-> one Linear (n*out, in), parts stacked on the output axis: a
    # packed gated MLP's first layer (timm SwiGLUPacked, HF Dinov2SwiGLUFFN weights_in)
    "stacked_linear": (lambda p: np.concatenate([W.dense_to_out_in(x) for x in p]),
                       lambda x, s: [W.dense_from_out_in(y) for y in np.split(x, len(s))]),
    # (out,) biases <-> one (n*out,) bias
    "stacked_bias": (lambda p: np.concatenate(p), lambda x, s: [y.copy() for y in np.split(x, len(s))]),
    # The layouts of Keras and Flax layers, which keep (in, out) kernels: per-head (D, H, hd)
    # kernels <-> one Dense (D, n*H*hd) (q, k or v alone, or packed), attention output (H, hd, D)
    # <-> a Dense (H*hd, D), a flat view of any tensor, and dense (in, out) kernels <-> one Dense
    # (in, n*out), parts on the output axis (a packed gated MLP's first layer).
    "heads_dense": (lambda p: np.concatenate([x.reshape(x.shape[0], -1) for x in p], axis=1),
                    lambda x, s: [y.reshape(t) for y, t in zip(np.split(x, len(s), axis=1), s, strict=True)]),
    "heads_out_dense": (lambda p: p[0].reshape(-1, p[0].shape[-1]), lambda x, s: [x.reshape(s[0])]),
    "flat": (lambda p: p[0].reshape(-1), lambda x, s: [x.reshape(s[0])]),
    "stacked_dense": (lambda p: np.concatenate(p, axis=1),
                      lambda x, s: [y.copy() for y in np.split(x, len(s), axis=1)]),
    # a patch embedding as a Dense on patches flattened in (ph, pw, C) order: (ph*pw*C, D), and
    # as a torch Linear: (D, ph*pw*C)
    "patch_dense": (lambda p: p[0].reshape(-1, p[0].shape[-1]), lambda x, s: [x.reshape(s[0])]),
    "patch_linear": (lambda p: np.ascontiguousarray(p[0].reshape(-1, p[0].shape[-1]).T),
                     lambda x, s: [np.ascontiguousarray(x.T).reshape(s[0])]),
    # (rows, D) <-> (1, side, side, D): a position table kept as its square grid (timm's NaFlexVit)
    "square_grid": (lambda p: W.table_to_square_grid(p[0]), lambda x, s: [x.reshape(s[0])]),
}
# the layouts that take several parts as well as one
PACKING = ("heads_linear", "heads_bias", "stacked_linear", "stacked_bias", "heads_dense", "stacked_dense")
# those whose parts lie one after another on the native tensor's first axis: cut there into equal
# pieces, each piece is its part in the same layout (Transformers 5 splits DINOv2's packed SwiGLU
# `weights_in` so: `Table.renamed`)
FIRST_AXIS_PACKING = ("heads_linear", "heads_bias", "stacked_linear", "stacked_bias")
PLACEHOLDER = re.compile(r"\{(\w+)(?::([^{}]*))?\}")


@dataclass(frozen=True)
class Row:
    """One row of a table, compiled: the canonical pattern as a regular expression."""

    canonical: str
    native: str
    layout: str
    pattern: re.Pattern[str]
    choices: dict[str, dict[str, str] | None]  # placeholder -> {canonical: native value}, None: any
    packed: tuple[str, ...]  # choices the native pattern leaves out, in pattern order

    @classmethod
    def parse(cls, table: str, canonical: str, native: str, layout: str = "same") -> Row:
        where = f"{table} table: row {canonical!r}"
        if layout not in LAYOUTS:
            raise WeightsError(f"{where}: layout {layout!r} is unknown; expected one of: "
                               f"{', '.join(LAYOUTS)}")
        regex, choices, at = "", {}, 0
        for m in PLACEHOLDER.finditer(canonical):
            if m[1] in choices:
                raise WeightsError(f"{where}: placeholder {{{m[1]}}} appears twice")
            pairs = [] if m[2] is None else [value.partition("=") for value in m[2].split("|")]
            choices[m[1]] = None if m[2] is None else {a: b if sep else a for a, sep, b in pairs}
            body = "[^.]+" if m[2] is None else "|".join(re.escape(a) for a, _, _ in pairs)
            regex += re.escape(canonical[at:m.start()]) + f"(?P<{m[1]}>{body})"
            at = m.end()
        named = PLACEHOLDER.findall(native)
        bad = [name for name, listed in named if listed or name not in choices]
        if bad:
            raise WeightsError(f"{where}: native placeholder {{{bad[0]}}} is not a plain name from the "
                               "canonical pattern")
        packed = tuple(name for name in choices if name not in dict(named))
        if any(choices[name] is None for name in packed):
            raise WeightsError(f"{where}: every {{name}} without choices must appear in the native name")
        if packed and layout not in PACKING:
            raise WeightsError(f"{where}: packs {', '.join(packed)}, but layout {layout!r} takes one tensor")
        return cls(canonical, native, layout, re.compile(regex + re.escape(canonical[at:])), choices, packed)

    def native_name(self, values: dict[str, str]) -> str:
        spell = self.choices
        return PLACEHOLDER.sub(lambda m: (spell[m[1]] or {}).get(values[m[1]], values[m[1]]), self.native)

    def part(self, values: dict[str, str]) -> tuple[int, ...]:
        """Where a canonical tensor goes in the packed native one: its choices' positions."""
        return tuple(list(self.choices[name] or ()).index(values[name]) for name in self.packed)

    def one_tensor(self, values: dict[str, str]) -> str:
        """The canonical pattern of the one native tensor `values` land on: every choice made but
        the packed ones (a packed tensor keeps them, its parts)."""
        return PLACEHOLDER.sub(lambda m: m[0] if m[1] in self.packed else values[m[1]], self.canonical)

    @property
    def parts(self) -> int:
        return math.prod(len(self.choices[name] or ()) for name in self.packed)


class Table:
    """Rows naming every canonical tensor natively; `bind` turns them into both directions."""

    def __init__(self, text: str, name: str, base: Table | None = None, inert: tuple[str, ...] = (),
                 **fill: str) -> None:
        # `inert`: native tensors of this convention that take no part in the function at inference
        # (Transformers' DINOv2 mask token): a model that holds them still binds by the table.
        self.name, self.base, self.inert = name, base, inert
        for key, value in fill.items():
            text = text.replace("{" + key + "}", value)
        self.rows: list[Row] = []
        for line in text.splitlines():
            cells = line.split("#", 1)[0].split()
            if cells and not 2 <= len(cells) <= 3:
                raise WeightsError(f"{name} table: row {line.strip()!r} needs a canonical and a native "
                                   "pattern, then at most a layout")
            if cells:
                self.rows.append(Row.parse(name, *cells))

    def match(self, canonical: str) -> tuple[Row, dict[str, str]] | None:
        hits = [(row, m.groupdict()) for row in self.rows if (m := row.pattern.fullmatch(canonical))]
        if len(hits) > 1:
            raise WeightsError(f"{self.name} table: canonical tensor {canonical!r} is ambiguous: rows "
                               f"{hits[0][0].canonical!r} and {hits[1][0].canonical!r} both match it")
        return hits[0] if hits else self.base.match(canonical) if self.base is not None else None

    def bind(self, shapes: dict[str, Shape]) -> Plan:
        """The native tensor every canonical tensor of `shapes` goes into (in canonical order)."""
        rows: dict[str, Row] = {}
        parts: dict[str, dict[tuple[int, ...], str]] = {}
        for canonical in shapes:
            found = self.match(canonical)
            if found is None:
                raise WeightsError(f"{self.name} table: canonical tensor {canonical!r} matches no row")
            row, values = found
            native, key = row.native_name(values), row.part(values)
            slot = parts.setdefault(native, {})
            if rows.setdefault(native, row) is not row or key in slot:
                raise WeightsError(f"{self.name} table: native tensor {native!r} is ambiguous: "
                                   f"{next(iter(slot.values()))!r} and {canonical!r} both land on it")
            slot[key] = canonical
        for native, row in rows.items():
            if len(parts[native]) != row.parts:
                raise WeightsError(f"{self.name} table: native tensor {native!r} packs {row.parts} tensors "
                                   f"({row.canonical}), the spec has {len(parts[native])}: "
                                   f"{', '.join(parts[native].values())}")
        links = [Link(native, tuple(parts[native][k] for k in sorted(parts[native])), row.layout)
                 for native, row in rows.items()]
        return Plan(self.name, dict(shapes), links)


    def renamed(self, shapes: dict[str, Shape], rename: Callable[[str], list[str]], name: str) -> Table:
        """This table bound to one spec's `shapes`, its native names renamed: `rename(native)` is
        the tensor's new name, or one name per part where the new convention holds a packed
        tensor's parts apart (cut on its first axis: FIRST_AXIS_PACKING). The result names each
        tensor literally (a packed one keeps its choice), so it binds only these shapes."""
        rows = []
        for link in self.bind(shapes).links:
            names = rename(link.native)
            if len(names) == 1:
                row, values = self.match(link.canonical[0])  # type: ignore[misc]  # bind matched it
                rows.append(f"{row.one_tensor(values)} {names[0]} {link.layout}")
            elif len(names) == len(link.canonical) and link.layout in FIRST_AXIS_PACKING:
                rows += [f"{c} {n} {link.layout}" for c, n in zip(link.canonical, names, strict=True)]
            else:
                raise WeightsError(f"{name} table: native tensor {link.native!r} is renamed into "
                                   f"{len(names)} tensors ({', '.join(names)}), but it packs "
                                   f"{len(link.canonical)} in layout {link.layout!r}; expected one name, or "
                                   "one per part of a layout packed on the first axis "
                                   f"({', '.join(FIRST_AXIS_PACKING)})")
        inert = tuple(n for native in self.inert for n in rename(native))
        return Table("\n".join(rows), name, inert=inert)


class Link(NamedTuple):
    native: str
    canonical: tuple[str, ...]  # one tensor, or the parts of a packed one in order
    layout: str


@dataclass
class Plan:
    """A table bound to one spec's canonical names and shapes: both directions, one engine."""

    name: str
    shapes: dict[str, Shape]
    links: list[Link]

    def to_native(self, tensors: Arrays) -> Arrays:
        return {link.native: LAYOUTS[link.layout][0]([tensors[c] for c in link.canonical])
                for link in self.links}

    @cached_property
    def native_shapes(self) -> dict[str, Shape]:
        """Native names and shapes: `to_native` run on one-byte placeholders."""
        placeholders = {name: np.zeros(shape, dtype=np.bool_) for name, shape in self.shapes.items()}
        return {name: tuple(value.shape) for name, value in self.to_native(placeholders).items()}

    def check(self, native: Arrays, source: str) -> None:
        """Refuse native tensors that do not map completely: missing, unused and misshapen ones
        are listed by name (the first few, then a count)."""
        expected = self.native_shapes
        missing = [n for n in expected if n not in native]
        unused = [n for n in native if n not in expected]
        problems = [listed(what, names) for what, names in (("missing", missing), ("unused", unused))
                    if names]
        if problems:
            raise WeightsError(f"{source}: does not map onto the spec: " + "; ".join(problems))
        for name, shape in expected.items():
            if tuple(native[name].shape) != shape:
                raise WeightsError(f"{source}: tensor {name!r} has shape {tuple(native[name].shape)}, "
                                   f"the spec expects {shape}")

    def from_native(self, native: Arrays, source: str) -> Arrays:
        """Native tensors -> canonical float32 tensors, in canonical order, after `check`."""
        self.check(native, source)
        out: Arrays = {}
        for link in self.links:
            parts = LAYOUTS[link.layout][1](native[link.native], [self.shapes[c] for c in link.canonical])
            out.update(zip(link.canonical, parts, strict=True))
        return {name: np.ascontiguousarray(out[name], dtype=np.float32) for name in self.shapes}

    def paths(self) -> dict[str, str]:
        """Canonical name -> native name, for a table that only renames (a port whose layout is
        canonical binds its variables by these paths)."""
        moved = [link.native for link in self.links if link.layout != "same"]
        if moved:
            raise WeightsError(f"{self.name} table: native tensor {moved[0]!r} is not a plain rename")
        return {link.canonical[0]: link.native for link in self.links}


def listed(what: str, names: list[str]) -> str:
    """How many names, and the first four of them: one line however many there are."""
    more = f", ... {len(names) - 4} more" if len(names) > 4 else ""
    return f"{len(names)} {what} ({', '.join(names[:4])}{more})"


def lookup(root: object, path: str) -> object:
    """The attribute at a dotted path; an integer segment indexes a list (`blocks.0.attn`)."""
    node = root
    for segment in path.split("."):
        node = node[int(segment)] if segment.isdigit() else getattr(node, segment)  # type: ignore[index]
    return node
