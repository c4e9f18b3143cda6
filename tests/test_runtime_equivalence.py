"""The one equivalence verdict (shared/core/equivalence.py), as verify, the timing gate and trace
use it: tolerance, shape, finiteness, parameter count and the precision contract, with a reason
for every failure, carried as one record (`PortVerdict`) with one JSON form."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from shared.core.equivalence import PortVerdict, check_logits, check_pair, compare_tensor, not_run, tap_budget
from shared.core.precision import FLOAT32, Precision, expected_tap_dtype
from shared.core.presets import get_preset
from shared.core.tolerance import logit_atol
from shared.measure import gate
from shared.measure.results_types import SchemaError
from shared.teaching.first_divergence import compare_taps, tap_order

SPEC = get_preset("quadrant")
REF = np.random.default_rng(0).standard_normal((4, SPEC.num_classes))



def test_a_towers_tokens_on_a_patch_batch_are_judged_on_the_valid_tokens_only() -> None:
    """`verify --model` on a tower that returns its tokens (`--output last_hidden_state`): what a
    model leaves in the padding rows is no image's, so a correct SigLIP2 tower whose padding rows
    differ from the reference's passed on its pooled output and failed (2.02) on its tokens."""
    from shared.core.batching import token_mask
    from shared.core.inputs import probe_batch
    from shared.core.reference import forward
    from shared.core.weights import init_weights

    spec = get_preset("naflex-tiny")
    images = probe_batch(spec, 4)
    taps: dict[str, np.ndarray] = {}
    forward(spec, init_weights(spec, 0), images, taps)
    reference = taps["final_norm"]
    padding = ~token_mask(spec, images)
    assert padding.any()
    tokens = reference.copy()
    tokens[padding] += 3.0  # what a library leaves in its padding rows
    assert check_logits(spec, tokens, reference, what="tokens", images=images).passed
    tokens[~padding] += 1e-3  # a real gap in the valid tokens still fails, naming its image
    verdict = check_logits(spec, tokens, reference, what="tokens", images=images)
    assert not verdict.passed and verdict.reason.startswith("max |tokens - reference| 0.001 > tolerance")

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


MIXED = Precision("bfloat16", "mixed")
GAP = 1e-2  # an emulated rounding gap: the bfloat16 bound and floor are its multiples


def _contract(precision: Precision) -> dict[str, str]:
    return {name: expected_tap_dtype(name, precision, SPEC) for name in tap_order(SPEC)}


def test_a_tensor_in_another_dtype_than_the_contract_fails_the_port() -> None:
    """Logits well within the bound and above the floor, every dtype the contract's but one."""
    logits = REF + 0.5 * logit_atol(SPEC, REF, MIXED, GAP)
    kept = check_logits(SPEC, logits, REF, SPEC.derived.params, MIXED, GAP, tap_dtypes=_contract(MIXED))
    assert kept.passed and kept.reason is None and kept.dtypes["block0.out"] == "float32"
    broken = {**_contract(MIXED), "block0.out": "bfloat16"}  # Keras' global policy: a bfloat16 stream
    verdict = check_logits(SPEC, logits, REF, SPEC.derived.params, MIXED, GAP, tap_dtypes=broken)
    assert not verdict.passed and verdict.status == "FAIL"
    assert verdict.reason == ("'block0.out' was computed in bfloat16, the bfloat16-mixed contract holds it "
                              "in float32")
    assert verdict.max_abs_diff == kept.max_abs_diff  # the numbers are the same; only the contract failed


def _verdicts() -> list[PortVerdict]:
    nan = np.where(np.arange(REF.size).reshape(REF.shape) == 3, np.nan, REF)
    return [check_logits(SPEC, REF, REF, SPEC.derived.params, framework="torch", device="cpu",
                         versions={"torch": "2"}), check_logits(SPEC, REF + 1e-3, REF),
            check_logits(SPEC, nan, REF, first_nonfinite="patch_embed"), check_logits(SPEC, REF, REF, 7),
            check_logits(SPEC, REF + 0.5 * logit_atol(SPEC, REF, MIXED, GAP), REF, None, MIXED, GAP,
                         tap_dtypes={**_contract(MIXED), "block0.out": "bfloat16"}),
            not_run(SPEC, "mlx", MIXED, "MLX has no mixed precision", unavailable=True)]


def test_the_record_has_one_json_form_that_the_results_file_accepts() -> None:
    """verify's --json entries and the results file's checks are `to_dict`; `from_dict` reads it
    back to the same record (its logits stay behind), and a check from before the record reads."""
    for verdict in _verdicts():
        data = json.loads(json.dumps(verdict.to_dict()))
        read = PortVerdict.from_dict(data, "runs[0].equivalence.eager", SchemaError)  # as a results file's
        assert read == verdict, verdict.reason
    nonfinite = _verdicts()[2].to_dict()
    assert nonfinite["max_abs_err"] == float("inf") and nonfinite["max_rel_err"] is None
    assert nonfinite["reason"] == ("1 of 16 values of the logits are not finite (NaN or infinity); the "
                                   "first non-finite tensor is 'patch_embed'")
    assert _verdicts()[-1].to_dict()["max_abs_err"] is None  # nothing was checked
    old = {"passed": False, "max_abs_err": 1e-3, "max_rel_err": 4e-4, "atol": 5e-6, "images": 4,
           "reason": "x"}
    read = PortVerdict.from_dict(old)
    assert (read.passed, read.max_abs_diff, read.tolerance, read.images, read.reason) == (
        False, 1e-3, 5e-6, 4, "x")


def test_the_gate_and_verify_table_read_the_workers_records() -> None:
    """A timing row whose compiled mode failed: the gate names the mode, and verify's table shows
    the compiled record itself, its reason prefixed with the mode: nothing is decided again."""
    eager = check_logits(SPEC, REF, REF, SPEC.derived.params, framework="torch")
    compiled = check_logits(SPEC, REF + 1e-3, REF, SPEC.derived.params, framework="torch")
    row = {"framework": "torch", "status": "invalid",
           "equivalence": {"eager": eager.to_dict(), "compiled": compiled.to_dict()}}
    assert gate.gate_failure(row) == f"equivalence gate failed in compiled mode: {compiled.reason}"
    shown = gate.row_verdict(SPEC, row, FLOAT32)
    assert shown.reason == f"compiled mode: {compiled.reason}"
    assert replace(shown, reason=compiled.reason) == compiled
    row["equivalence"].pop("compiled")
    assert gate.gate_failure(row) is None and gate.row_verdict(SPEC, row, FLOAT32) == eager
    gone = gate.row_verdict(SPEC, {"framework": "mlx", "status": "unavailable", "reason": "no MLX"}, FLOAT32)
    assert gone.status == "UNAVAILABLE" and gone.reason == "no MLX" and not gone.checked


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


def test_trace_judges_the_port_by_verify_s_verdict() -> None:
    """No tap over its budget, but a parameter count that is not the spec's: trace fails the port
    with the verdict `verify` gives, from its logits tap."""
    reference = {name: np.ones((2, 3)) * 10.0 for name in tap_order(SPEC)}
    count = SPEC.derived.params + 1
    trace = compare_taps(SPEC, reference, dict(reference), "planted", param_count=count)
    assert trace.first_divergence is None and not trace.passed
    logits = reference["logits"]
    assert trace.verdict == check_logits(SPEC, logits, logits, count, framework="planted")
    assert trace.verdict.reason == f"{count:,} parameters, spec says {SPEC.derived.params:,}"
