"""First-divergence tracing: clean ports stay within every per-tensor budget, and a divergence
planted in one block is located at the tensor where it enters."""

from __future__ import annotations

import json
import tempfile
from functools import partial
from pathlib import Path

import jax
import numpy as np
import pytest

from ports import create_port
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.weights import init_weights
from shared.teaching.first_divergence import PortTrace, compare_taps, reference_taps, report_lines, tap_order
from tests import background
from tests.adversarial import Outcome

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def archive():
    spec = get_preset("archive-torch")  # 4 blocks: block 3 is the last
    weights, images = init_weights(spec, 0), probe_batch(spec)
    return spec, weights, images, reference_taps(spec, weights, images)


def test_tap_order_covers_every_reference_tap(archive) -> None:
    spec, _, _, ref = archive
    assert sorted(tap_order(spec)) == sorted(ref)


@pytest.mark.parametrize("name", ["clip-tiny", "siglip-tiny", "dinov2-reg-tiny"])
def test_tap_order_is_the_order_the_reference_records_them_in(name: str) -> None:
    """ln_pre and the attention pool's probabilities too, so `trace` compares them in place."""
    spec = get_preset(name)
    assert tap_order(spec) == list(reference_taps(spec, init_weights(spec, 0), probe_batch(spec)))


@pytest.mark.parametrize("framework", ["torch", "flax"])
def test_clean_port_is_within_every_budget(archive, framework: str) -> None:
    spec, weights, images, ref = archive
    port = create_port(framework, spec)
    port.load(weights)
    trace = compare_taps(spec, ref, port.intermediates(images), framework)
    assert trace.first_divergence is None
    assert [r.name for r in trace.rows] == tap_order(spec)


def test_wrong_epsilon_in_block_3_is_located_in_torch(archive) -> None:
    spec, weights, images, ref = archive
    port = create_port("torch", spec)
    port.load(weights)
    port.model.blocks[3].norm1.eps = 1e-3  # Keras' default, in one norm of one block
    trace = compare_taps(spec, ref, port.intermediates(images), "torch")
    first = trace.first_divergence
    assert first is not None and first.name == "block3.norm1"
    assert all(not r.over for r in trace.rows[: trace.rows.index(first)])
    assert report_lines([trace])[0].startswith("torch: first divergence at block3.norm1: error ")


def test_tanh_gelu_in_block_3_is_located_in_flax(archive) -> None:
    spec, weights, images, ref = archive
    port = create_port("flax", spec)
    port.load(weights)
    port.model.blocks[3].mlp.act = partial(jax.nn.gelu, approximate=True)  # Flax's default form
    first = compare_taps(spec, ref, port.intermediates(images), "flax").first_divergence
    assert first is not None and first.name == "block3.mlp"


def test_dropped_layer_scale_is_named_at_block_0s_attention_branch() -> None:
    """The torch port loaded by a loader that skips ls1/ls2 (gammas left at one, the public MLX
    DINOv2 bug): everything up to block 0's attention probabilities agrees; its attention branch,
    after ls1, is the first tensor over budget."""
    from shared.teaching.variants import Case, variant

    spec = get_preset("dinov2-reg-tiny")
    case = Case(spec, init_weights(spec, 0), probe_batch(spec))
    dropped = variant("LayerScale gammas dropped").apply(case)
    assert dropped is not None
    port = create_port("torch", spec)
    port.load(dropped.weights)
    trace = compare_taps(spec, reference_taps(spec, case.weights, case.images),
                         port.intermediates(case.images), "torch")
    before = ["patch_embed", "pos_embed", "block0.norm1", "block0.attn_probs"]
    assert [r.name for r in trace.rows[:4]] == before
    assert not any(r.over for r in trace.rows[:4])
    assert trace.first_divergence is not None and trace.first_divergence.name == "block0.attn"


@background.task("quadrant-trace", "test_teaching_trace.py::test_cli_trace_reports_each_port")
def quadrant_trace(start: background.Start) -> tuple[Path, Outcome]:
    out = Path(tempfile.mkdtemp(prefix="portbench-trace-")) / "trace.json"
    return out, background.compare_py(start, "trace", "--spec", "quadrant", "--frameworks", "torch",
                                      "--json", out)


def test_cli_trace_reports_each_port() -> None:
    out, proc = background.result("quadrant-trace")
    assert proc.code == 0, proc.stderr
    assert "torch: all 17 taps within budget" in proc.stdout
    report = json.loads(out.read_text())
    assert report[0]["framework"] == "torch" and report[0]["first_divergence"] is None
    assert len(report[0]["taps"]) == 17
    assert PortTrace.from_dict(report[0]).to_dict() == report[0]  # the record reads back what it wrote
    np.testing.assert_array_less([t["error"] for t in report[0]["taps"]],
                                 [t["budget"] for t in report[0]["taps"]])
