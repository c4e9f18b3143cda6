"""`compare.py peers` on `quadrant`: the torch port against the peers installed in CI (timm and
Transformers' PyTorch ViT), each in its own worker, in rounds; with busy loops on the workers'
core the workers are flagged contended and no ratio is printed; a spec the peers cannot build and
a missing extra are one-line errors. No test asserts a speed: they assert flags and decisions."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import compare
from shared import REPO_ROOT
from shared.core.presets import get_preset
from shared.errors import SpecError
from shared.measure import peer_timing, rounds
from shared.measure.contention import CONTENDED
from tests import background
from tests.timing_helpers import compare as run_compare
from tests.timing_helpers import error_line, finish, start_compare

PEERS_ON_QUADRANT = ("peers", "--spec", "quadrant", "--frameworks", "torch", "--modes", "eager",
                     "--batch", "4", "--threads", "1", "--repeats", "3")
# A busy loop on one core: the CPU the launcher pins a one-thread worker to (process_env.pin_cpus takes
# the first of the parent's CPUs), so every worker shares its core with it. Bounded by its own
# deadline, and killed in a finally.
SPIN = ("import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\n"
        "end = time.monotonic() + float(sys.argv[2])\nwhile time.monotonic() < end:\n    pass\n")
SPIN_LIMIT_S = 300


@background.task("peers-on-quadrant", "test_timing_peers.py::test_peers_on_quadrant")
def peers_on_quadrant(start: background.Start) -> tuple[Path, subprocess.CompletedProcess]:
    """The peers run (three workers, two rounds) in the background (tests/background.py)."""
    out = Path(tempfile.mkdtemp(prefix="portbench-peers-")) / "peers.json"
    return out, finish(start(start_compare(*PEERS_ON_QUADRANT, "--processes", "2", "--json", str(out))))


@background.task("peers-under-load", "test_timing_peers.py::test_a_busy_core")
def peers_under_load(start: background.Start) -> tuple[Path, subprocess.CompletedProcess]:
    """One round of the same run while a busy loop spins on the workers' core."""
    out = Path(tempfile.mkdtemp(prefix="portbench-peers-load-")) / "peers.json"
    core = sorted(os.sched_getaffinity(0))[0]
    # Two loops: with the rest of the suite also on the machine, one loop alone was once left a
    # twentieth of the core during one worker's span
    spinners = [start(subprocess.Popen([sys.executable, "-c", SPIN, str(core), str(SPIN_LIMIT_S)],
                                       cwd=REPO_ROOT, env=background.ENVIRON))
                for _ in range(2)]
    try:
        return out, finish(start(start_compare(*PEERS_ON_QUADRANT, "--processes", "1", "--json", str(out))))
    finally:
        for spinner in spinners:
            background.kill(spinner)
            spinner.wait()


def printed_decisions(doc: dict, stdout: str) -> None:
    """Every pair's line says what its recorded decision says, and the decision is the rule's
    on the rounds the file records (whatever the machine's load was)."""
    for r in doc["ratios"]:
        again = rounds.ratio_decision(r["port"], doc["results"][r["port"]]["rounds"], r["peer"],
                                      doc["results"][r["peer"]]["rounds"])
        assert (again["comparable"], again["why"], again["side"]) == (r["comparable"], r["why"], r["side"])
        pair = f"{r['port']} / {r['peer']}: "
        if r["comparable"]:
            assert f"{pair}{r['ratio']:.2f}x (" in stdout
        elif r["side"]:  # rounds disagree, all on one side of 1: their range, never the median
            line = f"{pair}{rounds.one_side_text(r)}"  # may be wrapped: compared word by word
            assert " ".join(line.split()) in " ".join(stdout.split())
            assert f"{pair}{r['ratio']:.2f}x" not in stdout
        else:
            assert f"{pair}not comparable: " in stdout and f"{pair}{r['ratio']:.2f}x" not in stdout


def test_peers_on_quadrant_times_port_and_peers_in_rounds() -> None:
    out, result = background.result("peers-on-quadrant")
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    names = list(doc["results"])
    assert names == ["port:torch:eager", "timm:eager", "hf-torch:eager"]
    params = {r["params"] for r in doc["results"].values()}
    assert params == {18020}  # the peers built the spec's model (quadrant: 18,020 parameters)
    for report in doc["results"].values():
        assert report["n"] >= 2 * 3 and report["q1"] <= report["median"] <= report["q3"]
        assert [r["round"] for r in report["rounds"]] == [1, 2] and len(report["process_medians"]) == 2
        # each timed span ran 0.25 s, long enough for the probe's 10 ms ticks: measured, not null
        assert all(r["foreign_cpu"] is not None for r in report["rounds"])
        assert report["threads_used"]["intra_op"] == 1 and len(report["threads_used"]["affinity"]) == 1
    gemm = doc["results"]["port:torch:eager"]["gemm"]
    assert gemm["status"] == "ok" and len(gemm["rounds_gflops"]) == 2 and gemm["foreign_cpu"] is not None
    assert {(r["port"], r["peer"]) for r in doc["ratios"]} == {("port:torch:eager", "timm:eager"),
                                                               ("port:torch:eager", "hf-torch:eager")}
    printed_decisions(doc, result.stdout)
    for name in names:  # one fresh worker each, per round
        assert result.stderr.count(f"{name}: fresh worker process") == 2


def test_a_busy_core_marks_the_workers_contended_and_prints_no_ratio() -> None:
    out, result = background.result("peers-under-load")
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    flagged = []
    for name, report in doc["results"].items():
        contended = report["rounds"][0]["foreign_cpu"] > CONTENDED
        assert (f"{name} CONTENDED" in result.stdout) == contended, (name, report["rounds"])
        flagged += [name] * contended
    # The loops held two thirds of the workers' core (same nice): some worker is contended. Which
    # one the scheduler starved is its choice (usually the port's, which every pair includes, but
    # one CI-like run starved only timm's), so the rule is checked per pair: a pair with a contended
    # side prints no ratio, and says why.
    assert flagged, doc["results"]
    affected = [r for r in doc["ratios"] if r["port"] in flagged or r["peer"] in flagged]
    assert affected, doc["ratios"]  # every worker is some pair's side
    for r in affected:
        assert not r["comparable"] and r["why"].startswith("contended: "), r
    printed_decisions(doc, result.stdout)


def test_a_spec_the_peers_cannot_build_is_refused() -> None:
    line = error_line(run_compare("peers", "--spec", "archive-torch"))
    assert "no peer can build" in line
    assert "timm: timm VisionTransformer: spec field pooling='flatten'" in line
    assert "hf-flax: Hugging Face FlaxViTForImageClassification: spec field pooling='flatten'" in line
    assert "keras-hub: keras-hub ViTImageClassifier: spec field head_hidden=(128, 64, 32)" in line
    # A naflex or packed batch is patches, not NHWC images: every peer says so (timm's ran and timed
    # nothing before), and the port alone is planned.
    impls, _, refused = peer_timing.plan(["torch"], ("eager",), get_preset("packed-tiny"))
    assert [i.name for i in impls] == ["port:torch:eager"] and len(refused) >= 2, refused
    assert all("batching='packed' (peers run NHWC images of one size)" in line for line in refused)
    # Transformers 4.x's TF ViT has a bias on query, key and value whatever the config says; its Flax
    # ViT reads qkv_bias
    unbiased = get_preset("quadrant").replace(qkv_bias=False)
    assert "spec field qkv_bias=False" in peer_timing.refusal("hf-tf", unbiased)
    assert peer_timing.refusal("hf-flax", unbiased) is None
    every = r"build: timm, hf-torch, hf-flax, hf-tf, keras-hub: batching='packed' \(peers run NHWC"
    with pytest.raises(SpecError, match=every + r" images of one size\)$"):  # said once, for all
        peer_timing.check_expressible(get_preset("packed-tiny"))


def test_fewer_timed_calls_than_a_median_needs_are_refused() -> None:
    line = error_line(run_compare("peers", "--spec", "quadrant", "--repeats", "2"))
    assert "--repeats 2: at least 3 (a median of fewer timed calls cannot set an outlier aside)" in line


def test_timm_and_transformers_build_the_newer_families_and_towers_or_say_why_not() -> None:
    """timm's and Transformers' PyTorch peers are the classes their exporters write for the spec (the
    families and the towers: Transformers' Aimv2VisionModel for aimv2-tiny, timm's Eva for rope-tiny),
    each with the spec's parameter count; one that cannot build it is listed with the field it refuses."""
    dinov2_timm = get_preset("dinov2-reg-tiny").replace(pos_embed_class_row=False)  # no_embed_class
    builds = {"siglip-tiny": ("timm", "hf-torch"), "clip-tiny": ("timm",),
              "deit-distilled-tiny": ("timm", "hf-torch"), "deit3-tiny": ("timm",),
              "aimv2-tiny": ("timm", "hf-torch"), "pixtral-tiny": (), "rope-tiny": ("timm", "hf-torch")}
    refusals = {"clip-tiny": "num_classes=10", "deit3-tiny": "pos_embed_class_row=False",
                "pixtral-tiny": "spec field "}  # timm: its rope_bands; Transformers' Pixtral: its head
    for spec in (dinov2_timm, *map(get_preset, builds)):
        name = spec.name
        impls, _, refused = peer_timing.plan(["torch"], ("eager",), spec)
        peers = tuple(i.name.removesuffix(":eager") for i in impls[1:])
        assert peers == builds.get(name, ("timm",)), name
        assert all(refusals.get(name, "pos_embed_class_row=False") in line for line in refused), refused
        for peer in peers:
            _, facts = peer_timing.peer_call(peer, "eager", spec, np.zeros((1, 16, 16, 3), np.float32), 1)
            assert facts["params"] == spec.derived.params, (name, peer)  # the same model, counted there
            # DINOv3's mask_token, read only for bool_masked_pos, is named and left out of the count
            dinov3 = (name, peer) == ("rope-tiny", "hf-torch")
            assert facts.get("unread") == (["embeddings.mask_token"] if dinov3 else None), (name, peer)
    line = error_line(run_compare("peers", "--spec", "siglip-tiny", "--frameworks", "flax"))
    assert ("no peer of flax can build spec 'siglip-tiny': hf-flax:jit (Hugging Face "
            "FlaxViTForImageClassification: spec field pooling='map'") in line


def test_missing_extra_names_the_install_command(monkeypatch, capsys) -> None:
    real = importlib.util.find_spec
    absent = {"keras_hub", "tf_keras"}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in absent else real(name, *a))
    impls, missing, _ = peer_timing.plan(["keras"], ("compiled",), get_preset("quadrant"))
    assert [i.name for i in impls] == ["port:keras:compiled"]
    assert missing == ["keras-hub:predict needs keras_hub", "keras-hub:graph needs keras_hub",
                       "hf-tf:graph needs tf_keras"]
    code = compare.main(["peers", "--spec", "quadrant", "--frameworks", "keras"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2
    assert lines[-1].startswith("error: no peer implementation is installed; install with: pip install")
    assert "--no-deps keras-hub" in lines[-1]


def test_transformers4_peers_run_from_its_side_directory_or_say_what_they_need(monkeypatch, tmp_path) -> None:
    """Transformers' TF and Flax ViT are 4.x's: with 5 installed, those two peers get 4.x's side
    directory first on their workers' PYTHONPATH (conftest.py's `transformers4` for the tests'
    own workers), and without one they are left out, each naming what it needs; the plug-in's
    constructor says the same in this process."""
    from shared.checkpoints.libraries import hf
    from shared.errors import FrameworkUnavailable
    from shared.runtime import process_env

    spec = get_preset("quadrant")
    side = process_env.transformers4_env()
    assert side is not None, process_env.TRANSFORMERS4_NEEDED
    impls, missing, _ = peer_timing.plan(["flax", "keras"], ("compiled",), spec)
    paths = {i.name: i.env.get("PYTHONPATH") for i in impls if i.name.startswith("hf-")}
    assert paths == dict.fromkeys(["hf-flax:jit", "hf-tf:graph"], side.get("PYTHONPATH")) and not missing
    if "PYTHONPATH" in side:  # Transformers 5 installed: its constructor has no such class
        monkeypatch.setattr(process_env, "TRANSFORMERS4", tmp_path / "none")
        impls, missing, _ = peer_timing.plan(["flax", "keras"], ("compiled",), spec)
        assert missing == [f"{name} needs {process_env.TRANSFORMERS4_NEEDED}" for name in ("hf-flax:jit",
                                                                                          "hf-tf:graph")]
        assert not any(i.name.startswith("hf-") for i in impls)
        with pytest.raises(FrameworkUnavailable, match=r"has no FlaxViTForImageClassification: it needs "
                                                       r"transformers<5 \(Transformers' TensorFlow and Flax"):
            hf.build_model(spec, "flax", seed=0)
