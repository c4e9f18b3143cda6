#!/usr/bin/env python3
"""portbench: port one ViT-style classifier to torch, Keras, Flax and MLX (and run it on Keras'
JAX and PyTorch backends and as the torch port exported to ONNX), prove the ports compute the
same function, then time them fairly. `python compare.py --help` lists the subcommands; the bare
`python compare.py` verifies and then times the default spec."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Collection, Iterator
from pathlib import Path

from shared.errors import PortbenchError, first_line

EXPERIMENTS = Path(__file__).resolve().parent / "experiments"
PROG = "compare.py"  # how usage and argument errors name the program (`portbench` when installed)


def build_parser(load: Collection[str | None] | None = None) -> argparse.ArgumentParser:
    """The parser: every command is listed with its one line; the commands in `load` (all, when
    None) are loaded and given their full parsers. `run` loads only the command its argv names,
    so `--help` and a refused argument import nothing of the other commands."""
    # Imported inside main's handlers: Ctrl-C while loading is one line.
    from shared.cli import command_at, command_index
    from shared.cli._options import OneLineParser

    parser = OneLineParser(prog=PROG, description=__doc__)
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    experiment = command_at("experiment", "experiments.cli", EXPERIMENTS / "cli.py")  # research: listed last
    for command in (*command_index(), experiment):
        if load is None or command.name in load:
            command.load().register(sub)
        else:
            sub.add_parser(command.name, help=command.help)
    return parser


class VersionAction(argparse.Action):
    """`--version`: portbench's version, then each framework's and reference library's installed
    version (or "not installed"), read from package metadata when asked, never by importing."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print portbench's version and each installed "
                         "framework's, then exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from importlib import metadata

        from ports import library_versions

        print(f"portbench {metadata.version('portbench')} (Python {sys.version.split()[0]})")
        for module, version in library_versions().items():
            print(f"  {module:<13} {version or 'not installed'}")
        parser.exit()


def _command_named(argv: list[str]) -> str | None:
    """The command `argv` names: its first word, or the main job for a bare `compare.py`."""
    if not argv:
        return "main"
    return None if argv[0].startswith("-") else argv[0]


def run(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser({_command_named(argv)})
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["main"])  # the default job: verify, then time
    from shared.cli._quiet import native_stderr_captured

    with native_stderr_captured():  # TensorFlow's C++ start-up lines, unless the command fails
        return int(args.run(args) or 0)


def print_error(message: object) -> None:
    """The one place an `error:` line is printed: control characters in it (a spec name, a
    model's own message, a file's contents) are escaped, so it is one line and changes nothing
    on the terminal (shared/core/terminal.py)."""
    from shared.core.terminal import printable

    print(f"error: {printable(message)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    with terminate_unwinds():
        return _main(argv)


@contextlib.contextmanager
def terminate_unwinds() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C: every temporary is removed and every worker killed on the way
    out (the `finally` clauses of shared/core/files.py and shared/runtime/launch.py)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _main(argv: list[str] | None) -> int:
    try:
        return run(argv)
    except PortbenchError as exc:
        print_error(exc)
        return 2
    except KeyboardInterrupt:
        print_error("interrupted")
        return 130
    except BrokenPipeError:  # `compare.py spec ... | head`: the reader left; not an error
        sys.stderr.close()
        return 0
    except MemoryError:  # an estimate (shared/core/budget.py) let through more than the machine has
        print("error: out of memory: this machine cannot hold what the command needs; use a smaller "
              "spec or batch", file=sys.stderr)
        return 2
    except OSError as exc:  # an unwritable folder, a full disk: name the file, no traceback
        where = f" {exc.filename!r}" if exc.filename else ""
        print_error(f"cannot use{where}: {exc.strerror or exc}")
        return 2
    except Exception as exc:  # a portbench bug: one line that says so; the traceback on request
        if os.environ.get("PORTBENCH_DEBUG"):
            raise
        print_error(f"internal error {first_line(exc, typed=True)} "
                    "(a portbench bug; PORTBENCH_DEBUG=1 shows the traceback)")
        return 3


def entry_point() -> int:
    """The installed `portbench` command (pyproject's [project.scripts]): `python compare.py`."""
    global PROG
    PROG = "portbench"
    return main()


if __name__ == "__main__":
    sys.exit(main())
