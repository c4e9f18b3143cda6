"""The one equivalence verdict (shared/core/equivalence.py), as verify, the timing gate and trace
use it: tolerance, shape, finiteness and parameter count, with a reason for every failure."""

from __future__ import annotations

import numpy as np
import pytest

from shared.core.equivalence import check_logits, check_pair, compare_tensor, tap_budget
from shared.core.presets import get_preset
from shared.core.tolerance import logit_atol
from shared.measure import gate
from shared.teaching.tracing import compare_taps, tap_order

SPEC = get_preset("quadrant")
REF = np.random.default_rng(0).standard_normal((4, SPEC.num_classes))


def test_within_tolerance_passes_with_its_numbers() -> None:
    tol = logit_atol(SPEC, REF)
    verdict = check_logits(SPEC, (REF + 0.5 * tol).astype(np.float32), REF, SPEC.derived.params)
    assert verdict.passed and verdict.reason is None and verdict.tolerance == tol
    assert verdict.max_abs_diff == pytest.approx(0.5 * tol, rel=0.2)


@pytest.mark.parametrize("logits, fragment", [
    (REF + 1e-3, "max |logits - reference| 0.001 > tolerance 5e-06"),
    (np.where(np.arange(REF.size).reshape(REF.shape) == 3, np.nan, REF),
     "1 of 16 values of the logits are not finite"),
    (np.full_like(REF, np.inf), "16 of 16 values of the logits are not finite (NaN or infinity)"),
    (REF[:, :1], "logits shape (4, 1), expected (4, 4)"),
])
def test_every_failure_fails_and_says_why(logits: np.ndarray, fragment: str) -> None:
    verdict = check_logits(SPEC, logits, REF)
    assert not verdict.passed and fragment in verdict.reason


def test_the_parameter_count_must_be_the_spec_s() -> None:
    verdict = check_logits(SPEC, REF, REF, SPEC.derived.params + 1)
    assert not verdict.passed
    assert verdict.reason == f"{SPEC.derived.params + 1:,} parameters, spec says {SPEC.derived.params:,}"


def test_the_gate_and_verify_agree() -> None:
    """The timing gate records the same verdict verify prints, non-finite logits included."""
    for logits, count in ((REF, SPEC.derived.params), (REF + 1e-3, None), (REF * np.nan, None),
                          (REF, 7)):
        verdict, check = check_logits(SPEC, logits, REF, count), gate.compare(SPEC, logits, REF, count)
        assert check["passed"] == verdict.passed and check["reason"] == verdict.reason
        assert check["atol"] == verdict.tolerance and check["images"] == 4
    assert gate.compare(SPEC, REF * np.nan, REF)["max_abs_err"] == float("inf")


def test_pairs_get_twice_the_tolerance() -> None:
    tol = logit_atol(SPEC, REF)
    assert check_pair(REF + 1.5 * tol, REF, tol).passed
    assert not check_pair(REF + 2.5 * tol, REF, tol).passed


def test_trace_decides_each_tap_with_the_same_rules() -> None:
    reference = {name: np.ones((2, 3)) * 10.0 for name in tap_order(SPEC)}
    port = dict(reference)
    port["pos_embed"] = np.full((2, 3), np.nan)
    port["block0.mlp"] = np.ones((3, 2))
    trace = compare_taps(SPEC, reference, port, "planted")
    over = {row.name: row for row in trace.rows if row.over}
    assert set(over) == {"pos_embed", "block0.mlp"} and trace.first_divergence.name == "pos_embed"
    assert "not finite" in over["pos_embed"].note and "shape (3, 2)" in over["block0.mlp"].note
    assert trace.rows[0].budget == tap_budget(SPEC, reference["patch_embed"]) == 10 * logit_atol(SPEC)
    assert not compare_tensor(np.ones(2), np.ones(2), 0.0).reason
