"""`Record` on a small record of every declared type: coercion, overrides, round trips, the
declared-type check, the hash, and the decoders every spec, recipe and config file goes through;
`DataRecord` on a small nested one: its strict reading, the paths its refusals name, and the field
markers (derived, stored under another key, transient)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Literal

import pytest

from shared.checkpoints.tensor_files import read_config
from shared.core.data_record import Bound, DataRecord, derived, stored_as, transient
from shared.core.record import Record, fail, pick
from shared.errors import InputError, SpecError

Shade = Literal["light", "dark"]


@dataclass(frozen=True)
class Lamp(Record):
    KIND: ClassVar[str] = "lamp"

    watts: float = 40.0
    count: int = 1
    on: bool = False
    shade: Shade = "light"
    widths: tuple[int, ...] = ()
    timer: int | None = 10
    label: str = field(default="", compare=False)

    def validate(self) -> None:
        if self.count < 1:
            fail(self.KIND, "count", self.count, "at least 1")


FIELDS = "watts, count, on, shade, widths, timer, label"


def test_assignments_are_typed_as_declared() -> None:
    values = Lamp.parse_assignments(["watts=60", "count= 3 ", "on=yes", "shade=dark",
                                     "widths=[4, 2]", "timer=null", "label=desk"])
    assert values == {"watts": 60.0, "count": 3, "on": True, "shade": "dark", "widths": (4, 2),
                      "timer": None, "label": "desk"}
    assert type(values["watts"]) is float
    assert Lamp.parse_assignments(["widths=", "on=OFF"]) == {"widths": (), "on": False}
    lamp = Lamp()
    assert lamp.with_overrides([]) is lamp
    assert lamp.with_overrides(["count=2"], "--lamp") == Lamp(count=2)


BAD_ASSIGNMENTS = [
    ("count=many", "lamp field 'count' = 'many': expected an integer"),
    ("watts=bright", "lamp field 'watts' = 'bright': expected a number"),
    ("on=maybe", "lamp field 'on' = 'maybe': expected true or false"),
    ("shade=blue", "lamp field 'shade' = 'blue': expected one of light | dark"),
    ("widths=4,x", "lamp field 'widths' = '4,x': expected a comma-separated list of integers"),
    ("timer=soon", "lamp field 'timer' = 'soon': expected an integer"),
    ("count=0", "lamp field 'count' = 0: expected at least 1"),
    ("colour=red", f"--lamp: lamp field 'colour' is unknown; expected one of: {FIELDS}"),
    ("count", "--lamp 'count': expected FIELD=VALUE"),
]


@pytest.mark.parametrize(("assignment", "message"), BAD_ASSIGNMENTS)
def test_bad_assignments_name_the_field_the_value_and_what_was_expected(assignment, message) -> None:
    with pytest.raises(SpecError) as info:
        Lamp().with_overrides([assignment], "--lamp")
    assert str(info.value) == message


def test_declared_types_are_checked_before_the_records_own_rules() -> None:
    for changes, message in [
        ({"on": 1}, "lamp field 'on' = 1: expected true or false"),
        ({"shade": "blue", "count": 0}, "lamp field 'shade' = 'blue': expected one of light | dark"),
        ({"label": 5}, "lamp field 'label' = 5: expected text"),
        ({"label": "\ud800"}, "lamp field 'label' = '\\ud800': expected text without unpaired surrogates"),
        ({"count": 0}, "lamp field 'count' = 0: expected at least 1"),
    ]:
        with pytest.raises(SpecError) as info:
            Lamp(**changes)
        assert str(info.value) == message


def test_dict_json_toml_and_file_round_trips(tmp_path) -> None:
    lamp = Lamp(watts=1e-06, count=2, on=True, shade="dark", widths=(8, 4), timer=None,
                label='say "hi"\\ \x7f\t caf\u00e9')
    assert lamp.to_dict()["widths"] == [8, 4]
    assert Lamp.from_dict(lamp.to_dict()) == lamp
    assert Lamp.from_json(lamp.to_json()).label == lamp.label
    assert 'timer = "none"' in lamp.to_toml()  # TOML has no null: a None whose default is not
    assert Lamp.from_toml(lamp.to_toml()) == lamp  # ... is the word every optional field reads so
    # A field left out takes its default in TOML as in JSON (a hand-written recipe that left out
    # clip_global_norm once trained unclipped from TOML and clipped at 1.0 from JSON).
    assert Lamp.from_toml("count = 2").timer == Lamp.from_json('{"count": 2}').timer == 10
    assert Lamp.from_toml(lamp.to_toml()).label == lamp.label
    for suffix, text in ((".json", lamp.to_json()), (".toml", lamp.to_toml())):
        (tmp_path / f"lamp{suffix}").write_text(text, encoding="utf-8")
        assert Lamp.from_file(tmp_path / f"lamp{suffix}") == lamp
    assert Lamp.from_json(json.dumps({"lamp": lamp.to_dict(), "other": 1})) == lamp
    widened = Lamp.from_dict({"watts": 60, "widths": [1]})
    assert type(widened.watts) is float and widened.widths == (1,)


def test_from_dict_refuses_unknown_fields_and_non_mappings() -> None:
    with pytest.raises(SpecError) as info:
        Lamp.from_dict({"colour": "red", "brand": "x"})
    assert str(info.value) == f"lamp field 'brand' is unknown; expected one of: {FIELDS}"
    with pytest.raises(SpecError) as info:
        Lamp.from_dict([1])
    assert str(info.value) == "lamp: expected a mapping of fields, got list"
    with pytest.raises(SpecError) as info:
        Lamp.from_dict({"watts": 10**400})
    assert str(info.value).endswith("(401 characters): expected a number within float range")


def test_stable_hash_is_sorted_compact_json_of_the_compared_fields() -> None:
    lamp = Lamp(count=3, label="desk")
    body = {k: v for k, v in lamp.to_dict().items() if k != "label"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"))
    assert lamp.stable_hash() == hashlib.sha256(blob.encode()).hexdigest()[:16]
    assert Lamp.from_dict(dict(reversed(list(lamp.to_dict().items())))).stable_hash() == lamp.stable_hash()
    assert lamp.replace(label="hall").stable_hash() == lamp.stable_hash()
    assert lamp.replace(count=4).stable_hash() != lamp.stable_hash()


def test_arguments_and_names(tmp_path) -> None:
    named = {"desk": Lamp(count=2)}
    path = tmp_path / "l.toml"
    path.write_text(Lamp(count=5).to_toml())
    assert Lamp.from_argument(" desk ", named, "--lamp", "lamp preset") == Lamp(count=2)
    assert Lamp.from_argument('{"count": 4}', named, "--lamp", "lamp preset") == Lamp(count=4)
    assert Lamp.from_argument(str(path), named, "--lamp", "lamp preset") == Lamp(count=5)
    with pytest.raises(SpecError) as info:
        Lamp.from_argument("hall", named, "--lamp", "lamp preset")
    assert str(info.value) == ("--lamp 'hall' is neither a lamp preset (desk) nor a lamp file nor a "
                               "JSON document")
    assert pick("lamp preset", named, "desk") == Lamp(count=2)
    with pytest.raises(SpecError) as info:
        pick("lamp preset", named, "hall")
    assert str(info.value) == "unknown lamp preset 'hall'; expected one of: desk"


def test_missing_files_and_checkpoint_configs_decode_the_same_way(tmp_path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(SpecError) as info:
        Lamp.from_file(missing)
    assert str(info.value) == f"lamp file {str(missing)!r} does not exist"
    config = tmp_path / "config.json"
    for content, problem in [(b"\xff{}", "is not UTF-8 text: byte 0xff at offset 0 (invalid start byte)"),
                             (b'"text"', "holds a JSON string, expected an object of fields"),
                             (b"[" * 100_000, "is nested too deeply to read")]:
        config.write_bytes(content)
        with pytest.raises(SpecError) as info:
            read_config(config)
        assert str(info.value).startswith(f"config {str(config)!r} {problem}")
    config.write_text('{"hidden_size": 16}')
    assert read_config(config) == {"hidden_size": 16}


# ---- data records: what portbench writes and reads back, held to the annotations as they are
Watts = Annotated[float, Bound(low=0)]


@dataclass(frozen=True)
class Bulb(DataRecord):
    KIND: ClassVar[str] = "bulb"

    watts: Watts
    hours: Annotated[int, Bound(low=1)] | None = None


@dataclass(frozen=True, kw_only=True)
class Fitting(DataRecord):
    KIND: ClassVar[str] = "fitting"

    state: Literal["lit", "dark"] = derived()  # written, never given: `on` decides it
    on: bool
    bulbs: list[Bulb] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    levels: dict[Literal["low", "high"], Watts] = field(default_factory=dict)  # these keys only
    lamp: Lamp | None = None  # a settings record inside a data record
    error: Annotated[float, Bound(low=0, infinite=True)] | None = stored_as("err", default=None)
    glow: object = transient(default=None)

    def derived_values(self) -> dict[str, object]:
        return {"state": "lit" if self.on else "dark"}

    def validate(self) -> None:
        if self.on and not self.bulbs:
            self.refuse(".bulbs is [], expected a bulb: a fitting that is on holds one")


@dataclass(frozen=True)
class Loose(DataRecord):
    KIND: ClassVar[str] = "loose"
    OPEN: ClassVar[bool] = True

    count: int = 0


def test_a_data_record_round_trips_nested_and_keyed_fields_in_declaration_order() -> None:
    fitting = Fitting(on=True, bulbs=[Bulb(60.0, 2)], labels={"room": "hall"}, levels={"low": 5.0},
                      lamp=Lamp(count=2),
                      error=float("inf"), glow=object())
    data = fitting.to_dict()
    assert list(data) == ["state", "on", "bulbs", "labels", "levels", "lamp", "err"]  # no `glow`: transient
    assert data["state"] == "lit" and data["bulbs"] == [{"watts": 60.0, "hours": 2}]
    assert data["lamp"] == Lamp(count=2).to_dict()
    assert Fitting.from_dict(json.loads(json.dumps(data))) == fitting
    assert Fitting.from_dict({**data, "state": "dark"}).state == "lit"  # derived: the record's own
    assert Bulb.from_dict({"watts": 1}).watts == 1  # an integer is a number, kept as written
    assert Loose.from_dict({"count": 2, "newer": True}) == Loose(2)


DATA_MISTAKES = [
    ({"on": "yes"}, "fitting.on is 'yes', expected a boolean"),
    ({"on": False, "bulbs": [{"watts": -1.0}]},
     "fitting.bulbs[0].watts is -1.0, expected a non-negative number"),
    ({"on": False, "bulbs": [{"watts": "60"}]}, "fitting.bulbs[0].watts is '60', expected a non-negative"),
    ({"on": False, "bulbs": [{"watts": float("nan")}]},
     "fitting.bulbs[0].watts is nan, expected a non-negative number (finite)"),
    ({"on": False, "bulbs": [{"watts": 1.0, "hours": 0}]},
     "fitting.bulbs[0].hours is 0, expected an integer >= 1 or null"),
    ({"on": False, "bulbs": [{"watts": True}]}, "fitting.bulbs[0].watts is True, expected a non-negative"),
    ({"on": False, "bulbs": {}}, "fitting.bulbs is {}, expected a list"),
    ({"on": False, "bulbs": [{}]}, "fitting.bulbs[0] lacks the field 'watts'"),
    ({"on": False, "labels": {"room": 3}}, "fitting.labels.room is 3, expected a string"),
    ({"on": False, "err": "big"}, "fitting.err is 'big', expected a non-negative number or null"),
    ({"on": False, "state": "dim"}, "fitting.state is 'dim', expected one of lit, dark"),
    ({"on": False, "lamp": []}, "fitting.lamp is [], expected an object or null"),
    ({"on": False, "lamp": {"count": 0}}, "fitting.lamp: lamp field 'count' = 0: expected at least 1"),
    ({"on": True}, "fitting.bulbs is [], expected a bulb: a fitting that is on holds one"),
    ({}, "fitting lacks the field 'on'"),
    ({"on": False, "colour": "red"},
     "fitting has the unknown field 'colour'; expected some of: state, on, bulbs, labels, levels, lamp, err"),
    ({"on": False, "levels": {"low": 1.0, "mid": {}}},
     "fitting.levels has unknown key(s) ['mid']; expected some of low, high"),
    ([], "fitting is [], expected an object"),
]


@pytest.mark.parametrize(("data", "message"), DATA_MISTAKES)
def test_a_data_record_refuses_in_one_line_naming_the_path_the_value_and_what_was_expected(
        data, message) -> None:
    with pytest.raises(SpecError) as info:
        Fitting.from_dict(data)
    assert str(info.value).startswith(message)
    with pytest.raises(InputError) as info:  # a reader names where the record sits, and its own error
        Fitting.from_dict(data, "shop 'x': fittings[2]", InputError)
    assert str(info.value).startswith(message.replace("fitting", "shop 'x': fittings[2]", 1))


@dataclass(frozen=True)
class Meter(DataRecord):
    """A derived field stored under another key (a property answers to the key's name in memory)
    and readings kept as measured, NaN included."""

    KIND: ClassVar[str] = "meter"

    bulbs: list[Bulb]
    brightest_watts: Watts | None = derived("brightest")
    readings: list[Annotated[float, Bound(low=0, nan=True)]] = field(default_factory=list)

    @property
    def brightest(self) -> Bulb | None:
        return max(self.bulbs, key=lambda bulb: bulb.watts, default=None)

    def derived_values(self) -> dict[str, object]:
        return {"brightest_watts": self.brightest.watts if self.brightest else None}


def test_a_derived_field_stored_under_another_key_and_a_bound_that_allows_nan() -> None:
    meter = Meter([Bulb(40.0), Bulb(60.0)], [1.5, float("nan")])
    data = meter.to_dict()
    assert list(data) == ["bulbs", "brightest", "readings"] and data["brightest"] == 60.0
    assert meter.brightest == Bulb(60.0)  # the property keeps its name; the field is written under it
    text = json.dumps(data)
    again = Meter.from_dict(json.loads(text))
    assert json.dumps(again.to_dict()) == text and again.brightest_watts == 60.0
    assert Meter.from_dict({"bulbs": [{"watts": 5.0}], "brightest": 99.0}).brightest_watts == 5.0
    assert Meter.from_dict({"bulbs": []}).to_dict()["brightest"] is None


@pytest.mark.parametrize(("data", "message"), [
    ({"bulbs": [], "brightest": "x"}, "meter.brightest is 'x', expected a non-negative number or null"),
    ({"bulbs": [], "brightest_watts": 1.0},
     "meter has the unknown field 'brightest_watts'; expected some of: bulbs, brightest, readings"),
    ({"bulbs": [], "readings": [-1.0]}, "meter.readings[0] is -1.0, expected a non-negative number"),
    ({"bulbs": [], "readings": [float("inf")]},
     "meter.readings[0] is inf, expected a non-negative number (finite)"),
])
def test_the_new_markers_are_held_as_strictly_as_the_others(data, message) -> None:
    with pytest.raises(SpecError) as info:
        Meter.from_dict(data)
    assert str(info.value) == message
