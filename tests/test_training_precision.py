"""Training at low precision: one AdamW update and ten, at bfloat16-mixed and float16-mixed, in
every port that offers the rung, compared across ports and against the same port's float32 run.

One worker per framework carries all its rungs (shared/training/parity.py `steps` jobs with a
"precision"), on the quadrant preset, seeded batches of 16, dropout off, the parity recipe of
tests/test_training_parity.py. What is offered (ports/<fw>/train.py, shared/training/trainloop.py):

- torch and Keras train at bfloat16-mixed and float16-mixed, float16 with each framework's own
  loss scaling (torch.amp.GradScaler, keras.optimizers.LossScaleOptimizer; both start at 2^15);
- Flax trains at bfloat16-mixed; float16-mixed is FrameworkUnavailable (optax has no loss scaling);
- MLX has no mixed precision at all (its Port refuses the mixed rungs);
- a pure rung is refused for training in every port (FrameworkUnavailable, the reason in
  shared/training/trainloop.py check_training_precision).

Measured 2026-12-01 on this machine (torch 2.14, Keras 3.15 on TF 2.21, flax 0.12.8, optax 0.2.8;
one thread each; the runs are deterministic, a rerun gave the same numbers). Statistics over
every parameter element except the attention key bias (its true gradient is 0: see
test_training_parity.py; it gets the same 2 * lr * steps bound here), 17,956 elements:

  rung            updates  pair          max |d|   p99 |d|   elements |d| > lr  loss spread
  float32         1        worst pair    8.2e-7    3.0e-8    0                  1.2e-7
  float32         10       worst pair    8.3e-7    1.2e-7    0                  2.4e-7
  bfloat16-mixed  1        torch-keras   1.90e-3   3.22e-5   39                 |
                           torch-flax    1.89e-3   4.07e-5   52                 | 1.17e-3
                           keras-flax    1.90e-3   3.35e-5   46                 |
  bfloat16-mixed  10       torch-keras   2.16e-3   1.88e-4   40                 |
                           torch-flax    1.96e-3   1.87e-4   53                 | 3.85e-3
                           keras-flax    1.99e-3   2.04e-4   49                 |
  float16-mixed   1        torch-keras   1.22e-3   4.77e-6   2                    1.12e-4
  float16-mixed   10       torch-keras   1.22e-3   2.85e-5   2                    9.4e-5
  against the same port's float32 run (worst port; smallest p99 in brackets):
  bfloat16-mixed  1                      1.95e-3   3.49e-5 (3.42e-5)
  bfloat16-mixed  10                     2.41e-3   2.14e-4 (1.64e-4)
  float16-mixed   1                      1.12e-3   4.64e-6 (3.81e-6)
  float16-mixed   10                     1.12e-3   2.78e-5 (2.20e-5)
  float16-mixed, the scale started at 2^24 so that 9 steps overflow and are skipped (both ports
  skip the same 9; parameters after the first step are the initial ones exactly):
  float16-mixed   10 (1 taken)  torch-keras   1.6e-3    6.2e-6    6

Reading it: the ports differ from one another about as much as each differs from float32: each
rounds at its own places (kernel accumulation orders), so low-precision round-off is per port, not
shared. AdamW's first update is lr * sign(g) for every element whose gradient is well above its
epsilon, so an element whose tiny gradient changes sign under round-off moves by 2 * lr: that is
the 1-update max (1.9e-3 ~ 2 * lr) and it is no bound at all (any two runs are within 2 lr * (1 +
wd |p|) after one update). So after one update the test counts those flips and bounds the 99th
percentile; after ten the max is 9x under the 2 * lr * 10 a random walk could reach, and is bound.
Every bound is the measured maximum x SAFETY (2, as shared/core/tolerance.py). The proof that a
rung ran: every port's low-precision run is further from its float32 run, at the 99th percentile,
than FLOOR_FRACTION (1/4, as the forward floor) of the smallest such gap measured, and that floor
is itself far above the float32 cross-port noise (the p99 of 1.2e-7).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shared.core.precision import Precision
from shared.core.presets import get_preset
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable
from shared.training.parity import collect, start_training_jobs
from shared.training.train_spec import TrainSpec
from tests.adversarial import refused as refused_cli

ROOT = Path(__file__).resolve().parents[1]
SPEC = get_preset("quadrant").replace(dropout_head=0.0)  # dropout off: runs are deterministic
FRAMEWORKS = ("torch", "keras", "flax", "mlx")
LR, STEPS = 1e-3, 10
RECIPE = TrainSpec(name="parity", learning_rate=LR, beta1=0.9, beta2=0.999, epsilon=1e-7,
                   weight_decay=0.05, weight_decay_on="kernels", clip_global_norm=1.0, batch_size=16,
                   warmup_epochs=0)
LOW = ("bfloat16-mixed", "float16-mixed")
RUNGS = ("float32", *LOW, "bfloat16-pure")
OFFERED = {"float32": FRAMEWORKS, "bfloat16-mixed": ("torch", "keras", "flax"),
           "float16-mixed": ("torch", "keras")}
# (framework, rung) -> (error kind, words its one-line reason must contain)
REFUSED = {
    ("mlx", "bfloat16-mixed"): ("FrameworkUnavailable", "MLX has no mixed precision"),
    ("mlx", "float16-mixed"): ("FrameworkUnavailable", "MLX has no mixed precision"),
    ("flax", "float16-mixed"): ("FrameworkUnavailable", "optax has no loss scaling"),
    **{(fw, "bfloat16-pure"): ("FrameworkUnavailable", "training at bfloat16-pure is not offered")
       for fw in FRAMEWORKS},
}
SAFETY = 2.0
FLOOR_FRACTION = 0.25
KEY_BIAS_BOUND = 2 * LR * STEPS
F32_TOL = 2e-5  # tests/test_training_parity.py's cross-port bound at float32 (measured <= 8.3e-7 here)
F32_NOISE_P99 = 1.2e-7  # measured: the float32 cross-port p99 after 10 updates
# rung -> updates -> measured worst over port pairs: max |d| (10 updates only), p99 |d|, flips, loss spread
ACROSS = {"bfloat16-mixed": {1: (None, 4.07e-5, 52, 1.17e-3), 10: (2.16e-3, 2.04e-4, 53, 3.85e-3)},
          "float16-mixed": {1: (None, 4.77e-6, 2, 1.12e-4), 10: (1.22e-3, 2.85e-5, 2, 9.4e-5)}}
# rung -> updates -> measured against the port's own float32 run: (worst max, worst p99, smallest p99)
VS_FLOAT32 = {"bfloat16-mixed": {1: (None, 3.49e-5, 3.42e-5), 10: (2.41e-3, 2.14e-4, 1.64e-4)},
              "float16-mixed": {1: (None, 4.64e-6, 3.81e-6), 10: (1.12e-3, 2.78e-5, 2.20e-5)}}
# A loss scale too large for float16 (the pinned start raised to 2^24): the first backward
# overflows in both frameworks, each halves its scale and skips the update, 9 times, until 2^15
# fits (2^16, torch's own default start, overflows here too): measured, the same in both.
SKIP_JOB, SKIP_START, SKIPPED = "float16-mixed-skips", 2.0**24, 9
SKIP_P99 = 6.2e-6  # measured torch-keras p99 after the one update taken (max 1.6e-3, 6 flips)
CLI_EPOCH_STEPS = 26  # one epoch of the quick recipe on quadrant (tests/test_training_parity.py)


def job(rung: str) -> dict:
    return {"spec": SPEC.to_json(), "recipe": RECIPE.to_json(), "weights_seed": 0, "batch_seed": 1,
            "batch": 16, "snapshots": [1, STEPS], "gradients": False,
            "precision": Precision.from_rung(rung).to_dict()}


@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("precision-train")


@pytest.fixture(scope="module")
def runs(tmp_module: Path) -> dict:
    """{"runs": {fw: {rung: {snapshot: tensors}}}, "refused": {(fw, rung): "Kind: reason"},
    "workers", "cli": {name: (exit code, stdout, stderr)}}: the four workers and two
    `compare.py train` processes, all started together."""
    jobs = {fw: {rung: job(rung) for rung in RUNGS} for fw in FRAMEWORKS}
    for fw in OFFERED["float16-mixed"]:
        jobs[fw][SKIP_JOB] = {**job("float16-mixed"), "pins": {"LOSS_SCALE_INITIAL": SKIP_START}}
    workers = {fw: start_training_jobs(fw, js) for fw, js in jobs.items()}
    cli = {
        "torch": ["--framework", "torch", "--json", "t.json", "--checkpoints", "ck-torch"],
        "mlx": ["--framework", "mlx", "--checkpoints", "ck-mlx"],
    }
    procs = {name: subprocess.Popen(
        [sys.executable, str(ROOT / "compare.py"), "train", "--spec", "quadrant", "--epochs", "1",
         "--dtype", "bfloat16", "--precision", "mixed", "--quiet", *argv],
        cwd=tmp_module, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, argv in cli.items()}
    out: dict = {"runs": {}, "refused": {}, "workers": workers, "cli": {}}
    for fw, worker in workers.items():
        refused: dict[str, str] = {}
        out["runs"][fw] = collect(worker, timeout=600, refused=refused)
        out["refused"].update({(fw, rung): text for rung, text in refused.items()})
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        out["cli"][name] = (proc.returncode, stdout, stderr)
    return out


def differences(a: dict[str, np.ndarray], b: dict[str, np.ndarray], key_bias: bool = False) -> np.ndarray:
    names = [n for n in a if (".attn.key.bias" in n) == key_bias]
    return np.concatenate([np.abs(a[n].astype(np.float64) - b[n]).ravel() for n in names])


def p99(d: np.ndarray) -> float:
    return float(np.quantile(d, 0.99))


def test_every_rung_a_port_cannot_train_is_refused_in_one_line(runs: dict) -> None:
    assert set(runs["refused"]) == set(REFUSED)
    for key, (kind, words) in REFUSED.items():
        text = runs["refused"][key]
        assert text.startswith(f"{kind}: ") and words in text and "\n" not in text, (key, text)
    for rung, frameworks in OFFERED.items():
        assert all(rung in runs["runs"][fw] for fw in frameworks), rung


def test_collect_raises_the_refusal_class_when_not_asked_to_record_it(runs: dict) -> None:
    with pytest.raises(FrameworkUnavailable, match="MLX has no mixed precision"):
        collect(runs["workers"]["mlx"], timeout=60)  # the same finished worker, read again


def test_float32_runs_agree_across_ports(runs: dict) -> None:
    for snap in ("1", str(STEPS)):
        for a, b in itertools.combinations(FRAMEWORKS, 2):
            d = differences(runs["runs"][a]["float32"][snap], runs["runs"][b]["float32"][snap])
            assert d.max() < F32_TOL and p99(d) <= SAFETY * F32_NOISE_P99, (snap, a, b)


@pytest.mark.parametrize("rung", LOW)
@pytest.mark.parametrize("updates", [1, STEPS])
def test_ports_agree_at_a_low_rung(runs: dict, rung: str, updates: int) -> None:
    worst_max, worst_p99, worst_flips, worst_spread = ACROSS[rung][updates]
    snap = str(updates)
    for a, b in itertools.combinations(OFFERED[rung], 2):
        pa, pb = runs["runs"][a][rung][snap], runs["runs"][b][rung][snap]
        assert set(pa) == set(pb)
        d = differences(pa, pb)
        assert p99(d) <= SAFETY * worst_p99, (a, b, p99(d))
        assert int((d > LR).sum()) <= SAFETY * worst_flips, (a, b, int((d > LR).sum()))
        if worst_max is not None:  # after 1 update the max is the sign-flip bound 2 lr: no test
            assert d.max() <= SAFETY * worst_max, (a, b, d.max())
        assert differences(pa, pb, key_bias=True).max() <= KEY_BIAS_BOUND, (a, b)
    losses = [runs["runs"][fw][rung][f"loss{snap}"]["loss"][0] for fw in OFFERED[rung]]
    assert max(losses) - min(losses) <= SAFETY * worst_spread, losses


@pytest.mark.parametrize("rung", LOW)
@pytest.mark.parametrize("updates", [1, STEPS])
def test_a_low_rung_really_ran_and_stays_near_float32(runs: dict, rung: str, updates: int) -> None:
    worst_max, worst_p99, smallest_p99 = VS_FLOAT32[rung][updates]
    floor = FLOOR_FRACTION * smallest_p99
    assert floor > 5 * F32_NOISE_P99  # the floor is not float32 noise (smallest: 9.5e-7 vs 1.2e-7)
    snap = str(updates)
    for fw in OFFERED[rung]:
        d = differences(runs["runs"][fw][rung][snap], runs["runs"][fw]["float32"][snap])
        assert floor < p99(d) <= SAFETY * worst_p99, (fw, p99(d))
        if worst_max is not None:
            assert d.max() <= SAFETY * worst_max, (fw, d.max())


def test_float16_uses_each_frameworks_own_loss_scale(runs: dict) -> None:
    # Both scalers start at 2^15 (pinned); no step overflowed and 10 < 2000 growth steps, so
    # the scale after 10 updates is still 2^15. bfloat16 needs no scaling: 1.0.
    for fw in OFFERED["float16-mixed"]:
        assert runs["runs"][fw]["float16-mixed"][f"loss{STEPS}"]["scale"][0] == 2.0**15, fw
    for fw in OFFERED["bfloat16-mixed"]:
        assert runs["runs"][fw]["bfloat16-mixed"][f"loss{STEPS}"]["scale"][0] == 1.0, fw


def test_an_overflowing_float16_step_is_skipped_the_same_way_in_both_scalers(runs: dict) -> None:
    start = init_weights(SPEC, 0)
    for fw in OFFERED["float16-mixed"]:
        first, last = (runs["runs"][fw][SKIP_JOB][f"loss{k}"] for k in (1, STEPS))
        assert (first["updates"][0], first["scale"][0]) == (0, SKIP_START / 2), fw
        assert (last["updates"][0], last["scale"][0]) == (STEPS - SKIPPED, SKIP_START / 2**SKIPPED), fw
        for name, value in runs["runs"][fw][SKIP_JOB]["1"].items():  # the skipped update left them
            np.testing.assert_array_equal(value, start[name], err_msg=f"{fw} {name}")
    a, b = OFFERED["float16-mixed"]
    d = differences(runs["runs"][a][SKIP_JOB][str(STEPS)], runs["runs"][b][SKIP_JOB][str(STEPS)])
    assert p99(d) <= SAFETY * SKIP_P99, p99(d)


def test_compare_train_records_the_rung(runs: dict, tmp_module: Path) -> None:
    code, stdout, stderr = runs["cli"]["torch"]
    assert code == 0, stderr
    assert "with torch at bfloat16-mixed" in stdout
    document = json.loads((tmp_module / "t.json").read_text())
    assert document["precision"] == Precision("bfloat16", "mixed").to_dict()
    assert document["seeds"][0]["steps"] == CLI_EPOCH_STEPS
    assert np.isfinite(document["seeds"][0]["final_loss"])


def test_compare_train_names_an_unavailable_rung_in_one_line(runs: dict) -> None:
    code, _, stderr = runs["cli"]["mlx"]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "MLX has no mixed precision" in lines[0], stderr


@pytest.mark.parametrize("argv, expect", [
    (["--precision", "mixed"], "--precision mixed with --dtype float32"),
    (["--dtype", "bfloat16"], "training at bfloat16-pure is not offered"),
    (["--dtype", "float16", "--precision", "pure"], "training at float16-pure is not offered"),
])
def test_compare_train_refuses_a_rung_it_does_not_train_at(tmp_path: Path, argv: list[str],
                                                          expect: str) -> None:
    refused_cli(tmp_path, "train", "--spec", "quadrant", "--framework", "torch", *argv, expect=expect)


def test_a_checkpoint_resumes_only_at_the_rung_it_was_trained_at(tmp_path: Path) -> None:
    """state.json records the rung; resuming a bfloat16-mixed run in float32 is refused (a float16
    run's loss scale is not checkpointed: a resumed float16 run restarts it at 2^15)."""
    from types import SimpleNamespace

    from shared.core.precision import FLOAT32
    from shared.core.presets import get_preset
    from shared.training.checkpoint import CheckpointError, restore
    from shared.training.data import load_dataset
    from shared.training.train_spec import get_recipe
    from shared.training.trainloop import train_seed

    spec, recipe = get_preset("quadrant"), get_recipe("quick").replace(max_epochs=1)
    data = load_dataset("quadrant", spec, recipe.validation_fraction, 0)
    train_seed("torch", spec, recipe, data, 0, checkpoint_dir=tmp_path, log=lambda line: None)
    state_file = tmp_path / "epoch-000001" / "state.json"  # a complete unit, its rung rewritten
    state_file.write_text(json.dumps({**json.loads(state_file.read_text()), "precision": "bfloat16-mixed"}))
    trainer = SimpleNamespace(port=SimpleNamespace(precision=FLOAT32))
    with pytest.raises(CheckpointError, match="was trained at bfloat16-mixed, not float32"):
        restore(tmp_path, spec, recipe.replace(seed=0), trainer)
