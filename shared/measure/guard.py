"""The confound guard: two timings are ranked together only when they measured the same model
(spec hash) on the same batch, precision rung (dtype; pure or mixed; TF32), thread count and
device. Otherwise the difference could be the condition, not the framework, and `compare.py`
names the field that differs instead."""

from __future__ import annotations

from typing import Any

from shared.errors import PortbenchError
from shared.measure import rounds
from shared.measure.contention import CONTENDED
from shared.measure.results_types import RankedRow, Ranking
from shared.measure.schema import COMPARABILITY_FIELDS, CONDITION_DEFAULTS

DEVICE_FIELDS = ("device_class", "device_name")  # the ones --allow-mixed lets differ
FORWARD = "forward"  # the best (lowest-median) of the eager and compiled forward phases
RANK_METRICS = (FORWARD, "forward_eager", "forward_compiled", "train_step", "eval_pass", "prepare",
                "compile", "import", "build_load", "first_call_eager")
# What a phase was measured under beyond the row's conditions, held equal when it is the one ranked:
# the batches an evaluation pass runs, and whether a compile found its cache cold or warm.
PHASE_CONDITIONS = {"eval_pass": "batches", "compile": "cache"}


class IncomparableRunsError(PortbenchError):
    """Rows that differ in a field that must match before a ranking means anything."""


def label(row: dict[str, Any]) -> str:
    source = row.get("source")
    return f"{row['framework']}@{source}" if source else str(row["framework"])


def differing_fields(rows: list[dict[str, Any]],
                     allow_mixed: bool = False) -> dict[str, list[tuple[str, Any]]]:
    """field -> [(row label, value), ...] (distinct pairs, in row order) for every guarded field
    whose value is not the same in all rows."""
    fields = [f for f in COMPARABILITY_FIELDS if not (allow_mixed and f in DEVICE_FIELDS)]
    out: dict[str, list[tuple[str, Any]]] = {}
    for name in fields:
        values = [(label(r), r.get("conditions", {}).get(name, CONDITION_DEFAULTS.get(name))) for r in rows]
        if len({repr(v) for _, v in values}) > 1:
            out[name] = list(dict.fromkeys((who, _hashable(v)) for who, v in values))
    return out


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def check_comparable(rows: list[dict[str, Any]], allow_mixed: bool = False) -> None:
    """Raise IncomparableRunsError naming each guarded field the rows differ in, with its values."""
    differences = differing_fields(rows, allow_mixed)
    if not differences:
        return
    parts = []
    for name, values in differences.items():
        shown = ", ".join(f"{who}={value}" for who, value in values)
        parts.append(f"{name} differs ({shown})")
    hint = " (pass --allow-mixed to rank across devices)" if set(differences) <= set(DEVICE_FIELDS) else ""
    raise IncomparableRunsError(f"not ranking these runs: {'; '.join(parts)}{hint}")


def metric_value(row: dict[str, Any], metric: str) -> tuple[float, str] | None:
    """(median seconds, phase used), or None when the row is not `ok` or has no such measurement."""
    phases = row.get("phases", {}) if row.get("status") == "ok" else {}
    names = ("forward_eager", "forward_compiled") if metric == FORWARD else (metric,)
    found = [(p["median"], n) for n in names if (p := phases.get(n)) and p.get("status") == "ok"]
    return min(found) if found else None


def rank(rows: list[dict[str, Any]], metric: str = FORWARD,
         allow_mixed: bool = False) -> list[tuple[int, dict[str, Any], float, str]]:
    """Rank the valid rows by `metric` (fastest first). INVALID, crashed and timed-out rows are
    never ranked; the rest must pass the guard, or IncomparableRunsError names the differing field."""
    if metric not in RANK_METRICS:
        raise PortbenchError(f"unknown ranking metric {metric!r}; expected one of: {', '.join(RANK_METRICS)}")
    valid = [r for r in rows if metric_value(r, metric) is not None]
    check_comparable(valid, allow_mixed)
    if metric in PHASE_CONDITIONS:
        field = PHASE_CONDITIONS[metric]
        values = list(dict.fromkeys((label(r), r["phases"][metric].get(field)) for r in valid))
        if len({value for _, value in values}) > 1:
            shown = ", ".join(f"{who}={value}" for who, value in values)
            raise IncomparableRunsError(f"not ranking these runs by {metric}: its {field} differs ({shown})")
    scored = sorted(((metric_value(r, metric), r) for r in valid), key=lambda item: item[0][0])
    return [(i + 1, r, value, phase) for i, ((value, phase), r) in enumerate(scored)]


def worker_foreign(row: dict[str, Any]) -> list[float | None]:
    """Each round's foreign CPU over the worker's timed span; a file from before rounds has one
    round, judged by its most contended phase."""
    if row.get("rounds"):
        return [r.get("foreign_cpu") for r in row["rounds"]]
    if "foreign_cpu" in row:
        return [row["foreign_cpu"]]
    phases = [p["foreign_cpu"] for p in row.get("phases", {}).values() if p.get("foreign_cpu") is not None]
    return [max(phases) if phases else None]


def decided_ranks(rows: list[dict[str, Any]], metric: str = FORWARD,
                  allow_mixed: bool = False) -> list[dict[str, Any]]:
    """`rank`'s rows, fastest pooled median first, each with the rank `rounds.rank_decisions`
    allows it or why it has none: {"row", "phase", "rank" (None: not comparable), "why"}."""
    ranked = rank(rows, metric, allow_mixed)
    entries = []
    for _, row, _, phase in ranked:
        record = row["phases"][phase]
        entries.append((id(row), label(row), record.get("process_medians") or [record["median"]],
                        worker_foreign(row), record["median"]))
    decided = rounds.rank_decisions(entries)
    return [{"row": row, "phase": phase, "rank": decided[id(row)][0], "why": decided[id(row)][1]}
            for _, row, _, phase in ranked]


def ranking_record(rows: list[dict[str, Any]], metric: str = FORWARD,
                   allow_mixed: bool = False) -> dict[str, Any]:
    """The decision a results file keeps (docs/results-schema.md, `ranking`): a `Ranking`'s dict."""
    rule = {"metric": metric, "spread": rounds.SPREAD, "contended_above": CONTENDED}
    try:
        decided = decided_ranks(rows, metric, allow_mixed)
    except IncomparableRunsError as exc:
        return Ranking(**rule, rows=[], incomparable=str(exc)).to_dict()
    ranked = [RankedRow(framework=label(d["row"]), phase=d["phase"], rank=d["rank"], why=d["why"],
                        rounds=len(worker_foreign(d["row"]))) for d in decided]
    return Ranking(**rule, rows=ranked).to_dict()
