"""The versioned JSON results file written by `compare.py time` and read by `compare.py report`.

Documented field by field in docs/results-schema.md; its records, whose annotations are the
schema every document is checked by, are shared/measure/results_types.py. A reader refuses any
other `schema` name or `schema_version` with a one-line error (never a guess at an old layout).
Writers never replace an existing file unless asked (`--force`), and always write atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shared.core.data_record import read_value, refuse_value, required, stored_fields
from shared.core.documents import decode_json
from shared.core.files import read_text
from shared.core.record import field_types
from shared.measure.results_types import Results, SchemaError
from shared.measure.timing_row import TimingRow

SCHEMA_NAME = "portbench-results"
SCHEMA_VERSION = 1

# The fields that must match before two rows may be ranked (see shared/measure/guard.py).
COMPARABILITY_FIELDS = ("spec_hash", "batch", "dtype", "precision", "threads", "device_class", "device_name")
# A field a results file written before it existed lacks: read as this value (the precision ladder
# came later; every earlier run was float32).
CONDITION_DEFAULTS = {"precision": "float32"}


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
    otherwise be ranked, or crash the table): `doc` read into its records, `Results` and each
    row's `TimingRow`."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_NAME:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise SchemaError(f"{source}: not a portbench results file (schema {found!r}, "
                          f"expected {SCHEMA_NAME!r})")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaError(f"{source}: results schema_version {version!r}, this portbench reads "
                          f"version {SCHEMA_VERSION} only; re-run `compare.py time` to regenerate it")
    top = stored_fields(Results)
    for f, key in top:
        if required(f) and key not in doc:
            raise SchemaError(f"{source}: results file lacks the field {key!r}")
    types = field_types(Results)
    for f, key in top:  # the top level's fields are named as such (`'created'`), the rows by index
        if key in doc and key != "runs":
            read_value(types[f.name], doc[key], f"{source}: {key!r}", SchemaError)
    if not isinstance(doc["runs"], list):
        refuse_value(f"{source}: 'runs'", doc["runs"], "a list", SchemaError)
    for i, row in enumerate(doc["runs"]):
        TimingRow.from_dict(row, f"{source}: runs[{i}]", SchemaError)
    return doc


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    where = f"results file {str(path)!r}"
    return validate(decode_json(read_text(path, where, SchemaError), where, SchemaError), where)


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, default=_jsonable) + "\n"


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # NumPy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")
