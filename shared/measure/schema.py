"""The versioned JSON results file written by `compare.py time` and read by `compare.py report`.

Documented field by field in docs/results-schema.md. A reader refuses any other `schema` name or
`schema_version` with a one-line error (never a guess at an old layout). Writers never replace an
existing file unless asked (`--force`), and always write atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shared.core.documents import unique_keys
from shared.core.files import read_text
from shared.measure.results_types import TOP_TYPES, SchemaError, check_row

SCHEMA_NAME = "portbench-results"
SCHEMA_VERSION = 1

# Phases in the order they happen inside a worker. `n1` phases are one cold measurement per
# fresh process (they cannot be repeated without a new process); the rest are repeated.
PHASES: tuple[tuple[str, str], ...] = (
    ("import", "import the framework and the port (fresh process, cold)"),
    ("build_load", "build the model and load the canonical weights"),
    ("first_call_eager", "first eager forward (lazy initialisation)"),
    ("compile", "first compiled forward: trace + compile + run"),
    ("prepare", "canonical NHWC batch -> native layout and device"),
    ("forward_eager", "warmed eager forward, eval mode"),
    ("forward_compiled", "warmed compiled forward, eval mode"),
    ("train_step", "one training update: forward, mean CE, backward, clip, AdamW"),
    ("eval_pass", "evaluation pass over a dataset: prepare + forward + read back, per pass"),
)
PHASE_NAMES = tuple(name for name, _ in PHASES)
# The fields that must match before two rows may be ranked (see shared/measure/guard.py).
COMPARABILITY_FIELDS = ("spec_hash", "batch", "dtype", "precision", "threads", "device_class", "device_name")
# A field a results file written before it existed lacks: read as this value (the precision ladder
# came later; every earlier run was float32).
CONDITION_DEFAULTS = {"precision": "float32"}

REQUIRED_TOP = ("schema", "schema_version", "created", "environment", "conditions", "runs")


def new_results(environment: dict[str, Any], conditions: dict[str, Any], runs: list[dict[str, Any]],
                created: str, command: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = {
        "schema": SCHEMA_NAME,
        "schema_version": SCHEMA_VERSION,
        "created": created,
        "command": command,
        "environment": environment,
        "conditions": conditions,
        "runs": runs,
    }
    if extra:
        doc.update(extra)
    return doc


def validate(doc: Any, source: str) -> dict[str, Any]:
    """Raise SchemaError (one line) unless `doc` is a results document of this version, with
    every field the readers use of the type they expect (a string where a number belongs would
    otherwise be ranked, or crash the table)."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_NAME:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise SchemaError(f"{source}: not a portbench results file (schema {found!r}, "
                          f"expected {SCHEMA_NAME!r})")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaError(f"{source}: results schema_version {version!r}, this portbench reads "
                          f"version {SCHEMA_VERSION} only; re-run `compare.py time` to regenerate it")
    for key in REQUIRED_TOP:
        if key not in doc:
            raise SchemaError(f"{source}: results file lacks the field {key!r}")
    for key, check in TOP_TYPES.items():
        check(doc.get(key), f"{source}: {key!r}")  # the optional ones may be absent: null
    for i, row in enumerate(doc["runs"]):
        check_row(row, f"{source}: runs[{i}]", PHASE_NAMES)
    return doc


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    text = read_text(path, "results file")  # a regular file only: a FIFO or /dev/zero never hangs
    try:
        doc = json.loads(text, object_pairs_hook=unique_keys(f"results file {str(path)!r}", SchemaError))
    except json.JSONDecodeError as exc:
        raise SchemaError(f"results file {str(path)!r} is not JSON ({exc.msg} at line "
                          f"{exc.lineno})") from None
    except (RecursionError, ValueError):  # nesting beyond the recursion limit, a 5000-digit integer
        raise SchemaError(f"results file {str(path)!r} is nested too deeply or holds an integer too long "
                          "to read") from None
    return validate(doc, f"results file {str(path)!r}")


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, default=_jsonable) + "\n"


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # NumPy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")
