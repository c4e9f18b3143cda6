"""`compare.py peers` on `quadrant`: the torch port against the peers installed in CI (timm and
Transformers' PyTorch ViT), each in its own worker; a spec the peers cannot build and a missing
extra are one-line errors. No test asserts a speed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import tempfile
from pathlib import Path

import compare
from shared.measure import peer_timing
from tests import background
from tests.timing_helpers import compare as run_compare
from tests.timing_helpers import error_line, finish, start_compare


@background.task("peers-on-quadrant", "test_timing_peers.py::test_peers_on_quadrant")
def peers_on_quadrant(start: background.Start) -> tuple[Path, subprocess.CompletedProcess]:
    """The peers run (three workers, one after another) in the background (tests/background.py)."""
    out = Path(tempfile.mkdtemp(prefix="portbench-peers-")) / "peers.json"
    return out, finish(start(start_compare("peers", "--spec", "quadrant", "--frameworks", "torch", "--modes",
                                           "eager", "--batch", "4", "--threads", "1", "--repeats", "3",
                                           "--json", str(out))))


def test_peers_on_quadrant_times_port_and_peers_and_prints_ratios() -> None:
    out, result = background.result("peers-on-quadrant")
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    names = list(doc["results"])
    assert names == ["port:torch:eager", "timm:eager", "hf-torch:eager"]
    params = {r["params"] for r in doc["results"].values()}
    assert params == {18020}  # the peers built the spec's model (quadrant: 18,020 parameters)
    for report in doc["results"].values():
        assert report["n"] == 3 and report["q1"] <= report["median"] <= report["q3"]
    assert doc["results"]["port:torch:eager"]["gemm"]["status"] == "ok"
    found = {(r["port"], r["peer"]): r for r in doc["ratios"]}
    ratio = found[("port:torch:eager", "timm:eager")]
    assert ratio["low"] <= ratio["ratio"] <= ratio["high"]
    assert "port:torch:eager / timm:eager:" in result.stdout
    for name in names:  # one fresh worker each
        assert result.stderr.count(f"{name}: fresh worker process") == 1


def test_a_spec_the_peers_cannot_build_is_refused() -> None:
    line = error_line(run_compare("peers", "--spec", "archive-torch"))
    assert "not a standard ViT" in line and "pooling='flatten'" in line and "class_token=False" in line


def test_missing_extra_names_the_install_command(monkeypatch, capsys) -> None:
    real = importlib.util.find_spec
    absent = {"keras_hub", "tf_keras"}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in absent else real(name, *a))
    impls, missing = peer_timing.plan(["keras"], ("compiled",))
    assert [i.name for i in impls] == ["port:keras:compiled"]
    assert missing == ["keras-hub:predict needs keras_hub", "keras-hub:graph needs keras_hub",
                       "hf-tf:graph needs tf_keras"]
    code = compare.main(["peers", "--spec", "quadrant", "--frameworks", "keras"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2
    assert lines[-1].startswith("error: no peer implementation is installed; install with: pip install")
    assert "--no-deps keras-hub" in lines[-1]
