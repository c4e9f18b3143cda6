"""Class 3, a device that is not there: an explicit --device that a framework cannot use on
this machine is an error in every command and framework (never a silent CPU run); only `auto`
falls back, and says what it chose. This CPU-only machine has no CUDA and no Metal."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests import background
from tests.adversarial import Outcome, refused, run_cli

ABSENT = [(framework, device) for framework in ("torch", "keras", "flax") for device in ("cuda", "metal")]


@background.task("absent-devices", "test_bad_input_devices.py::test_logits_refuses_an_absent_device")
def absent_devices(start: background.Start) -> tuple[Path, dict[tuple[str, str], Outcome]]:
    """Each refusal is a framework's import in a process of its own: waited for in the background."""
    folder = Path(tempfile.mkdtemp(prefix="portbench-devices-"))
    runs = {(fw, device): ("logits", "--spec", "quadrant", "--framework", fw, "--device", device, "--out",
                           folder / f"{fw}-{device}.npy") for fw, device in ABSENT}
    return folder, {key: background.compare_py(start, *argv) for key, argv in runs.items()}


@pytest.mark.parametrize("framework, device", ABSENT)
def test_logits_refuses_an_absent_device(framework: str, device: str) -> None:
    folder, outcomes = background.result("absent-devices")
    outcome = outcomes[framework, device]
    assert outcome.code == 2 and f"framework {framework!r} cannot use device {device!r}" in outcome.error
    assert not any(folder.iterdir()), list(folder.iterdir())  # no run left its output or anything else


def test_the_reference_runs_on_the_cpu_only(tmp_path: Path) -> None:
    refused(tmp_path, "logits", "--spec", "quadrant", "--framework", "reference", "--device", "cuda",
            "--out", "y.npy", expect="the float64 reference runs on the CPU only")


def test_auto_falls_back_and_says_so(tmp_path: Path) -> None:
    outcome = run_cli("logits", "--spec", "quadrant", "--framework", "torch", "--device", "auto",
                      "--out", "y.npy", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert "device auto: torch runs on cpu" in outcome.stderr
    assert (tmp_path / "y.npy").exists()


def test_verify_shows_unavailable_rows_and_exits_2_when_none_could_run(tmp_path: Path) -> None:
    outcome = run_cli("verify", "--spec", "quadrant", "--frameworks", "torch", "--device", "cuda",
                      cwd=tmp_path)
    assert outcome.code == 2
    assert "UNAVAILABLE: framework 'torch' cannot use device 'cuda'" in outcome.stdout
    assert outcome.error.startswith("error: no framework could run here")


@pytest.mark.parametrize("device", ["cuda", "metal"])
def test_peers_refuses_any_device_but_the_cpu(tmp_path: Path, device: str) -> None:
    """The public implementations are built on the CPU and every peers worker is shown no GPU, so
    a port on any other device would be compared with CPU peers: refused before any worker starts,
    where it once timed the peers and then failed the port (auto chooses the CPU, and says so)."""
    refused(tmp_path, "peers", "--spec", "quadrant", "--device", device,
            expect=f"--device {device!r}: peers times every implementation on the CPU")


def test_peers_with_auto_chooses_the_cpu_and_says_so(tmp_path: Path) -> None:
    """Stopped at the spec no peer builds, after the device is chosen: no worker starts."""
    outcome = run_cli("peers", "--spec", "archive-torch", "--device", "auto", cwd=tmp_path)
    assert outcome.code == 2 and "is a model no peer can build" in outcome.error, outcome
    assert "device auto: peers runs every implementation on the cpu" in outcome.stderr
