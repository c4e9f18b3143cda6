"""Every field of a results file that a reader uses, with its type and range: the one place a
results document is checked, on load (`schema.load`, for `report`'s text table, CSV, chart and
HTML page alike) and before a write (`schema.validate`, called by every writer).

A field a reader does not use is not checked (a newer writer may add one: docs/results-schema.md,
"Versions"). A field it uses is refused in one line naming its path, its value and what was
expected: a number given as a string, a list where an object belongs, `passed: "no"` (a string
is not a verdict), an infinite or negative time, a spread below zero, a quartile outside the
median, and an `ok` row without the conditions that decide whether two rows may be ranked
together (a missing `spec_hash` would let rows of different specs be ranked as one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from shared.errors import InputError

Check = Callable[[Any, str], None]


class SchemaError(InputError):
    """A results file that this version cannot read."""


def fail(where: str, value: Any, expected: str) -> None:
    raise SchemaError(f"{where} is {value!r:.40}, expected {expected}")


def typed(kind: type, optional: bool = True, low: float | None = None, infinite: bool = False) -> Check:
    """A value of `kind` (a bool is not a number), at least `low`, finite unless `infinite`;
    null allowed when `optional`."""
    noun = {float: "number", int: "integer", str: "string", bool: "boolean"}[kind]
    name = f"{'an' if kind is int else 'a'} {noun}" if low is None else \
        f"a non-negative {noun}" if low == 0 else f"{'an' if kind is int else 'a'} {noun} >= {low:g}"
    name += " or null" if optional else ""

    def check(value: Any, where: str) -> None:
        if value is None and optional:
            return
        allowed = (int, float) if kind is float else kind
        if not isinstance(value, allowed) or (isinstance(value, bool) and kind is not bool):
            fail(where, value, name)
        if kind is float and (math.isnan(value) or (math.isinf(value) and not infinite)):
            fail(where, value, f"{name} (finite)")
        if low is not None and value < low:
            fail(where, value, name)

    return check


def one_of(*choices: str) -> Check:
    def check(value: Any, where: str) -> None:
        if value not in choices:
            raise SchemaError(f"{where} is {value!r:.40}, expected one of {', '.join(choices)}")

    return check


def obj(fields: dict[str, Check] | None = None, required: tuple[str, ...] = (), optional: bool = True,
        each: Check | None = None) -> Check:
    """An object whose listed `fields` are checked where present (`required` must be), and
    whose every value passes `each`."""
    def check(value: Any, where: str) -> None:
        if value is None and optional:
            return
        if not isinstance(value, dict):
            fail(where, value, "an object" + (" or null" if optional else ""))
        for key in required:
            if key not in value:
                raise SchemaError(f"{where} lacks the field {key!r}")
        for key, item in value.items():
            if fields and key in fields:
                fields[key](item, f"{where}.{key}")
            if each is not None:
                each(item, f"{where}.{key}")

    return check


def items(each: Check, optional: bool = True) -> Check:
    def check(value: Any, where: str) -> None:
        if value is None and optional:
            return
        if not isinstance(value, list):
            fail(where, value, "a list" + (" or null" if optional else ""))
        for i, item in enumerate(value):
            each(item, f"{where}[{i}]")

    return check


TEXT, COUNT, SECONDS = typed(str), typed(int, low=0), typed(float, low=0)


def timed_phase(phase: Any, where: str) -> None:
    """A phase record; an `ok` one has a finite median between its quartiles (the spread, `iqr`,
    is non-negative by its field's check)."""
    PHASE(phase, where)
    if phase.get("status") != "ok":
        return
    typed(float, optional=False, low=0)(phase.get("median"), f"{where}.median")
    q1, median, q3 = phase.get("q1", phase["median"]), phase["median"], phase.get("q3", phase["median"])
    slack = 1e-9 * max(abs(q3), abs(q1), median)  # interpolated quartiles: rounding, nothing more
    if not q1 - slack <= median <= q3 + slack:
        raise SchemaError(f"{where}: median {median!r} lies outside its quartiles q1 {q1!r} .. q3 {q3!r}")


PHASE = obj({"status": one_of("ok", "n/a"), "reason": TEXT, "note": TEXT, "cache": TEXT,
             "samples": items(SECONDS), "n": typed(int, low=1), "median": SECONDS, "q1": SECONDS,
             "q3": SECONDS, "iqr": SECONDS, "min": SECONDS, "mean": SECONDS, "cpu_util": SECONDS,
             "foreign_cpu": SECONDS, "process_medians": items(SECONDS), "first_step_seconds": SECONDS},
            required=("status",), optional=False)
# One mode's verdict, `PortVerdict.to_dict` (shared/core/equivalence.py); files written before
# that record hold only `passed`, `max_abs_err`, `max_rel_err`, `atol`, `images` and `reason`.
CHECK = obj({"passed": typed(bool, optional=False), "max_abs_err": typed(float, low=0, infinite=True),
             "max_rel_err": typed(float, low=0, infinite=True), "atol": SECONDS, "images": COUNT,
             "reason": TEXT, "framework": TEXT, "spec": TEXT, "spec_hash": TEXT, "rung": TEXT,
             "status": one_of("PASS", "FAIL", "UNAVAILABLE"), "unavailable": typed(bool), "floor": SECONDS,
             "bound": TEXT, "emulated_gap": SECONDS, "param_count": COUNT, "expected_params": COUNT,
             "device": TEXT, "versions": obj(), "dtypes": obj(each=TEXT)},
            required=("passed",), optional=False)
ROOFLINE = obj({"forward_flops": SECONDS,
                "gemm": obj({"status": TEXT, "gflops": SECONDS, "reason": TEXT, "dtype": TEXT, "mode": TEXT,
                             "shapes": items(obj(optional=False)), "foreign_cpu": SECONDS,
                             "rounds_gflops": items(SECONDS), "rounds_disagree": typed(bool)}),
                "phases": obj(each=obj({"gflops": SECONDS, "fraction": SECONDS}, optional=False))})
# One candidate mode as shared/measure/modes.py measured it: its times, and the gate's verdict
# on its first call's logits (null when it failed before the gate ran).
CANDIDATE = obj({"mode": typed(str, optional=False), "status": one_of("ok", "failed"), "reason": TEXT,
                 "first_call_s": SECONDS, "median": SECONDS, "iqr": SECONDS, "n": typed(int, low=1),
                 "gate": lambda value, where: None if value is None else CHECK(value, where)},
                required=("mode", "status"), optional=False)
MODE_CHOICE = obj({"chosen": TEXT, "source": one_of("only", "forced", "cached", "measured"),
                   "forward": one_of("eager", "compiled"), "offered": items(TEXT),
                   "candidates": items(CANDIDATE),
                   "notes": items(TEXT), "measured": TEXT, "compile_after_measurement": typed(bool),
                   "budget": obj()}, required=("chosen", "source"))
CONDITIONS = obj({"spec_name": TEXT, "spec_hash": TEXT, "batch": typed(int, low=1), "dtype": TEXT,
                  "precision": TEXT, "threads": typed(int, low=1), "device_class": TEXT,
                  "device_name": TEXT, "device_request": TEXT}, optional=False)
# what must be stated before an `ok` row is ranked against another (guard.COMPARABILITY_FIELDS)
RANKED_CONDITIONS = ("spec_hash", "batch", "dtype", "threads")
ROW_STATUSES = ("ok", "invalid", "crashed", "timeout", "unavailable")
# One round's worker (shared/measure/runner.round_record): what the rounds' rule judges it by.
ROUND = obj({"round": typed(int, optional=False, low=1), "status": one_of(*ROW_STATUSES),
             "foreign_cpu": SECONDS, "gemm_gflops": SECONDS, "gemm_foreign_cpu": SECONDS,
             "worker_wall_seconds": SECONDS}, required=("round",), optional=False)
# The rank decision a `time` table printed (shared/measure/guard.ranking_record).
RANKING = obj({"metric": TEXT, "spread": SECONDS, "contended_above": SECONDS, "incomparable": TEXT,
               "rows": items(obj({"framework": typed(str, optional=False), "phase": TEXT,
                                  "rank": typed(int, low=1), "why": TEXT, "rounds": typed(int, low=1)},
                                 required=("framework", "rank", "why"), optional=False))},
              optional=False)
ROW = obj({"framework": typed(str, optional=False), "status": one_of(*ROW_STATUSES),
           "reason": TEXT, "source": TEXT, "backend": TEXT, "conditions": CONDITIONS,
           "phases": obj(optional=False), "memory": obj(optional=False),
           "equivalence": obj(each=CHECK), "roofline": ROOFLINE, "mode_choice": MODE_CHOICE,
           "threads_applied": obj({"affinity_note": TEXT, "requested": COUNT}),
           "notes": items(TEXT), "stderr_tail": items(TEXT), "param_count": COUNT,
           "param_count_spec": COUNT, "worker_wall_seconds": SECONDS, "foreign_cpu": SECONDS,
           "rounds": items(ROUND), "replicates": typed(int, low=1),
           "sweep_point": obj({"batch": typed(int, low=1), "tokens": COUNT, "image": items(COUNT)})},
          required=("framework", "status", "conditions", "phases", "memory"), optional=False)
SLOPES = obj({"batch": typed(float), "tokens": typed(float)})  # fitted exponents: any sign
FIT = obj({"points": COUNT, "time": SLOPES, "memory": SLOPES, "memory_source": TEXT}, optional=False)
ENVIRONMENT = obj({"hostname": TEXT, "cpu_model": TEXT, "git_revision": TEXT, "git_dirty": typed(bool),
                   "cpu_count": COUNT}, optional=False)


# the top-level fields (the required ones are checked present first, in schema.validate)
TOP_TYPES: dict[str, Check] = {
    "created": typed(str, optional=False), "command": items(TEXT, optional=False), "environment": ENVIRONMENT,
    "conditions": obj(optional=False), "runs": items(obj(optional=False), optional=False),
    "merged_from": items(obj({"file": TEXT, "source": TEXT, "created": TEXT, "environment": ENVIRONMENT,
                              "conditions": obj(optional=False)}, optional=False)),
    "sweep": obj({"fits": obj(each=FIT)}), "factorial": obj(), "ranking": items(RANKING),
}


def check_row(row: Any, where: str, phase_names: tuple[str, ...]) -> None:
    """One row of `runs`: every field above, its phases by name, and what ranking needs."""
    ROW(row, where)
    unknown = sorted(set(row["phases"]) - set(phase_names))
    if unknown:
        raise SchemaError(f"{where} has unknown phase(s) {unknown}; expected some of "
                          f"{', '.join(phase_names)}")
    for name, phase in row["phases"].items():
        timed_phase(phase, f"{where}.phases.{name}")
    roofed = sorted(set((row.get("roofline") or {}).get("phases") or {}) - set(phase_names))
    if roofed:
        raise SchemaError(f"{where}.roofline has unknown phase(s) {roofed}")
    for key, value in row["memory"].items():
        if key.endswith("_bytes"):
            COUNT(value, f"{where}.memory.{key}")
    if row["status"] == "ok":  # a ranked row: the guard compares these, so they must be stated
        for key in RANKED_CONDITIONS:
            if row["conditions"].get(key) in (None, ""):
                raise SchemaError(f"{where}.conditions.{key} is {row['conditions'].get(key)!r}, expected a "
                                  "value: an ok row is ranked only against rows with the same one")
