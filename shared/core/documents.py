"""Decoding what a user hands over, for every command: spec and recipe files and documents,
checkpoint configs.

Each problem is one line (a `SpecError` unless the caller names another error) that names the
file (or the document) and what is wrong, never a traceback: a syntax error, JSON or TOML nested
deeper than Python's recursion limit, an integer longer than Python's int-string conversion limit
(4300 digits by default), and a top-level JSON value that is not an object. The file itself is read
by shared/core/files.py's `read_text`, the one reader of a user's text.

A value read from a decoded document is then held to its declared type as it is (`value_fits`,
`type_text`): a record's types (shared/core/record.py), for a record's fields and for the config
keys each checkpoint plug-in reads (its `Key` rows, shared/checkpoints/decoding.py).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Literal, get_args, get_origin

from shared.core.files import open_user_file
from shared.errors import PortbenchError, SpecError

JSON_TYPE_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
                   NoneType: "null"}


def check_regular(path: Path, where: str) -> None:
    """One `SpecError` line unless `path` is a regular file (a directory, FIFO or device is named)."""
    open_user_file(path, where, SpecError).close()


def decode_json(text: str, where: str, error: type[PortbenchError] = SpecError) -> dict[str, Any]:
    """A JSON object, or one `error` line saying why the text is not one: every JSON document a
    user hands over is decoded here (a spec, a checkpoint's config, a results or tolerances file)."""
    try:
        data = json.loads(text, object_pairs_hook=unique_keys(where, error))
    except json.JSONDecodeError as exc:
        raise error(f"{where} is malformed JSON: {exc.msg} at line {exc.lineno}") from None
    except (RecursionError, ValueError) as exc:
        raise error(f"{where} {_beyond_limits(exc)}") from None
    if not isinstance(data, dict):
        kind = JSON_TYPE_NAMES.get(type(data), type(data).__name__)
        raise error(f"{where} holds a JSON {kind}, expected an object of fields")
    return data


def unique_keys(where: str, error: type[PortbenchError]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A `json.loads` object hook that refuses a key given twice in one object (JSON itself
    lets the last one win silently: a spec would run with a value the user did not mean)."""
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise error(f"{where} gives the key {key!r:.80} twice in one object; give each field once")
            out[key] = value
        return out

    return build


def decode_toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{where} is malformed TOML: {_toml_problem(text, str(exc))}") from None
    except (RecursionError, ValueError) as exc:
        raise SpecError(f"{where} {_beyond_limits(exc)}") from None


def _toml_problem(text: str, message: str) -> str:
    """tomllib's message, with the key named where it says only "Cannot overwrite a value" (a
    key given twice: TOML refuses it, and the user should see which one)."""
    found = re.search(r"Cannot overwrite a value \(at line (\d+)", message)
    lines = text.splitlines()
    if found and 0 < int(found[1]) <= len(lines):
        key = lines[int(found[1]) - 1].split("=", 1)[0].strip()
        return f"the key {key!r:.80} is given twice (line {found[1]}); give each field once"
    return message


def _beyond_limits(exc: RecursionError | ValueError) -> str:
    """The two limits a syntactically valid document can exceed in `json` and `tomllib`: the
    recursion limit (nesting) and, the only other ValueError they raise, the int-string limit."""
    if isinstance(exc, RecursionError):
        return (f"is nested too deeply to read (beyond Python's recursion limit of "
                f"{sys.getrecursionlimit()})")
    return (f"holds an integer longer than {sys.get_int_max_str_digits()} digits (Python's "
            "int-string conversion limit)")


def names_a_path(text: str) -> bool:
    """Whether `text` names anything on disk (a file, a directory, a FIFO, a device): the
    reader then says what it is, instead of calling it neither a preset nor a file."""
    try:
        return os.path.lexists(text)
    except (OSError, ValueError):  # a name longer than the file system allows, a NUL byte
        return False


# ---- typed values ---------------------------------------------------------------------------
def value_fits(value: Any, declared: Any) -> bool:
    """Whether `value`, as a decoded document holds it, is of the declared type: `bool`, `int`,
    `float`, `str`, `Literal[...]`, `None`, `tuple[T, ...]` or `tuple[T, T]` (a fixed length), and
    unions of them. Nothing is parsed or converted (unlike `record.coerce`, which parses a `--set`
    text): a string is never a number, a boolean never an integer, an integer is a float within
    float range, a float is finite, and a list is a tuple."""
    args = get_args(declared)
    if get_origin(declared) is UnionType:
        return any(value_fits(value, arm) for arm in args)
    if declared is NoneType:
        return value is None
    if declared is bool or declared is str:
        return isinstance(value, declared)
    if declared is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if declared is float:
        if isinstance(value, int) and not isinstance(value, bool):
            return abs(value) <= sys.float_info.max
        return isinstance(value, float) and math.isfinite(value)
    if get_origin(declared) is Literal:
        return any(type(value) is type(choice) and value == choice for choice in args)
    if get_origin(declared) is tuple:
        if not isinstance(value, (list, tuple)):
            return False
        items = args[:1] * len(value) if args[-1:] == (Ellipsis,) else args
        if len(items) != len(value):
            return False
        return all(value_fits(v, item) for v, item in zip(value, items, strict=True))
    raise TypeError(f"{declared!r} is not a type a document's value is declared as")


PLURALS = {bool: "booleans", int: "integers", float: "numbers", str: "texts"}


def type_text(declared: Any) -> str:
    """What a value of the declared type is, in a message's words ("an integer or a list of 2
    integers")."""
    args = get_args(declared)
    if get_origin(declared) is UnionType:
        words = [type_text(arm) for arm in args]
        return ", ".join(words[:-1]) + " or " + words[-1]
    if get_origin(declared) is Literal:
        return choices_text(declared)
    if get_origin(declared) is tuple:
        many = PLURALS.get(args[0], "values")
        return f"a list of {many}" if args[-1:] == (Ellipsis,) else f"a list of {len(args)} {many}"
    return {NoneType: "null", bool: "true or false", int: "an integer", float: "a finite number",
            str: "text"}[declared]


def choices_text(declared: Any) -> str:
    return "one of " + " | ".join(str(choice) for choice in get_args(declared))
