"""What a checkpoint reader infers the spec from, decoded one way before anything uses it: the
values of the checkpoint's config (a table of `Key`s per reader) and the shapes of the tensors
it reads sizes from.

A config is untrusted: each key a reader reads is held to its declared type as the JSON holds
it (shared/core/documents.py's `value_fits`: a string is never a number, a boolean never a count,
a number is finite, `"14"` is not a grid and `8.9` is not a size) and to the bounds of the spec
fields it sets, so a wrong value is one line naming the checkpoint's own key and value (timm's
`model_args.ref_feat_shape`, Transformers' `mlp_ratio`), never the spec field it would have become.
A tensor whose rank is not the one its role has (a 1-D position table, a 3-D patch kernel), or
that has an empty dimension, is one line naming the tensor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Any, get_args, get_origin

from shared.checkpoints.common import Inference, Raw
from shared.core.documents import type_text, value_fits
from shared.core.record import shown
from shared.core.spec import COUNT_BOUNDS, FIELD_BOUNDS
from shared.errors import SpecError, WeightsError

SPEC_BOUNDS = FIELD_BOUNDS | COUNT_BOUNDS  # the spec's integer fields and their largest values
SIZE = int | tuple[int, int]  # a config's image or patch size: one side, or (height, width)


@dataclass(frozen=True)
class Key:
    """One config key a reader reads.

    name: its path in the config, dotted for a nested object ('model_args.ref_feat_shape').
    declared: its type as the JSON holds it (`int`, `float`, `bool`, `str`, `Literal[...]`,
        `tuple[int, int]`, unions with `None`; documents.py's `value_fits`).
    sets: the spec fields it sets, named in its message; an integer in it keeps their bounds.
    positive: its numbers are > 0 (an integer at least 1); false: at least 0 (a count that may
        be none, an offset).
    at_most: its integers' largest value, where no spec field's bound states it.
    """

    name: str
    declared: Any
    sets: tuple[str, ...] = ()
    positive: bool = True
    at_most: int | None = None

    @property
    def largest(self) -> int | None:
        """Its integers' largest value (a float key, a ratio, has none: what it makes is checked)."""
        if not _declares(self.declared, int):
            return None
        bounds = [SPEC_BOUNDS[f] for f in self.sets if f in SPEC_BOUNDS]
        return self.at_most if self.at_most is not None else max(bounds, default=None)

    def holds(self, value: Any) -> bool:
        """Whether `value` is of the declared type and every number in it within the bounds."""
        return value_fits(value, self.declared) and all(self._within(n) for n in _numbers(value))

    def _within(self, number: int | float) -> bool:
        largest = self.largest
        low_ok = number > 0 if self.positive else number >= 0
        return low_ok and (largest is None or number <= largest)

    def expected(self) -> str:
        """The declared type and bounds in a message's words."""
        text = type_text(self.declared)
        if not _declares_numbers(self.declared):
            return text
        largest = self.largest
        if _declares(self.declared, int):
            low = 1 if self.positive else 0
            bound = f"from {low} to {largest:,}" if largest is not None else f"of at least {low}"
        else:
            bound = "> 0" if self.positive else ">= 0"
        return f"{text} {bound}" if self.declared in (int, float) else f"{text}, each number {bound}"

    def refuse(self, value: Any) -> SpecError:
        sets = f" (it sets the spec's {_listed(self.sets)})" if self.sets else ""
        return SpecError(f"config {self.name} = {shown(value)}: expected {self.expected()}{sets}")


MISSING = object()


def config_value(config: Mapping[str, Any] | None, name: str) -> Any:
    """The value at a dotted path of the config, or `MISSING`; a step that is not an object (a
    `model_args` that is a number) is one line naming it."""
    node: Any = config or {}
    parts = name.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, dict):
            raise SpecError(f"config {'.'.join(parts[:i])} = {shown(node)}: expected an object of keys")
        if part not in node:
            return MISSING
        node = node[part]
    return node


def decode_config(config: Mapping[str, Any] | None, keys: Iterable[Key]) -> dict[str, Any]:
    """{key name: value} for each of `keys` the config gives, each held to its `Key` (one line
    naming the first key whose value is not); a key the config does not give is left out, for
    the reader's defaults (the library's own) to fill."""
    out: dict[str, Any] = {}
    for key in keys:
        value = config_value(config, key.name)
        if value is MISSING:
            continue
        if not key.holds(value):
            raise key.refuse(value)
        out[key.name] = value
    return out


def pair(value: int | list[int] | tuple[int, ...]) -> tuple[int, int]:
    """A decoded `int | tuple[int, int]` size as (height, width): an integer is both."""
    return (value, value) if isinstance(value, int) else (value[0], value[1])


def tensor_shape(inf: Inference, raw: Raw, name: str, axes: str, why: str = "") -> tuple[int, ...]:
    """The shape of a tensor the spec's sizes are read from, whose dimensions `axes` names
    ("out, in, height, width"); another rank or an empty dimension is one line naming it."""
    shape = tuple(int(n) for n in inf.need(raw, name, why).shape)
    wanted = axes.split(", ")
    if len(shape) != len(wanted) or 0 in shape:
        raise WeightsError(f"{inf.fmt} checkpoint: tensor {name!r} has shape {shape}: expected "
                           f"{len(wanted)} dimensions ({axes}), none of them empty")
    return shape


def _numbers(value: Any) -> list[int | float]:
    if isinstance(value, (list, tuple)):
        return [n for item in value for n in _numbers(item)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def _declares(declared: Any, kind: type) -> bool:
    """Whether `kind` is the declared type or one of its arms or items."""
    if declared is kind:
        return True
    if get_origin(declared) in (UnionType, tuple):
        return any(_declares(arm, kind) for arm in get_args(declared) if arm is not Ellipsis)
    return False


def _listed(names: tuple[str, ...]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1])))


def _declares_numbers(declared: Any) -> bool:
    return _declares(declared, int) or _declares(declared, float)
