"""A timing results file as typed records (shared/core/data_record.py): the top level (`Results`)
around its rows (`TimingRow`, shared/measure/timing_row.py), with the host, the rank decisions a
`time` table printed, a sweep's fits and `report --json`'s inputs. Their annotations ARE the
schema: a results document is checked by reading it into these records, on load (`schema.load`,
for `report`'s text table, CSV, chart and HTML page alike) and before a write (`schema.validate`,
called by every writer). As a row's parts, each is open: a field no reader uses is not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from shared.errors import InputError
from shared.measure.timing_row import Count, Environment, NonNegative, Part, Positive, Text, TimingRow


class SchemaError(InputError):
    """A results file that this version cannot read."""


@dataclass(frozen=True, kw_only=True)
class RankedRow(Part):
    KIND: ClassVar[str] = "ranked row"

    framework: str
    phase: Text = None
    rank: Positive  # stated, null when not comparable
    why: Text  # stated, null when ranked
    rounds: Positive = None


@dataclass(frozen=True, kw_only=True)
class Ranking(Part):
    """The rank decision a `time` table printed: `guard.ranking_record` writes it as this record."""

    KIND: ClassVar[str] = "ranking"

    metric: Text = None
    spread: NonNegative = None
    contended_above: NonNegative = None
    rows: list[RankedRow] | None = None
    incomparable: Text = None  # the guard's line when no row could be ranked


@dataclass(frozen=True, kw_only=True)
class Slopes(Part):
    """Fitted exponents against batch and tokens: any sign."""

    KIND: ClassVar[str] = "slopes"

    batch: float | None = None
    tokens: float | None = None


@dataclass(frozen=True, kw_only=True)
class Fit(Part):
    KIND: ClassVar[str] = "fit"

    points: Count = None
    time: Slopes | None = None
    memory: Slopes | None = None
    memory_source: Text = None


@dataclass(frozen=True, kw_only=True)
class Sweep(Part):
    KIND: ClassVar[str] = "sweep"

    fits: dict[str, Fit] | None = None


@dataclass(frozen=True, kw_only=True)
class MergedFrom(Part):
    """One input of `report --json`."""

    KIND: ClassVar[str] = "merged_from"

    file: Text = None
    source: Text = None
    created: Text = None
    environment: Environment = field(default_factory=Environment)  # may be absent, never null
    conditions: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Results(Part):
    """The whole file (`schema.validate` reads its top level field by field, with its own words
    for the file kind and version)."""

    KIND: ClassVar[str] = "results"

    schema: Literal["portbench-results"]
    schema_version: Literal[1]
    created: str
    command: list[Text]
    environment: Environment
    conditions: dict[str, Any]  # for --factorial, `factorial_specs` holds one per spec
    runs: list[TimingRow]
    merged_from: list[MergedFrom] | None = None
    sweep: Sweep | None = None
    factorial: dict[str, Any] | None = None
    ranking: list[Ranking] | None = None
