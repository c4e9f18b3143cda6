"""Property-based fuzzing of what users hand over: spec documents and weight-file headers.
Whatever the bytes, reading them ends in a value or a one-line PortbenchError, never another
exception, never a hang.

CI runs a fixed, derandomized set of examples (the same every run, so a landing never depends
on the draw). For a deeper local search: `PORTBENCH_FUZZ=deep python -m pytest
tests/test_bad_input_fuzz.py` (random, 2000 examples per property)."""

from __future__ import annotations

import json
import os
import struct
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.core.presets import get_preset
from shared.core.spec import ModelSpec
from shared.core.weights import load_weights
from shared.errors import PortbenchError

DEEP = os.environ.get("PORTBENCH_FUZZ") == "deep"
FUZZ = settings(max_examples=2000 if DEEP else 60, derandomize=not DEEP, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
FIELDS = list(ModelSpec.__dataclass_fields__)

values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
documents = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=12), values, max_size=10)


def outcome_of(call) -> str:
    try:
        call()
        return "ok"
    except PortbenchError as exc:
        assert "\n" not in str(exc), str(exc)
        return "refused"


@FUZZ
@given(documents)
def test_any_spec_document_is_a_spec_or_one_line(document: dict) -> None:
    base = get_preset("quadrant").to_dict()
    text = json.dumps({**base, **document}, allow_nan=True)
    outcome_of(lambda: ModelSpec.from_json(text))


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_as_a_spec_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.json"
        path.write_bytes(data)
        outcome_of(lambda: ModelSpec.from_file(path))


header_entry = st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "F64", "F16", "I64", "BOOL", "??"]),
    "shape": st.lists(st.integers(min_value=-2, max_value=40), max_size=4),
    "data_offsets": st.lists(st.integers(min_value=-5, max_value=5000), min_size=0, max_size=3),
})
headers = st.dictionaries(
    st.sampled_from(list(get_preset("quadrant").derived.tensor_shapes)) | st.text(max_size=10),
    header_entry, max_size=6)
metadata = st.fixed_dictionaries({}, optional={
    "format": st.sampled_from(["portbench-weights", "x"]), "format_version": st.sampled_from(["1", "2", ""]),
    "spec": st.sampled_from([get_preset("quadrant").to_json(), "{", "[]", json.dumps({"dim": -1})]),
    "spec_hash": st.text(max_size=16)})


@FUZZ
@given(headers, metadata, st.binary(max_size=600), st.integers(min_value=-1, max_value=3))
def test_any_weight_file_header_is_read_or_refused(header: dict, meta: dict, body: bytes,
                                                   length_error: int) -> None:
    blob = json.dumps({**header, "__metadata__": meta}).encode()
    declared = len(blob) + (length_error if length_error > 0 else 0)
    data = struct.pack("<Q", declared if length_error >= 0 else 2**63) + blob + body
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "w.safetensors"
        path.write_bytes(data)
        outcome_of(lambda: load_weights(path))
