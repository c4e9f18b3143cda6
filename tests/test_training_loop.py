"""The shared training loop in every framework: a short quadrant run learns the task, a run
resumed from its checkpoint ends where an uninterrupted run ends, and bad input is one line.

The framework runs happen in worker processes (shared/parity.py), started together."""

from __future__ import annotations

import json

import numpy as np
import pytest

import compare
from shared.parity import collect, run_jobs
from shared.presets import get_preset
from shared.train_spec import get_recipe

FRAMEWORKS = ("torch", "keras", "flax")
EPOCHS = 2
# After 2 epochs of the quick recipe every framework measured 0.9824 test accuracy (seed 0); the
# majority-class baseline is 0.256. 0.95 says "learned the task" with room for round-off.
HIGH_ACCURACY = 0.95


@pytest.fixture(scope="module")
def loops() -> dict:
    job = {"kind": "loop", "spec": get_preset("quadrant").to_json(), "data": "quadrant",
           "recipe": get_recipe("quick").replace(max_epochs=EPOCHS).to_json()}
    procs = {fw: run_jobs(fw, {"loop": job}) for fw in FRAMEWORKS}
    return {fw: collect(proc, timeout=900)["loop"] for fw, proc in procs.items()}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_short_quadrant_run_reaches_high_accuracy(loops: dict, framework: str) -> None:
    accuracy = loops[framework]["accuracy"]["test"]
    assert len(accuracy) == EPOCHS and accuracy[-1] >= HIGH_ACCURACY


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_resumed_run_equals_uninterrupted_run(loops: dict, framework: str) -> None:
    # Parameters, Adam moments, the update count, the schedule state and the dropout seed are
    # all restored, and the batches are a function of (seed, epoch): so bit-exact (measured).
    full, resumed = loops[framework]["full"], loops[framework]["resumed"]
    assert loops[framework]["steps"]["full"][0] == loops[framework]["steps"]["resumed"][0]
    for name in full:
        np.testing.assert_array_equal(full[name], resumed[name], err_msg=f"{framework} {name}")


def test_three_frameworks_end_at_the_same_weights(loops: dict) -> None:
    # 52 steps of the whole loop (data order, schedule, clipping, AdamW): measured <= 3e-6.
    torch = loops["torch"]["full"]
    for fw in ("keras", "flax"):
        worst = max(float(np.abs(torch[n] - loops[fw]["full"][n]).max())
                    for n in torch if ".attn.key.bias" not in n)
        assert worst < 1e-4, (fw, worst)


# ---- bad input: one line, exit 2, nothing written (these fail before any framework import) ----
def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert compare.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("extra, expected", [
    (["--rset", "batch_size=5000"], "'batch_size' = 5000: expected at most the 1638 examples"),
    (["--rset", "plateau_metric=val_acc"], "'plateau_metric' = 'val_acc': expected one of"),
    (["--rset", "learning_rate=-0.001"], "'learning_rate' = -0.001: expected a finite number > 0"),
    (["--seeds", "0,x"], "--seeds '0,x': expected comma-separated integers"),
    (["--data", "cifar"], "--data 'cifar': expected quadrant, digits, or mnist:PATH.npz"),
])
def test_bad_recipe_or_data_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path, extra: list[str],
                                        expected: str) -> None:
    err = one_line_error(capsys, ["train", "--spec", "quadrant", "--checkpoints", str(tmp_path / "ck"),
                                  *extra])
    assert expected in err
    assert not (tmp_path / "ck").exists()


def test_missing_and_malformed_mnist_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    missing = one_line_error(capsys, ["train", "--spec", "mnist-vit-small", "--data",
                                      f"mnist:{tmp_path / 'nope.npz'}"])
    assert "does not exist; supply a .npz with x_train, y_train, x_test, y_test" in missing
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file")
    assert "is not a readable .npz" in one_line_error(capsys, ["train", "--spec", "mnist-vit-small",
                                                               "--data", str(garbage)])
    partial = tmp_path / "partial.npz"
    np.savez(partial, x_train=np.zeros((4, 28, 28), np.uint8), y_train=np.zeros(4, np.int64))
    assert "lacks array 'x_test'" in one_line_error(capsys, ["train", "--spec", "mnist-vit-small",
                                                             "--data", str(partial)])
    no_data = one_line_error(capsys, ["train", "--spec", "archive-torch"])
    assert "has no bundled data; pass --data" in no_data


def test_diverging_run_stops_names_the_step_and_keeps_the_last_good_checkpoint(tmp_path) -> None:
    """A real divergence (lr 1e30 from epoch 1 on: the first such update sends the parameters to
    ~1e30 and the next forward overflows), in the torch worker."""
    job = {"kind": "diverge", "spec": get_preset("quadrant").to_json(), "data": "quadrant",
           "recipe": get_recipe("quick").replace(max_epochs=3).to_json()}
    result = collect(run_jobs("torch", {"diverge": job}), timeout=600)["diverge"]
    message = bytes(result["error"]["message"]).decode()
    # Epoch 0 has 26 steps; step 27 is the first at lr 1e30 and its loss is still finite.
    assert message.startswith("loss is nan at step 28 (epoch 1, batch 2 of 26") and "\n" not in message
    assert "last good checkpoint" in message and "(epoch 1)" in message
    state = json.loads(bytes(result["error"]["state"]).decode())
    assert state["controller"]["epoch"] == 1 and state["updates"] == 26
    assert bool(result["error"]["checkpoint_loads"][0])
