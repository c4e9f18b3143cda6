"""Framework-free parts of the timing harness: statistics, the results schema, the confound
guard, the factorial split and the outputs. Rows here are built by hand on purpose: they test
the guard's logic, not a measurement."""

from __future__ import annotations

import copy
import json

import pytest

from shared.errors import PortbenchError
from shared.measure import factorial, guard, output, schema
from shared.measure.stats import Budget, repeat, summarise


def make_row(framework: str, median: float, **conditions: object) -> dict:
    cond = {"spec_name": "quadrant", "spec_hash": "abc", "batch": 8, "dtype": "float32", "threads": 1,
            "device_class": "cpu", "device_name": "Some CPU"}
    cond.update(conditions)
    samples = [median * 0.9, median, median * 1.1]
    return {"framework": framework, "status": "ok", "reason": None, "conditions": cond,
            "phases": {"forward_eager": {"status": "ok", "samples": samples, **summarise(samples)},
                       "compile": {"status": "n/a", "reason": "eager only"}},
            "memory": {"peak_rss_bytes": 2**30, "allocator_peak_bytes": None},
            "equivalence": {"eager": {"passed": True, "max_abs_err": 1e-6}}}


def make_doc(rows: list[dict]) -> dict:
    return schema.new_results({"cpu_model": "Some CPU", "git_revision": "0" * 40, "git_dirty": False},
                              {"batch": 8}, rows, "2026-01-01T00:00:00Z", ["compare.py", "time"])


def test_summarise_median_and_iqr_exact() -> None:
    stats = summarise([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (stats["n"], stats["median"], stats["q1"], stats["q3"]) == (5, 3.0, 2.0, 4.0)
    assert stats["iqr"] == 2.0 and stats["min"] == 1.0


def test_repeat_warms_up_then_respects_counts() -> None:
    calls = []
    samples = repeat(lambda: calls.append(1), Budget(warmup=2, min_repeats=4, max_repeats=6, seconds=0.0))
    assert len(samples) == 4 and len(calls) == 6  # 2 untimed warm-up calls + 4 timed
    samples = repeat(lambda: None, Budget(warmup=0, min_repeats=1, max_repeats=7, seconds=60.0))
    assert len(samples) == 7  # the count caps a long budget


def test_schema_round_trip(tmp_path) -> None:
    doc = make_doc([make_row("torch", 0.01), make_row("flax", 0.02)])
    path = tmp_path / "r.json"
    schema.save(path, doc)
    assert schema.load(path) == json.loads(json.dumps(doc))


def test_schema_refuses_other_version_and_foreign_files(tmp_path) -> None:
    doc = make_doc([make_row("torch", 0.01)])
    doc["schema_version"] = schema.SCHEMA_VERSION + 1
    (tmp_path / "new.json").write_text(json.dumps(doc))
    with pytest.raises(schema.SchemaError, match="schema_version 2"):
        schema.load(tmp_path / "new.json")
    (tmp_path / "other.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(schema.SchemaError, match="not a portbench results file"):
        schema.load(tmp_path / "other.json")
    bad = make_doc([make_row("torch", 0.01)])
    bad["runs"][0]["phases"]["warp_speed"] = {}
    with pytest.raises(schema.SchemaError, match="unknown phase"):
        schema.validate(bad, "x")


@pytest.mark.parametrize("field, value", [("spec_hash", "def"), ("batch", 16), ("dtype", "bfloat16"),
                                          ("threads", 2), ("device_class", "cuda")])
def test_guard_refuses_a_mismatch_and_names_the_field(field: str, value: object) -> None:
    rows = [make_row("torch", 0.01), make_row("flax", 0.02, **{field: value})]
    with pytest.raises(guard.IncomparableRunsError, match=f"{field} differs") as info:
        guard.rank(rows)
    assert str(value) in str(info.value)
    text = output.table(rows)
    assert f"{field} differs" in text
    assert all(line.split()[0] == "-" for line in text.splitlines()[1:3])  # no ranks shown


def test_guard_sees_rows_with_the_same_label() -> None:
    # A factorial file holds each framework twice (one row per spec): same label, other spec.
    rows = [make_row("torch", 0.01), make_row("torch", 0.02, spec_hash="def")]
    with pytest.raises(guard.IncomparableRunsError, match="spec_hash differs"):
        guard.rank(rows)


def test_guard_allow_mixed_only_relaxes_the_device() -> None:
    rows = [make_row("torch", 0.03), make_row("flax", 0.02, device_class="cuda", device_name="GPU")]
    ranked = guard.rank(rows, allow_mixed=True)
    assert [r["framework"] for _, r, _, _ in ranked] == ["flax", "torch"]
    rows[1]["conditions"]["threads"] = 4
    with pytest.raises(guard.IncomparableRunsError, match="threads differs"):
        guard.rank(rows, allow_mixed=True)


def test_invalid_and_crashed_rows_are_never_ranked() -> None:
    rows = [make_row("torch", 0.03), make_row("flax", 0.01), make_row("keras", 0.02)]
    rows[1]["status"] = "invalid"
    rows[2]["status"] = "crashed"
    rows[2]["conditions"]["threads"] = 99  # a failed row cannot trip the guard either
    assert [r["framework"] for _, r, _, _ in guard.rank(rows)] == ["torch"]
    with pytest.raises(PortbenchError, match="unknown ranking metric"):
        guard.rank(rows, metric="speed")


def test_factorial_split_is_exact_and_symmetric() -> None:
    parts = factorial.decompose(t_af=1.0, t_ag=1.5, t_bf=3.0, t_bg=4.0)
    assert parts["gap"] == 3.0
    assert parts["spec_effect"] == pytest.approx(2.25)  # ½[(3-1) + (4-1.5)]
    assert parts["framework_effect"] == pytest.approx(0.75)  # ½[(1.5-1) + (4-3)]
    assert parts["spec_effect"] + parts["framework_effect"] == pytest.approx(parts["gap"])
    assert parts["interaction"] == pytest.approx(0.5)
    rows_a = [make_row("torch", 1.0), make_row("keras", 1.5)]
    rows_b = [make_row("torch", 3.0, spec_hash="b"), make_row("keras", 4.0, spec_hash="b")]
    (only,) = factorial.attribute(rows_a, rows_b, "forward")
    assert (only["framework_f"], only["framework_g"]) == ("torch", "keras")
    assert only["spec_effect"] == pytest.approx(2.25)


def test_csv_has_one_line_per_run_and_phase() -> None:
    rows = [make_row("torch", 0.01), make_row("flax", 0.02)]
    lines = output.csv_text(rows).strip().splitlines()
    assert lines[0].split(",") == list(output.CSV_FIELDS)
    assert len(lines) == 1 + 2 * 2  # two phases recorded per row
    assert any(",n/a," in line and "eager only" in line for line in lines)


def test_chart_is_a_png(tmp_path) -> None:
    rows = [make_row("torch", 0.01), copy.deepcopy(make_row("flax", 0.02))]
    output.write_chart(tmp_path / "c.png", rows, "t")
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_analytic_flops_match_the_published_vit_b16_count() -> None:
    from shared.core.presets import get_preset
    from shared.measure.flops import forward_flops, forward_macs_per_image

    # performance.md §3.3: 17.564 GMACs = 35.13 GFLOP per 224² image, 281.0 GFLOP per batch of 8.
    # 12 blocks x 1,453,954,560 + patch projection 115,605,504 + head 768,000
    assert forward_macs_per_image(get_preset("vit-b16")) == 17_563_828_224
    assert round(forward_flops(get_preset("vit-b16"), 8) / 1e9, 1) == 281.0


def test_process_replicates_pool_samples_and_keep_per_process_medians() -> None:
    from shared.measure.runner import combine

    first, second = make_row("torch", 0.01), make_row("torch", 0.03)
    first["phases"]["import"] = {"status": "ok", "samples": [2.0], **summarise([2.0])}
    second["phases"]["import"] = {"status": "ok", "samples": [4.0], **summarise([4.0])}
    row = combine([first, second])
    assert row["replicates"] == 2 and row["status"] == "ok"
    forward = row["phases"]["forward_eager"]
    assert forward["n"] == 6 and forward["process_medians"] == [0.01, 0.03]
    assert row["phases"]["import"]["n"] == 2 and row["phases"]["import"]["median"] == 3.0
    assert row["phases"]["compile"]["status"] == "n/a"
    second["status"], second["reason"] = "timeout", "killed"
    failed = combine([first, second])
    assert failed["status"] == "timeout" and failed["reason"] == "1 of 2 processes: killed"
