"""Bad input to `compare.py train` is one line, exit 2, and nothing is written. These all fail
before any framework is imported. (The loop's runs in each framework, resume and divergence are
tested in test_training_parity.py, whose worker processes they share.)"""

from __future__ import annotations

import numpy as np
import pytest

import compare


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
    (["--seeds", "0,x"], "--seeds has 'x'; expected distinct whole numbers >= 0"),
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
