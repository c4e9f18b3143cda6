"""Class 2, refuse before allocating: a spec whose weights or activations cannot fit, or whose
fields are absurd, is refused in one line, fast, with the estimate and the memory available."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from shared.core import budget
from shared.core.presets import get_preset
from tests.adversarial import refused


@pytest.mark.parametrize("field, value, expect", [
    ("depth", "1000000000", "'depth' = 1000000000: expected a positive integer of at most 1,024"),
    ("dim", "1000000000", "'dim' = 1000000000: expected a positive integer of at most 65,536"),
    ("image_height", "100000", "'image_height' = 100000"),
    ("mlp_dim", "-3", "'mlp_dim' = -3"),
    ("num_classes", "0", "'num_classes' = 0"),
])
@pytest.mark.parametrize("command", ["spec", "init", "logits"])
def test_absurd_fields_are_refused_at_once(tmp_path: Path, command: str, field: str, value: str,
                                           expect: str) -> None:
    argv = {"spec": ["spec", "quadrant"], "init": ["init", "--spec", "quadrant", "--out", "w.safetensors"],
            "logits": ["logits", "--spec", "quadrant", "--framework", "reference", "--out", "y.npy"]}[command]
    started = time.perf_counter()
    refused(tmp_path, *argv, "--set", f"{field}={value}", expect=expect)
    assert time.perf_counter() - started < 5  # refused, not attempted (generous for a loaded CI box)


@pytest.mark.parametrize("command", ["init", "logits"])
def test_a_spec_too_big_for_this_machine_states_the_estimate(tmp_path: Path, command: str) -> None:
    argv = {"init": ["init", "--spec", "vit-b16", "--out", "w.safetensors"],
            "logits": ["logits", "--spec", "vit-b16", "--framework", "reference", "--out", "y.npy"]}[command]
    line = refused(tmp_path, *argv, "--set", "image_height=16384", "--set", "image_width=16384")
    assert "needs about" in line and "GiB of memory is available" in line and "parameters" in line


def test_the_estimate_counts_what_the_spec_derives() -> None:
    spec = get_preset("vit-b16")
    found = budget.estimate(spec, batch=8)
    assert found.params == spec.derived.params == 86_567_656
    assert found.weight_bytes == 12 * spec.derived.params  # float32 + float64 copy
    # at least the attention matrices of one block in float64: 8 x 12 heads x 197^2
    assert found.activation_bytes >= 8 * 8 * 12 * 197 * 197
