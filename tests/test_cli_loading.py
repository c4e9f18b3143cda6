"""The CLI loads only the command it runs (shared/cli/__init__.py): `compare.py --help` reads
each command's line from its module's source without importing it, and a refused argument of any
command imports no framework and no tool module. Checked in fresh processes, where `sys.modules`
is the whole truth: all of them started at once in the background (tests/background.py), since
each is only a Python start-up to wait for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import compare
from shared.cli import command_index
from tests import background

ROOT = Path(compare.__file__).resolve().parent
FRAMEWORKS = ("torch", "tensorflow", "keras", "jax", "flax", "mlx", "onnxruntime")
OURS = ("shared", "ports", "experiments")
TOOLS = ("shared.training", "shared.teaching", "shared.measure", "shared.checkpoints", "shared.report")
PROBE = f"""
import contextlib, io, json, sys
import compare
with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
    try:
        code = compare.main(sys.argv[1:])
    except SystemExit as exc:  # argparse's own exit, after --help or a refused argument
        code = exc.code
modules = sorted(m for m in sys.modules if m.split(".")[0] in {OURS} or m == "compare")
print(json.dumps({{"code": code, "out": out.getvalue(), "error": err.getvalue(), "modules": modules,
                  "frameworks": sorted(m for m in sys.modules if m.split(".")[0] in {FRAMEWORKS})}}))
"""


def probe(start: background.Start, *argvs: list[str]) -> list[dict]:
    """Run compare.main on each argv in a fresh process of its own (all at once) and report what
    each imported."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    runs = [start(subprocess.Popen([sys.executable, "-c", PROBE, *argv], cwd=ROOT, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)) for argv in argvs]
    out = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr
        out.append(json.loads(stdout))
    return out


def refused_names() -> list[str]:
    return [c.name for c in command_index()] + ["experiment"]


def taking_frameworks() -> list[str]:
    """The commands that take --frameworks, read from their parsers."""
    taking = []
    for command in command_index():
        parser = compare.build_parser({command.name})
        sub = next(a for a in parser._actions if a.dest == "command")
        if any("--frameworks" in a.option_strings for a in sub.choices[command.name]._actions):
            taking.append(command.name)
    return taking


@background.task("cli-probes", "test_cli_loading.py::")
def cli_probes(start: background.Start) -> dict[str, list[dict]]:
    """Every probe of this module's tests, by test: --help, --version, a refused argument of each
    command, an unknown framework in each command that takes --frameworks."""
    needs = {"sweep": ["--batch", "1"]}  # a command's required options, given
    unknown = [[name, *needs.get(name, []), "--frameworks", "nope"] for name in taking_frameworks()]
    groups = {"help": [["--help"]], "version": [["--version"]],
              "refused": [[name, "--no-such-option"] for name in refused_names()], "unknown": unknown,
              "no-rungs": [["lessons", "cross_entropy", "--rungs"]]}
    seen = iter(probe(start, *(argv for argvs in groups.values() for argv in argvs)))
    return {group: [next(seen) for _ in argvs] for group, argvs in groups.items()}


def test_help_imports_a_handful_of_modules_and_no_framework() -> None:
    (seen,) = background.result("cli-probes")["help"]
    assert seen["code"] == 0 and seen["frameworks"] == []
    assert len(seen["modules"]) <= 15, seen["modules"]
    assert not [m for m in seen["modules"] if m.startswith(("shared.cli.", "experiments.")) and
                not m.startswith("shared.cli._")], seen["modules"]  # no command module was loaded


def test_a_refused_argument_of_any_command_imports_no_framework_and_no_tool() -> None:
    for name, seen in zip(refused_names(), background.result("cli-probes")["refused"], strict=True):
        assert seen["code"] == 2, (name, seen["error"])
        assert seen["error"].startswith("error: compare.py") and seen["error"].count("\n") == 1, seen["error"]
        assert seen["frameworks"] == [], (name, seen["frameworks"])
        if name != "experiment":  # the research beside the product keeps its own imports
            # convert's options list the formats: the checkpoint registry, which reads the
            # plug-ins' source text and imports nothing else (shared/checkpoints/__init__.py)
            tools = [m for m in seen["modules"] if m.startswith(TOOLS) and m != "shared.checkpoints"]
            assert tools == [], (name, seen["modules"])


def test_the_line_read_from_the_source_is_the_line_the_module_registers() -> None:
    """`HELP` is read by `ast` for --help and passed by the module to `add_parser`: one fact."""
    sub = next(a for a in compare.build_parser()._actions if a.dest == "command")
    registered = {action.dest: action.help for action in sub._choices_actions}
    listed = {c.name: c.help for c in command_index()}
    assert listed == {name: registered[name] for name in listed}
    assert set(registered) == {*listed, "experiment"}


def test_version_names_portbench_and_every_framework_without_importing_one() -> None:
    """`--version` (also the installed `portbench` command's, pyproject's [project.scripts]) reads
    package metadata: portbench's version first, then each framework, none imported."""
    import tomllib
    from importlib import metadata

    from ports import PORTS

    (seen,) = background.result("cli-probes")["version"]
    assert seen["code"] == 0 and seen["frameworks"] == []
    lines = seen["out"].splitlines()
    assert lines[0].startswith(f"portbench {metadata.version('portbench')} (Python ")
    listed = {line.split()[0]: line.split(maxsplit=1)[1] for line in lines[1:]}
    assert {m for entry in PORTS.values() for m in entry.requires} <= set(listed)
    assert listed["numpy"] == metadata.version("numpy")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["portbench"].partition(":")
    assert module == "compare" and callable(getattr(compare, function))


def test_an_unknown_framework_is_refused_before_any_tool_or_framework_is_imported() -> None:
    """Every command that takes `--frameworks` reads the list (`parse_frameworks`) before it
    imports a tool module: the refusal costs no tool's import and no framework's."""
    taking = taking_frameworks()
    assert {"main", "time", "verify", "peers", "sweep"} <= set(taking)
    for name, seen in zip(taking, background.result("cli-probes")["unknown"], strict=True):
        assert seen["code"] == 2 and "unknown framework 'nope'" in seen["error"], (name, seen["error"])
        assert seen["frameworks"] == [], (name, seen["frameworks"])
        assert [m for m in seen["modules"] if m.startswith(TOOLS)] == [], (name, seen["modules"])


def test_a_lesson_with_no_rungs_is_refused_before_any_is_measured() -> None:
    """`lessons NAME --rungs` checks NAME against the forward divergences first: it once measured
    every entry's variants and ran every demonstration (torch and MLX imported), then refused."""
    (seen,) = background.result("cli-probes")["no-rungs"]
    assert seen["code"] == 2 and seen["error"].count("\n") == 1, seen["error"]
    assert "'cross_entropy' is not a forward divergence; expected one of: head_width," in seen["error"]
    assert seen["frameworks"] == [], seen["frameworks"]
