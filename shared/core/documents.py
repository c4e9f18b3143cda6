"""Decoding what a user hands over, for every command: spec and recipe files and documents,
checkpoint configs.

Each problem is one `SpecError` line that names the file (or the document) and what is wrong,
never a traceback: a file that cannot be read or is not UTF-8, a syntax error, JSON or TOML
nested deeper than Python's recursion limit, an integer longer than Python's int-string
conversion limit (4300 digits by default), and a top-level JSON value that is not an object.
"""

from __future__ import annotations

import codecs
import json
import sys
import tomllib
from pathlib import Path
from types import NoneType
from typing import Any

from shared.errors import SpecError

JSON_TYPE_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
                   NoneType: "null"}


def read_text(path: Path, where: str) -> str:
    """A file's text as UTF-8 (a leading byte-order mark is skipped)."""
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"{where} cannot be read: {exc.strerror or exc}") from None
    skip = len(codecs.BOM_UTF8) if blob.startswith(codecs.BOM_UTF8) else 0
    try:
        return blob[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = skip + exc.start
        raise SpecError(f"{where} is not UTF-8 text: byte 0x{blob[at]:02x} at offset {at} "
                        f"({exc.reason})") from None


def decode_json(text: str, where: str) -> dict[str, Any]:
    """A JSON object, or one line saying why the text is not one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{where} is malformed JSON: {exc.msg} at line {exc.lineno}") from None
    except (RecursionError, ValueError) as exc:
        raise SpecError(f"{where} {_beyond_limits(exc)}") from None
    if not isinstance(data, dict):
        kind = JSON_TYPE_NAMES.get(type(data), type(data).__name__)
        raise SpecError(f"{where} holds a JSON {kind}, expected an object of fields")
    return data


def decode_toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{where} is malformed TOML: {exc}") from None
    except (RecursionError, ValueError) as exc:
        raise SpecError(f"{where} {_beyond_limits(exc)}") from None


def _beyond_limits(exc: RecursionError | ValueError) -> str:
    """The two limits a syntactically valid document can exceed in `json` and `tomllib`: the
    recursion limit (nesting) and, the only other ValueError they raise, the int-string limit."""
    if isinstance(exc, RecursionError):
        return (f"is nested too deeply to read (beyond Python's recursion limit of "
                f"{sys.getrecursionlimit()})")
    return (f"holds an integer longer than {sys.get_int_max_str_digits()} digits (Python's "
            "int-string conversion limit)")


def is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except OSError:  # e.g. a name longer than the file system allows: not a file
        return False
