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
  shared/core/train_spec.py check_training_precision).

What the bounds bound, and why they hold on any CPU. The low-precision round-off is per port
(each kernel accumulates in its own order, and a CPU without native bfloat16 rounds differently
again: Eigen's bfloat16 GEMM, which TensorFlow uses there, keeps blocked partial sums in
bfloat16), so no bound is one machine's maximum. Each is a model of the error with a constant
measured on several arithmetic paths (statistics over every parameter element except the
attention key bias, whose true gradient is 0 and which gets the hard bound 2 * lr * steps; N =
17,956 elements; u = the rung's unit roundoff, 2^-8 bfloat16, 2^-11 float16):

- AdamW's first update is lr * sign(g) for every element whose gradient is well above epsilon, so
  a gradient's rounding error moves an element only where it flips the sign (by 2 lr) or where
  the gradient is tiny (by a fraction of lr). The count of flips (|d| > lr) and the 99th
  percentile of |d| therefore scale with u: flips <= C_FLIPS * N * u, p99 <= C_P99[updates] * lr
  * u, across ports and against the same port's float32 run (which also has a floor: a port
  further than FLOOR_P99 * lr * u from its float32 run, so the rung ran).
- The largest |d| is a flip's 2 lr that later updates do not undo: max <= C_MAX * lr (no bound
  after one update, where 2 lr is what any two runs can differ by).
- The loss of step k is a forward pass at the rung, so two ports' losses differ by at most the
  sum of their per-sample cross-entropy errors; each is within the forward ladder's bound
  multiple (shared/core/tolerance.py) of the rung-emulating reference's per-sample error
  (shared/core/rounding.py) on the same weights and batch: spread <= 2 * bound_multiple * mean_i
  |CE_i(emulated) - CE_i(float64)| on the first batch at the initial weights (the parameters move
  by ~10 lr in ten updates; the rounding's scale does not).

The constants are the largest ratios measured on three paths, x SAFETY (2): this machine with its
native kernels (avx512_bf16, avx512_fp16, AMX), the same machine limited to AVX2
(ONEDNN_MAX_CPU_ISA=AVX2 TF_ENABLE_ONEDNN_OPTS=0 XLA_FLAGS=--xla_cpu_max_isa=AVX2: what an AVX2-only
CPU computes, docs/tolerances.md), and the 2026-12-01 machine (avx512_bf16, no native float16). The
floor constant is the smallest, x FLOOR_FRACTION. Measured (torch 2.14, Keras 3.15 on TF 2.21,
flax 0.12.8; one thread each; deterministic runs), as the ratio each bound divides by:

  ratio                          rung            native   AVX2    2026-12-01
  p99 across ports / (lr u)      bf16  1 update  10.4     12.2    10.4
                                 fp16  1 update   8.4      9.3     9.8
                                 bf16 10 updates 52.2     63.9    52.2
                                 fp16 10 updates 49.2     63.3    58.4
  p99 vs float32 / (lr u)        bf16  1 / 10    8.9/54.8 10.3/61.4  8.9/54.8  (smallest 8.8 / 42.2)
                                 fp16  1 / 10    8.4/52.0  9.2/58.6  9.5/56.9  (smallest 7.8 / 45.1)
  flips / (N u)                  bf16 / fp16     0.76/0.46 0.76/0.34 0.76/0.23
  max after 10 / lr              bf16 / fp16     2.16/1.40 2.51/1.22 2.16/1.22
  max vs float32 after 10 / lr   bf16 / fp16     2.41/1.26 2.63/1.11 2.41/1.12
  loss spread / emulated         bf16  1 / 10    0.20/0.57 1.03/0.01 0.20/0.65  (emulated 5.96e-3)
    per-sample loss gap          fp16  1 / 10    0.83/0.10 0.07/0.20 0.15/0.13  (emulated 7.25e-4)
  float16-mixed, the scale started at 2^24 so that 9 steps overflow and are skipped (both ports
  skip the same 9; parameters after the first step are the initial ones exactly): the one update
  taken is a first update, p99 6.2e-6 = 12.7 lr u (2026-12-01), held to the 1-update bound.

Reading it: the ports differ from one another about as much as each differs from float32, and
the same constant fits bfloat16 and float16 (the model's u carries the dtype); the AVX2 path
moves the constants by at most 1.3x, and the 1-update loss spread 5x (Keras' blocked bfloat16
sums), which the loss bound covers because it is derived from the forward bound, not from this
spread: 2 x 8.56 x 5.96e-3 = 0.10 at bfloat16-mixed (largest spread 6.1e-3), 2 x 5.54 x 7.25e-4
= 8.0e-3 at float16-mixed (largest 6.0e-4).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from shared.core.precision import UNIT_ROUNDOFF, Precision
from shared.core.presets import get_preset
from shared.core.reference import forward
from shared.core.rounding import emulated_forward
from shared.core.tolerance import bound_multiple
from shared.core.train_spec import TrainSpec
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable
from shared.training.parity import collect, job_batches, start_training_jobs
from tests import background
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
# The model's constants (the module docstring): the largest ratio measured on any path x SAFETY.
C_P99 = {1: SAFETY * 12.7, STEPS: SAFETY * 63.9}  # p99 |d| / (lr u), across ports and vs float32
FLOOR_P99 = {1: FLOOR_FRACTION * 7.8, STEPS: FLOOR_FRACTION * 42.2}  # smallest p99 vs float32 / (lr u)
C_FLIPS = SAFETY * 0.76  # elements with |d| > lr / (N u)
C_MAX = SAFETY * 2.63  # max |d| after 10 updates / lr, across ports and vs float32
# A loss scale too large for float16 (the pinned start raised to 2^24): the first backward
# overflows in both frameworks, each halves its scale and skips the update, 9 times, until 2^15
# fits (2^16, torch's own default start, overflows here too): measured, the same in both.
SKIP_JOB, SKIP_START, SKIPPED = "float16-mixed-skips", 2.0**24, 9
CLI_EPOCH_STEPS = 26  # one epoch of the quick recipe on quadrant (tests/test_training_parity.py)


def job(rung: str) -> dict:
    return {"spec": SPEC.to_json(), "recipe": RECIPE.to_json(), "weights_seed": 0, "batch_seed": 1,
            "batch": 16, "snapshots": [1, STEPS], "gradients": False,
            "precision": Precision.from_rung(rung).to_dict()}


@background.task("training-at-rungs", "test_training_precision.py::")
def training_at_rungs(start: background.Start) -> dict:
    """{"runs": {fw: {rung: {snapshot: tensors}}}, "refused": {(fw, rung): "Kind: reason"},
    "workers", "cli": {name: (exit code, stdout, stderr)}, "folder"}: the four workers and two
    `compare.py train` processes, all started together, in the background (tests/background.py)."""
    folder = Path(tempfile.mkdtemp(prefix="portbench-precision-train-"))
    jobs = {fw: {rung: job(rung) for rung in RUNGS} for fw in FRAMEWORKS}
    for fw in OFFERED["float16-mixed"]:
        jobs[fw][SKIP_JOB] = {**job("float16-mixed"), "pins": {"LOSS_SCALE_INITIAL": SKIP_START}}
    workers = {fw: start(start_training_jobs(fw, js)) for fw, js in jobs.items()}
    cli = {
        "torch": ["--framework", "torch", "--json", "t.json", "--checkpoints", "ck-torch"],
        "mlx": ["--framework", "mlx", "--checkpoints", "ck-mlx"],
    }
    procs = {name: start(subprocess.Popen(
        [sys.executable, str(ROOT / "compare.py"), "train", "--spec", "quadrant", "--epochs", "1",
         "--dtype", "bfloat16", "--precision", "mixed", "--quiet", *argv],
        cwd=folder, env=background.ENVIRON, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for name, argv in cli.items()}
    out: dict = {"runs": {}, "refused": {}, "workers": workers, "cli": {}, "folder": folder}
    for fw, worker in workers.items():
        refused: dict[str, str] = {}
        out["runs"][fw] = collect(worker, timeout=600, refused=refused)
        out["refused"].update({(fw, rung): text for rung, text in refused.items()})
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        out["cli"][name] = (proc.returncode, stdout, stderr)
    return out


@pytest.fixture(scope="module")
def runs() -> dict:
    return background.result("training-at-rungs")


def differences(a: dict[str, np.ndarray], b: dict[str, np.ndarray], key_bias: bool = False) -> np.ndarray:
    names = [n for n in a if (".attn.key.bias" in n) == key_bias]
    return np.concatenate([np.abs(a[n].astype(np.float64) - b[n]).ravel() for n in names])


def p99(d: np.ndarray) -> float:
    return float(np.quantile(d, 0.99))


def lr_u(rung: str) -> float:
    """lr x the rung's unit roundoff u: the scale of one update's rounding."""
    return LR * UNIT_ROUNDOFF[Precision.from_rung(rung).dtype]


def sample_losses(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels]


def loss_spread_bound(rung: str) -> float:
    """2 x the forward bound's multiple x the emulated per-sample loss error, mean_i |CE_i(emulated)
    - CE_i(float64)|, on the first batch at the initial weights (the module docstring)."""
    images, labels = job_batches(SPEC, 1, 16, 1)[0]
    weights = init_weights(SPEC, 0)
    exact = sample_losses(forward(SPEC, weights, images), labels)
    emulated = sample_losses(emulated_forward(SPEC, weights, images, Precision.from_rung(rung)), labels)
    return 2 * bound_multiple(rung) * float(np.mean(np.abs(emulated - exact)))


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
    snap, u = str(updates), UNIT_ROUNDOFF[Precision.from_rung(rung).dtype]
    for a, b in itertools.combinations(OFFERED[rung], 2):
        pa, pb = runs["runs"][a][rung][snap], runs["runs"][b][rung][snap]
        assert set(pa) == set(pb)
        d = differences(pa, pb)
        assert p99(d) <= C_P99[updates] * lr_u(rung), (a, b, p99(d) / lr_u(rung))
        assert int((d > LR).sum()) <= C_FLIPS * d.size * u, (a, b, int((d > LR).sum()) / (d.size * u))
        if updates > 1:  # after 1 update the max is the sign-flip bound 2 lr: no test
            assert d.max() <= C_MAX * LR, (a, b, d.max() / LR)
        assert differences(pa, pb, key_bias=True).max() <= KEY_BIAS_BOUND, (a, b)
    losses = [runs["runs"][fw][rung][f"loss{snap}"]["loss"][0] for fw in OFFERED[rung]]
    assert max(losses) - min(losses) <= loss_spread_bound(rung), (losses, loss_spread_bound(rung))


@pytest.mark.parametrize("rung", LOW)
@pytest.mark.parametrize("updates", [1, STEPS])
def test_a_low_rung_really_ran_and_stays_near_float32(runs: dict, rung: str, updates: int) -> None:
    floor = FLOOR_P99[updates] * lr_u(rung)
    assert floor > 5 * F32_NOISE_P99  # the floor is not float32 noise (smallest: 9.5e-7 vs 1.2e-7)
    snap = str(updates)
    for fw in OFFERED[rung]:
        d = differences(runs["runs"][fw][rung][snap], runs["runs"][fw]["float32"][snap])
        assert floor < p99(d) <= C_P99[updates] * lr_u(rung), (fw, p99(d) / lr_u(rung))
        if updates > 1:
            assert d.max() <= C_MAX * LR, (fw, d.max() / LR)


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
    assert p99(d) <= C_P99[1] * lr_u("float16-mixed"), p99(d) / lr_u("float16-mixed")  # one first update


def test_compare_train_records_the_rung(runs: dict) -> None:
    code, stdout, stderr = runs["cli"]["torch"]
    assert code == 0, stderr
    assert "with torch at bfloat16-mixed" in stdout
    document = json.loads((runs["folder"] / "t.json").read_text())
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
    from shared.core.train_spec import get_recipe
    from shared.training.checkpoint import CheckpointError, restore
    from shared.training.data import load_dataset
    from shared.training.trainloop import train_seed

    spec, recipe = get_preset("quadrant"), get_recipe("quick").replace(max_epochs=1)
    data = load_dataset("quadrant", spec, recipe.validation_fraction, 0)
    train_seed("torch", spec, recipe, data, 0, checkpoint_dir=tmp_path, log=lambda line: None)
    state_file = tmp_path / "epoch-000001" / "state.json"  # a complete unit, its rung rewritten
    state_file.write_text(json.dumps({**json.loads(state_file.read_text()), "precision": "bfloat16-mixed"}))
    trainer = SimpleNamespace(port=SimpleNamespace(precision=FLOAT32))
    with pytest.raises(CheckpointError, match="was trained at bfloat16-mixed, not float32"):
        restore(tmp_path, spec, recipe.replace(seed=0), trainer, data.name)
