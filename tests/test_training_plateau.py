"""The plateau experiment's bookkeeping (shared/training/plateau*.py, init_schemes.py): dwell on
synthetic curves, confusion matrices on known predictions, the init schemes' statistics, the
quadrant generator's settings, identical batches and initial weights in every port (worker
processes that load each port but train nothing), and one short torch run on two seeds. No test
asserts the plateau itself: whether a model stalls is the experiment's finding, not a contract."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shared.core.presets import get_preset
from shared.core.train_spec import TrainSpec, get_recipe
from shared.core.weights import init_weights
from shared.errors import InputError, SpecError
from shared.training import plateau
from shared.training.data import QUADRANT_NOISE, load_dataset, quadrant_images, quadrant_name
from shared.training.init_schemes import TRUNCATED_STD, initial_weights, kernel_fans
from shared.training.plateau_experiment import (
    Settings,
    agreement,
    parse_shapes,
    run_experiment,
    shape_spec,
    summarise_run,
)
from shared.training.plateau_report import check_outputs, write_outputs
from shared.training.plateau_runs import job, run_all

T = plateau.TARGET


# ---- dwell ------------------------------------------------------------------------------------
def test_dwell_counts_the_band_on_a_synthetic_curve() -> None:
    curve = [1.2] * 10 + [T + 0.04] * 20 + [0.9] + [T - 0.03] * 5 + [0.01] * 14
    dw = plateau.dwell(curve, band=0.05, window=1)
    assert (dw.steps_in_band, dw.plateau_steps, dw.longest_plateau) == (25, 25, 20)
    assert dw.first_step == 11 and not dw.stalled
    # Accuracy decides which in-band updates are the plateau: only the first 15 are at 3/4.
    accuracy = np.array([0.5] * 10 + [0.75] * 15 + [1.0] * 25)
    dw = plateau.dwell(curve, accuracy, band=0.05, window=1)
    assert (dw.steps_in_band, dw.plateau_steps, dw.longest_plateau) == (25, 15, 15)
    assert plateau.dwell([1.0] * 5 + [T] * 5, window=1).stalled


def test_smoothing_is_a_trailing_mean() -> None:
    np.testing.assert_allclose(plateau.smoothed([0, 2, 4, 6], window=2), [0, 1, 3, 5])
    # A loss alternating T +- 0.08 is out of a 0.05 band raw and inside it smoothed.
    curve = [T + 0.08, T - 0.08] * 20
    assert plateau.dwell(curve, window=1).steps_in_band == 0
    assert plateau.dwell(curve, window=2).steps_in_band == 39  # update 1 is a mean of one


def test_per_step_repeats_epoch_values() -> None:
    np.testing.assert_array_equal(plateau.per_step([0.5, 0.75], 3, 5), [0.5, 0.5, 0.5, 0.75, 0.75])


# ---- confusion matrix ---------------------------------------------------------------------------
def test_confusion_matrix_and_unresolved_pair() -> None:
    labels = np.array([0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3])
    # TL and TR resolved; BL and BR answered at random between the two.
    predicted = np.array([0, 0, 1, 1, 2, 3, 3, 2, 3, 2, 3, 2])
    counts = plateau.confusion(labels, predicted)
    assert counts.tolist() == [[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 2], [0, 0, 2, 2]]
    i, j, mixed = plateau.unresolved_pair(counts)
    assert (i, j, mixed) == (2, 3, 4) and plateau.pair_name(i, j) == "BL/BR"


def test_plateau_epoch_prefers_three_quarters() -> None:
    # Epoch 1 is nearest ln(2)/2 but already right on everything (a slow descent); epoch 0 is
    # the plateau.
    assert plateau.plateau_epoch([T + 0.03, T, 0.1], [0.74, 1.0, 1.0]) == 0
    assert plateau.plateau_epoch([T, 0.1], [1.0, 1.0]) == 0  # no 3/4 epoch: nearest in band
    assert plateau.plateau_epoch([1.0, 0.1], [0.5, 1.0]) is None


def test_agreement_names_the_first_update_beyond_the_tolerance() -> None:
    a = [1.0, 0.9, 0.8, 0.7]
    assert agreement(a, [1.0, 0.9 + 1e-6, 0.8 + 3e-5, 0.7])["first_step_over_tol"] == 3
    assert agreement(a, a) == {"steps": 4, "max_abs_diff": 0.0, "first_step_over_tol": None}


# ---- init schemes ----------------------------------------------------------------------------
WIDE = get_preset("quadrant").replace(name="wide", dim=256, heads=8, head_dim=32, mlp_dim=1024)


def test_canonical_scheme_is_init_weights() -> None:
    spec = get_preset("quadrant-narrow")
    got, expected = initial_weights(spec, 3), init_weights(spec, 3)
    assert all(np.array_equal(got[n], expected[n]) for n in expected)


def test_vit_truncated_normal_has_the_right_std_and_bound() -> None:
    w = initial_weights(WIDE, 0, "vit")
    for name in ("blocks.0.mlp.fc1.kernel", "pos_embed"):
        values = w[name].astype(np.float64)
        assert np.abs(values).max() <= 2 * 0.02 + 1e-7, name
        if values.size > 100_000:
            assert abs(values.std() - 0.02 * TRUNCATED_STD) < 0.02 * 0.01, name
    assert not w["cls_token"].any() and not w["blocks.0.mlp.fc1.bias"].any()
    assert np.all(w["blocks.0.norm1.scale"] == 1.0)


@pytest.mark.parametrize("scheme", ["torch", "keras", "flax"])
def test_framework_default_schemes(scheme: str) -> None:
    w = initial_weights(WIDE, 0, scheme)
    name = "blocks.0.mlp.fc1.kernel"  # (256, 1024)
    fan_in, fan_out = kernel_fans(name, WIDE.derived.tensor_shapes[name])
    assert (fan_in, fan_out) == (256, 1024)
    values = w[name].astype(np.float64)
    bound = {"torch": 1 / math.sqrt(fan_in), "keras": math.sqrt(6 / (fan_in + fan_out)),
             "flax": 2 / math.sqrt(fan_in) / TRUNCATED_STD}[scheme]
    std = bound / math.sqrt(3) if scheme != "flax" else 1 / math.sqrt(fan_in)
    assert np.abs(values).max() <= bound * (1 + 1e-6) and np.abs(values).max() > 0.95 * bound
    assert abs(values.std() - std) < 0.01 * std
    bias = w["blocks.0.mlp.fc1.bias"]
    if scheme == "torch":
        assert np.abs(bias).max() <= 1 / math.sqrt(fan_in) and bias.any()
    else:
        assert not bias.any()
    assert not w["pos_embed"].any() and not w["cls_token"].any()
    assert np.all(w["final_norm.scale"] == 1.0) and not w["final_norm.bias"].any()


def test_attention_and_patch_fans() -> None:
    shapes = WIDE.derived.tensor_shapes
    assert kernel_fans("blocks.0.attn.query.kernel", shapes["blocks.0.attn.query.kernel"]) == (256, 256)
    assert kernel_fans("blocks.0.attn.out.kernel", shapes["blocks.0.attn.out.kernel"]) == (256, 256)
    assert kernel_fans("patch_embed.kernel", shapes["patch_embed.kernel"]) == (16, 16 * 256)


def test_knobs_and_recipe_validation() -> None:
    spec = get_preset("quadrant-narrow")
    base, scaled = initial_weights(spec, 0, "keras"), initial_weights(spec, 0, "keras", kernel_gain=2.0)
    np.testing.assert_allclose(scaled["head.out.kernel"], 2 * base["head.out.kernel"], rtol=1e-6)
    assert np.array_equal(scaled["head.out.bias"], base["head.out.bias"])
    pos = initial_weights(spec, 0, "torch", pos_std=1.0)["pos_embed"]
    assert pos.std() > 0.5
    with pytest.raises(SpecError, match="'init' = 'xavier': expected one of canonical"):
        TrainSpec(init="xavier")
    with pytest.raises(SpecError, match="'init_kernel_gain' = 0"):
        get_recipe("quick").replace(init_kernel_gain=0)
    assert TrainSpec.from_toml(get_recipe("quick").replace(init_pos_std=0.5).to_toml()).init_pos_std == 0.5


# ---- the quadrant generator's settings ------------------------------------------------------
def test_quadrant_noise_and_contrast() -> None:
    default = quadrant_images(64, 0)
    same = quadrant_images(64, 0, noise=QUADRANT_NOISE, contrast=1.0)
    assert np.array_equal(default.images, same.images)
    flat = quadrant_images(64, 0, noise=0.0, contrast=0.3)
    np.testing.assert_array_equal(np.unique(flat.images), np.array([0.0, 0.3], dtype=np.float32))
    spec = get_preset("quadrant-narrow")
    data = load_dataset(quadrant_name(noise=0.5), spec, 0.2, 0)
    assert data.name == "quadrant:noise=0.5,contrast=1"
    assert abs(float(data.train.images.std()) - 0.66) < 0.05  # sqrt(0.5^2 + 1/4 * 3/4)
    with pytest.raises(InputError, match="option 'blur=1' is not noise=N or contrast=C"):
        load_dataset("quadrant:blur=1", spec, 0.2, 0)
    with pytest.raises(InputError, match="noise = '-1', expected a number >= 0"):
        load_dataset("quadrant:noise=-1", spec, 0.2, 0)


def test_shapes_are_parsed_and_checked() -> None:
    assert parse_shapes("16/2, 24/3,32/4") == [(16, 2), (24, 3), (32, 4)]
    assert shape_spec(24, 3).head_dim == 8 and shape_spec(16, 2).derived.params == \
        get_preset("quadrant-narrow").derived.params
    with pytest.raises(InputError, match="--shapes '16/3'"):
        parse_shapes("16/3")


# ---- every port starts from the same batches and weights (no training) -------------------------
def test_every_port_gets_identical_batches_and_initial_weights() -> None:
    recipe = get_recipe("quick").replace(init="vit", batch_size=512)
    probes = [job(shape_spec(16, 2), recipe, quadrant_name(noise=0.3), seed, 16, probe=True)
              for seed in (0, 1)]
    results = {fw: run_all(fw, probes, echo=False) for fw in ("torch", "keras", "flax")}
    for fw in ("keras", "flax"):
        assert results[fw] == results["torch"], fw
    first, second = results["torch"]
    assert len(first["batch_digests"]) == 4 and first["batch_digests"] != second["batch_digests"]


# ---- one short torch run on two seeds: the document's bookkeeping ------------------------------
def test_short_torch_run_bookkeeping(tmp_path) -> None:
    settings = Settings([(16, 2)], [0, 1], ["torch"], get_recipe("quick"), "quadrant", budget=40)
    document = run_experiment(settings, echo=lambda line: None)
    runs = document["runs"]
    assert [(r["seed"], r["steps"]) for r in runs] == [(0, 40), (1, 40)]
    assert runs[0]["step_loss"] != runs[1]["step_loss"]  # two seeds: two runs
    assert all(len(r["step_loss"]) == 40 and r["final_accuracy"] > 0.25 for r in runs)
    recomputed = plateau.dwell(runs[0]["step_loss"], None, settings.band, settings.window)
    assert recomputed.steps_in_band == runs[0]["steps_in_band"]
    group = document["groups"][0]
    assert group["seeds"] == 2 and group["plateau_steps_min"] <= group["plateau_steps_mean"]
    assert document["agreement"] == []  # one framework: nothing to compare
    paths = write_outputs(document, tmp_path / "plateau")
    assert [p.suffix for p in paths] == [".json", ".csv", ".png"] and all(p.stat().st_size for p in paths)
    assert (tmp_path / "plateau.csv").read_text().count("\n") == 3
    with pytest.raises(InputError, match="exists; pass --force"):
        check_outputs(paths, force=False)
    check_outputs(paths, force=True)


def test_summary_of_a_known_run() -> None:
    counts = [[128, 0, 0, 0], [0, 128, 0, 0], [0, 0, 64, 64], [0, 0, 64, 64]]
    run = {"step_loss": [T] * 30, "test_loss": [1.0, T], "test_accuracy": [0.5, 0.75],
           "confusion": [counts, counts], "steps": 30, "epochs": 2}
    s = summarise_run(run, band=0.05, window=4)
    assert (s["steps_in_band"], s["plateau_steps"], s["stalled"], s["plateau_epoch"]) == (30, 15, True, 1)
    assert s["unresolved_pair"] == "BL/BR (128 of 512 confused)"
