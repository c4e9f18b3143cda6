"""Class 4, non-finite results are never written silently: finite float32 inputs that overflow
inside a port (every pixel 3e38) make its logits NaN; portbench names the first intermediate
that went non-finite and exits non-zero, writing nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.adversarial import refused, run_cli


def overflowing_input(folder: Path) -> None:
    np.save(folder / "huge.npy", np.full((2, 8, 8, 1), 3e38, dtype=np.float32))


@pytest.mark.parametrize("framework", ["torch", "flax"])
def test_logits_names_the_first_non_finite_tensor(tmp_path: Path, framework: str) -> None:
    overflowing_input(tmp_path)
    refused(tmp_path, "logits", "--spec", "quadrant", "--framework", framework, "--input", "huge.npy",
            "--out", "y.npy", expect="the first non-finite tensor is 'patch_embed'")


def test_verify_fails_the_port_and_names_the_tensor(tmp_path: Path) -> None:
    from shared.core import reference
    from shared.core.presets import get_preset
    from shared.core.weights import init_weights
    from shared.runtime.verify import VerifyCase, verify

    spec = get_preset("quadrant")
    images = np.full((2, 8, 8, 1), 3e38, dtype=np.float32)
    assert np.all(np.isfinite(reference.forward(spec, init_weights(spec, 0), images)))  # float64 copes
    verdicts, _ = verify([VerifyCase(spec, init_weights(spec, 0), images)], ["torch"])
    assert not verdicts[0].passed
    assert "not finite" in verdicts[0].reason and "'patch_embed'" in verdicts[0].reason


def test_finite_results_are_still_written(tmp_path: Path) -> None:
    outcome = run_cli("logits", "--spec", "quadrant", "--framework", "reference", "--out", "y.npy",
                      cwd=tmp_path)
    assert outcome.code == 0 and np.all(np.isfinite(np.load(tmp_path / "y.npy")))
