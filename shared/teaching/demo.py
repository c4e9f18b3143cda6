"""What every catalogue demonstration shares: its result (`Demo`), the canonical weights it runs,
and the pinned-vs-unpinned gap through the float64 reference (`variant_demo`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.reference import forward
from shared.core.spec import ModelSpec
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable
from shared.teaching.framework_defaults import demos_module
from shared.teaching.variants import Case, variant

DEMO_SEED = 0  # canonical weights for every demonstration: init_weights(spec, DEMO_SEED)


@dataclass
class Demo:
    gap: float | None  # the headline: max |unpinned - pinned|; None when nothing could run
    lines: list[str] = field(default_factory=list)  # each measurement, one line
    ran_with: list[str] = field(default_factory=list)  # "reference", "torch", ...


def demo_case(spec: ModelSpec) -> Case:
    return Case(spec, init_weights(spec, DEMO_SEED), probe_batch(spec))


def gap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def quadrant() -> ModelSpec:
    return get_preset("quadrant")


def framework(name: str) -> ModuleType | None:
    """`ports.<name>.demos` (its demonstration helpers), or None when it is not installed: a
    demonstration then reports what the reference alone shows."""
    try:
        return demos_module(name)
    except FrameworkUnavailable:
        return None


def variant_demo(spec: ModelSpec, keys: tuple[str, ...], note: str = "") -> Demo:
    """The reference's logits under each variant in `keys` against the pinned spec's."""
    case = demo_case(spec)
    pinned = forward(case.spec, case.weights, case.images)
    demo = Demo(None, ran_with=["reference"])
    for key in keys:
        changed = variant(key).apply(case)
        if changed is None:
            demo.lines.append(f"{key}: does not apply to spec {spec.name!r}")
            continue
        moved = gap(forward(changed.spec, changed.weights, changed.images), pinned)
        demo.gap = max(demo.gap or 0.0, moved)
        demo.lines.append(f"spec {spec.name!r}, same canonical weights: logits move by {moved:.3g} "
                          f"with {key}")
    if note:
        demo.lines.append(note)
    return demo
