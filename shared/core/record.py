"""`Record`: the one way a frozen settings dataclass (`ModelSpec`, `TrainSpec`) is read, written,
overridden from the command line and hashed; what portbench writes and reads back (a verdict, a
job, a results row) is a `shared.core.data_record.DataRecord`, the same machinery held strictly.

A record is a frozen dataclass that also inherits `Record` and names itself in `KIND` ("spec",
"recipe"): the word every message starts with. Its field annotations are the schema:

- `bool`, `int`, `float`, `str`, `Literal[...]` choices, `tuple[T, ...]` and `T | None`;
- a string (a `--set FIELD=VALUE` value) is parsed to the declared type, a JSON integer given for
  a float field is widened, a list given for a tuple field becomes a tuple;
- choices, booleans and text are checked for every instance, before the record's own `validate`
  (ranges and combinations, which stay with each record).

Files and documents are decoded by `shared.core.documents`, so every problem in what a user
hands over is one `SpecError` line naming the file (or "spec document").
"""

from __future__ import annotations

import hashlib
import json
import sys
import typing
from collections.abc import Collection, Iterable, Mapping
from dataclasses import fields
from dataclasses import replace as dataclass_replace
from functools import cache
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, ClassVar, Literal, NoReturn, Self, TypeVar, get_args, get_origin, get_type_hints

from shared.core.documents import (
    check_regular,
    choices_text,
    decode_json,
    decode_toml,
    names_a_path,
    type_text,
    value_fits,
)
from shared.core.files import read_text
from shared.core.terminal import has_control
from shared.errors import SpecError

TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")
NULL_WORDS = ("none", "null", "")
FILE_SUFFIXES = (".json", ".toml")
# A record's name is printed on every line that speaks of it (headers, progress, tables): an
# escape sequence or a newline in it would act on the terminal, so it holds none.
NAME_FIELD = "name"
Named = TypeVar("Named")


class Record:
    """Mixin for a frozen dataclass of settings; see the module docstring."""

    KIND: ClassVar[str]

    def __post_init__(self) -> None:
        check_declared(self)
        self.validate()

    def validate(self) -> None:
        """The record's own rules (ranges, combinations of fields); one `SpecError` line each."""

    # ---- dicts, JSON, TOML, files ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Every field, in declaration order, as JSON types (tuples become lists)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        if not isinstance(data, dict):
            raise SpecError(f"{cls.KIND}: expected a mapping of fields, got {type(data).__name__}")
        types = field_types(cls)
        unknown = [key for key in data if key not in types]
        if unknown:
            raise SpecError(f"{cls.KIND} field {shown(min(unknown, key=str))} is unknown; "
                            f"expected one of: {', '.join(types)}")
        return cls(**{key: coerce(cls.KIND, key, value, types[key]) for key, value in data.items()})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str, where: str | None = None) -> Self:
        """A bare record, or a document that nests one under its `KIND` (`compare.py spec
        --json`, a training results file)."""
        return cls.from_dict(cls._unwrap(decode_json(text, where or f"{cls.KIND} document")))

    def to_toml(self) -> str:
        """TOML has no null: a None field is left out where its default is None, and written as
        the word "none" (which every optional field reads as None) where it is not."""
        defaults = {f.name: f.default for f in fields(self)}
        lines = [f"{key} = {toml_value('none' if value is None else value)}"
                 for key, value in self.to_dict().items()
                 if value is not None or defaults[key] is not None]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_toml(cls, text: str, where: str | None = None) -> Self:
        """A field left out takes its default, as in a JSON document."""
        return cls.from_dict(cls._unwrap(decode_toml(text, where or f"{cls.KIND} document")))

    @classmethod
    def from_file(cls, path: str | Path) -> Self:
        path = Path(path)
        where = f"{cls.KIND} file {str(path)!r}"
        check_regular(path, where)  # a directory, FIFO or device named as one, before its suffix
        suffix = path.suffix.lower()
        if suffix not in FILE_SUFFIXES:
            raise SpecError(f"{where} is neither .json nor .toml (its suffix is {suffix or 'empty'!r})")
        text = read_text(path, where, SpecError)
        return cls.from_toml(text, where) if suffix == ".toml" else cls.from_json(text, where)

    @classmethod
    def from_argument(cls, value: str, named: Mapping[str, Self], flag: str, noun: str) -> Self:
        """A command-line argument naming a record: a key of `named`, a JSON document or a
        .json / .toml file."""
        text = value.strip()
        if text in named:
            return named[text]
        if text.startswith("{"):
            return cls.from_json(text)
        if names_a_path(text):
            return cls.from_file(text)
        raise SpecError(f"{flag} {shown(value)} is neither a {noun} ({', '.join(named)}) nor a "
                        f"{cls.KIND} file nor a JSON document")

    @classmethod
    def _unwrap(cls, data: dict[str, Any]) -> dict[str, Any]:
        nested = data.get(cls.KIND)
        return nested if isinstance(nested, dict) else data

    # ---- changes ---------------------------------------------------------------------------
    def replace(self, **changes: Any) -> Self:
        return dataclass_replace(self, **changes)

    @classmethod
    def parse_assignments(cls, assignments: Iterable[str], flag: str = "--set") -> dict[str, Any]:
        """`FIELD=VALUE` arguments as {field: value of the declared type}; the record as a whole
        is validated only when one is built from them."""
        types = field_types(cls)
        out: dict[str, Any] = {}
        for item in assignments:
            key, sep, text = item.partition("=")
            key = key.strip()
            if not sep:
                raise SpecError(f"{flag} {shown(item)}: expected FIELD=VALUE")
            if key not in types:
                raise SpecError(f"{flag}: {cls.KIND} field {shown(key)} is unknown; expected one "
                                f"of: {', '.join(types)}")
            out[key] = coerce(cls.KIND, key, text.strip(), types[key])
        return out

    def with_overrides(self, assignments: Iterable[str], flag: str = "--set") -> Self:
        changes = self.parse_assignments(assignments, flag)
        return self.replace(**changes) if changes else self

    def stable_hash(self, omit: Collection[str] = ()) -> str:
        """sha256 (16 hex digits) of the sorted, compact JSON of every compared field (less those
        in `omit`): the same over field order, formatting and free text (compare=False fields)."""
        return self.dict_hash(self.to_dict(), omit)

    @classmethod
    def dict_hash(cls, data: Mapping[str, Any], omit: Collection[str] = ()) -> str:
        """`stable_hash` of a record as `to_dict` writes it, valid today or not: a stored one is
        checked against the hash it was written with."""
        compared = {f.name for f in fields(cls) if f.compare and f.name not in omit}
        body = {key: value for key, value in data.items() if key in compared}
        blob = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def pick(noun: str, named: Mapping[str, Named], name: str) -> Named:
    """`named[name]`, or one line listing the names there are."""
    if name not in named:
        raise SpecError(f"unknown {noun} {shown(name)}; expected one of: {', '.join(named)}")
    return named[name]


@cache
def field_types(cls: type) -> dict[str, Any]:
    """Field name -> its declared type, resolved from the annotations (an `Annotated` bound kept),
    in declaration order."""
    hints = get_type_hints(cls, include_extras=True)
    return {f.name: hints[f.name] for f in fields(cls)}


# ---- typed values ------------------------------------------------------------------------
def fail(kind: str, name: str, value: Any, expected: str) -> NoReturn:
    raise SpecError(f"{kind} field {name!r} = {shown(value)}: expected {expected}") from None


def shown(value: Any) -> str:
    """`repr(value)`, cut to 200 characters so a message stays one readable line."""
    try:
        text = repr(value)
    except ValueError:  # an integer beyond the int-string conversion limit
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
    return text if len(text) <= 200 else f"{text[:160]}... ({len(text)} characters)"


def coerce(kind: str, name: str, value: Any, declared: Any) -> Any:
    """`value` as the declared type. A string is parsed (or refused in one line); anything else
    that does not fit is returned unchanged, for `check_declared` or the record's own validation
    to name with its range."""
    declared, optional = unwrap_optional(declared)
    if optional and (value is None or (isinstance(value, str) and value.strip().lower() in NULL_WORDS)):
        return None
    if isinstance(value, str):
        return _parse(kind, name, value, declared)
    if declared is float and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            fail(kind, name, value, "a number within float range")
    if get_origin(declared) is tuple and isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def _parse(kind: str, name: str, text: str, declared: Any) -> Any:
    word = text.strip()
    if declared is bool:
        if word.lower() in TRUE_WORDS + FALSE_WORDS:
            return word.lower() in TRUE_WORDS
        fail(kind, name, text, "true or false")
    if declared is int:
        try:
            return int(word)
        except ValueError:
            limit = sys.get_int_max_str_digits()
            too_long = word.lstrip("+-").isdigit() and len(word.lstrip("+-")) > limit
            fail(kind, name, text, f"an integer of at most {limit} digits" if too_long else "an integer")
    if declared is float:
        try:
            return float(word)
        except ValueError:
            fail(kind, name, text, "a number")
    if get_origin(declared) is Literal:
        for choice in get_args(declared):
            if word == str(choice):
                return choice
        fail(kind, name, text, choices_text(declared))
    if get_origin(declared) is tuple:
        item = get_args(declared)[0]
        inner = word.strip("[]()")  # an empty list is (); an empty item (`16,,8`) is refused, not skipped,
        if word.startswith(("(", "[")):  # but a bracketed list may end with one comma, as Python's `(16,)`
            inner = inner.rstrip().removesuffix(",")
        parts = inner.split(",") if inner.strip() else []
        try:
            return tuple(_parse(kind, name, part, item) for part in parts)
        except SpecError:
            plural = {int: "integers", float: "numbers"}.get(item, "values")
            fail(kind, name, text, f"a comma-separated list of {plural}")
    return text


def check_declared(record: Record) -> None:
    """Refuse a field whose value is not among its `Literal` choices, a non-boolean for a
    `bool` field, a non-text (or unpaired-surrogate) value for a `str` field, or a `name` with a
    control character. Numbers and tuples are left to each record, which states their ranges."""
    for name, declared in field_types(type(record)).items():
        value = getattr(record, name)
        expected = _mismatch(value, declared)
        if not expected and name == NAME_FIELD and isinstance(value, str) and has_control(value):
            expected = "text without control characters (escape sequences, newlines, tabs)"
        if expected:
            fail(record.KIND, name, value, expected)


def _mismatch(value: Any, declared: Any) -> str | None:
    declared, optional = unwrap_optional(declared)
    if value is None and optional:
        return None
    checked = get_origin(declared) is Literal or declared in (bool, str)  # numbers: each record's ranges
    if checked and not value_fits(value, declared):
        return type_text(declared)
    if declared is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "text without unpaired surrogates"
    return None


def unwrap_optional(declared: Any) -> tuple[Any, bool]:
    """(T, True) for a field declared `T | None`, else (declared, False). `Literal[...] | None` and
    `Annotated[...] | None` are `typing.Union`s, `int | None` a `types.UnionType`: both read."""
    args = get_args(declared)
    if get_origin(declared) in (UnionType, typing.Union) and len(args) == 2 and NoneType in args:
        return next(arg for arg in args if arg is not NoneType), True
    return declared, False


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, str):  # JSON's string escapes are TOML's, except that TOML escapes DEL
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    return repr(value) if isinstance(value, float) else str(value)
