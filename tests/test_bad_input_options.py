"""Class 7, the same option means the same thing everywhere: every option several commands take
is one row of the options table (shared/cli/_options.py), so a bad value is the same one-line
error, exit 2, in every command that takes it, and every command reads `--frameworks` through the
one parser (the table's `parse_frameworks`): an unknown name, an empty list, 'reference' where it
is not run are each the same line everywhere."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tests.adversarial import refused

COMMANDS = {
    "time": ["time", "--spec", "quadrant", "--frameworks", "torch"],
    "verify": ["verify", "--spec", "quadrant", "--frameworks", "torch"],
    "train": ["train", "--spec", "quadrant", "--framework", "torch"],
    "logits": ["logits", "--spec", "quadrant", "--framework", "reference", "--out", "y.npy"],
}
BAD = [
    ("--batch", "-1", "argument --batch: -1 is not a whole number >= 1"),
    ("--batch", "eight", "argument --batch: 'eight' is not a whole number >= 1"),
    ("--threads", "0", "argument --threads: 0 is not a whole number from 1 to 1,024"),
    ("--threads", "100000", "argument --threads: 100000 is not a whole number from 1 to 1,024"),  # SIGSEGV
    ("--device", "tpu", "argument --device: invalid choice: 'tpu'"),
    ("--timeout", "-5", "argument --timeout: -5 is not a number > 0"),
    ("--weights", "", "argument --weights: '' is empty; expected a value"),  # not read as left out
    ("--set", "", "argument --set: '' is empty; expected FIELD=VALUE"),  # a list's own words
    ("--device", "", "argument --device: invalid choice: ''"),  # a row with choices names them
    ("--warmup", "-1", "argument --warmup: -1 is not a whole number >= 0"),  # named no value
]


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's full parser (compare.build_parser() loads them all)."""
    import compare

    sub = next(a for a in compare.build_parser()._actions if a.dest == "command")
    return dict(sub.choices)


def takes(command: str, option: str) -> bool:
    return any(option in a.option_strings for a in parsers()[command]._actions)


# Every (command, bad value) pair where the command takes the option, decided from the parser.
CASES = [(c, o, v, e) for c in COMMANDS for o, v, e in BAD if takes(c, o)]


@pytest.mark.parametrize("command, option, value, expect", CASES)
def test_a_bad_shared_option_is_one_line(tmp_path: Path, command: str, option: str, value: str,
                                         expect: str) -> None:
    line = refused(tmp_path, *COMMANDS[command], option, value, expect=expect)
    assert f"compare.py {command}" in line


# The same flag with another meaning, each defined by its command (and why).
OWN_MEANING = {
    ("sweep", "--batch"): "a list of points (1,8,64), read by its own one-line parser",
    ("spec", "--json"): "prints the spec as JSON; writes no file",
    ("logits", "--framework"): "the one port (or the reference) to run, not your model's framework",
    ("train", "--framework"): "the one port to train, not your model's framework",
}


def worded(template: str) -> str:
    """A pattern for every help a row can render: its text, any words in its slots, a note."""
    return re.sub(r"\\\{[^}]*\\\}", ".*", re.escape(template)) + r"( \(.*\))?"


def test_every_shared_option_is_its_table_row_in_every_command() -> None:
    """Each option in the table is defined once: wherever a command takes its flag, the action
    has the row's destination, type, metavar, choices, kind (store, append, store_true) and
    wording (the command's own words only in the row's slots and note)."""
    from shared.cli._options import TABLE

    rows = {row.flags: row for row in TABLE}
    assert len(rows) == len(TABLE), "two rows define the same flags"
    flags = {flag for row in TABLE for flag in row.flags}
    seen = set()
    for name, parser in parsers().items():
        for action in parser._actions:
            if not set(action.option_strings) & flags or (name, action.option_strings[0]) in OWN_MEANING:
                continue
            row = rows.get(tuple(action.option_strings))
            where = f"{name} {action.option_strings}"
            assert row is not None, f"{where}: not the flags of a row"
            assert action.dest == row.dest, where
            assert action.type is (None if row.action == "store_true" else row.type), where
            assert action.metavar == row.metavar, where
            assert action.choices == row.choices, where
            assert type(action) is parser._registry_get("action", row.action), where
            assert re.fullmatch(worded(row.help), action.help or ""), (where, action.help)
            seen.add(row.flags)
    assert seen == set(rows), f"rows no command takes: {set(rows) - seen}"


def test_a_spec_override_is_read_from_one_destination_everywhere() -> None:
    """`--set` was `args.set` in seven commands and `args.overrides` in five; the main job, which
    takes no --set, still gives its readers an empty `args.set`."""
    for name, parser in parsers().items():
        dests = {a.dest for a in parser._actions if "--set" in a.option_strings}
        assert dests <= {"set"}, name
        if dests or name == "main":
            assert parser.get_default("set") == [], name


# What each command needs besides --frameworks to reach its reading of the list (and no further).
REQUIRED = {"sweep": ["--batch", "1"], "experiment": ["narrow"]}
WITH_REFERENCE = {"verify", "trace"}  # the float64 reference alone is a run of theirs
FRAMEWORK_COMMANDS = [name for name in parsers() if takes(name, "--frameworks")]


def frameworks_refused(tmp_path: Path, command: str, value: str) -> str:
    spec = ["--spec", "quadrant"] if takes(command, "--spec") else []
    return refused(tmp_path, command, *REQUIRED.get(command, []), *spec, "--frameworks", value)


@pytest.mark.parametrize("command", FRAMEWORK_COMMANDS)
def test_every_command_refuses_an_unknown_framework_with_the_same_line(tmp_path: Path, command: str) -> None:
    from ports import PORTS

    line = frameworks_refused(tmp_path, command, "torch,mxnet")
    assert line == f"error: unknown framework 'mxnet'; expected one of: {', '.join(PORTS)}"


@pytest.mark.parametrize("command", FRAMEWORK_COMMANDS)
def test_every_command_refuses_an_empty_framework_list(tmp_path: Path, command: str) -> None:
    """An empty value is a script's unset variable: it was the default set in some commands and
    no framework at all in others (time then timed nothing)."""
    line = frameworks_refused(tmp_path, command, " , ")
    assert line.startswith("error: --frameworks is empty; expected some of: ")
    assert ("reference" in line) == (command in WITH_REFERENCE)


@pytest.mark.parametrize("command", [c for c in FRAMEWORK_COMMANDS if c not in WITH_REFERENCE])
def test_a_command_that_does_not_run_the_reference_alone_refuses_it(tmp_path: Path, command: str) -> None:
    """audit, devices and tolerances took it and did nothing; time called it unknown."""
    line = frameworks_refused(tmp_path, command, "reference")
    assert line.startswith("error: framework 'reference' is not one this command runs; expected some of: ")


def test_the_one_list_reading() -> None:
    """Every comma-separated option (frameworks, modes, presets, rungs, seeds, sweep points,
    shapes) is read by `comma_list`: the same refusals, in the same words, naming the option."""
    from shared.cli._lists import comma_list, whole_number
    from shared.errors import InputError

    seeds = whole_number(0)
    assert comma_list(" 0, 2 ,1", "--seeds", "seeds", seeds) == [0, 2, 1]  # in the order given
    for text, line in [(" , ", "--seeds is empty; expected seeds"),
                       ("0,,1", "--seeds '0,,1' has an empty item; expected seeds"),  # never shorter
                       ("0,-1", "--seeds has '-1'; expected seeds"),
                       ("0,1.5", "--seeds has '1.5'; expected seeds"),
                       ("1,01", "--seeds '1,01' names '01' twice; name each once")]:  # equal once read
        with pytest.raises(InputError) as info:
            comma_list(text, "--seeds", "seeds", seeds)
        assert str(info.value) == line


def test_the_one_framework_parser() -> None:
    from ports import NATIVE, PORTS, installed
    from shared.cli._lists import parse_frameworks
    from shared.errors import FrameworkUnavailable, InputError

    here = [name for name, why in installed().items() if why is None]
    assert parse_frameworks(None, ("torch",)) == ["torch"]  # not given: the command's default
    assert parse_frameworks(" torch , flax ") == ["torch", "flax"]
    assert parse_frameworks("all") == [n for n in PORTS if n in here]
    assert parse_frameworks("all", offered=NATIVE) == [n for n in NATIVE if n in here]
    assert parse_frameworks("reference,torch", reference=True) == ["reference", "torch"]
    with pytest.raises(FrameworkUnavailable) as info:
        parse_frameworks("torch,mlx", offered=("torch", "keras", "flax"))
    assert str(info.value) == ("framework 'mlx' is not one this command runs; expected some of: "
                               "torch, keras, flax")
    with pytest.raises(InputError, match="'torch,,flax' has an empty item"):  # never a shorter list
        parse_frameworks("torch,,flax")


@pytest.mark.parametrize("options, expect", [
    ({"batch": 0}, "portbench.check: batch is 0, expected a positive integer"),
    ({"batch": -3}, "batch is -3, expected a positive integer"),
    ({"batch": 2.5}, "batch is 2.5, expected a positive integer"),
    ({"batch": "4"}, "batch is '4', expected a positive integer"),
    ({"batch": True}, "batch is True, expected a positive integer"),
    ({"batchsize": 4}, "portbench.check: unknown option 'batchsize'; expected some of: framework, layout"),
    ({"weights": 5}, "portbench.check: weights is 5, expected a file path"),  # read as a file descriptor
    ({"trace": "no"}, "portbench.check: trace is 'no', expected True or False"),  # was true
    ({"layout": "XYZ"}, "portbench.check: layout is 'XYZ', expected one of NHWC, NCHW, NHW"),  # a Result
    ({"frameworks": "torch"}, "portbench.check: frameworks is 'torch', expected a list of framework names"),
    # an empty name or a comma in one ran torch, then raised a bare KeyError
    ({"frameworks": ["torch", ""]}, "frameworks is ['torch', ''], expected a list of framework names"),
    ({"frameworks": ["torch,"]}, "frameworks is ['torch,'], expected a list of framework names"),
])
@pytest.mark.parametrize("model", ["mine.py:build", "an object"])
def test_the_python_api_refuses_bad_options_in_one_line(tmp_path, model: str, options: dict,
                                                        expect: str) -> None:
    """Before, batch 0 raised a bare ValueError from deep inside; now, as the CLI's flags, one
    InputError line before anything is built or started."""
    import portbench
    from shared.errors import InputError
    from tests.refusals import child_pids

    before = child_pids()
    with pytest.raises(InputError) as info:
        given = str(tmp_path / model) if model.endswith(".py:build") else object()
        portbench.check(given, "quadrant", **options)
    assert expect in str(info.value) and "\n" not in str(info.value)
    assert child_pids() == before


def test_every_option_that_takes_a_value_checks_it_as_it_is_parsed() -> None:
    """An option without a type took any text, the empty one too: `--weights "$UNSET"` verified
    seeded weights and passed, `--json ""` wrote nothing and said nothing. Every option that takes
    a value has a type (a number's, or `non_empty`) or choices, in every command."""
    loose = [f"{name} {a.option_strings or a.dest}" for name, parser in parsers().items()
             for a in parser._actions if a.nargs != 0 and a.type is None and a.choices is None
             and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    assert loose == []



def test_every_list_option_refuses_an_empty_item() -> None:
    """`--seeds 0,,1`, `--frameworks torch,` and `sweep --batch 1,,8` were read as shorter lists.
    Every option whose value is a comma-separated list has the one list type (`listed`), in every
    command; a list of nothing is each command's own refusal (test above)."""
    from shared.cli._options import listed

    lists = {(name, a.option_strings[0]): a.type for name, parser in parsers().items()
             for a in parser._actions
             if a.option_strings and ("comma-separated" in (a.help or "") or a.dest == "shapes")}
    assert {option for _, option in lists} >= {"--frameworks", "--modes", "--seeds", "--batch", "--image",
                                                "--presets", "--rungs", "--shapes"}
    for (name, option), parse in lists.items():
        assert getattr(parse, "__qualname__", "").startswith(listed.__name__), (name, option)
        with pytest.raises(argparse.ArgumentTypeError, match="has an empty item; expected "):
            parse("1,,2")
        assert parse("1, 2") == "1, 2" and parse(" , ") == " , "


MODEL = f"{Path(__file__).resolve().parents[1] / 'examples' / 'torch_mha_vit.py'}:build"
USER_ENTRIES = "expected one of torch, keras, flax, keras-jax, keras-torch, mlx"


@pytest.mark.parametrize("argv, expect", [
    (["verify", "--spec", "mnist-vit-small", "--model", MODEL, "--framework", "bogus"],
     f"--framework 'bogus': {USER_ENTRIES}"),  # was an internal error (KeyError)
    (["time", "--spec", "mnist-vit-small", "--model", MODEL, "--framework", "onnx"],
     f"--framework 'onnx': {USER_ENTRIES}"),  # onnx has no reader of a user's model
    (["spec", "--from-model", MODEL, "--framework", "reference"], f"--framework 'reference': {USER_ENTRIES}"),
    (["verify", "--spec", "quadrant", "--framework", "torch"],
     "--framework says how to run your own model: it needs --model"),  # was ignored
    (["trace", "--spec", "quadrant", "--input-layout", "NCHW"],
     "--input-layout says how to run your own model"),
    (["lessons", "--no-measure", "--width", "1000000000"],
     "argument --width: 1000000000 is not a width of 80 to 1000 columns"),  # was killed, out of memory
    (["diagnose", "--spec", "quadrant", "--logits", "l.npy", "--tolerance", "-1"],
     "argument --tolerance: -1 is not a number > 0"),  # was a verdict against a negative bound
    (["diagnose", "--spec", "quadrant", "--logits", "l.npy", "--tolerance", "inf"], "is not a number > 0"),
    (["verify", "--spec", "quadrant", "--frameworks", "torch,torch"],
     "--frameworks 'torch,torch' names 'torch' twice"),  # ran, and was shown, twice
    (["verify", "--spec", "quadrant", "--frameworks", "reference"],
     "--frameworks reference: the reference alone has nothing to compare with"),  # an empty table
    (["trace", "--spec", "quadrant", "--frameworks", "reference"],
     "--frameworks reference: the reference alone has nothing to compare with"),  # checked nothing, exit 0
    (["tolerances", "--presets", "quadrant", "--frameworks", "keras-jax", "--rungs", "bfloat16-pure"],
     "framework 'keras-jax' is not one this command runs; expected some of: torch, keras, flax, mlx"),
    (["time", "--factorial", "quadrant", "quadrant"], "both name one spec"),
    (["train", "--spec", "quadrant", "--rset", "max_epochs=3", "--epochs", "1"],
     "--epochs and --rset max_epochs both set the epochs"),  # --epochs silently won
    (["train", "--spec", "quadrant", "--rset", "seed=5"],
     "--rset seed: the seeds a run trains are --seeds"),  # trained seed 0, recorded the recipe's 5
    (["experiment", "narrow", "--data", "mnist:x.npz"],
     "--data is not read by the narrow experiment (only plateau reads it)"),  # trained on quadrant, exit 0
    (["experiment", "narrow", "--rset", "max_epochs=1"],
     "--rset max_epochs: an experiment sets its epochs with --epochs"),  # its own --epochs silently won
    (["verify", "--spec", "quadrant", "--weights", "w.safetensors", "--seed", "3"],
     "--seed 3 seeds the weights made when no --weights is given"),  # the file's weights ran, 'seeded'
    (["logits", "--weights", "w.safetensors", "--seed", "3", "--framework", "reference", "--out", "y.npy"],
     "--seed 3 seeds the weights made when no --weights is given"),  # wrote the file's logits, exit 0
    (["trace", "--model", MODEL, "--seed", "3"],
     "--seed 3 seeds portbench's initial weights, and your --model"),
    # each refused before --out is made: a refused experiment left an empty folder behind
    (["experiment", "plateau", "--data", "foo", "--out", "exp"], "--data 'foo': the plateau experiment"),
    (["experiment", "plateau", "--shapes", "16/x", "--out", "exp"], "--shapes has '16/x'; expected distinct"),
    (["experiment", "narrow", "--seeds", "a,b", "--out", "exp"], "--seeds has 'a'; expected distinct whole"),
    (["experiment", "plateau", "--steps", "8", "--window", "16", "--out", "exp"],
     "--window 16: expected at most --steps = 8"),  # a trailing mean that never fills: no verdict
    (["time", "--factorial", "quadrant", "mnist-vit-small", "--frameworks", "torch"],
     "--factorial needs at least two frameworks that run here; got torch"),  # said so after the run
    # an option the chosen mode does not read: each ran and exited 0, writing nothing it named
    (["lessons", "--list", "--json", "l.json"], "--json is not read with --list"),
    (["lessons", "--list", "bogus"], "NAME is not read with --list"),
    (["lessons", "--rungs", "--html", "r.html"], "--html is not read with --rungs"),
    (["lessons", "gelu", "--markdown"], "--markdown is not read without --rungs"),
    (["divergences", "--list", "--json", "d.json"], "--json is not read with --list"),
    (["tolerances", "--from", "t.json", "--presets", "vit-b16"], "--presets is not read with --from"),
    (["tolerances", "--from", "t.json", "--device", "cuda"], "--device is not read with --from"),
    (["tolerances", "--from", "t.json", "--timeout", "60"], "--timeout is not read with --from"),
    (["audit", "--source", "f.py", "--set", "depth=3"], "--set is not read with --source"),
    (["time", "--spec", "quadrant", "--no-chart", "--chart", "c.png"], "--chart is not read with --no-chart"),
    (["time", "--spec", "quadrant", "--mode", "=explicit"], "--mode '=explicit': expected NAME or"),
    (["time", "--spec", "quadrant", "--mode", "torch=fused", "--mode", "torch=explicit"],
     "--mode 'torch=fused' and --mode 'torch=explicit' both choose torch's mode: give one"),  # first won
])
def test_a_value_no_run_can_use_is_refused_before_it_starts(tmp_path: Path, argv: list[str],
                                                           expect: str) -> None:
    refused(tmp_path, *argv, expect=expect)


def test_the_python_api_refuses_a_framework_no_model_runs_in() -> None:
    """portbench.check on a FILE.py:NAME model returned a failed Result for framework='nope' (the
    model's verdict), where an argument's mistake raises."""
    import portbench
    from shared.errors import InputError

    with pytest.raises(InputError, match=f"--framework 'nope': {USER_ENTRIES}"):
        portbench.check(MODEL, "mnist-vit-small", framework="nope")


def test_the_python_api_refuses_a_spec_of_another_type() -> None:
    """check(model, 5) was an AttributeError ('int' object has no attribute 'strip')."""
    import portbench
    from shared.errors import InputError

    with pytest.raises(InputError, match=r"portbench\.check: spec is 5, expected a ModelSpec, a preset name"):
        portbench.check(object(), 5)


def test_train_refuses_a_port_without_a_trainer(tmp_path: Path) -> None:
    """keras-jax shares the Keras port's module but not its trainer (a tf.function step): it was
    an internal error importing `ports.keras-jax.train`; now one line naming the ports that train."""
    refused(tmp_path, "train", "--spec", "quadrant", "--framework", "keras-jax", "--epochs", "1",
            expect="--framework 'keras-jax': expected one of torch, keras, flax, mlx (the ports that train)")
