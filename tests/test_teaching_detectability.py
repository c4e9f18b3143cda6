"""What a test can still see at each rung: a real port, run at each precision rung on a MUTATED
case (a catalogue variant applied to its spec, weights or images), fails the equivalence check
against the ORIGINAL case's float64 reference exactly where shared/teaching/detectability.py's
table says "caught" and passes where it says "missed". Marginal verdicts (the gap within a factor
MARGIN of the bound) are decided by rounding noise and asserted neither way; every case still
decides float32 and at least two low rungs.

The verdicts come from the bounds in shared/core/tolerance.py when the test runs: below float32 a
measured multiple of the case's emulated rounding gap (shared/core/rounding.py), so the verdicts
hold on any CPU the bounds hold on. Measured 2026-12-01, as |logit gap| / max(1, max |logit|): the
bounds on quadrant (seed 0, probe batch) bfloat16-pure 5.1e-2, bfloat16-mixed 8.7e-2 (its
multiple covers Keras' Eigen bfloat16 GEMM on an AVX2 CPU), float16-pure 3.6e-3, float16-mixed
3.4e-3; the float64 gaps of the variants: dense kernels reshaped 1.28, remainder=pad
(archive-keras) 3.9e-2, layer_norm_eps 1e-3 (Keras' default) 8.4e-3, 1e-6 (Flax's) 7.8e-5, GELU
tanh in the MLP 1.5e-4, no position embedding (archive-final) 4.6e-2. So a layout slip is caught at
every rung; epsilon 1e-6 and the tanh GELU sink below every low rung's rounding; Keras' epsilon is
missed in bfloat16 and caught in float16 (2.3-2.5x its bound), a missing position embedding is
caught in float16 and marginal in bfloat16.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from ports import create_port
from shared.core.equivalence import check_logits
from shared.core.precision import LOW_RUNGS, Precision
from shared.teaching import detectability as dt
from shared.teaching.detectability import Measured, measure
from shared.teaching.variants import Case
from tests import background

ROOT = Path(__file__).resolve().parent.parent
BFLOAT16 = ("bfloat16-pure", "bfloat16-mixed")
FLOAT16 = ("float16-pure", "float16-mixed")

CASES = [
    # (entry, variant, framework): two caught everywhere, two missed below float32, two where
    # float16 sees more than bfloat16
    ("dense_kernel_layout", "dense kernels reshaped to (out, in)", "torch"),
    ("remainder", "remainder=pad", "torch"),
    ("layer_norm_eps", "layer_norm_eps=1e-06", "torch"),
    ("gelu", "gelu form flipped (MLP)", "torch"),
    ("layer_norm_eps", "layer_norm_eps=0.001", "torch"),
    ("layer_norm_eps", "layer_norm_eps=0.001", "flax"),
]


def _logits(framework: str, case: Case, rung: str) -> np.ndarray:
    port = create_port(framework, case.spec, precision=Precision.from_rung(rung))
    port.load(case.weights)
    return port.logits(case.images)


def _passes(m: Measured, logits: np.ndarray, rung: str) -> bool:
    return check_logits(m.case.spec, logits, m.reference, param_count=None,
                        precision=Precision.from_rung(rung), emulated_gap=m.emulated[rung]).passed


@pytest.mark.parametrize(("entry", "key", "framework"), CASES, ids=[f"{c[2]}-{c[1]}" for c in CASES])
def test_a_port_at_each_rung_sees_what_the_table_says(entry: str, key: str, framework: str) -> None:
    m = measure(entry, key)
    assert m is not None and m.entry == entry
    decided = []
    for rung in dt.RUNG_COLUMNS:
        expected = m.verdict(rung)
        if expected == dt.MARGINAL:
            continue
        assert _passes(m, _logits(framework, m.case, rung), rung), f"baseline {framework} at {rung}"
        passed = _passes(m, _logits(framework, m.mutated, rung), rung)
        assert passed == (expected == dt.MISSED), (
            f"{framework} {key} at {rung}: table says {expected} (gap {m.gap / m.scale:.3g}, "
            f"bound {m.bound(rung):.3g}), the check {'passed' if passed else 'failed'}")
        decided.append(rung)
    assert "float32" in decided and len(decided) >= 3, decided


def test_the_table_spans_the_split() -> None:
    """Read from the bounds: a layout slip is caught at every rung; epsilon 1e-6 and the tanh
    GELU are caught in float32 only; float16 sees more than bfloat16 (Keras' epsilon: missed in
    bfloat16, caught in float16; a missing position embedding: marginal in bfloat16, caught in
    float16; gaps and bounds in the module docstring)."""
    def verdicts(entry: str, key: str) -> dict[str, str]:
        m = measure(entry, key)
        assert m is not None
        return {r: m.verdict(r) for r in dt.RUNG_COLUMNS}

    for entry, key in (("dense_kernel_layout", "dense kernels reshaped to (out, in)"),
                       ("conv_kernel_layout", "patch kernel reshaped to OIHW"),
                       ("head_width", "heads merged into one")):
        assert set(verdicts(entry, key).values()) == {dt.CAUGHT}, key
    for entry, key in (("layer_norm_eps", "layer_norm_eps=1e-06"), ("gelu", "gelu form flipped (MLP)")):
        v = verdicts(entry, key)
        assert v["float32"] == dt.CAUGHT and all(v[r] == dt.MISSED for r in LOW_RUNGS), (key, v)
    keras_eps = verdicts("layer_norm_eps", "layer_norm_eps=0.001")
    assert [keras_eps[r] for r in (*BFLOAT16, *FLOAT16)] == [dt.MISSED, dt.MISSED, dt.CAUGHT,
                                                            dt.CAUGHT], keras_eps
    no_positions = verdicts("pos_table_rows", "no position embedding")
    assert [no_positions[r] for r in (*BFLOAT16, *FLOAT16)] == [dt.MARGINAL, dt.MARGINAL, dt.CAUGHT,
                                                               dt.CAUGHT], no_positions


def test_float32_column_agrees_with_the_float32_mutation_tests() -> None:
    """tests/test_teaching_mutations.py: every forward variant breaks a float32 port; the
    variant-less entries (framework APIs) are not modelled at any rung."""
    table, same = dt.rows(run_demos=False)
    modelled = [r for r in table if r.variant]
    assert len(modelled) >= 20 and all(r.verdicts["float32"] == dt.CAUGHT for r in modelled)
    assert {r.entry for r in table if not r.variant} == {"batch_first", "dropout_flags", "gelu_names",
                                                            "rope_prefix", "rope_1d", "rope_half_reused",
                                                            "attention_mask"}
    assert all(set(r.verdicts.values()) == {dt.NOT_MODELLED} for r in table if not r.variant)
    assert "rms_norm_eps=1e-06" in same  # internvit-tiny's own epsilon: no difference to find


def test_docs_show_the_table_as_generated() -> None:
    """Regenerate docs/teaching.md's table with `python compare.py lessons --rungs --markdown`."""
    docs = (ROOT / "docs" / "teaching.md").read_text()
    table, _ = dt.rows(run_demos=False)
    stale = [line for line in dt.markdown_table([r for r in table if r.variant]) if line not in docs]
    assert not stale, f"docs/teaching.md is stale (first: {stale[0]})"


@background.task("lessons-rungs-cli", "test_teaching_detectability.py::test_cli_rungs_json")
def lessons_rungs(start: background.Start) -> tuple[Path, tuple[int, str, str]]:
    """A `compare.py lessons --rungs` run (rung emulation on two specs): in the background. A name
    with no rungs is refused before any is measured (tests/test_cli_loading.py)."""
    out = Path(tempfile.mkdtemp(prefix="portbench-rungs-")) / "rungs.json"
    proc = start(subprocess.Popen([sys.executable, "compare.py", "lessons", "gelu", "--rungs", "--no-measure",
                                   "--json", str(out)], cwd=ROOT, env=background.ENVIRON,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    stdout, stderr = proc.communicate(timeout=300)
    return out, (proc.returncode, stdout, stderr)


def test_cli_rungs_json() -> None:
    out, (code, stdout, stderr) = background.result("lessons-rungs-cli")
    assert code == 0, stderr
    assert "gelu form flipped (MLP)" in stdout and "bfloat16-mixed" in stdout
    payload = json.loads(out.read_text())
    assert [p["variant"] for p in payload] == ["gelu form flipped (MLP)", "gelu form flipped (head)",
                                                "gelu form flipped (MLP and head)"]
    assert set(payload[0]["verdicts"]) == set(dt.RUNG_COLUMNS)
