"""Class 7, the same option means the same thing everywhere: --batch, --threads, --device and
--timeout are defined once (shared/cli/_options.py), so a bad value is the same one-line error,
exit 2, in every command that takes it."""

from __future__ import annotations

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
    ("--threads", "0", "argument --threads: 0 is not a whole number >= 1"),
    ("--device", "tpu", "argument --device: invalid choice: 'tpu'"),
    ("--timeout", "-5", "argument --timeout: -5 is not a number > 0"),
]


def takes(command: str, option: str) -> bool:
    import compare

    sub = next(a for a in compare.build_parser()._actions if a.dest == "command")
    return any(option in a.option_strings for a in sub.choices[command]._actions)


# Every (command, bad value) pair where the command takes the option, decided from the parser.
CASES = [(c, o, v, e) for c in COMMANDS for o, v, e in BAD if takes(c, o)]


@pytest.mark.parametrize("command, option, value, expect", CASES)
def test_a_bad_shared_option_is_one_line(tmp_path: Path, command: str, option: str, value: str,
                                         expect: str) -> None:
    line = refused(tmp_path, *COMMANDS[command], option, value, expect=expect)
    assert f"compare.py {command}" in line


def test_every_command_with_a_batch_or_threads_option_uses_the_shared_definition() -> None:
    import compare
    from shared.cli import _options

    sub = next(a for a in compare.build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        for action in parser._actions:
            # sweep's --batch is a list of points (1,8,64), read by its own one-line parser
            if {"--batch", "--threads"} & set(action.option_strings) and action.dest != "batches":
                assert action.type is _options.positive_int, f"{name} {action.option_strings}"


@pytest.mark.parametrize("options, expect", [
    ({"batch": 0}, "portbench.check: batch is 0, expected a positive integer"),
    ({"batch": -3}, "batch is -3, expected a positive integer"),
    ({"batch": 2.5}, "batch is 2.5, expected a positive integer"),
    ({"batch": "4"}, "batch is '4', expected a positive integer"),
    ({"batch": True}, "batch is True, expected a positive integer"),
    ({"batchsize": 4}, "portbench.check: unknown option 'batchsize'; expected some of: framework, layout"),
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


def test_train_refuses_a_port_without_a_trainer(tmp_path: Path) -> None:
    """keras-jax shares the Keras port's module but not its trainer (a tf.function step): it was
    an internal error importing `ports.keras-jax.train`; now one line naming the ports that train."""
    refused(tmp_path, "train", "--spec", "quadrant", "--framework", "keras-jax", "--epochs", "1",
            expect="--framework 'keras-jax': expected one of torch, keras, flax, mlx (the ports that train)")
