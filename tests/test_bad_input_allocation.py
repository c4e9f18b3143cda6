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
    ("num_classes", "-1", "'num_classes' = -1"),
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


# ---- every command and option that scales work or memory -----------------------------------------
VIT_H = ["--spec", "vit-b16", "--set", "dim=1280", "--set", "depth=32", "--set", "heads=16", "--set",
         "head_dim=80", "--set", "mlp_dim=5120", "--set", "patch_height=14", "--set", "patch_width=14"]


@pytest.fixture
def four_gib(monkeypatch) -> None:
    """A machine with 4 GiB available: the refusals below do not depend on this one's memory."""
    monkeypatch.setattr(budget, "available_bytes", lambda: 4 * 2**30)


def test_init_of_a_vit_h_sized_spec_is_refused_before_a_tensor_is_made(tmp_path: Path, four_gib) -> None:
    started = time.perf_counter()
    line = refused(tmp_path, "init", *VIT_H, "--out", "w.safetensors")
    assert " parameters)" in line
    assert "needs about" in line and "writing its weights file" in line
    assert time.perf_counter() - started < 5


def test_a_million_image_input_batch_is_refused_before_the_reference(tmp_path: Path, four_gib) -> None:
    import numpy as np

    images = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float32,
                                       shape=(10**6, 8, 8, 1))  # sparse: no 256 MB written
    del images
    line = refused(tmp_path, "logits", "--spec", "quadrant", "--framework", "reference", "--input", "x.npy",
                   "--out", "y.npy")
    assert "the 1,000,000 images of 'x.npy'" in line and "needs about" in line


def test_a_million_image_timing_batch_is_refused(tmp_path: Path, four_gib) -> None:
    refused(tmp_path, "time", "--spec", "quadrant", "--frameworks", "torch", "--batch", "1000000",
            "--json", "r.json", expect="a timing run's batches (3 evaluation batches of --batch 1,000,000)")


@pytest.mark.parametrize("argv", [
    ["init", "--spec", "quadrant", "--seed", "-1", "--out", "w.safetensors"],
    ["logits", "--spec", "quadrant", "--framework", "reference", "--seed", "-5", "--out", "y.npy"],
    ["verify", "--spec", "quadrant", "--frameworks", "torch", "--seed", "-1"],
    ["trace", "--spec", "quadrant", "--frameworks", "reference", "--seed", "-1"],
])
def test_a_negative_seed_is_refused(tmp_path: Path, argv: list[str]) -> None:
    refused(tmp_path, *argv, expect="is not a whole number >= 0")


@pytest.mark.parametrize("argv, expect", [
    (["experiment", "plateau", "--steps", "1000000000000", "--out", "exp"], "--steps 1,000,000,000,000: at"),
    (["experiment", "plateau", "--window", "10000000000", "--out", "exp"], "--window 10,000,000,000: at"),
    (["experiment", "pos-embed", "--epochs", "10000000", "--out", "exp"], "--epochs 10,000,000: at most"),
    (["train", "--spec", "quadrant", "--epochs", "1000000000000"], "--epochs 1,000,000,000,000: at most"),
    (["train", "--spec", "quadrant", "--rset", "max_epochs=1000000000"], "--epochs 1,000,000,000: at most"),
    (["train", "--spec", "quadrant", "--seeds", ",".join(map(str, range(1001)))], "--seeds 1,001: at most"),
    (["time", "--spec", "quadrant", "--frameworks", "torch", "--warmup", "1000000000000"], "--warmup"),
    (["time", "--spec", "quadrant", "--frameworks", "torch", "--min-repeats", "1000000000000",
      "--max-repeats", "1000000000000"], "--min-repeats 1,000,000,000,000: at most 100,000"),
    (["time", "--spec", "quadrant", "--frameworks", "torch", "--processes", "100000"], "--processes"),
    (["time", "--spec", "quadrant", "--frameworks", "torch", "--budget", "1e12"], "--budget"),
    (["time", "--spec", "quadrant", "--frameworks", "torch", "--eval-batches", "10000000"], "--eval-batches"),
    (["main", "--frameworks", "torch", "--max-repeats", "1000000000"], "--max-repeats"),
    (["peers", "--spec", "quadrant", "--repeats", "1000000000"], "--repeats"),
])
def test_work_beyond_its_bound_is_refused_at_once(tmp_path: Path, argv: list[str], expect: str) -> None:
    started = time.perf_counter()
    refused(tmp_path, *argv, expect=expect)
    assert time.perf_counter() - started < 10
    assert not (tmp_path / "exp").exists() and not (tmp_path / "runs").exists()



def test_all_presets_verifies_in_groups_that_fit_and_refuses_what_it_would_ignore(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """`verify --all-presets` made every preset's weights at once (2.2 billion parameters) and was
    killed for memory with no line; it ignored --spec, --set and --weights."""
    from shared.cli import verify
    from shared.core.presets import PRESETS

    refused(tmp_path, "verify", "--all-presets", "--set", "depth=3",
            expect="--set is not read with --all-presets")
    monkeypatch.setattr(verify, "available_bytes", lambda: 2**31)  # 2 GiB: room for 1.6
    groups = verify.fitting_groups(list(PRESETS), 1)
    assert len(groups) > 1 and [name for group in groups for name in group] == list(PRESETS)
    for group in groups:
        size = verify.group_bytes([budget.estimate(get_preset(name), 1) for name in group])
        assert len(group) == 1 or size <= verify.USABLE_FRACTION * 2**31, group


def test_the_reference_keeps_no_blocks_tensors_that_nobody_asked_for() -> None:
    """Without taps asked for, the float64 reference recorded every block's tensors anyway (each
    block's attention map among them): Pixtral's encoder at one image needed 48 GB, not the
    estimate's 14. Only what a caller names is kept (NamedTaps)."""
    import tracemalloc

    from shared.core import reference
    from shared.core.inputs import probe_batch
    from shared.core.taps import NamedTaps
    from shared.core.weights import init_weights

    spec = get_preset("quadrant").replace(image_height=64, image_width=64, depth=8)  # 257 tokens
    weights, images = init_weights(spec, 0), probe_batch(spec, 2)
    peaks = {}
    for name, taps in (("all", {}), ("none", None), ("named", NamedTaps(["logits", "block3.out"]))):
        tracemalloc.start()
        reference.forward(spec, weights, images, taps)
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    one_map = 8 * 2 * spec.heads * spec.derived.seq_len ** 2
    assert peaks["all"] > 8 * one_map  # every block's map, and more
    assert peaks["none"] < 5 * one_map and peaks["named"] < 5 * one_map, peaks
    assert set(taps.tensors) == {"logits", "block3.out"}
