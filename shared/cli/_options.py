"""Options that several subcommands share, defined once so that `--batch -1` or `--threads 0`
is the same one-line error in every command (argparse reports a bad value before anything runs)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

DEVICES = ("auto", "cpu", "cuda", "metal")


def _number(kind: type, minimum: float, what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not minimum <= value < float("inf"):  # NaN fails every comparison
            raise argparse.ArgumentTypeError(f"{text} is not {what}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


positive_int = _number(int, 1, "a whole number >= 1")
non_negative_int = _number(int, 0, "a whole number >= 0")
positive_float = _number(float, 1e-9, "a number > 0")
non_negative_float = _number(float, 0.0, "a number >= 0")


def add_batch(parser: argparse.ArgumentParser, default: int, what: str = "images per batch") -> None:
    parser.add_argument("--batch", type=positive_int, default=default, help=f"{what} (default {default})")


def add_threads(parser: argparse.ArgumentParser, default: int = 1) -> None:
    parser.add_argument("--threads", type=positive_int, default=default,
                        help="CPU threads for the framework, applied before import and pinned with "
                             f"CPU affinity (default {default})")


def add_device(parser: argparse.ArgumentParser, default: str = "cpu") -> None:
    parser.add_argument("--device", default=default, choices=DEVICES,
                        help=f"auto|cpu|cuda|metal (default {default}; only auto falls back, and says "
                             "what it chose)")


def add_timeout(parser: argparse.ArgumentParser, default: float) -> None:
    parser.add_argument("--timeout", type=positive_float, default=default,
                        help=f"seconds before one framework's worker is killed (default {default:g})")


class OneLineParser(argparse.ArgumentParser):
    """argparse's own errors as one line (`error: ...`, exit 2), like every other portbench
    error, instead of a usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from shared.core.terminal import printable  # an argument is the user's text: escaped

        self.exit(2, f"error: {self.prog}: {printable(message)} (see {self.prog} --help)\n")


def add_precision(parser: argparse.ArgumentParser) -> None:
    """--dtype, --precision and --allow-tf32: one rung of the precision ladder
    (shared/core/precision.py; `precision.from_args` reads them)."""
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                        help="the dtype the ports compute in (default float32)")
    parser.add_argument("--precision", choices=("pure", "mixed"), default=None,
                        help="pure: parameters and activations in --dtype; mixed: float32 parameters, "
                             "matmuls in --dtype, LayerNorm/softmax/residual in float32 (default pure)")
    parser.add_argument("--allow-tf32", action="store_true",
                        help="let float32 matmuls use TF32 tensor cores (CUDA only; off by default)")
