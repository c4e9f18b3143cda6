"""A row of a timing results file as typed records (shared/core/data_record.py): `TimingRow`, one
framework's run, and its parts — phases, conditions, memory, verdicts per mode (`PortVerdict`, the
record `verify` writes), roofline, mode choice, rounds. Their annotations ARE the schema a row is
checked by (`schema.validate` reads every row into a `TimingRow`), so a field and its check cannot
drift apart; the file around the rows is shared/measure/results_types.py.

Each record declares the fields a reader uses, with their types and ranges; it is open, so a field
no reader uses is not checked (a newer writer may add one: docs/results-schema.md, "Versions"). A
field it declares is refused in one line naming its path, its value and what was expected: a
number given as a string, a list where an object belongs, `passed: "no"` (a string is not a
verdict), an infinite or negative time, a spread below zero, a phase no worker records. What no
annotation states is a rule of its record (`validate`): a quartile outside the median, and an `ok`
row without the conditions that decide whether two rows may be ranked together (a missing
`spec_hash` would let rows of different specs be ranked as one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from shared.core.data_record import Bound, DataRecord
from shared.core.equivalence import PortVerdict

# Phases in the order they happen inside a worker. `n1` phases are one cold measurement per
# fresh process (they cannot be repeated without a new process); the rest are repeated.
PHASES: tuple[tuple[str, str], ...] = (
    ("import", "import the framework and the port (fresh process, cold)"),
    ("build_load", "build the model and load the canonical weights"),
    ("first_call_eager", "first eager forward (lazy initialisation)"),
    ("compile", "first compiled forward: trace + compile + run"),
    ("prepare", "canonical NHWC batch -> native layout and device"),
    ("forward_eager", "warmed eager forward, eval mode"),
    ("forward_compiled", "warmed compiled forward, eval mode"),
    ("train_step", "one training update: forward, mean CE, backward, clip, AdamW"),
    ("eval_pass", "evaluation pass over a dataset: prepare + forward + read back, per pass"),
)
PHASE_NAMES = tuple(name for name, _ in PHASES)
PhaseName = Literal[PHASE_NAMES]  # a key of `phases`: Literal[("a", "b")] is Literal["a", "b"]
# what must be stated before an `ok` row is ranked against another (guard.COMPARABILITY_FIELDS)
RANKED_CONDITIONS = ("spec_hash", "batch", "dtype", "threads")
RowStatus = Literal["ok", "invalid", "crashed", "timeout", "unavailable"]

# The values a results file holds; null means "not measured / not available", never zero.
Text = str | None
NonNegative = Annotated[float, Bound(low=0)] | None  # a time, a rate, a share, a CPU count: finite
Count = Annotated[int, Bound(low=0)] | None
Positive = Annotated[int, Bound(low=1)] | None
Flag = bool | None
# A value its writer states or leaves out, never null: a statistic of a timed phase (every one
# shared/measure/stats.summarise returns is a number), which an n/a phase leaves out. The default
# LEFT_OUT (None in memory) stands for "left out"; a null in the file is refused as a string would be.
Stated = Annotated[float, Bound(low=0)]
StatedCount = Annotated[int, Bound(low=1)]
LEFT_OUT: Any = None


class Part(DataRecord):
    """A part of a results file: open, since a newer writer may add a field no reader uses."""

    OPEN: ClassVar[bool] = True


@dataclass(frozen=True, kw_only=True)
class Phase(Part):
    """One phase's record: `{"status": "n/a", "reason": ...}`, or its timed samples and statistics."""

    KIND: ClassVar[str] = "phase"

    status: Literal["ok", "n/a"]
    reason: Text = None
    note: Text = None
    cache: Text = None
    samples: list[NonNegative] | None = None
    n: StatedCount = LEFT_OUT  # left out: one measurement
    median: Stated = LEFT_OUT
    q1: Stated = LEFT_OUT
    q3: Stated = LEFT_OUT
    iqr: Stated = LEFT_OUT
    min: Stated = LEFT_OUT
    mean: Stated = LEFT_OUT
    cpu_util: NonNegative = None  # null: not measured (a clock that did not advance)
    foreign_cpu: NonNegative = None
    process_medians: list[NonNegative] | None = None
    first_step_seconds: NonNegative = None
    batches: Count = None  # eval_pass: the batches one pass evaluates (--eval-batches)

    def validate(self) -> None:
        """An `ok` phase states its median, between its quartiles (a missing quartile: the
        median), and its IQR when it has more than one sample (what the tables print beside it)."""
        if self.status != "ok":
            return
        median = self.median
        if median is None:
            self.refuse(" lacks the field 'median', which an ok phase states")
        if self.iqr is None and (self.n or 1) > 1:
            self.refuse(f" lacks the field 'iqr', which an ok phase of n {self.n} > 1 states")
        q1 = median if self.q1 is None else self.q1
        q3 = median if self.q3 is None else self.q3
        slack = 1e-9 * max(abs(q3), abs(q1), median)  # interpolated quartiles: rounding, nothing more
        if not q1 - slack <= median <= q3 + slack:
            self.refuse(f": median {median!r} lies outside its quartiles q1 {q1!r} .. q3 {q3!r}")


@dataclass(frozen=True, kw_only=True)
class Conditions(Part):
    """What a row (or the run) was measured under: the guard compares these before ranking."""

    KIND: ClassVar[str] = "conditions"

    spec_name: Text = None
    spec_hash: Text = None
    batch: Positive = None
    dtype: Text = None
    precision: Text = None
    threads: Positive = None
    device_request: Text = None
    device_class: Text = None
    device_name: Text = None
    patches_real: Count = None  # the timed batch's images' patches (shared/core/batching.patch_counts)
    patches_slots: Count = None  # what the model computes on: the padding included


@dataclass(frozen=True, kw_only=True)
class Memory(Part):
    KIND: ClassVar[str] = "memory"

    rss_after_import_bytes: Count = None
    peak_rss_bytes: Count = None
    allocator_peak_bytes: Count = None


@dataclass(frozen=True, kw_only=True)
class ThreadsApplied(Part):
    KIND: ClassVar[str] = "threads_applied"

    requested: Count = None
    affinity_note: Text = None


@dataclass(frozen=True, kw_only=True)
class Gemm(Part):
    """The framework's GEMM rate in the worker (shared/measure/roofline.py)."""

    KIND: ClassVar[str] = "gemm"

    status: Text = None
    gflops: NonNegative = None
    reason: Text = None
    dtype: str = "float32"  # left out by a file from before the precision ladder; never null
    mode: Text = None
    shapes: list[dict[str, Any]] | None = None
    foreign_cpu: NonNegative = None
    rounds_gflops: list[NonNegative] | None = None
    rounds_disagree: Flag = None


@dataclass(frozen=True, kw_only=True)
class RoofPhase(Part):
    KIND: ClassVar[str] = "roofline phase"

    gflops: Annotated[float, Bound(low=0)]  # roofline.achieved states it for every phase it lists
    fraction: NonNegative = None  # null: the GEMM rate was n/a


@dataclass(frozen=True, kw_only=True)
class Roofline(Part):
    KIND: ClassVar[str] = "roofline"

    forward_flops: NonNegative = None
    gemm: Gemm | None = None
    phases: dict[PhaseName, RoofPhase] | None = None


@dataclass(frozen=True, kw_only=True)
class Candidate(Part):
    """One candidate mode as shared/measure/modes.py measured it: its times, and the gate's
    verdict on its first call's logits (null when it failed before the gate ran)."""

    KIND: ClassVar[str] = "candidate"

    mode: str
    status: Literal["ok", "failed"]
    reason: Text = None
    first_call_s: NonNegative = None
    median: NonNegative = None
    iqr: NonNegative = None
    n: Positive = None
    gate: PortVerdict | None = None


@dataclass(frozen=True, kw_only=True)
class ModeChoice(Part):
    KIND: ClassVar[str] = "mode_choice"

    chosen: Text  # stated, null for a port that offers no mode
    source: Literal["only", "forced", "cached", "measured"]
    forward: Literal["eager", "compiled"] | None = None
    offered: list[Text] | None = None
    candidates: list[Candidate] | None = None
    notes: list[Text] | None = None
    measured: Text = None
    compile_after_measurement: Flag = None
    budget: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Round(Part):
    """One round's worker (shared/measure/runner.round_record): what the rounds' rule judges it by."""

    KIND: ClassVar[str] = "round"

    round: Annotated[int, Bound(low=1)]
    status: RowStatus | None = None
    foreign_cpu: NonNegative = None
    gemm_gflops: NonNegative = None
    gemm_foreign_cpu: NonNegative = None
    worker_wall_seconds: NonNegative = None


@dataclass(frozen=True, kw_only=True)
class SweepPoint(Part):
    KIND: ClassVar[str] = "sweep_point"

    batch: Annotated[int, Bound(low=1)]  # shared/measure/sweep.run_sweep states all three
    tokens: Annotated[int, Bound(low=1)]
    image: list[Annotated[int, Bound(low=1)]] | None = None


@dataclass(frozen=True, kw_only=True)
class Environment(Part):
    """The host a run measured on: a results file's `environment`, and a row's `host` where
    `report --json` merged runs of several files."""

    KIND: ClassVar[str] = "environment"

    hostname: Text = None
    cpu_model: Text = None
    git_revision: Text = None
    git_dirty: Flag = None
    cpu_count: Count = None


@dataclass(frozen=True, kw_only=True)
class TimingRow(Part):
    """One framework's row of `runs` (docs/results-schema.md, "A row"), as a reader sees it. The
    worker fills its row in place as a dict (a failure part-way keeps what was measured) and the
    writers write that dict, fields no reader uses included: this record reads it, and its
    `to_dict` (the declared fields only) is not the file's form."""

    KIND: ClassVar[str] = "row"

    framework: str
    status: RowStatus
    reason: Text = None
    source: Text = None
    host: Environment | None = None  # report --json: the machine of the file the row came from
    backend: Text = None
    conditions: Conditions
    phases: dict[PhaseName, Phase]
    memory: Memory
    equivalence: dict[str, PortVerdict] | None = None
    roofline: Roofline | None = None
    mode_choice: ModeChoice | None = None
    threads_applied: ThreadsApplied | None = None
    notes: list[Text] | None = None
    stderr_tail: list[Text] | None = None
    param_count: Count = None
    param_count_spec: Count = None
    worker_wall_seconds: NonNegative = None
    foreign_cpu: NonNegative = None
    rounds: list[Round] | None = None
    replicates: Positive = None
    sweep_point: SweepPoint | None = None

    def validate(self) -> None:
        """What ranking needs of an `ok` row."""
        if self.status == "ok":  # a ranked row: the guard compares these, so they must be stated
            for key in RANKED_CONDITIONS:
                value = getattr(self.conditions, key)
                if value in (None, ""):
                    self.refuse(f".conditions.{key} is {value!r}, expected a value: an ok row is ranked "
                                "only against rows with the same one")
