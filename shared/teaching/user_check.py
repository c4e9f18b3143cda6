"""The verdict on a user's own model (`verify --model`, `trace --model`, `portbench.check`): the
run of `shared.your_model.run` against the float64 reference on the weights it ran with, our ports
on the same weights when asked, and, when it fails, diagnose's finding (`gap_explanation`) and
trace's first divergent tensor (`first_divergence`). Here, not in `shared/your_model/`, because
it explains a failure with this package's tools; `your_model` imports no teaching module."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.core.equivalence import PortVerdict, check_logits
from shared.core.reference import forward
from shared.core.spec import ModelSpec
from shared.core.taps import NamedTaps
from shared.runtime.verify import VerifyCase, pairwise_gaps, verify
from shared.your_model.run import UserRun, run_user
from shared.your_model.spec_check import TRAIN

if TYPE_CHECKING:
    from shared.teaching.first_divergence import PortTrace
    from shared.teaching.gap_explanation import Diagnosis


@dataclass
class UserCheck:
    """What `verify --model` and `portbench.check` report: the user's row, our ports' rows, the
    spec contradictions, and diagnose's finding (and trace's first divergence) when it failed."""

    run: UserRun
    entry: PortVerdict
    ports: list[PortVerdict] = field(default_factory=list)
    pairwise: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    first_divergence: str | None = None

    @property
    def passed(self) -> bool:
        return self.entry.passed and not any(c.decisive for c in self.run.contradictions)

    def explanation(self) -> str:
        """One line: why it failed (the contradicting fields, then diagnose's finding); what was
        compared when it is a tower's final tokens rather than its logits."""
        if self.passed:
            return (f"equivalent: max abs gap {self.entry.max_abs_diff:.2g} <= {self.entry.tolerance:.1e}"
                    f"{self.compared()}")
        # a contradiction the logits judge is named beside a gap (a sequence-first attention the
        # model did not transpose for); a dropout rate never is: it cannot make one
        parts = [c.line() for c in self.run.contradictions
                 if c.decisive or (not self.entry.passed and c.effect != TRAIN)]
        if not self.entry.passed:
            parts.append(self.entry.reason or "logits differ")
        if self.diagnosis is not None and self.diagnosis.explained:
            parts.append(self.diagnosis.lines()[0])
        if self.first_divergence:
            parts.append(f"first divergent tensor: {self.first_divergence}")
        return "; ".join(parts) + self.compared()

    def compared(self) -> str:
        """Nothing for logits; for a tower that returns only its tokens, what they were held to
        and what that leaves unchecked (the spec's parameter-free pooling: a convention)."""
        if self.run.readout == "logits":
            return ""
        return (f" (on the final tokens, the reference's {self.run.readout!r}: your model returns no "
                f"pooled output, so the spec's pooling={self.run.spec.pooling!r} is not checked)")


def check_user(reference: str, spec: ModelSpec, images: np.ndarray, *, frameworks: list[str] | None = None,
               timeout: float = 300.0, trace: bool = False, unread: tuple[str, ...] = (),
               **options: Any) -> UserCheck:
    """The user's model against the float64 reference on the weights it ran with (its own, bound,
    or --weights loaded into it, or the canonical weights where its own are too small to judge by:
    shared/your_model/evaluate.py); our ports on the same weights when `frameworks` are given.
    `unread`: the fields of a spec read from the model that nothing read (`judge`)."""
    run = run_user(reference, spec, images, taps=trace, timeout=timeout, **options)
    return judge(run, images, frameworks=frameworks, timeout=timeout, trace=trace, unread=unread)


def judge(run: UserRun, images: np.ndarray, *, frameworks: list[str] | None = None,
          timeout: float = 300.0, trace: bool = False, unread: tuple[str, ...] = ()) -> UserCheck:
    """A finished `UserRun` against the reference, our ports, diagnose and trace. For a spec read
    from the model, `unread` names the fields no layer stated (pre or post norm, the pooling beside
    a class token, an inline activation): where exactly one catalogue setting of those fields alone
    reproduces the model's logits, the spec takes it and the run's notes say so (`fit_unread`)."""
    entry, logits = _entry(run, images)
    diagnosis = _diagnosis(run, images, entry)
    fitted = fit_unread(run, images, diagnosis, unread) if diagnosis is not None and unread else None
    if fitted is not None and (refit := _entry(fitted, images))[0].passed:
        run, (entry, logits), diagnosis = fitted, refit, None
    result = UserCheck(run, entry, diagnosis=diagnosis)
    case = VerifyCase(run.spec, run.tensors, images)
    if frameworks:
        result.ports, _ = verify([case], frameworks, timeout=timeout)
    result.pairwise = pairwise_gaps(case, [entry, *result.ports], logits)  # the ports' logits; tokens: none
    if trace:
        traced = user_trace(run, images)
        result.first_divergence = traced.first_divergence.name if traced.first_divergence else None
    return result


def _entry(run: UserRun, images: np.ndarray) -> tuple[PortVerdict, np.ndarray]:
    """The user's row against the reference under the run's spec, and the reference's logits."""
    taps = NamedTaps([run.readout, *run.spec.derived.extra_outputs])
    logits = forward(run.spec, run.tensors, images, taps)
    ref = logits if run.readout == "logits" else taps[run.readout]  # a tower's tokens: the spec's
    entry = check_logits(run.spec, run.logits, ref, int(run.report["param_count"]), framework=run.label,
                         device="cpu", what="logits" if run.readout == "logits" else "tokens",
                         outputs=run.taps if run.spec.derived.extra_outputs else None,
                         references=taps.tensors, images=images)
    return entry, logits


def _diagnosis(run: UserRun, images: np.ndarray, entry: PortVerdict) -> Diagnosis | None:
    """diagnose's finding on a gap: only a gap is diagnosed (the catalogue its alternatives come
    from loads only then), and only on logits, which its alternatives are judged by: a tower's
    tokens are traced instead."""
    if entry.passed or entry.max_abs_diff is None or run.readout != "logits":
        return None
    from shared.teaching.gap_explanation import diagnose

    return diagnose(run.spec, run.tensors, images, run.logits.astype(np.float64), source="your model",
                    model_from=run.origin)


def fit_unread(run: UserRun, images: np.ndarray, diagnosis: Diagnosis,
               unread: tuple[str, ...]) -> UserRun | None:
    """The run under the one explaining setting that changes only unread spec fields, with a note
    naming it; None when none or several do (several: the logits cannot tell them apart, and the
    failure with diagnose's lines stands), or when a setting also changes weights or images."""
    from shared.teaching.transforms import Case
    from shared.teaching.variants import variant

    base = Case(run.spec, run.tensors, images)
    fits: list[tuple[str, ModelSpec]] = []
    for candidate in diagnosis.explained:
        case: Case | None = base
        for key in candidate.settings:
            case = variant(key).apply(case) if case is not None else None
        if case is None or case.weights is not base.weights or case.images is not base.images:
            continue
        changed = {f for f, v in case.spec.to_dict().items() if v != base.spec.to_dict()[f]}
        if changed and changed <= set(unread):
            fits.append((candidate.label, case.spec))
    if len(fits) != 1:
        return None
    label, spec = fits[0]
    note = (f"fitted: {label}, a setting no layer of your model states (unread), is the only one that "
            f"reproduces its logits (diagnose tried {diagnosis.tried_single} settings and "
            f"{diagnosis.tried_pairs} pairs); --set it, or a --spec, to check against another")
    report = {**run.report, "notes": [*run.report.get("notes", []), note]}
    return dataclasses.replace(run, spec=spec, report=report)


def user_trace(run: UserRun, images: np.ndarray) -> PortTrace:
    """The user's captured taps (and logits) against the reference's, named canonically."""
    from shared.teaching.first_divergence import compare_taps, reference_taps  # only when traced

    reference = reference_taps(run.spec, run.tensors, images)
    return compare_taps(run.spec, reference, {**run.taps, run.readout: run.logits}, run.label,
                        readout=run.readout, images=images)
