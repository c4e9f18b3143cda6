"""How a low rung's bound is derived (shared/core/tolerance.py): the rung's measured multiple of
the case's emulated rounding gap (shared/core/rounding.py), never under float32's bound, its
floor the rung's floor multiple of the same gap; how verify and the timing gate state it; and
`compare.py tolerances --from`, which writes docs/tolerances.md from one run per arithmetic path.
NumPy only: no framework runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.core.equivalence import check_logits
from shared.core.precision import FLOAT32, LOW_RUNGS, Precision
from shared.core.rounding import emulated_gap
from shared.core.tolerance import (
    FLOOR_FRACTION,
    MEASURED_RATIOS,
    bound_multiple,
    derivation,
    float32_atol,
    floor_multiple,
    logit_atol,
    rung_floor,
)
from shared.core.weights import init_weights
from shared.measure import gate
from shared.runtime.ladder import Measured, markdown, ratio_summary
from tests.adversarial import refused, run_cli
from tests.ports_cache import case


def test_a_low_rung_bound_is_its_multiple_of_the_emulated_gap() -> None:
    spec, _, _, ref = case("quadrant")
    for rung in LOW_RUNGS:
        precision = Precision.from_rung(rung)
        highest = max(high for _, high in MEASURED_RATIOS[rung].values())
        lowest = min(low for low, _ in MEASURED_RATIOS[rung].values())
        assert bound_multiple(rung) == pytest.approx(2 * highest)
        assert floor_multiple(rung) == pytest.approx(lowest * FLOOR_FRACTION)
        assert logit_atol(spec, ref, precision, 1e-2) == pytest.approx(bound_multiple(rung) * 1e-2)
        assert rung_floor(spec, ref, precision, 1e-2) == pytest.approx(floor_multiple(rung) * 1e-2)
        # a case whose rounding is below float32's bound keeps float32's bound
        assert logit_atol(spec, ref, precision, 1e-12) == float32_atol(spec, ref)
        assert f"{bound_multiple(rung):.3g} x emulated {rung} rounding gap 1.00e-02" in derivation(
            spec, ref, precision, 1e-2)
    assert logit_atol(spec, ref, FLOAT32) == float32_atol(spec, ref) and rung_floor(spec, ref, FLOAT32) == 0.0
    tf32 = Precision(tf32=True)  # unmeasured: float16-pure's multiple, no floor
    assert logit_atol(spec, ref, tf32, 1e-2) == pytest.approx(bound_multiple("float16-pure") * 1e-2)
    assert rung_floor(spec, ref, tf32, 1e-2) == 0.0


def test_the_timing_gate_stores_and_applies_the_emulated_gap(tmp_path: Path) -> None:
    """The parent writes the emulated gap beside the reference logits; each worker's check uses
    it and records it, with the derivation, in the results file."""
    spec, precision = case("quadrant")[0], Precision("bfloat16", "mixed")
    npz = tmp_path / "reference.npz"
    ref = gate.write_reference(npz, spec, 4, 0, 0, precision)
    emulated = gate.read_reference(npz)[1]
    assert emulated == emulated_gap(spec, init_weights(spec, 0), gate.gate_images(spec, 4, 0), precision, ref)
    check = check_logits(spec, ref + 0.5 * emulated, ref, None, precision, emulated).to_dict()
    assert check["passed"] and check["emulated_gap"] == emulated
    assert check["atol"] == pytest.approx(bound_multiple(precision.rung) * emulated)
    assert check["bound"].startswith(f"{bound_multiple(precision.rung):.3g} x emulated")
    gate.write_reference(npz, spec, 4, 0, 0, FLOAT32)
    assert gate.read_reference(npz)[1] is None
    check = check_logits(spec, ref, ref, None, FLOAT32).to_dict()
    assert check["emulated_gap"] is None and check["bound"] is None


def _measured(path_ratio: float) -> list[Measured]:
    return [Measured("quadrant", "small", "bfloat16-mixed", "torch", 2e-2 * path_ratio, "PASS", None, 2e-2),
            Measured("quadrant", "small", "bfloat16-mixed", "flax", 1e-2, "PASS", None, 2e-2),
            Measured("quadrant", "small", "bfloat16-mixed", "mlx", None, "UNAVAILABLE", "no mixed", None)]


def test_the_ladder_reports_ratios_per_path() -> None:
    native, limited = _measured(1.0), _measured(1.5)
    assert ratio_summary(native) == {"bfloat16-mixed": (0.5, 1.0)}
    assert ratio_summary(limited) == {"bfloat16-mixed": (0.5, 1.5)}
    page = markdown({"native (avx512_bf16)": (native, []), "AVX2-limited (X=1)": (limited, [])}, "2026-12-01")
    assert "| bfloat16-mixed | 0.50 .. 1.00 | 0.50 .. 1.50 | 8.56 | 0.166 |" in page
    assert "Gaps bit-identical on every path: torch 0 of 1, flax 1 of 1." in page
    assert "| quadrant | bfloat16-mixed | torch | 3.00e-02 | 2.00e-02 | 1.50 | PASS |" in page


def test_tolerances_from_files_writes_the_page(tmp_path: Path) -> None:
    sources = []
    for name, ratio in (("native", 1.0), ("avx2", 1.5)):
        document = {"schema": "portbench.tolerances/2", "date": "2026-12-01", "path": name,
                    "entries": [m.to_dict() for m in _measured(ratio)], "pairwise": []}
        (tmp_path / f"{name}.json").write_text(json.dumps(document))
        sources += ["--from", str(tmp_path / f"{name}.json")]
    out = run_cli("tolerances", *sources, "--markdown", str(tmp_path / "t.md"))
    assert out.code == 0, out.stderr
    assert "native: (smallest, largest) port gap / emulated gap" in out.stdout
    assert "| bfloat16-mixed | 0.50 .. 1.00 | 0.50 .. 1.50 |" in (tmp_path / "t.md").read_text()


@pytest.mark.parametrize(("text", "expect"), [
    ('{"schema": "portbench.tolerances/1", "entries": []}', "expected 'portbench.tolerances/2'"),
    ('{"schema": "portbench.tolerances/2", "path": "x"}', "not a `compare.py tolerances --json` file"),
    ("[1, 2]", "holds a JSON array, expected an object of fields"),  # decoded as every JSON document is
    ("{", "is malformed JSON: Expecting property name"),
])
def test_tolerances_refuses_a_file_it_did_not_write(tmp_path: Path, text: str, expect: str) -> None:
    (tmp_path / "bad.json").write_text(text)  # refused: one line, exit 2, nothing written
    refused(tmp_path, "tolerances", "--from", str(tmp_path / "bad.json"), "--markdown",
            str(tmp_path / "t.md"), expect=expect)
