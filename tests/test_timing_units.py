"""Framework-free parts of the timing harness: statistics, the results schema, the confound
guard, the factorial split and the outputs. Rows here are built by hand on purpose: they test
the guard's logic, not a measurement."""

from __future__ import annotations

import copy
import json

import pytest

from shared.errors import PortbenchError
from shared.measure import exports, factorial, guard, output, schema
from shared.measure.stats import Budget, repeat, summarise
from shared.measure.timing_row import TimingRow


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
    path.write_text(schema.dumps(doc))  # as the writers publish it (shared/cli/_outputs.py)
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
    with pytest.raises(schema.SchemaError, match=r"runs\[0\]\.phases has unknown key\(s\) \[.warp_speed.\]"):
        schema.validate(bad, "x")


@pytest.mark.parametrize("field, value", [("spec_hash", "def"), ("batch", 16), ("dtype", "bfloat16"),
                                          ("precision", "bfloat16-mixed"), ("threads", 2),
                                          ("device_class", "cuda")])
def test_guard_refuses_a_mismatch_and_names_the_field(field: str, value: object) -> None:
    rows = [make_row("torch", 0.01), make_row("flax", 0.02, **{field: value})]
    with pytest.raises(guard.IncomparableRunsError, match=f"{field} differs") as info:
        guard.rank(rows)
    assert str(value) in str(info.value)
    text = output.table(rows)
    assert f"{field} differs" in text
    assert all(line.split()[0] == "-" for line in text.splitlines()[1:3])  # no ranks shown


def test_rows_from_before_the_precision_ladder_read_as_float32() -> None:
    """A row without conditions.precision (every run before the ladder was float32) ranks beside
    a float32 row, and is refused beside a bfloat16-pure one: pure vs mixed is not the dtype."""
    old, new = make_row("torch", 0.01), make_row("flax", 0.02, precision="float32")
    assert [r["framework"] for _, r, _, _ in guard.rank([old, new])] == ["torch", "flax"]
    pure = make_row("flax", 0.02, dtype="bfloat16", precision="bfloat16-pure")
    mixed = make_row("torch", 0.01, dtype="bfloat16", precision="bfloat16-mixed")
    with pytest.raises(guard.IncomparableRunsError, match="precision differs"):
        guard.rank([mixed, pure])


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


def test_an_eval_pass_or_compile_ranking_holds_the_phases_own_condition() -> None:
    """eval_pass was ranked across 1 and 3 batches a pass, compile across a cold and a warm cache:
    those differences live in the phase, not the row's conditions."""
    rows = [make_row("torch", 0.01), make_row("flax", 0.02)]
    for row, batches, cache in zip(rows, (1, 3), ("warm", "cold"), strict=True):
        row["phases"]["eval_pass"] = {**row["phases"]["forward_eager"], "batches": batches}
        row["phases"]["compile"] = {**row["phases"]["forward_eager"], "cache": cache}
    assert [r["framework"] for _, r, _, _ in guard.rank(rows)] == ["torch", "flax"]  # forward: ranked
    refused = guard.IncomparableRunsError
    with pytest.raises(refused, match=r"by eval_pass: its batches differs \(torch=1, flax=3\)"):
        guard.rank(rows, metric="eval_pass")
    with pytest.raises(refused, match=r"by compile: its cache differs \(torch=warm, flax=cold"):
        guard.rank(rows, metric="compile")
    from shared.report.pages import timing_parts  # the HTML page ranks by the command's metric too

    assert "its batches differs" in "".join(timing_parts(rows, "eval_pass"))
    assert "differs" not in "".join(timing_parts(rows))  # it ranked by forward whatever --rank-by said
    rows[1]["phases"]["eval_pass"]["batches"] = 1
    assert [r["framework"] for _, r, _, _ in guard.rank(rows, metric="eval_pass")] == ["torch", "flax"]


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
    lines = exports.csv_text(rows).strip().splitlines()
    assert lines[0].split(",") == list(exports.CSV_FIELDS)
    assert len(lines) == 1 + 2 * 2  # two phases recorded per row
    assert any(",n/a," in line and "eager only" in line for line in lines)


def test_chart_is_a_png() -> None:
    rows = [make_row("torch", 0.01), copy.deepcopy(make_row("flax", 0.02))]
    assert exports.chart_png(rows, "t")[:8] == b"\x89PNG\r\n\x1a\n"


def test_analytic_flops_match_the_published_vit_b16_count() -> None:
    from shared.core.presets import get_preset
    from shared.measure.flops import forward_flops

    # The published count: 17.564 GMACs = 35.13 GFLOP per 224² image, 281.0 GFLOP per batch of 8.
    # 12 blocks x 1,453,954,560 + patch projection 115,605,504 + head 768,000
    assert forward_flops(get_preset("vit-b16"), 1) == 2 * 17_563_828_224
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
    # a phase no round measured contention for stays null (it read 0.0: "quiet"); a cold round
    # pooled with a warm one is called mixed (it was labelled with the first round's "cold")
    assert row["phases"]["import"]["foreign_cpu"] is None
    first["phases"]["import"] |= {"cache": "cold", "foreign_cpu": 0.3}
    second["phases"]["import"] |= {"cache": "warm"}
    pooled = combine([first, second])["phases"]["import"]
    assert (pooled["foreign_cpu"], pooled["cache"]) == (0.3, "mixed") and "cold then a warm" in pooled["note"]
    second["status"], second["reason"] = "timeout", "killed"
    failed = combine([first, second])
    assert failed["status"] == "timeout" and failed["reason"] == "1 of 2 processes: killed"


# ---- roofline and the 100-column table ---------------------------------------------------------
def test_roofline_rate_weights_each_shape_by_its_count_and_fraction_is_achieved_over_it() -> None:
    from shared.measure import roofline

    # 2 GFLOP at 1 s, counted once, and 1 GFLOP at 0.25 s, counted 4 times: 6 GFLOP in 2 s.
    shapes = [{"m": 1000, "k": 1000, "n": 1000, "count": 1, "seconds": 1.0},
              {"m": 500, "k": 1000, "n": 1000, "count": 4, "seconds": 0.25}]
    assert roofline.weighted_rate(shapes) == pytest.approx(3.0)
    gemm = {"status": "ok", "gflops": 3.0}
    phases = {"forward_eager": {"status": "ok", "median": 2.0},
              "forward_compiled": {"status": "n/a", "reason": "not requested"}}
    out = roofline.achieved(12 * 10**9, phases, gemm)
    assert out == {"forward_eager": {"gflops": pytest.approx(6.0), "fraction": pytest.approx(2.0)}}
    assert roofline.achieved(12 * 10**9, phases, {"status": "n/a"})["forward_eager"]["fraction"] is None


def test_gemm_shapes_are_the_specs_dense_matmuls_and_flops_come_from_one_list() -> None:
    from shared.core.presets import get_preset
    from shared.measure import flops

    spec = get_preset("vit-b16")
    shapes = {(m.m, m.k, m.n): m.count for m in flops.gemm_shapes(spec, 8)}
    tokens = 8 * 197
    assert shapes[(tokens, 768, 3 * 768)] == 12 and shapes[(tokens, 3072, 768)] == 12
    assert shapes[(8 * 196, 768, 768)] == 1  # the patch projection
    assert flops.forward_flops(spec, 8) == 2 * sum(m.macs for m in flops.matmuls(spec, 8))


def test_flops_count_the_gate_the_attention_pool_and_both_heads() -> None:
    from shared.core.presets import get_preset
    from shared.measure import flops

    gated = get_preset("dinov2-reg-tiny")  # 16 patches + class + 2 registers, width 32, MLP 48, 2 blocks
    plain = gated.replace(mlp="standard")
    assert flops.forward_flops(gated, 4) - flops.forward_flops(plain, 4) == 2 * (4 * 19) * 32 * 48 * 2
    pooled = get_preset("siglip-tiny")  # 16 tokens, width 32, 4 heads of 8, MLP 64, no classifier
    mean = pooled.replace(pooling="mean")
    per_image = 32 * 32 + 8 * 16 * 4 + 16 * 8 * 4 + 32 * 32 + 32 * 64 * 2  # q, q·kᵀ, a·v, out, MLP
    keys_values = 4 * 16 * 32 * 64  # every token's key and value
    assert flops.forward_flops(pooled, 4) - flops.forward_flops(mean, 4) == 2 * (keys_values + 4 * per_image)
    heads = {m.name: m.macs for m in flops.matmuls(get_preset("deit-distilled-tiny"), 4) if "head" in m.name}
    assert heads == {"head 0": 4 * 32 * 10, "head dist": 4 * 32 * 10}
    assert not [m for m in flops.matmuls(pooled, 4) if "head" in m.name]  # num_classes 0: no classifier
    # pool and heads (m = batch) never join the roofline's GEMM shapes
    assert all(m.m != 4 for m in flops.gemm_shapes(pooled, 4))


def synthetic_rows() -> list[dict]:
    """Every kind of row the table shows, with the longest labels and cells it may meet."""
    ok = make_row("keras-torch", 0.123456)
    slow = [1.5, 1.6, 1.7]
    ok["phases"]["forward_compiled"] = {"status": "ok", "samples": slow, **summarise(slow)}
    ok["phases"]["train_step"] = {"status": "ok", "samples": [12.3, 45.6], **summarise([12.3, 45.6]),
                                  "foreign_cpu": 1.75}
    ok["phases"]["compile"] = {"status": "ok", "samples": [27.1], **summarise([27.1]), "cache": "cold"}
    ok["memory"]["peak_rss_bytes"] = 123 * 2**30
    ok["threads_applied"] = {"affinity_note": "4 threads requested but only 2 CPUs usable: oversubscribed"}
    ok["roofline"] = {"forward_flops": 10**9, "gemm": {"status": "ok", "gflops": 100.0},
                      "phases": {"forward_eager": {"gflops": 8.1, "fraction": 0.081}}}
    warm = make_row("torch", 0.001)
    warm["phases"]["compile"] = {"status": "ok", "samples": [4.5], **summarise([4.5]), "cache": "warm"}
    onnx = make_row("onnx", 0.002)
    onnx["roofline"] = {"forward_flops": 1, "gemm": {"status": "n/a", "reason": "no GEMM here " * 12},
                        "phases": {}}
    crashed = make_row("flax", 0.5)
    crashed.update(status="crashed", reason="worker killed by signal SIGSEGV " + "x" * 150)
    return [ok, warm, onnx, crashed]


def test_default_table_fits_100_columns_and_notes_name_their_row() -> None:
    text = output.table(synthetic_rows())
    assert all(len(line) <= 100 for line in text.splitlines()), max(text.splitlines(), key=len)
    header = text.splitlines()[0].split()
    assert header[:3] == ["rank", "port", "fwd"] and header[-3:] == ["mem", "roof", "status"]
    assert "27.1s cold" in text and "4.5s warm" in text and "8%" in text
    for expected in ("keras-torch: CONTENDED", "keras-torch: WARNING: 4 threads", "onnx: roofline n/a",
                     "flax: CRASHED", "roof, best forward / float32 GEMM GFLOP/s: keras-torch 8.1/100"):
        assert expected in text
    assert "CRASHED" in [line.split()[-1] for line in text.splitlines()[1:5]]


def test_wide_table_restores_every_column() -> None:
    text = output.table(synthetic_rows(), wide=True)
    header = text.splitlines()[0]
    for column in ("spec", "device", "import", "build+load", "1st eager", "prepare", "eval pass",
                   "peak RSS", "alloc peak", "gate |err|", "GEMM GFLOP/s"):
        assert column in header
    assert max(len(line) for line in text.splitlines()[:5]) > 100


def test_foreign_cpu_is_not_claimed_from_a_window_too_short_to_resolve() -> None:
    import time

    from shared.measure.contention import MIN_WALL_S, ForeignCpu

    with ForeignCpu([0]) as short:
        pass
    assert short.value is None  # a few microseconds: 10 ms ticks cannot tell
    with ForeignCpu([0]) as long:
        time.sleep(MIN_WALL_S + 0.05)
    assert long.value is not None and 0.0 <= long.value <= 1.0  # never more than the pinned CPUs


# ---- rounds: when a ratio or a rank may be printed (shared/measure/rounds.py) -------------------
def rounds_of(medians: list[float], foreign: list[float | None] | None = None) -> list[dict]:
    foreign = foreign or [0.0] * len(medians)
    return [{"round": k, "median": m, "foreign_cpu": f}
            for k, (m, f) in enumerate(zip(medians, foreign, strict=True), 1)]


def test_a_ratio_is_comparable_only_when_no_round_was_contended_and_the_rounds_agree() -> None:
    from shared.measure.rounds import SPREAD, ratio_decision

    agree = ratio_decision("port", rounds_of([2.0, 2.1, 2.0]), "peer", rounds_of([2.0, 2.0, 1.9]))
    assert agree["comparable"] and agree["checked"] and agree["why"] is None
    assert agree["per_round"] == [1.0, 1.05, 2.0 / 1.9]
    assert agree["spread"] == pytest.approx(2.0 / 1.9 - 1) and agree["spread"] <= SPREAD
    # the busy run: one round of the port slowed by a co-tenant, its probe saw it
    busy = ratio_decision("port", rounds_of([2.0, 4.3, 2.0], [0.02, 0.93, 0.0]), "peer",
                          rounds_of([2.0, 2.0, 2.0]))
    assert not busy["comparable"] and busy["why"] == "contended: port round 2 (0.93 CPUs)"
    # no probe saw anything, but the rounds say a burst landed somewhere: 1.0 vs 1.25
    drift = ratio_decision("port", rounds_of([2.0, 2.5]), "peer", rounds_of([2.0, 2.0]))
    assert not drift["comparable"] and drift["spread"] == pytest.approx(0.25)
    assert drift["why"] == "rounds disagree: per-round ratios 1.00, 1.25 differ by 25% > 10%"
    assert drift["side"] is None  # a round at exactly 1 says neither is faster
    single = ratio_decision("port", rounds_of([2.0]), "peer", rounds_of([1.0]))
    assert single["comparable"] and not single["checked"] and single["per_round"] == [2.0]
    unmeasured = ratio_decision("port", rounds_of([2.0, 2.0], [None, None]), "peer", rounds_of([2.0, 2.0]))
    assert unmeasured["comparable"]  # a span too short to resolve is no claim of contention
    failed = ratio_decision("port", rounds_of([2.0, 2.0]), "peer",
                            [{"round": 1, "median": None}, {"round": 2}])
    assert not failed["comparable"] and failed["why"] == "no time from peer round 1, peer round 2"


def test_rounds_that_disagree_on_one_side_of_1_print_their_range_never_a_median() -> None:
    from shared.measure.rounds import one_side_text, ratio_decision

    agree = ratio_decision("port", rounds_of([1.0, 1.04]), "peer", rounds_of([2.0, 2.0]))
    assert agree["comparable"] and agree["side"] is None and one_side_text(agree) is None
    # the AVX2-limited Keras / keras-hub rounds: 0.54-0.72, every one says the port is faster
    below = ratio_decision("port", rounds_of([0.54, 0.72, 0.60]), "peer", rounds_of([1.0, 1.0, 1.0]))
    assert not below["comparable"] and below["side"] == "faster"
    assert below["spread"] == pytest.approx(0.72 / 0.54 - 1)
    assert below["why"] == "rounds disagree: per-round ratios 0.54, 0.72, 0.60 differ by 33% > 10%"
    assert one_side_text(below) == "0.54-0.72x, faster in every round; rounds disagree by 33%"
    above = ratio_decision("port", rounds_of([3.0, 2.4]), "peer", rounds_of([2.0, 2.0]))
    assert above["side"] == "slower"
    assert one_side_text(above) == "1.20-1.50x, slower in every round; rounds disagree by 25%"
    straddle = ratio_decision("port", rounds_of([0.9, 1.2]), "peer", rounds_of([1.0, 1.0]))
    assert not straddle["comparable"] and straddle["side"] is None and one_side_text(straddle) is None
    assert straddle["why"] == "rounds disagree: per-round ratios 0.90, 1.20 differ by 33% > 10%"
    # contended: no ratio and no range, though every round is below 1
    busy = ratio_decision("port", rounds_of([0.54, 0.72], [0.0, 0.4]), "peer", rounds_of([1.0, 1.0]))
    assert busy["side"] is None and one_side_text(busy) is None
    assert busy["why"] == "contended: port round 2 (0.40 CPUs)"


def test_a_rank_is_kept_only_where_every_round_agrees_and_contended_rows_get_none() -> None:
    from shared.measure.rounds import rank_decisions

    decided = rank_decisions([("a", "a", [1.0, 2.0], [0.0, 0.0], 1.5),
                              ("b", "b", [1.5, 1.5], [0.0, 0.0], 1.5),
                              ("c", "c", [3.0, 3.0], [0.0, 0.1], 3.0),
                              ("d", "d", [0.5, 0.5], [0.0, 0.6], 0.5)])
    assert decided["d"] == (None, "contended: d round 2 (0.60 CPUs)")
    assert decided["c"] == (3, None)  # third of the calm rows in both rounds
    assert decided["a"] == (None, "rank differs between rounds (round 1: 1, round 2: 2)")
    assert decided["b"] == (None, "rank differs between rounds (round 1: 2, round 2: 1)")
    assert rank_decisions([("x", "x", [1.0], [None], 1.0), ("y", "y", [2.0], [0.15], 2.0)]) == {
        "x": (1, None), "y": (2, None)}
    # Merged files of 2 rounds and 1: ranked on the pooled medians the table shows (x 1.2 before
    # y 1.5), not on the mean of x's rounds (2.0), which would put the row listed first second.
    assert rank_decisions([("x", "x", [1.0, 3.0], [0.0, 0.0], 1.2), ("y", "y", [1.5], [0.0], 1.5)]) == {
        "x": (1, None), "y": (2, None)}


def test_the_gemm_ceiling_is_the_fastest_calm_round_and_a_contended_one_is_flagged() -> None:
    from shared.measure.rounds import ceiling, gemm_warning

    calm, busy = {"status": "ok", "gflops": 137.0, "foreign_cpu": 0.01}, \
        {"status": "ok", "gflops": 150.0, "foreign_cpu": 0.8}
    chosen = ceiling([{"status": "ok", "gflops": 130.0, "foreign_cpu": 0.0}, busy, calm])
    assert chosen["gflops"] == 137.0 and chosen["rounds_gflops"] == [130.0, 150.0, 137.0]
    assert not chosen["rounds_disagree"] and gemm_warning("torch", chosen) is None
    worst = ceiling([{"status": "ok", "gflops": 50.9, "foreign_cpu": 0.9}])
    assert gemm_warning("keras", worst).startswith("keras: roof: its GEMM rate 50.9 GFLOP/s was measured "
                                                   "while other processes used 0.90 of its CPUs")
    apart = ceiling([{"status": "ok", "gflops": 50.9}, {"status": "ok", "gflops": 137.0}])
    assert apart["gflops"] == 137.0 and apart["rounds_disagree"]
    assert "GEMM rate differs between rounds (50.9, 137 GFLOP/s" in gemm_warning("keras", apart)


def round_row(framework: str, medians: list[float], foreign: list[float | None]) -> dict:
    row = make_row(framework, sum(medians) / len(medians))
    row["phases"]["forward_eager"]["process_medians"] = medians
    row["rounds"] = [{"round": k, "status": "ok", "foreign_cpu": f} for k, f in enumerate(foreign, 1)]
    return row


def test_time_table_ranks_only_rows_the_rounds_agree_on_and_the_file_records_why() -> None:
    calm = round_row("torch", [0.01, 0.011], [0.0, 0.02])
    busy = round_row("flax", [0.005, 0.02], [0.0, 0.7])
    calm["roofline"] = {"forward_flops": 10**9, "gemm": {"status": "ok", "gflops": 50.0, "foreign_cpu": 0.5},
                        "phases": {"forward_eager": {"gflops": 100.0, "fraction": 2.0}}}
    text = output.table([calm, busy])
    lines = text.splitlines()
    assert lines[1].split()[:2] == ["1", "torch"] and lines[2].split()[:2] == ["-", "flax"]
    assert "200%?" in lines[1]  # the share of a GEMM rate measured while contended
    assert "flax: not comparable: contended: flax round 2 (0.70 CPUs)" in text
    assert "torch: roof: its GEMM rate 50 GFLOP/s was measured while other processes used 0.50" in text
    record = guard.ranking_record([calm, busy])
    assert [(r["framework"], r["rank"], r["why"]) for r in record["rows"]] == [
        ("torch", 1, None), ("flax", None, "contended: flax round 2 (0.70 CPUs)")]
    doc = make_doc([calm, busy])
    doc["ranking"] = [record]
    schema.validate(json.loads(schema.dumps(doc)), "doc")
    doc["runs"][0]["rounds"][1]["foreign_cpu"] = "0.02"
    with pytest.raises(schema.SchemaError, match=r"runs\[0\]\.rounds\[1\]\.foreign_cpu is '0.02'"):
        schema.validate(doc, "doc")


def test_a_roof_share_above_100_percent_is_flagged_not_printed_plain() -> None:
    import argparse

    from shared.cli.peers import report_text
    from shared.core.presets import get_preset

    # the Keras row: an XLA forward over a ceiling timed in the graph's oneDNN GEMM
    row = make_row("keras", 0.01)
    gemm = {"status": "ok", "gflops": 50.0, "dtype": "float32", "mode": "graph", "foreign_cpu": 0.0}
    row["roofline"] = {"forward_flops": 8.2 * 10**8, "gemm": gemm,
                       "phases": {"forward_eager": {"gflops": 82.0, "fraction": 1.64}}}
    text = output.table([row])
    assert text.splitlines()[1].split()[-2] == "164%!"
    flagged = ("keras: roof below the forward's rate: the ceiling was not measured as the forward runs "
               "(forward 82 GFLOP/s, 164% of the float32 GEMM rate 50 GFLOP/s measured in mode graph)")
    assert flagged in " ".join(text.split())  # the note, however it is wrapped
    row["roofline"]["phases"]["forward_eager"] = {"gflops": 45.0, "fraction": 0.9}
    calm = output.table([row])
    assert calm.splitlines()[1].split()[-2] == "90%" and "roof below" not in calm
    # peers' roof column: the same mark and line
    results = {"port:keras:compiled": {**peer_report([1.0, 1.0], [0.0, 0.0]), "gflops": 82.0, "gemm": gemm}}
    args = argparse.Namespace(batch=4, threads=1, processes=2)
    text = report_text(get_preset("quadrant"), args, results, [])
    assert "164%! of 50" in text
    assert flagged.replace("keras:", "port:keras:compiled:", 1) in " ".join(text.split())


def peer_report(medians: list[float], foreign: list[float]) -> dict:
    samples = [m for m in medians for _ in range(3)]
    return {"samples": samples, **summarise(samples), "params": 18020, "gflops": 1.0, "first_call_s": 0.1,
            "runs_as": "torch eager", "threads_used": {"affinity": [0], "intra_op": 1, "inter_op": 1},
            "rounds": rounds_of(medians, foreign)}


def test_peers_print_a_ratio_only_where_the_rule_allows_and_say_what_differs() -> None:
    import argparse

    from shared.cli.peers import report_text
    from shared.core.presets import get_preset
    from shared.measure.peer_timing import ratios

    results = {"port:torch:eager": peer_report([2.4, 2.4], [0.0, 0.0]),
               "timm:eager": peer_report([2.0, 2.0], [0.0, 0.0]),
               "hf-torch:eager": peer_report([2.0, 1.0], [0.0, 0.5]),
               "port:flax:compiled": peer_report([1.08, 1.44], [0.0, 0.0]),
               "hf-flax:jit": peer_report([2.0, 2.0], [0.0, 0.0])}
    found = {(r["port"], r["peer"]): r for r in ratios(results)}
    timm, hf = found[("port:torch:eager", "timm:eager")], found[("port:torch:eager", "hf-torch:eager")]
    assert timm["comparable"] and timm["ratio"] == pytest.approx(1.2)
    assert timm["differs"]["finding"] is None and timm["differs"]["peer"]["runs_as"] == "torch eager"
    assert not hf["comparable"] and "differs" not in hf
    args = argparse.Namespace(batch=4, threads=1, processes=2)
    text = report_text(get_preset("quadrant"), args, results, list(found.values()))
    assert "  port:torch:eager / timm:eager: 1.20x (1.20-1.20); rounds 1.20, 1.20" in text
    assert "    port:torch:eager ran torch eager; threads: intra_op 1, inter_op 1, CPUs [0]" in text
    assert "    finding: none measured yet for this pair" in text
    assert ("  port:torch:eager / hf-torch:eager: not comparable: contended: hf-torch:eager round 2 "
            "(0.50 CPUs)") in text
    assert "hf-torch:eager CONTENDED" in text  # the row itself is flagged in the table
    # rounds 0.54 and 0.72: the range, marked, and no median (the pooled one would be 0.63x)
    assert found[("port:flax:compiled", "hf-flax:jit")]["ratio"] == pytest.approx(0.63)
    assert ("  port:flax:compiled / hf-flax:jit: 0.54-0.72x, faster in every round; rounds disagree by 33%"
            in text.splitlines())
    assert "0.63x" not in text


def test_a_row_reads_as_typed_records() -> None:
    """The schema is the records' annotations: what `load` checked is a `TimingRow` a reader can use."""
    doc = make_doc([make_row("torch", 0.01)])
    row = TimingRow.from_dict(schema.validate(doc, "x")["runs"][0], "runs[0]", schema.SchemaError)
    assert row.framework == "torch" and row.status == "ok"
    assert row.phases["forward_eager"].median == doc["runs"][0]["phases"]["forward_eager"]["median"]
    assert row.conditions.spec_hash == doc["runs"][0]["conditions"]["spec_hash"]


def test_a_padded_batch_is_timed_in_real_patches_per_second_beside_its_padding() -> None:
    """A naflex or packed batch: each row's real patches over its faster forward, and the share of
    the computed slots that was padding (shared/core/batching.patch_counts, counted in the worker);
    a fixed batch has no padding and no such line. Exact on synthetic medians."""
    from shared.core.batching import patch_counts
    from shared.core.inputs import probe_batch
    from shared.core.presets import get_preset

    spec = get_preset("siglip2-naflex-tiny")
    assert patch_counts(spec, probe_batch(spec, 4)) == (12 + 4 + 3 + 1, 48)  # grids 3x4, 4x1, 3x1, 1x1
    fixed = get_preset("quadrant")
    assert patch_counts(fixed, probe_batch(fixed, 4)) == (4 * 4, 4 * 4)  # four 2x2 grids
    rows = [make_row("torch", 0.002, patches_real=20, patches_slots=48),
            make_row("flax", 0.001, patches_real=20, patches_slots=48)]
    assert output.patches_line(rows) == ["real patches/s, best forward (20 of 48 patch slots real, 58% "
                                         "padding): torch 10,000, flax 20,000"]
    assert output.patches_line([make_row("torch", 0.002, patches_real=64, patches_slots=64)]) == []
    assert "real patches/s" in output.table(rows)
