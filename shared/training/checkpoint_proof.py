"""What makes a checkpoint unit provably complete, read without trusting it: its four files are
regular files; `state.json` decodes (within the memory left, bounded nesting) to the fields and types a resume
needs; and each safetensors file's header is readable, names the same epoch as `state.json`,
and the file is exactly as long as its header says (so a truncated file is never "complete").
Nothing here loads a tensor; `shared.training.checkpoint` does, from a unit proven here.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Any

from shared.core.containers import safetensors_header
from shared.core.documents import decode_json
from shared.core.files import read_text
from shared.errors import PortbenchError

MOMENTS = ("weights.safetensors", "adam_m.safetensors", "adam_v.safetensors")
STATE = "state.json"
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
    state = decode_json(read_text(path, where, CheckpointError), where, CheckpointError)
    check_fields(state, {"recipe": dict, "spec_hash": str, "updates": int, "controller": dict,
                         "result": dict}, where, "")
    for key in ("precision", "framework", "data"):  # absent from older units
        if key in state and not isinstance(state[key], str):
            raise CheckpointError(f"{where}: field {key!r} is {_kind(state[key])}, expected a string")
    check_fields(state["controller"], CONTROLLER, where, "controller.")
    lr, top = state["controller"]["lr"], state["recipe"].get("learning_rate")
    if not 0 < lr < math.inf:  # NaN fails too: a resumed run would descend, or ascend, from it
        raise CheckpointError(f"{where}: field 'controller.lr' is {lr!r}, expected a finite number > 0")
    if _is(top, NUMBER) and lr / (1 + 1e-9) > top:  # plateau cuts only lower the recipe's rate
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
    """The epoch a unit's safetensors file names in its metadata, after checking (as every
    safetensors file is) that the file is exactly as long as its header says."""
    _, metadata = safetensors_header(path, f"checkpoint file {str(path)!r}", CheckpointError)
    return metadata.get("epoch")
