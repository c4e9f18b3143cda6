"""The catalogue's mixed-precision demonstration: the dtype a framework's own mixed precision holds
the token stream in, against the pinned contract (shared/core/precision.py, point 1), measured
against the float64 reference on a spec where type promotion cannot help: no position table and
no class token, so no float32 tensor ever enters the residual sum.

The framework calls live in `ports/keras/demos.py` (`global_policy_port`); the pinned port is
the ordinary one at the rung (`ports.create_port`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ports import create_port
from shared.core.precision import Precision
from shared.core.presets import get_preset
from shared.core.reference import forward
from shared.core.spec import ModelSpec
from shared.teaching.demo import Demo, demo_case, framework, gap

MIXED = Precision("bfloat16", "mixed")


def stream_spec(preset: str = "quadrant") -> ModelSpec:
    """`preset` with nothing float32 to promote the stream: no position table, no class token."""
    return get_preset(preset).replace(name=f"{preset}-nopos", pos_embed="none", pos_embed_class_row=False,
                                      class_token=False, pooling="mean")


def relative_rms(a: np.ndarray, b: np.ndarray) -> float:
    """rms(a - b) / rms(b): the error of one stream tap, whatever its scale."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.sqrt(np.mean((a64 - b64) ** 2) / np.mean(b64**2)))


@dataclass
class StreamRun:
    logits: np.ndarray
    dtypes: dict[str, str]  # tap -> the dtype the framework computed it in
    errors: dict[str, float]  # stream tap -> its relative rms error against the float64 reference


def stream_runs(spec: ModelSpec) -> tuple[dict[str, StreamRun], np.ndarray] | None:
    """Each Keras port at bfloat16-mixed (built under Keras' global policy; the pinned port), and
    the float64 reference's logits. None when Keras is not installed."""
    keras = framework("keras")
    if keras is None:
        return None
    case = demo_case(spec)
    ref_taps: dict[str, np.ndarray] = {}
    ref = forward(spec, case.weights, case.images, ref_taps)
    taps = dict.fromkeys(("block0.out", f"block{spec.depth - 1}.out", "pooled"))  # the stream
    ports = {"Keras' global mixed_bfloat16 policy": keras.global_policy_port(spec, MIXED),
             "the pinned Keras port at bfloat16-mixed": create_port("keras", spec, precision=MIXED)}
    out: dict[str, StreamRun] = {}
    for label, port in ports.items():
        port.load(case.weights)
        values = port.intermediates(case.images)
        out[label] = StreamRun(port.logits(case.images), port.tap_dtypes(case.images),
                               {t: relative_rms(values[t], ref_taps[t]) for t in taps})
    return out, ref


def demo_mixed_stream(preset: str = "quadrant") -> Demo:
    spec = stream_spec(preset)
    demo = Demo(None, ran_with=["reference"])
    measured = stream_runs(spec)
    if measured is None:
        demo.lines.append("Keras is not installed: its global mixed_bfloat16 policy cannot be run")
        return demo
    runs, ref = measured
    demo.ran_with.append("keras")
    for label, run in runs.items():
        moved = gap(run.logits, ref)
        demo.gap = max(demo.gap or 0.0, moved)
        errors = ", ".join(f"{tap} {e:.2g}" for tap, e in run.errors.items())
        demo.lines.append(f"{label}: block0.out computed in {run.dtypes['block0.out']}; logits {moved:.3g} "
                          f"from float64; stream error (relative rms) {errors}")
    native, pinned = (run.logits for run in runs.values())
    demo.lines.append(f"spec {spec.name!r} (depth {spec.depth}, no position table or class token): the two "
                      f"ports' logits differ by {gap(native, pinned):.3g}; both compute in bfloat16, so the "
                      "logit gaps are rounding of one order: what differs is the stream's dtype, and the "
                      "rounding a bfloat16 stream adds at every residual sum")
    return demo
