"""What every catalogue demonstration shares: its result (`Demo`), the canonical weights it runs,
and the template most of them are: the pinned-vs-unpinned gap through the float64 reference
(`variant_demo`), declared in an entry's row as a `Reference`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType

from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.reference import forward
from shared.core.spec import ModelSpec
from shared.core.tolerance import max_abs_diff as gap
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable
from shared.teaching.first_divergence import compare_taps, reference_taps
from shared.teaching.framework_defaults import demos_module
from shared.teaching.transforms import Case, Variant

DEMO_SEED = 0  # canonical weights for every demonstration: init_weights(spec, DEMO_SEED)


@dataclass
class Demo:
    gap: float | None  # the headline: max |unpinned - pinned|; None when nothing could run
    lines: list[str] = field(default_factory=list)  # each measurement, one line
    ran_with: list[str] = field(default_factory=list)  # "reference", "torch", ...


def demo_case(spec: ModelSpec) -> Case:
    return Case(spec, init_weights(spec, DEMO_SEED), probe_batch(spec))


def quadrant() -> ModelSpec:
    return get_preset("quadrant")


def framework(name: str) -> ModuleType | None:
    """`ports.<name>.demos` (its demonstration helpers), or None when it is not installed: a
    demonstration then reports what the reference alone shows."""
    try:
        return demos_module(name)
    except FrameworkUnavailable:
        return None


def first_seen(case: Case, changed: Case) -> str:
    """The first tap where `trace` tells the changed run from the pinned one (float32 budgets)."""
    trace = compare_taps(case.spec, reference_taps(case.spec, case.weights, case.images),
                         reference_taps(changed.spec, changed.weights, changed.images), "variant")
    first = trace.first_divergence
    return first.name if first else "none"


def variant_demo(spec: ModelSpec, variants: Sequence[Variant], traced: bool = False) -> Demo:
    """The reference's logits under each of `variants` against the pinned spec's (`traced`: each
    line also names the first tap where the trace sees the variant)."""
    case = demo_case(spec)
    pinned = forward(case.spec, case.weights, case.images)
    demo = Demo(None, ran_with=["reference"])
    for v in variants:
        changed = v.apply(case)
        if changed is None:
            demo.lines.append(f"{v.key}: does not apply to spec {spec.name!r}")
            continue
        moved = gap(forward(changed.spec, changed.weights, changed.images), pinned)
        demo.gap = max(demo.gap or 0.0, moved)
        where = f"; trace first sees it at {first_seen(case, changed)}" if traced else ""
        demo.lines.append(f"spec {spec.name!r}, same canonical weights: logits move by {moved:.3g} "
                          f"with {v.key}{where}")
    return demo


Template = Callable[[ModelSpec, Sequence[Variant]], Demo]  # lays the variants' runs out on a spec
More = Callable[[Demo, Case, Sequence[Variant]], None]  # adds what else a demonstration measures


@dataclass(frozen=True)
class Reference:
    """A demonstration that is the template: an entry's alternatives (`only` these, when named) on
    the canonical weights of the entry's first spec, each against the pinned spec through the
    float64 reference (`template`: `variant_demo`, or another layout of the same runs); then the
    `note`, then what `more` measures beside them (a framework's own API, a count, a trace)."""

    only: tuple[str, ...] = ()
    note: str = ""
    more: More | None = None
    template: Template = variant_demo

    def run(self, spec: ModelSpec, variants: Sequence[Variant]) -> Demo:
        if self.only:
            declared = {v.key: v for v in variants}
            variants = [declared[key] for key in self.only]
        demo = self.template(spec, variants)
        if self.note:
            demo.lines.append(self.note)
        if self.more is not None:
            self.more(demo, demo_case(spec), variants)
        return demo
