"""Each port's mode chosen by measurement (shared/measure/modes.py): the cache (its key, reuse, a
corrupt file, a forced mode), that a candidate failing the equivalence gate is never chosen, and
that the results JSON carries every candidate. No test asserts a speed.

The units need no framework. The end-to-end proof is three `compare.py time` runs of torch on the
tiny `quadrant` spec (eager only), in the background (tests/background.py), one cache folder:
1. a fresh cache, the `fused` candidate's logits tampered 1e-3 off (PORTBENCH_TEST_FAULT): it
   fails the gate and `explicit` is chosen whichever is faster;
2. the same machine again, no fault: the cached choice is reused and said so;
3. `--mode torch=fused`: forced, nothing measured.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from shared.errors import PortbenchError
from shared.measure import modes, output, schema
from shared.measure.results_types import SchemaError
from tests import background
from tests.test_timing_units import make_doc, make_row
from tests.timing_helpers import FAST, REPO, _env


# ---- units: the cache, forcing, choosing ---------------------------------------------------------
def timing_row(**conditions: Any) -> dict[str, Any]:
    cond = {"device_name": "AMD EPYC", "spec_hash": "abc", "batch": 8, "threads": 2, "precision": "float32",
            "device_class": "cpu"}
    return {"conditions": {**cond, **conditions}, "versions": {"torch": "2.14.1", "numpy": "2.4.6"}}


def test_cache_key_names_machine_versions_and_spec_shape() -> None:
    base = modes.cache_key("torch", timing_row(), "compiled")
    assert base == modes.cache_key("torch", timing_row(), "compiled")
    changed = [modes.cache_key("keras", timing_row(), "compiled"),
               modes.cache_key("torch", timing_row(), "eager"),
               modes.cache_key("torch", timing_row(device_name="Intel Xeon"), "compiled"),
               modes.cache_key("torch", timing_row(spec_hash="def"), "compiled"),
               modes.cache_key("torch", timing_row(batch=1), "compiled"),
               modes.cache_key("torch", timing_row(threads=1), "compiled"),
               modes.cache_key("torch", timing_row(precision="bfloat16"), "compiled"),
               modes.cache_key("torch", {**timing_row(), "versions": {"torch": "2.15.0"}}, "compiled")]
    assert len({base, *changed}) == 1 + len(changed)


def test_a_written_choice_is_read_back_and_a_mode_no_longer_offered_is_not_reused(tmp_path: Path) -> None:
    path, notes = tmp_path / "portbench" / "modes.json", []
    candidates = [{"mode": "fused", "status": "ok", "median": 0.5}]
    modes.write_cache(path, "k1", {"mode": "fused", "candidates": candidates, "measured": "t"}, notes)
    modes.write_cache(path, "k2", {"mode": "explicit", "candidates": [], "measured": "t"}, notes)
    entries = modes.read_cache(path, notes)
    assert notes == [] and set(entries) == {"k1", "k2"}  # the second write kept the first entry
    assert modes.cached_choice(entries["k1"], ("explicit", "fused")) == {
        "chosen": "fused", "candidates": candidates, "measured": "t"}
    assert modes.cached_choice(entries["k1"], ("graph", "xla")) is None


@pytest.mark.parametrize("text", ["{not json", '["a list"]', '{"format": 99, "entries": {}}',
                                  '{"format": 1, "entries": []}', "\udcff",
                                  pytest.param("[" * 100_000, id="nested-too-deep")])  # was a crash
def test_a_corrupt_cache_is_ignored_with_a_note(tmp_path: Path, text: str) -> None:
    path, notes = tmp_path / "modes.json", []
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    assert modes.read_cache(path, notes) == {}
    assert len(notes) == 1 and notes[0].startswith(f"mode cache {path} ignored (")
    modes.write_cache(path, "k", {"mode": "xla"}, notes)  # and replaced by the next measurement
    assert modes.read_cache(path, []) == {"k": {"mode": "xla"}}


def test_a_forced_mode_is_the_named_frameworks_or_any_port_offering_it() -> None:
    notes: list[str] = []
    assert modes.forced_mode("keras", ("graph", "xla"), ["torch=fused", "keras=xla"], notes) == "xla"
    assert modes.forced_mode("torch", ("explicit", "fused"), ["explicit"], notes) == "explicit"
    assert notes == []
    assert modes.forced_mode("keras", ("graph", "xla"), ["explicit"], notes) is None
    assert notes == ["--mode explicit: not one of keras's modes (graph, xla); measured"]
    with pytest.raises(PortbenchError, match=r"^--mode torch=xla: torch has no mode 'xla'; expected one of: "
                                             r"explicit, fused$"):
        modes.forced_mode("torch", ("explicit", "fused"), ["torch=xla"], notes)


def test_the_fastest_candidate_that_passed_the_gate_is_chosen() -> None:
    failed_fast = {"mode": "fused", "status": "failed", "median": 0.001, "reason": "equivalence gate"}
    assert modes.fastest([failed_fast, {"mode": "explicit", "status": "ok", "median": 0.5},
                          {"mode": "other", "status": "ok", "median": 0.7}]) == "explicit"
    assert modes.fastest([failed_fast]) is None


class FakePort:
    spec = None

    def __init__(self) -> None:
        self.modes: list[str] = []

    def set_mode(self, mode: str) -> None:
        self.modes.append(mode)


class FakeModule:
    def __init__(self, offered: tuple[str, ...]) -> None:
        self.offered = offered

    def run_modes(self, spec: Any, device_class: str) -> tuple[str, ...]:
        return self.offered


def choose(offered: tuple[str, ...], options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    port, row = FakePort(), timing_row()
    modes.choose("torch", FakeModule(offered), port, None,  # type: ignore[arg-type]
                 {"modes": ["eager", "compiled"], "mode_options": options}, row)
    return row["mode_choice"], port.modes


def test_choose_reuses_the_cache_and_obeys_a_forced_mode(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert choose(("inductor",), {}) == ({"forward": "compiled", "offered": ["inductor"], "candidates": [],
                                          "notes": [], "chosen": "inductor", "source": "only"}, [])
    key = modes.cache_key("torch", timing_row(), "compiled")
    measured = [{"mode": "fused", "status": "ok", "median": 0.2}]
    modes.write_cache(modes.cache_path(), key, {"mode": "fused", "candidates": measured, "measured": "t"}, [])
    record, applied = choose(("explicit", "fused"), {})
    assert (record["chosen"], record["source"], record["candidates"], applied) == \
        ("fused", "cached", measured, ["fused"])
    record, applied = choose(("explicit", "fused"), {"force": ["torch=explicit"]})
    assert (record["chosen"], record["source"], record["candidates"], applied) == \
        ("explicit", "forced", [], ["explicit"])
    row = timing_row()
    with pytest.raises(PortbenchError):
        modes.choose("torch", FakeModule(("explicit", "fused")), FakePort(), None,  # type: ignore[arg-type]
                     {"modes": ["compiled"], "mode_options": {"force": ["torch=xla"]}}, row)
    # the parent says it in one line
    assert row["user_error"].startswith("--mode torch=xla: torch has no mode 'xla'")


def test_results_schema_checks_every_candidate_and_the_table_names_the_mode() -> None:
    row = make_row("torch", 0.01)
    ok = {"mode": "explicit", "status": "ok", "median": 0.01, "iqr": 0.0, "n": 3, "first_call_s": 0.02,
          "gate": {"passed": True, "max_abs_err": 1e-7}}
    failed = {"mode": "fused", "status": "failed", "reason": "equivalence gate: off",
              "gate": {"passed": False, "max_abs_err": 1e-3}}
    row["mode_choice"] = {"chosen": "explicit", "source": "measured", "forward": "eager",
                          "offered": ["explicit", "fused"], "notes": [], "candidates": [ok, failed]}
    schema.validate(make_doc([row]), "x")
    text = output.table([row])
    assert text.splitlines()[1].split()[1] == "torch/explicit"
    unwrapped = " ".join(text.split())
    assert "torch explicit (measured: explicit 10ms, fused FAILED (equivalence gate: off))" in unwrapped
    row["mode_choice"]["candidates"][1]["status"] = "skipped"
    with pytest.raises(SchemaError, match=r"runs\[0\]\.mode_choice\.candidates\[1\]\.status is 'skipped'"):
        schema.validate(make_doc([row]), "x")


# ---- end to end: three runs sharing one cache folder ------------------------------------------
@background.task("timing-modes", "test_timing_modes.py::test_run")
def mode_runs(start: background.Start) -> dict[str, tuple[dict[str, Any], subprocess.CompletedProcess]]:
    root = Path(tempfile.mkdtemp(prefix="portbench-modes-"))
    runs = {"tampered": (["--remeasure-modes"], "torch:tamper-mode=fused"), "cached": ([], None),
            "forced": (["--mode", "torch=fused"], None)}
    out = {}
    for name, (extra, fault) in runs.items():  # in turn: each reads what the one before cached
        path = root / f"{name}.json"
        env = {**_env(fault), "XDG_CACHE_HOME": str(root / "cache")}
        args = ["time", *FAST, "--frameworks", "torch", "--no-chart", "--json", str(path), *extra]
        proc = start(subprocess.Popen([sys.executable, str(REPO / "compare.py"), *args], cwd=REPO, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        stdout, stderr = proc.communicate(timeout=240)
        result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        assert result.returncode == 0, stderr
        out[name] = (schema.load(path)["runs"][0], result)
    return out


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[dict[str, Any], subprocess.CompletedProcess]]:
    return background.result("timing-modes")


def test_run_never_chooses_a_candidate_that_failed_the_gate_and_records_every_one(runs) -> None:
    row, result = runs["tampered"]
    choice = row["mode_choice"]
    assert (choice["chosen"], choice["source"], choice["forward"]) == ("explicit", "measured", "eager")
    by_mode = {c["mode"]: c for c in choice["candidates"]}
    assert list(by_mode) == choice["offered"] and set(by_mode) == {"explicit", "fused"}
    assert by_mode["fused"]["status"] == "failed" and by_mode["fused"]["gate"]["passed"] is False
    assert by_mode["fused"]["reason"].startswith("equivalence gate: ")
    assert by_mode["explicit"]["status"] == "ok" and by_mode["explicit"]["gate"]["passed"] is True
    assert by_mode["explicit"]["n"] >= modes.MEASURE_BUDGET.min_repeats
    assert choice["budget"]["seconds"] == modes.MEASURE_BUDGET.seconds
    assert row["status"] == "ok" and all(v["passed"] for v in row["equivalence"].values())
    assert "torch: mode: explicit (measured)" in result.stderr
    printed = " ".join(result.stdout.split())  # the line under the table is wrapped at 100 columns
    assert "torch/explicit" in printed and "fused FAILED (equivalence gate: " in printed


def test_run_on_the_same_machine_reuses_the_cached_choice_and_says_so(runs) -> None:
    row, result = runs["cached"]
    first, _ = runs["tampered"]
    assert (row["mode_choice"]["chosen"], row["mode_choice"]["source"]) == ("explicit", "cached")
    assert row["mode_choice"]["candidates"] == first["mode_choice"]["candidates"]
    assert "torch: mode: explicit (cached)" in result.stderr and "measuring mode" not in result.stderr


def test_run_with_a_forced_mode_measures_nothing(runs) -> None:
    row, result = runs["forced"]
    assert (row["mode_choice"]["chosen"], row["mode_choice"]["source"]) == ("fused", "forced")
    assert row["mode_choice"]["candidates"] == [] and "measuring mode" not in result.stderr
    assert row["status"] == "ok"


def test_bad_mode_option_is_one_line() -> None:
    from tests.timing_helpers import compare, error_line

    line = error_line(compare("time", "--spec", "quadrant", "--mode", "nosuchfw=fast"))
    assert line.startswith("error: --mode 'nosuchfw=fast': expected NAME or FRAMEWORK=NAME")


def test_the_compile_reported_after_a_measurement_is_the_chosen_candidates_first_call() -> None:
    measured = {"source": "measured", "forward": "compiled", "chosen": "xla", "candidates": [
        {"mode": "graph", "status": "ok", "first_call_s": 0.5},
        {"mode": "xla", "status": "ok", "first_call_s": 1.25}]}
    assert modes.first_compile({"mode_choice": measured}, 0.002) == 1.25
    # cached, forced, eager-measured or one-mode rows: the compile phase measured a real compile
    for record in ({**measured, "source": "cached"}, {**measured, "forward": "eager"}, {"source": "only"}):
        assert modes.first_compile({"mode_choice": record}, 0.002) == 0.002


class GemmModule:
    """A port module whose products only sleep (a nonzero time to divide by): it records the mode
    each gemm_call was given."""

    def __init__(self) -> None:
        self.modes: list[str | None] = []

    def gemm_call(self, m: int, k: int, n: int, device_class: str, dtype: str = "float32",
                  mode: str | None = None) -> Any:
        self.modes.append(mode)
        return lambda: time.sleep(1e-5)


class Progress:
    def progress(self, message: str) -> None:
        self.said = message


def test_the_roof_is_measured_in_the_mode_the_run_chose_and_says_so() -> None:
    from shared.core.presets import get_preset
    from shared.measure import flops, phases

    spec, module, timer = get_preset("quadrant"), GemmModule(), Progress()
    row = {"mode_choice": {"chosen": "xla"}, "phases": {"forward_compiled": {"status": "ok", "median": 0.01}}}
    phases.measure_roofline(module, spec, "cpu", {"batch": 2}, row, timer)  # type: ignore[arg-type]
    # every one of the spec's GEMM shapes was timed in the chosen mode, and the record says which
    assert module.modes == ["xla"] * len(flops.gemm_shapes(spec, 2))
    assert row["roofline"]["gemm"]["mode"] == "xla"
    assert timer.said == "measuring the float32 GEMM rate (mode xla)"
    # a port with one way to run (ONNX, a user's model) has no chosen mode: None reaches gemm_call
    bare: dict[str, Any] = {"phases": {}}
    phases.measure_roofline(module, spec, "cpu", {"batch": 2}, bare, timer)  # type: ignore[arg-type]
    assert module.modes[-1] is None and bare["roofline"]["gemm"]["mode"] is None


@pytest.mark.parametrize("framework", ["torch", "flax", "mlx"])
def test_an_attention_mode_reaches_the_pool_as_well_as_the_blocks(framework: str) -> None:
    import ports
    from shared.core.presets import get_preset

    port = ports.create_port(framework, get_preset("siglip-tiny"))
    port.set_mode("explicit")
    layers = [*port.model.blocks, port.model.pool]
    assert [layer.attn.attention_path for layer in layers] == ["explicit"] * len(layers)


def test_peers_gate_the_port_they_time_however_its_mode_was_chosen(tmp_path: Path, monkeypatch) -> None:
    """peers gated the port only while measuring its modes: a choice read from the cache (or forced,
    or the default after every candidate failed) timed a port that computes another function against
    its peers. The forward choose_for hands back is gated whatever chose it."""
    import ports
    from shared.core.inputs import probe_batch
    from shared.core.presets import get_preset
    from shared.core.weights import init_weights
    from shared.measure import gate

    monkeypatch.setattr(modes, "cache_path", lambda: tmp_path / "modes.json")
    spec = get_preset("quadrant")
    reference = str(tmp_path / "reference.npz")
    gate.write_reference(reference, spec, 4, 1234, 0)
    module = ports.load_port_module("torch")
    for shift, passes in ((0.0, True), (1e-3, False)):
        weights = init_weights(spec, seed=0)
        weights["head.out.bias"] = weights["head.out.bias"] + shift  # the tamper fault's 1e-3
        port = module.Port(spec)
        port.load(weights)
        prepared = port.prepare(probe_batch(spec, batch=4, seed=1234))
        if passes:  # measured, gated, and cached for this machine and spec shape
            choice, forward = modes.choose_for("torch", module, port, prepared, "eager", 4, 1, reference)
            assert choice["source"] == "measured" and forward(prepared) is not None
            continue  # the tampered port below finds that choice in the cache
        with pytest.raises(PortbenchError, match=r"the torch port's \w+ forward failed the equivalence gate"):
            modes.choose_for("torch", module, port, prepared, "eager", 4, 1, reference)
