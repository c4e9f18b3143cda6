"""`DataRecord`: a `Record` that portbench itself writes and reads back — a verdict, a precision
rung, a job, a spec proposal, a row of a timing results file — on the one record machinery
(shared/core/record.py: fields, annotations, `to_dict`, `KIND`).

A settings record's values may be typed by a user, so text is parsed and numbers are left to its
own `validate`. A data record's values were written by a program, so `from_dict` holds every one
to its declared type as it is, in JSON's words (a string is never a number, a boolean never an
integer), and the annotations are the whole schema:

- `bool`, `int`, `float` (finite), `str`, `Literal[...]`, `Any`, `T | None`;
- `Annotated[int | float, Bound(low=...)]`: a lower bound (`Bound(infinite=True)`: an infinity
  allowed, `Bound(nan=True)`: NaN allowed);
- `list[T]`, `tuple[T, ...]`, `dict[str, T]` (`dict[Literal[...], T]`: only those keys), and a
  nested record (read by its own `from_dict`);
- a field without a default must be present; a key no field declares is refused, unless the
  record is `OPEN` (a results file a newer portbench wrote may add fields a reader ignores).

A mistake is one line naming its path, the value and what was expected:
`runs[0].phases.forward_eager.median is 'fast', expected a non-negative number or null`. A rule
across fields stays with the record (`validate`, raising through `refuse`), and its line continues
the same path.

`to_dict` writes every field in declaration order, a nested record as its own dict, and three
field markers say how a field travels: `stored_as` (written under another key than its
attribute's name: a JSON form older than the name), `derived` (computed from the others by
`derived_values`, written, never given; it too may be stored under another key) and `transient`
(in memory only, never written: the logits a verdict carries to the table).
"""

from __future__ import annotations

import math
from dataclasses import MISSING, Field, dataclass, field, fields
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, NoReturn, Self, get_args, get_origin

from shared.core.record import Record, field_types, shown, unwrap_optional
from shared.errors import PortbenchError, SpecError

NOUNS = {bool: "boolean", int: "integer", float: "number", str: "string"}
KEY, TRANSIENT = "record_key", "record_transient"  # a field's metadata: see the markers below


@dataclass(frozen=True)
class Bound:
    """A number's range in a data record's annotation: `Annotated[float, Bound(low=0)]`."""

    low: float | None = None
    infinite: bool = False  # +inf is a value (an error that could not be measured), not a mistake
    nan: bool = False  # NaN is a value (a metric as an evaluation returned it), not a mistake


class RuleBrokenError(SpecError):
    """A data record's own rule, broken: `text` continues the path of the record it is about
    (".median is None, expected ...", ": median 2 lies outside ..."), which the reader prefixes."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(f"{kind}{text}")
        self.text = text


class DataRecord(Record):
    """Mixin for a frozen dataclass that portbench writes and reads back; see the module docstring."""

    OPEN: ClassVar[bool] = False  # whether a key no field declares is ignored rather than refused

    def __post_init__(self) -> None:
        for name, value in self.derived_values().items():
            object.__setattr__(self, name, value)  # frozen: set once, before the checks read it
        super().__post_init__()

    def derived_values(self) -> dict[str, Any]:
        """The value of each `derived` field, from the others."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """Every stored field under its key, in declaration order, as JSON types (a nested
        record as its own dict, a tuple as a list)."""
        return {key: plain(getattr(self, f.name)) for f, key in stored_fields(type(self))}

    def refuse(self, text: str) -> NoReturn:
        """Break one of the record's own rules (in `validate`); `text` continues its path."""
        raise RuleBrokenError(self.KIND, text)

    @classmethod
    def from_dict(cls, data: Any, where: str | None = None,
                  error: type[PortbenchError] = SpecError) -> Self:
        """The record `to_dict` wrote; anything else is one `error` line naming the path under
        `where` (by default the record's `KIND`)."""
        where = where or cls.KIND
        if not isinstance(data, dict):
            refuse_value(where, data, "an object", error)
        stored = stored_fields(cls)
        for f, key in stored:
            if required(f) and key not in data:
                raise error(f"{where} lacks the field {key!r}")
        known = [key for _, key in stored]
        unknown = [key for key in data if key not in known]
        if unknown and not cls.OPEN:
            raise error(f"{where} has the unknown field {shown(min(unknown, key=str))}; expected some "
                        f"of: {', '.join(known)}")
        types = field_types(cls)
        values = {}
        for f, key in stored:
            if key in data:
                value = read_value(types[f.name], data[key], f"{where}.{key}", error)
                if f.init:  # a derived field's value is the record's own; only its type is read
                    values[f.name] = value
        try:
            return cls(**values)
        except RuleBrokenError as exc:
            raise error(f"{where}{exc.text}") from None


# ---- how a field travels ----------------------------------------------------------------------
def stored_as(key: str, **options: Any) -> Any:
    """A field written and read under `key`, not its attribute's name (a JSON form that
    predates the name the code reads it by)."""
    return field(metadata={KEY: key}, **options)


def derived(key: str | None = None) -> Any:
    """A field the record computes (`derived_values`): written with the others (under `key`, when
    a property already answers to the key's name in memory), never given; a reader checks its type
    and leaves its value to the record."""
    return field(init=False, compare=False, repr=False, metadata={KEY: key} if key else {})


def transient(**options: Any) -> Any:
    """A field that lives in memory only: never written, never read, never compared."""
    return field(metadata={TRANSIENT: True}, compare=False, repr=False, **options)


@cache
def stored_fields(cls: type) -> tuple[tuple[Field[Any], str], ...]:
    """(field, the key it is stored under) for every field but the transient ones."""
    return tuple((f, f.metadata.get(KEY, f.name)) for f in fields(cls) if not f.metadata.get(TRANSIENT))


def required(f: Field[Any]) -> bool:
    """Whether a reader needs the field's key: it is given (not derived) and has no default."""
    return f.init and f.default is MISSING and f.default_factory is MISSING


def plain(value: Any) -> Any:
    """A value as JSON types: a record as its dict, a tuple as a list, containers copied."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return [plain(item) for item in value] if isinstance(value, (list, tuple)) else value


# ---- reading ---------------------------------------------------------------------------------------
def refuse_value(where: str, value: Any, expected: str, error: type[PortbenchError]) -> NoReturn:
    raise error(f"{where} is {value!r:.40}, expected {expected}")


def read_value(declared: Any, value: Any, where: str, error: type[PortbenchError]) -> Any:
    """`value` held to the declared type as it is (see the module docstring), with every nested
    record built; one `error` line naming `where` otherwise."""
    declared, nullable = unwrap_optional(declared)
    if value is None and nullable:
        return None
    declared, bound = bounded(declared)
    expected = json_text(declared, bound) + (" or null" if nullable else "")
    origin, args = get_origin(declared), get_args(declared)
    if declared is Any:
        return value
    if isinstance(declared, type) and issubclass(declared, Record):
        if not isinstance(value, dict):
            refuse_value(where, value, expected, error)
        if issubclass(declared, DataRecord):
            return declared.from_dict(value, where, error)
        try:
            return declared.from_dict(value)
        except SpecError as exc:  # a settings record names its field in its own words; the path leads
            raise error(f"{where}: {exc}") from None
    if origin is dict:
        if not isinstance(value, dict):
            refuse_value(where, value, expected, error)
        names = get_args(args[0]) if get_origin(args[0]) is Literal else None
        unknown = sorted(key for key in value if key not in names) if names else []
        if unknown:  # before any entry is read: a name no writer uses says more than its fields
            raise error(f"{where} has unknown key(s) {unknown}; expected some of {', '.join(names)}")
        return {key: read_value(args[1], item, f"{where}.{key}", error) for key, item in value.items()}
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            refuse_value(where, value, expected, error)
        items = [read_value(args[0], item, f"{where}[{i}]", error) for i, item in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if not fits(value, declared, bound):
        nonfinite = declared is float and isinstance(value, float) and not math.isfinite(value)
        refuse_value(where, value, f"{expected} (finite)" if nonfinite else expected, error)
    return value


def bounded(declared: Any) -> tuple[Any, Bound]:
    """(the type, its `Bound`) of `Annotated[T, Bound(...)]`; an unbounded type has `Bound()`."""
    if get_origin(declared) is not Annotated:
        return declared, Bound()
    base, *extras = get_args(declared)
    return base, next((extra for extra in extras if isinstance(extra, Bound)), Bound())


def fits(value: Any, declared: Any, bound: Bound) -> bool:
    """Whether a scalar is of the declared type and within its bound; nothing is converted."""
    if get_origin(declared) is Literal:
        return any(type(value) is type(choice) and value == choice for choice in get_args(declared))
    if declared not in NOUNS:
        raise TypeError(f"{declared!r} is not a type a data record's field is declared as")
    numeric = (int, float) if declared is float else declared
    if not isinstance(value, numeric) or (isinstance(value, bool) and declared is not bool):
        return False
    if declared is float and math.isnan(value):
        return bound.nan  # unordered: allowed or not, never held to the lower bound
    if declared is float and math.isinf(value) and not bound.infinite:
        return False
    return bound.low is None or value >= bound.low


def json_text(declared: Any, bound: Bound) -> str:
    """What a value of the declared type is, in JSON's words ("a non-negative number")."""
    if get_origin(declared) is Literal:
        return "one of " + ", ".join(str(choice) for choice in get_args(declared))
    if get_origin(declared) is dict or (isinstance(declared, type) and issubclass(declared, Record)):
        return "an object"
    if get_origin(declared) in (list, tuple):
        return "a list"
    noun = NOUNS.get(declared, "value")
    article = "an" if declared is int else "a"
    if bound.low is None:
        return f"{article} {noun}"
    return f"a non-negative {noun}" if bound.low == 0 else f"{article} {noun} >= {bound.low:g}"
