"""The archive's experiments (experiments/): each `compare.py experiment NAME` once at a tiny size
(one seed, one framework, one epoch or a few updates) with what it writes and prints checked; the
plateau's bookkeeping on synthetic curves; every port starting the plateau runs from the same
batches and weights; and the one-way rule: nothing in the product imports experiments/ or
benchmarks/. No test asserts a finding that is the experiment's to measure (whether a model
stalls, what positions are worth); archive-final's dead rows are structural and are asserted.

The experiments that train or start workers run in the background (tests/background.py), each in
its own `compare.py` process, as a user runs them."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from experiments.attention import attention_statistics
from experiments.plateau import bookkeeping, runs
from experiments.plateau.experiment import agreement, parse_shapes, shape_spec, summarise_run
from experiments.plateau.runs import job
from shared.core.presets import get_preset
from shared.core.train_spec import get_recipe
from shared.errors import InputError
from shared.training.data import quadrant_name
from tests import background
from tests.adversarial import refused, run_cli

ROOT = Path(__file__).resolve().parents[1]
T = bookkeeping.TARGET


def experiment(start: background.Start, out: Path, *argv: str) -> subprocess.CompletedProcess:
    """`python compare.py experiment ARGV --out OUT`, started through the background runner."""
    env = {**background.ENVIRON, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = start(subprocess.Popen([sys.executable, str(ROOT / "compare.py"), "experiment", *argv,
                                   "--out", str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True))
    stdout, stderr = proc.communicate(timeout=600)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}: {stderr[-2000:]}"
    return done


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


# ---- imports run one way: experiments -> the product ----------------------------------------------
def test_the_product_never_imports_experiments_or_benchmarks() -> None:
    from tests.test_layering import imported, python_files

    found = [f"{path.relative_to(ROOT)}:{line}: imports {name}"
             for path in python_files(ROOT / "shared", ROOT / "ports") for line, name in imported(path)
             if name.split(".")[0] in ("experiments", "benchmarks")]
    assert not found, "the product must not import the research beside it:\n" + "\n".join(found)


# ---- every experiment at a tiny size ---------------------------------------------------------------
@background.task("experiment-digits", "test_experiments.py::test_digits_")
def digits_runs(start: background.Start) -> tuple[Path, subprocess.CompletedProcess,
                                                  subprocess.CompletedProcess]:
    """pos-embed (two one-epoch torch runs), then attention-map reusing its trained checkpoint."""
    out = Path(tempfile.mkdtemp(prefix="portbench-exp-digits-"))
    tiny = ("--frameworks", "torch", "--seeds", "0", "--epochs", "1")
    return out, experiment(start, out, "pos-embed", *tiny), experiment(start, out, "attention-map",
                                                                        *tiny, "--reuse")


def test_digits_pos_embed_trains_with_and_without_positions() -> None:
    out, pos, _ = background.result("experiment-digits")
    docs = {p: json.loads((out / f"pos-torch-{p}.json").read_text()) for p in ("learned", "none")}
    assert docs["learned"]["spec"]["pos_embed"] == "learned" and docs["none"]["spec"]["pos_embed"] == "none"
    accuracy = {}
    for positions, doc in docs.items():
        (seed,) = doc["seeds"]
        assert (doc["framework"], seed["seed"], seed["epochs"]) == ("torch", 0, 1)
        assert math.isfinite(seed["final_loss"]) and 0 <= seed["final_accuracy"] <= 1
        assert (out / "ck" / f"pos-torch-{positions}" / "seed0" / "LATEST").is_file()
        accuracy[positions] = seed["final_accuracy"]
    # The printed verdict is the difference of the two files' accuracies.
    assert f"torch: positions are worth {100 * (accuracy['learned'] - accuracy['none']):+.1f} points" \
        in pos.stdout


def test_digits_attention_map_reads_the_trained_checkpoint() -> None:
    out, _, attention = background.result("experiment-digits")
    assert "compare.py train" not in attention.stdout  # --reuse: pos-embed's run, not a second one
    images = np.load(out / "attention-map-images.npy")
    assert images.shape == (4, 8, 8, 1) and images.dtype == np.float32
    # One framework: one row of four panels (2.2 x 2.3 inches each at 100 dpi).
    assert png_size(out / "attention-map.png") == (880, 230)
    assert f"wrote {out / 'attention-map.png'}" in attention.stdout


@background.task("experiment-narrow", "test_experiments.py::test_narrow")
def narrow_run(start: background.Start) -> tuple[Path, subprocess.CompletedProcess]:
    out = Path(tempfile.mkdtemp(prefix="portbench-exp-narrow-"))
    return out, experiment(start, out, "narrow", "--frameworks", "torch", "--seeds", "0", "--epochs", "1")


def test_narrow_trains_both_widths_and_prints_their_files() -> None:
    out, proc = background.result("experiment-narrow")
    for name, width, heads in (("quadrant", 32, 4), ("quadrant-narrow", 16, 2)):
        doc = json.loads((out / f"narrow-{name}.json").read_text())
        assert (doc["spec"]["dim"], doc["spec"]["heads"]) == (width, heads)
        (seed,) = doc["seeds"]
        assert math.isfinite(seed["final_loss"]) and seed["epochs"] == 1
        row = f"{name:<16} {0:>4} {seed['final_loss']:10.4f} {seed['final_accuracy']:9.4f}"
        assert any(line.startswith(row) for line in proc.stdout.splitlines()), row


@background.task("experiment-dead-rows", "test_experiments.py::test_dead_rows")
def dead_rows_run(start: background.Start) -> subprocess.CompletedProcess:
    return experiment(start, Path(tempfile.mkdtemp(prefix="portbench-exp-rows-")), "dead-rows",
                      "--frameworks", "torch")


def test_dead_rows_are_archive_finals_unread_position_rows() -> None:
    lines = background.result("experiment-dead-rows").stdout.splitlines()
    # 42 rows, 35 read (34 patches + the class row): rows 35-41 get exactly zero gradient.
    start = lines.index("archive-final: position table 42 rows, 35 used")
    assert lines[start + 1].startswith("  torch  rows with exactly zero gradient: 35-41 (7 rows);")
    start = lines.index("archive-final-repaired: position table 35 rows, 35 used")
    assert lines[start + 1].startswith("  torch  rows with exactly zero gradient: none;")


@background.task("experiment-plateau", "test_experiments.py::test_plateau_writes")
def plateau_run(start: background.Start) -> tuple[Path, subprocess.CompletedProcess]:
    """Width 8 / 2 heads, 4 updates of batch 512 (one epoch of the quadrant set), seed 0, torch."""
    out = Path(tempfile.mkdtemp(prefix="portbench-exp-plateau-"))
    return out, experiment(start, out, "plateau", "--frameworks", "torch", "--shapes", "8/2", "--seeds",
                           "0", "--steps", "4", "--window", "2", "--rset", "batch_size=512")


def test_plateau_writes_its_document_csv_and_figure() -> None:
    out, proc = background.result("experiment-plateau")
    document = json.loads((out / "plateau.json").read_text())
    assert document["settings"]["budget"] == 4 and document["settings"]["recipe"]["batch_size"] == 512
    (run,) = document["runs"]
    assert (run["condition"], run["framework"], run["width"], run["heads"], run["seed"]) == \
        ("base", "torch", 8, 2, 0)
    assert run["steps"] == 4 and len(run["step_loss"]) == 4 and all(map(math.isfinite, run["step_loss"]))
    recomputed = bookkeeping.dwell(run["step_loss"], None, 0.05, window=2)
    assert recomputed.steps_in_band == run["steps_in_band"]
    (group,) = document["groups"]
    assert group["seeds"] == 1 and group["plateau_steps_mean"] == run["plateau_steps"]
    assert document["agreement"] == []  # one framework: nothing to compare
    assert (out / "plateau.csv").read_text().splitlines()[1].startswith("base,torch,8,2,0,quadrant,4,")
    assert png_size(out / "plateau.png")[0] > 0
    assert f"wrote {out / 'plateau.png'}" in proc.stdout
    # A second run refuses before training: the three files exist and --force was not given.
    again = run_cli("experiment", "plateau", "--frameworks", "torch", "--shapes", "8/2", "--out", out)
    assert again.code == 2 and "exists; pass --force" in again.error


def test_sqrt_dk_prints_the_table_and_writes_the_figure(tmp_path: Path) -> None:
    outcome = run_cli("experiment", "sqrt-dk", "--out", tmp_path)
    assert outcome.code == 0, outcome.stderr
    rows = [line.split() for line in outcome.stdout.splitlines() if line[:5].strip() in ("1", "4", "512")]
    scalings = ("none", "1/sqrt(d_k)")
    assert [(r[0], r[1]) for r in rows] == [(d, s) for d in ("1", "4", "512") for s in scalings]
    for d, scaling, max_weight, entropy in rows:
        expected = attention_statistics(int(d), scaling != "none")
        assert (float(max_weight), float(entropy)) == pytest.approx(expected, abs=5e-5)  # printed to 4 places
    assert png_size(tmp_path / "sqrt-dk.png") == (900, 350)


@pytest.mark.parametrize(("argv", "kept"), [
    (["sqrt-dk"], "sqrt-dk.png"),
    # the second run's JSON: refused before the first run trains, not after it
    (["narrow", "--frameworks", "torch", "--seeds", "0"], "narrow-quadrant-narrow.json"),
    # the figure, with the training run's JSON there to --reuse: refused before any worker starts
    (["attention-map", "--frameworks", "torch", "--seeds", "0", "--reuse"], "attention-map.png"),
])
def test_an_existing_output_is_kept_and_refused_before_any_work(tmp_path: Path, argv: list[str],
                                                                 kept: str) -> None:
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / kept).write_text("mine\n")
    (tmp_path / "exp" / "pos-torch-learned.json").write_text("{}")  # attention-map --reuse: no training
    refused(tmp_path, "experiment", *argv, "--out", "exp",
            expect=f"error: output 'exp/{kept}' already exists; pass --force to replace it")


def test_an_existing_checkpoint_is_refused_before_any_run(tmp_path: Path) -> None:
    (tmp_path / "exp" / "ck" / "narrow-quadrant" / "seed0").mkdir(parents=True)
    (tmp_path / "exp" / "ck" / "narrow-quadrant" / "seed0" / "LATEST").write_text("epoch1\n")
    refused(tmp_path, "experiment", "narrow", "--frameworks", "torch", "--seeds", "0", "--out", "exp",
            expect="error: exp/ck/narrow-quadrant already holds a checkpoint for seed 0; pass --force")


def test_force_replaces_the_experiments_own_file(tmp_path: Path) -> None:
    (tmp_path / "sqrt-dk.png").write_text("mine\n")
    outcome = run_cli("experiment", "sqrt-dk", "--out", tmp_path, "--force")
    assert outcome.code == 0, outcome.stderr
    assert png_size(tmp_path / "sqrt-dk.png") == (900, 350)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sqrt-dk.png"]  # no temporary left


def test_attention_statistics_at_width_one_do_not_depend_on_the_scaling() -> None:
    # sqrt(1) = 1: the same draws, the same statistics, bit for bit.
    assert attention_statistics(1, scaled=False) == attention_statistics(1, scaled=True)
# ---- the plateau's bookkeeping: dwell ------------------------------------------------------------
def test_dwell_counts_the_band_on_a_synthetic_curve() -> None:
    curve = [1.2] * 10 + [T + 0.04] * 20 + [0.9] + [T - 0.03] * 5 + [0.01] * 14
    dw = bookkeeping.dwell(curve, band=0.05, window=1)
    assert (dw.steps_in_band, dw.plateau_steps, dw.longest_plateau) == (25, 25, 20)
    assert dw.first_step == 11 and not dw.stalled
    # Accuracy decides which in-band updates are the plateau: only the first 15 are at 3/4.
    accuracy = np.array([0.5] * 10 + [0.75] * 15 + [1.0] * 25)
    dw = bookkeeping.dwell(curve, accuracy, band=0.05, window=1)
    assert (dw.steps_in_band, dw.plateau_steps, dw.longest_plateau) == (25, 15, 15)
    assert bookkeeping.dwell([1.0] * 5 + [T] * 5, window=1).stalled


def test_smoothing_is_a_trailing_mean() -> None:
    np.testing.assert_allclose(bookkeeping.smoothed([0, 2, 4, 6], window=2), [0, 1, 3, 5])
    # A loss alternating T +- 0.08 is out of a 0.05 band raw and inside it smoothed.
    curve = [T + 0.08, T - 0.08] * 20
    assert bookkeeping.dwell(curve, window=1).steps_in_band == 0
    assert bookkeeping.dwell(curve, window=2).steps_in_band == 39  # update 1 is a mean of one


def test_per_step_repeats_epoch_values() -> None:
    np.testing.assert_array_equal(bookkeeping.per_step([0.5, 0.75], 3, 5), [0.5, 0.5, 0.5, 0.75, 0.75])


# ---- confusion matrix ---------------------------------------------------------------------------
def test_confusion_matrix_and_unresolved_pair() -> None:
    labels = np.array([0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3])
    # TL and TR resolved; BL and BR answered at random between the two.
    predicted = np.array([0, 0, 1, 1, 2, 3, 3, 2, 3, 2, 3, 2])
    counts = bookkeeping.confusion(labels, predicted)
    assert counts.tolist() == [[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 2], [0, 0, 2, 2]]
    i, j, mixed = bookkeeping.unresolved_pair(counts)
    assert (i, j, mixed) == (2, 3, 4) and bookkeeping.pair_name(i, j) == "BL/BR"


def test_plateau_epoch_prefers_three_quarters() -> None:
    # Epoch 1 is nearest ln(2)/2 but already right on everything (a slow descent); epoch 0 is
    # the bookkeeping.
    assert bookkeeping.plateau_epoch([T + 0.03, T, 0.1], [0.74, 1.0, 1.0]) == 0
    assert bookkeeping.plateau_epoch([T, 0.1], [1.0, 1.0]) == 0  # no 3/4 epoch: nearest in band
    assert bookkeeping.plateau_epoch([1.0, 0.1], [0.5, 1.0]) is None


def test_agreement_names_the_first_update_beyond_the_tolerance() -> None:
    a = [1.0, 0.9, 0.8, 0.7]
    assert agreement(a, [1.0, 0.9 + 1e-6, 0.8 + 3e-5, 0.7])["first_step_over_tol"] == 3
    assert agreement(a, a) == {"steps": 4, "max_abs_diff": 0.0, "first_step_over_tol": None}


def test_shapes_are_parsed_and_checked() -> None:
    assert parse_shapes("16/2, 24/3,32/4") == [(16, 2), (24, 3), (32, 4)]
    assert shape_spec(24, 3).head_dim == 8 and shape_spec(16, 2).derived.params == \
        get_preset("quadrant-narrow").derived.params
    with pytest.raises(InputError, match="--shapes has '16/3'; expected"):
        parse_shapes("16/3")


# ---- every port starts from the same batches and weights (no training) -------------------------
@background.task("experiment-identical-starts", "test_experiments.py::test_every_port_gets_identical")
def identical_starts(start: background.Start) -> tuple[list[dict], dict[str, list[dict]]]:
    """Three framework workers probing the same two runs: in the background (tests/background.py)."""
    recipe = get_recipe("quick").replace(init="vit", batch_size=512)
    probes = [job(shape_spec(16, 2), recipe, quadrant_name(noise=0.3), seed, 16, probe=True)
              for seed in (0, 1)]
    folder = tempfile.mkdtemp(prefix="portbench-identical-")
    results = {}
    for fw in ("torch", "keras", "flax"):
        worker = start(runs.start(fw, probes, folder, echo=False))
        results[fw] = runs.collect(fw, worker, probes, echo=False)
    return probes, results


def test_every_port_gets_identical_batches_and_initial_weights() -> None:
    _, results = background.result("experiment-identical-starts")
    for fw in ("keras", "flax"):
        assert results[fw] == results["torch"], fw
    first, second = results["torch"]
    assert len(first["batch_digests"]) == 4 and first["batch_digests"] != second["batch_digests"]


def test_summary_of_a_known_run() -> None:
    counts = [[128, 0, 0, 0], [0, 128, 0, 0], [0, 0, 64, 64], [0, 0, 64, 64]]
    run = {"step_loss": [T] * 30, "test_loss": [1.0, T], "test_accuracy": [0.5, 0.75],
           "confusion": [counts, counts], "steps": 30, "epochs": 2}
    s = summarise_run(run, band=0.05, window=4)
    assert (s["steps_in_band"], s["plateau_steps"], s["stalled"], s["plateau_epoch"]) == (30, 15, True, 1)
    assert s["unresolved_pair"] == "BL/BR (128 of 512 confused)"
