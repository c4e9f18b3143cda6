"""compare.py end to end, as a user runs it: spec, init, logits, verify, and the one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.weights import init_weights, load_weights
from tests import background
from tests.adversarial import Outcome

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([sys.executable, str(ROOT / "compare.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_spec_json_document() -> None:
    doc = json.loads(cli("spec", "archive-torch", "--json").stdout)
    assert doc["derived"]["params"] == 161_410 and doc["derived"]["seq_len"] == 28
    assert doc["spec"]["head_dim"] == 8 and doc["derived"]["cols_dropped"] == 3
    table = cli("spec", "archive-torch").stdout
    row = next(line for line in table.splitlines() if line.startswith("patch_embed"))
    assert [cell.strip() for cell in row.split("|")][:3] == ["patch_embed", "B × 28 × 32", "1,056"]
    assert "Unfold without padding | 4 × 7 valid patches; three rightmost columns discarded" in row
    assert "161,410" in table
    padded = json.loads(cli("spec", "archive-torch", "--set", "remainder=pad", "--json").stdout)
    assert padded["derived"]["seq_len"] == 32


@background.task("cli-init-logits", "test_cli.py::test_init_logits_and_spec")
def cli_init_logits(start: background.Start) -> tuple[Path, list[Outcome]]:
    """init, then logits in torch and the reference from the file alone, in the background."""
    folder = Path(tempfile.mkdtemp(prefix="portbench-init-"))
    weights = folder / "w.safetensors"
    runs = [("init", "--spec", "quadrant", "--seed", "5", "--out", weights),
            ("logits", "--weights", weights, "--framework", "torch", "--out", folder / "y.npy"),
            ("logits", "--weights", weights, "--set", "layer_norm_eps=1e-3", "--framework", "reference",
             "--out", folder / "r.npy")]
    return folder, [background.compare_py(start, *argv) for argv in runs]


def test_init_logits_and_spec_from_the_weight_file() -> None:
    folder, (init, logits, other_eps) = background.result("cli-init-logits")
    for outcome in (init, logits, other_eps):
        assert outcome.code == 0, outcome.stderr[-2000:]
    spec = get_preset("quadrant")
    assert load_weights(folder / "w.safetensors").spec == spec
    expected = reference.forward(spec, init_weights(spec, 5), probe_batch(spec))
    assert np.abs(np.load(folder / "y.npy") - expected).max() <= 5e-6
    # Same weights under another epsilon: runs, and says which field changed.
    assert "layer_norm_eps=0.001 (file: 1e-05)" in other_eps.stderr
    assert np.abs(np.load(folder / "r.npy") - expected).max() > 1e-4


@background.task("cli-verify", "test_cli.py::test_verify_passes")
def cli_verify(start: background.Start) -> tuple[Path, subprocess.CompletedProcess]:
    """verify in three workers, in the background (tests/background.py)."""
    out = Path(tempfile.mkdtemp(prefix="portbench-verify-")) / "verify.json"
    env = {**background.ENVIRON, "TF_CPP_MIN_LOG_LEVEL": "3"}
    argv = ["verify", "--spec", "archive-keras", "--frameworks", "torch,keras,flax", "--json", str(out)]
    proc = start(subprocess.Popen([sys.executable, str(ROOT / "compare.py"), *argv], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    stdout, stderr = proc.communicate(timeout=600)
    return out, subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_verify_passes_and_writes_json() -> None:
    out, proc = background.result("cli-verify")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert {e["framework"] for e in doc["entries"]} >= {"torch", "keras", "flax"}
    assert all(e["passed"] and e["max_abs_err"] < 5e-6 for e in doc["entries"])
    assert len(doc["pairwise"]) >= 3 and "0 failed" in proc.stdout


def test_verify_fails_and_exits_nonzero_when_a_port_disagrees(capsys) -> None:
    """Shift the oracle by 1e-4 (twenty times the tolerance): every port must now FAIL, and
    verify must say so with exit status 1. The shifted reference is the case's own (not a patched
    `reference.forward`: the background tasks compute references in this process meanwhile)."""
    from shared.cli import verify as verify_cli
    from shared.runtime.verify import VerifyCase

    spec = get_preset("quadrant")
    tensors, images = init_weights(spec, 0), probe_batch(spec)
    case = VerifyCase(spec, tensors, images, reference=reference.forward(spec, tensors, images) + 1e-4)
    status = verify_cli.run_cases([[case]], ["torch"], "cpu", 300.0, None)  # one group of one case
    out = capsys.readouterr().out
    assert status == 1 and "FAIL" in out and "1 failed" in out


BAD_COMMANDS = [
    (["spec", "no-such-preset"], ["neither a preset"]),
    (["spec", "quadrant", "--set", "heads=0"], ["'heads' = 0", "positive integer"]),
    (["spec", "quadrant", "--set", "pooling=cls", "--set", "class_token=false",
      "--set", "pos_embed_class_row=false"], ["'pooling' = 'cls'"]),
    (["logits", "--framework", "mxnet", "--out", "{tmp}/y.npy"], ["unknown framework 'mxnet'"]),
    (["logits", "--framework", "torch", "--weights", "{tmp}/absent.safetensors", "--out", "{tmp}/y.npy"],
     ["does not exist"]),
    (["logits", "--framework", "torch", "--spec", "quadrant", "--input", "{tmp}/bad.npy",
      "--out", "{tmp}/y.npy"],
     ["shape (2, 9, 9, 1)", "expected (batch, 8, 8, 1)"]),
    (["logits", "--framework", "torch", "--spec", "vit-ti16", "--weights", "{tmp}/q.safetensors",
      "--out", "{tmp}/y.npy"], ["does not fit spec 'vit-ti16'", "'patch_embed.kernel'"]),
    (["init", "--spec", "quadrant", "--out", "{tmp}/q.safetensors"], ["already exists", "--force"]),
    (["verify", "--frameworks", "torch,mxnet"], ["unknown framework 'mxnet'"]),
]


@background.task("bad-commands", "test_cli.py::test_bad_input_is_one_line")
def bad_commands(start: background.Start) -> list[tuple[dict[str, str], dict[str, str], Outcome]]:
    """Each bad command, a process of its own, in a folder of its own holding a weights file and a
    misshapen input: (the folder's files before, after, what the command printed)."""
    from tests.adversarial import snapshot

    env = {**background.ENVIRON, "TF_CPP_MIN_LOG_LEVEL": "3"}
    root = Path(tempfile.mkdtemp(prefix="portbench-bad-commands-"))
    template = root / "template"
    template.mkdir()
    np.save(template / "bad.npy", np.zeros((2, 9, 9, 1), np.float32))
    made = background.compare_py(start, "init", "--spec", "quadrant", "--out", template / "q.safetensors",
                                 env=env)
    if made.code != 0:
        raise AssertionError(f"init failed: {made.stderr[-2000:]}")
    found = []
    for case, (args, _) in enumerate(BAD_COMMANDS):
        folder = shutil.copytree(template, root / str(case))
        before = snapshot(folder)
        outcome = background.compare_py(start, *[a.format(tmp=folder) for a in args], env=env)
        found.append((before, snapshot(folder), outcome))
    return found


@pytest.mark.parametrize("case", range(len(BAD_COMMANDS)), ids=[" ".join(a[:2]) for a, _ in BAD_COMMANDS])
def test_bad_input_is_one_line_and_overwrites_nothing(case: int) -> None:
    before, after, outcome = background.result("bad-commands")[case]
    assert_one_line_error(subprocess.CompletedProcess([], outcome.code, outcome.stdout, outcome.stderr),
                          *BAD_COMMANDS[case][1])
    assert after == before
