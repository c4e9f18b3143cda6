"""What makes a checkpoint unit provably complete, read without trusting it: its four files are
regular files; `state.json` decodes (bounded size and nesting) to the fields and types a resume
needs; and each safetensors file's header is readable, names the same epoch as `state.json`,
and the file is exactly as long as its header says (so a truncated file is never "complete").
Nothing here loads a tensor; `shared.training.checkpoint` does, from a unit proven here.
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
from pathlib import Path
from typing import Any

from shared.core.documents import decode_json
from shared.errors import PortbenchError, SpecError

MOMENTS = ("weights.safetensors", "adam_m.safetensors", "adam_v.safetensors")
STATE = "state.json"
MAX_STATE_BYTES = 64 * 2**20  # a state.json holds curves of at most a few thousand epochs
MAX_HEADER_BYTES = 100 * 2**20  # safetensors' own limit
NUMBER = (int, float)
# Every field a resume reads, and the types it must have (bool is not a count).
CONTROLLER = {"epoch": int, "lr": NUMBER, "plateau_best": (*NUMBER, type(None)), "plateau_bad": int,
              "cooldown_left": int, "stop_best": (*NUMBER, type(None)), "stop_bad": int,
              "stopped": bool, "cuts": list}
RESULT = {"seed": int, "curves": dict, "epochs": int, "steps": int, "stopped_because": str, "wall_s": dict}


class CheckpointError(PortbenchError):
    """A checkpoint that cannot be resumed; the message says which and why."""


def prove(unit: Path) -> dict[str, Any]:
    """`unit`'s validated state.json when the unit is provably complete; else CheckpointError
    saying what is missing or wrong."""
    for name in (*MOMENTS, STATE):
        try:
            mode = os.lstat(unit / name).st_mode
        except OSError:
            raise CheckpointError(f"checkpoint unit {str(unit)!r} has no {name}") from None
        if not stat.S_ISREG(mode):
            raise CheckpointError(f"checkpoint unit {str(unit)!r}: {name} is not a regular file")
    state = read_state(unit / STATE)
    epoch = str(state["controller"]["epoch"])
    for name in MOMENTS:
        found = header_epoch(unit / name)
        if found != epoch:
            raise CheckpointError(f"checkpoint unit {str(unit)!r}: {name} is from epoch {found!r}, "
                                  f"state.json from epoch {epoch!r}")
    return state


def read_state(path: Path) -> dict[str, Any]:
    where = f"checkpoint {str(path)!r}"
    try:
        if path.stat().st_size > MAX_STATE_BYTES:
            raise CheckpointError(f"{where} is larger than {MAX_STATE_BYTES // 2**20} MiB")
        text = path.read_bytes().decode("utf-8")
        state = decode_json(text, where)
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{where} is unreadable ({exc})") from None
    except SpecError as exc:
        raise CheckpointError(str(exc)) from None
    check_fields(state, {"recipe": dict, "spec_hash": str, "updates": int, "controller": dict,
                         "result": dict}, where, "")
    if "precision" in state and not isinstance(state["precision"], str):
        raise CheckpointError(f"{where}: field 'precision' is {_kind(state['precision'])}, expected a string")
    check_fields(state["controller"], CONTROLLER, where, "controller.")
    lr, top = state["controller"]["lr"], state["recipe"].get("learning_rate")
    if not 0 < lr < math.inf:  # NaN fails too: a resumed run would descend, or ascend, from it
        raise CheckpointError(f"{where}: field 'controller.lr' is {lr!r}, expected a finite number > 0")
    if _is(top, NUMBER) and lr > top * (1 + 1e-9):  # plateau cuts only lower the recipe's rate
        raise CheckpointError(f"{where}: field 'controller.lr' is {lr!r}, expected at most the recipe's "
                              f"learning_rate {top!r}")
    check_fields(state["result"], RESULT, where, "result.")
    for key, curve in state["result"]["curves"].items():
        if not isinstance(curve, list) or not all(_is(v, NUMBER) for v in curve):
            raise CheckpointError(f"{where}: field 'result.curves.{key}' is not a list of numbers")
    if not all(_is(v, NUMBER) for v in state["result"]["wall_s"].values()):
        raise CheckpointError(f"{where}: field 'result.wall_s' holds a value that is not a number")
    if not all(_is(v, int) for v in state["controller"]["cuts"]):
        raise CheckpointError(f"{where}: field 'controller.cuts' holds a value that is not an integer")
    return state


def check_fields(document: dict[str, Any], fields: dict[str, Any], where: str, prefix: str) -> None:
    for key, kind in fields.items():
        if key not in document:
            raise CheckpointError(f"{where} lacks the field {prefix + key!r}")
        if not _is(document[key], kind):
            raise CheckpointError(f"{where}: field {prefix + key!r} is {_kind(document[key])}, "
                                  f"expected {_expected(kind)}")
        if kind is int and document[key] < 0:
            raise CheckpointError(f"{where}: field {prefix + key!r} is {document[key]}, expected >= 0")
    unknown = sorted(set(document) - set(fields))
    if prefix == "controller." and unknown:  # each one would become an attribute of the schedule
        raise CheckpointError(f"{where}: unknown field {prefix + unknown[0]!r}")


def _is(value: Any, kind: Any) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)


def _kind(value: Any) -> str:
    return {str: "a string", bool: "a boolean", list: "a list", dict: "an object",
            type(None): "null"}.get(type(value), f"the number {value!r}" if _is(value, NUMBER) else "?")


def _expected(kind: Any) -> str:
    return {int: "a whole number", bool: "true or false", str: "a string", list: "a list",
            dict: "an object"}.get(kind, "a number")


def header_epoch(path: Path) -> str | None:
    """The epoch a unit's safetensors file names in its metadata, after checking that the file
    is exactly as long as its header says."""
    where = f"checkpoint file {str(path)!r}"
    try:
        with open(path, "rb") as handle:
            prefix = handle.read(8)
            if len(prefix) != 8:
                raise CheckpointError(f"{where} is truncated (no header)")
            (length,) = struct.unpack("<Q", prefix)
            if length > MAX_HEADER_BYTES:
                raise CheckpointError(f"{where} has a header of {length} bytes; not a safetensors file")
            header = json.loads(handle.read(length))
            size = os.fstat(handle.fileno()).st_size
    except OSError as exc:
        raise CheckpointError(f"{where} is unreadable ({exc.strerror})") from None
    except (ValueError, RecursionError):
        raise CheckpointError(f"{where} has an unreadable header") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{where} has an unreadable header")
    ends = [v.get("data_offsets", [0, 0])[1] for k, v in header.items()
            if k != "__metadata__" and isinstance(v, dict) and isinstance(v.get("data_offsets"), list)]
    expected = 8 + length + max((e for e in ends if isinstance(e, int)), default=0)
    if size != expected:
        raise CheckpointError(f"{where} is {size} bytes, its header says {expected}: truncated or damaged")
    metadata = header.get("__metadata__")
    return metadata.get("epoch") if isinstance(metadata, dict) else None
