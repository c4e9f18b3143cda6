"""One catalogue row: an `Entry` and everything it carries, so that a divergence is declared in
one place (the rows are `shared.teaching.divergences.CATALOGUE`): what differs and what pins it,
each framework's default (read through `ports/<fw>/defaults.py`), its alternatives (`Variant`:
what a port that took the other setting computes, run through the reference by `diagnose`, the
rung table and the demonstrations), the specs they are measured `On`, its demonstration (the
template, `shared.teaching.demo.Reference`, or a function) and its `Lesson` (the ports' code side
by side)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from shared.core.presets import get_preset
from shared.core.spec import ModelSpec
from shared.teaching.demo import Demo, Reference
from shared.teaching.framework_defaults import FRAMEWORKS, read_default
from shared.teaching.library_source import LibrarySelect
from shared.teaching.port_source import Select
from shared.teaching.transforms import Variant


@dataclass(frozen=True)
class On:
    """A spec an entry is measured on: a preset with changes. The rung table names it by its
    `label`; the demonstration calls it `name` (default: the label)."""

    preset: str
    changes: Mapping[str, object] = field(default_factory=dict)
    name: str = ""

    @property
    def label(self) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in self.changes.items())
        return f"{self.preset} ({extra})" if extra else self.preset

    def spec(self) -> ModelSpec:
        spec = get_preset(self.preset)
        return spec.replace(**self.changes) if self.changes else spec

    def demo_spec(self) -> ModelSpec:
        spec = self.spec()
        name = self.name or self.label
        return spec if name == spec.name else spec.replace(name=name)


@dataclass(frozen=True)
class Lesson:
    """What `compare.py lessons` shows for an entry: the four ports' own code side by side
    (shared/teaching/lessons.py), with the entry's title, measured gap and pin."""

    point: str  # what to look at in the code
    selects: tuple[Select, ...]
    library: tuple[LibrarySelect, ...] = ()  # the libraries' own code, in the order shown
    place: int = 0  # its place in the lessons' reading order (1, 2, ...); 0: after those, in catalogue order
    name: str = ""  # its entry's key, filled in by the row


Demonstration = Reference | Callable[[], Demo]


@dataclass(frozen=True)
class Entry:
    key: str
    title: str
    differs: str
    pin: str  # the spec / train-spec field or fixed convention that pins it
    kind: str  # forward | training | numerics
    rows: str  # where the measurement came from in the project's first survey (kept for JSON readers)
    demo: Demonstration  # the template, run on cases[0] with this entry's variants; or a function
    alternatives: tuple[Variant, ...] = ()  # what a port that took the other setting computes
    also: tuple[Variant, ...] = ()  # another entry's alternatives that show this one too (listed first)
    # The specs its alternatives are measured on, tried in order until one applies: the specs of
    # the float32 mutation tests (tests/test_teaching_mutations.py), so the rung table's float32
    # column is what those tests assert. The first is also the demonstration's.
    cases: tuple[On, ...] = (On("quadrant"),)
    lesson: Lesson | None = None
    tried: int = 0  # where `diagnose` tries its alternatives (1, 2, ...); 0: after those, in catalogue order
    framework_default: bool = True  # False: a convention of the model code, no framework API to read

    def __post_init__(self) -> None:
        # What the row declares is the entry's: its alternatives (each one's knob, unless named, is
        # the entry itself) and its lesson.
        own = tuple(replace(v, entry=self.key, group=v.group or self.key) for v in self.alternatives)
        object.__setattr__(self, "alternatives", own)
        if self.lesson is not None:
            object.__setattr__(self, "lesson", replace(self.lesson, name=self.key))

    @property
    def variants(self) -> tuple[str, ...]:
        """The keys of the alternatives that show this divergence, as the rung table lists them."""
        return tuple(v.key for v in (*self.also, *self.alternatives))

    def defaults(self) -> dict[str, str]:
        if not self.framework_default:
            return dict.fromkeys(FRAMEWORKS, "n/a")
        return {fw: read_default(self.key, fw) for fw in FRAMEWORKS}

    def run_demo(self) -> Demo:
        if isinstance(self.demo, Reference):
            return self.demo.run(self.cases[0].demo_spec(), (*self.also, *self.alternatives))
        return self.demo()
