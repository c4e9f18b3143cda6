"""The verdict on a user's own model (`verify --model`, `trace --model`, `portbench.check`): the
run of `shared.your_model.run` against the float64 reference on the weights it ran with, our ports
on the same weights when asked, and, when it fails, diagnose's finding (`gap_explanation`) and
trace's first divergent tensor (`first_divergence`). Here, not in `shared/your_model/`, because
it explains a failure with this package's tools; `your_model` imports no teaching module."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.core.equivalence import PortVerdict, check_logits
from shared.core.reference import forward
from shared.core.spec import ModelSpec
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
               timeout: float = 300.0, trace: bool = False, **options: Any) -> UserCheck:
    """The user's model against the float64 reference on the weights it ran with (its own, bound,
    or --weights loaded into it); our ports on the same weights when `frameworks` are given."""
    run = run_user(reference, spec, images, taps=trace, timeout=timeout, **options)
    return judge(run, images, frameworks=frameworks, timeout=timeout, trace=trace)


def judge(run: UserRun, images: np.ndarray, *, frameworks: list[str] | None = None,
          timeout: float = 300.0, trace: bool = False) -> UserCheck:
    """A finished `UserRun` against the reference, our ports, diagnose and trace."""
    spec = run.spec
    taps: dict[str, np.ndarray] = {}
    logits = forward(spec, run.tensors, images, taps)
    ref = logits if run.readout == "logits" else taps[run.readout]  # a tower's tokens: the spec's
    entry = check_logits(spec, run.logits, ref, int(run.report["param_count"]), framework=run.label,
                         device="cpu", what="logits" if run.readout == "logits" else "tokens")
    result = UserCheck(run, entry)
    case = VerifyCase(spec, run.tensors, images)
    if frameworks:
        result.ports, _ = verify([case], frameworks, timeout=timeout)
    result.pairwise = pairwise_gaps(case, [entry, *result.ports], logits)  # the ports' logits; tokens: none
    if not entry.passed and entry.max_abs_diff is not None and run.readout == "logits":
        # only a gap is diagnosed (the catalogue its alternatives come from loads only then), and
        # only on logits, which its alternatives are judged by: a tower's tokens are traced instead
        from shared.teaching.gap_explanation import diagnose

        result.diagnosis = diagnose(spec, run.tensors, images, run.logits.astype(np.float64),
                                    source="your model", model_from=run.origin)
    if trace:
        traced = user_trace(run, images)
        result.first_divergence = traced.first_divergence.name if traced.first_divergence else None
    return result


def user_trace(run: UserRun, images: np.ndarray) -> PortTrace:
    """The user's captured taps (and logits) against the reference's, named canonically."""
    from shared.teaching.first_divergence import compare_taps, reference_taps  # only when traced

    reference = reference_taps(run.spec, run.tensors, images)
    return compare_taps(run.spec, reference, {**run.taps, run.readout: run.logits}, run.label,
                        readout=run.readout)
