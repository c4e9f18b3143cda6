"""The options table: every option that several subcommands take, defined once (flags, type,
metavar, one destination, its help), so that `--batch -1` or `--threads 0` is the same one-line
error in every command (argparse reports a bad value before anything runs), `--set` is read from
`args.set` everywhere, and a new command declares the options it takes (`SPEC.add(parser)`)
instead of writing them again.

Where commands differ, a row says so in its help: `{default}` is the command's default value,
`{slot}` the command's own words (what `--force` replaces, what `--json` holds), and a command's
`note` is appended in parentheses (its default set, its reading of the option). Nothing here
imports a tool or a framework: `compare.py --help` imports this module to build its parser."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.errors import PortbenchError

DEVICES = ("auto", "cpu", "cuda", "metal")


def _number(kind: type, minimum: float, what: str, maximum: float = float("inf")) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not minimum <= value < float("inf") or value > maximum:  # NaN fails every comparison
            raise argparse.ArgumentTypeError(f"{text} is not {what}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


def given(expected: str) -> Callable[[str], str]:
    """A name, path, list or document as given; an empty one is refused naming what `expected`
    says, never read as the option left out (`--weights "$UNSET"` would otherwise verify seeded
    weights and pass)."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{text!r} is empty; expected {expected}")
        return text

    parse.__name__ = "value"  # argparse names the type in its messages
    return parse


non_empty = given("a value")


def listed(expected: str) -> Callable[[str], str]:
    """A comma-separated list as given, with no empty item among the others: `0,,1` or a trailing
    comma is refused naming what `expected` says, never read as a shorter list. Every list option
    has this type; a list of nothing (`" , "`) is left to the command, which names its choices."""
    whole = given(expected)

    def parse(text: str) -> str:
        items = [item.strip() for item in whole(text).split(",")]
        if any(items) and not all(items):
            raise argparse.ArgumentTypeError(f"{text!r} has an empty item; expected {expected}")
        return text

    parse.__name__ = "value"  # argparse names the type in its messages
    return parse


def refuse_unread(args: argparse.Namespace, names: tuple[str, ...], where: str) -> None:
    """Refuse, in one line, an option given `where` the command does not read it (`names`: argparse
    destinations; `name`, a positional, is shown as NAME): a run that ignored it would look like
    its answer."""
    for name in names:
        if getattr(args, name, None) not in (None, False, [], ()):
            shown = "NAME" if name == "name" else "--" + name.replace("_", "-")
            raise PortbenchError(f"{shown} is not read {where}: drop it")


positive_int = _number(int, 1, "a whole number >= 1")
non_negative_int = _number(int, 0, "a whole number >= 0")
positive_float = _number(float, 1e-9, "a number > 0")
non_negative_float = _number(float, 0.0, "a number >= 0")
columns = _number(int, 80, "a width of 80 to 1000 columns", maximum=1000)  # what a page of text can hold
# More threads than any machine has CPUs: oversubscription is allowed (and noted in the row), but
# --threads 100000 made torch's thread pool crash the worker with SIGSEGV.
thread_count = _number(int, 1, "a whole number from 1 to 1,024", maximum=1024)


SAME: Any = object()  # `Option.add`'s default: the row's own (a command passes one only where it differs)


@dataclass(frozen=True)
class Option:
    """One row of the table: an option as every command that takes it has it. Its destination
    is its flag's name (`--allow-tf32` -> `args.allow_tf32`), the same in every command."""

    flags: tuple[str, ...]
    help: str
    slot: str = ""  # the help's `{slot}` where the command says nothing of its own
    note: str = ""  # the note where the command gives none (a command's `note=""` drops it)
    # every value is a number or a non-empty text; a row with choices has none (argparse's "invalid
    # choice ... (choose from ...)" names them), and a list's or a pair's says what its parser reads
    type: Callable[[str], Any] | None = non_empty
    metavar: str | None = None
    action: str = "store"  # or "append", "store_true"
    default: Any = None
    choices: tuple[str, ...] | None = None

    @property
    def dest(self) -> str:
        return self.flags[0].removeprefix("--").replace("-", "_")

    def add(self, parser: argparse._ActionsContainer, slot: str | None = None, *, note: str | None = None,
            default: Any = SAME, shown: Any = SAME) -> argparse.Action:
        """Declare this option on a command's parser (or one of its groups), with the command's
        own default, `{slot}` words and note where it differs. `shown`: the default the help
        names, where the parser's is None so that the command can tell the option was given
        (`refuse_unread`) and applies `shown` itself."""
        value = self.default if default is SAME else default
        named = value if shown is SAME else shown
        text = self.help.format(slot=self.slot if slot is None else slot, default=named)
        note = self.note if note is None else note
        if note:
            text = f"{text} ({note})"
        settings: dict[str, Any] = {"dest": self.dest, "action": self.action, "help": text}
        if self.action == "store_true":
            return parser.add_argument(*self.flags, **settings)
        settings.update(type=self.type, metavar=self.metavar, default=value)
        if self.action == "append":
            settings["default"] = list(value or ())  # argparse appends to a copy of it
        else:
            settings["choices"] = self.choices
        return parser.add_argument(*self.flags, **settings)


# ---- the spec, its weights and its inputs ------------------------------------------------------------
SPEC = Option(("--spec",), "preset name, spec file (.json/.toml) or JSON document",
              type=given("a preset name, a spec file or a JSON document"),
              note="default: archive-torch")  # shared/core/presets.py DEFAULT_PRESET
SET = Option(("--set",), "change one spec field, repeatable", action="append", metavar="FIELD=VALUE",
             type=given("FIELD=VALUE"))
WEIGHTS = Option(("--weights",), "canonical .safetensors file (default: seeded init)")
# None when not given (`_common.init_seed` reads it as 0), so a --seed that seeds nothing is refused
SEED = Option(("--seed",), "init seed{slot} (default 0)", slot=" when no --weights", type=non_negative_int)
INPUT = Option(("--input",), "NHWC float32 .npy images (default: the spec's seeded probe batch)")

# ---- which frameworks, where, how ---------------------------------------------------------------------
FRAMEWORKS = Option(("--frameworks",), "comma-separated registry names, or 'all' for every installed one",
                    type=listed("comma-separated framework names, or 'all'"))
# the note of the commands that run the reference beside the ports, and a user's --model
WITH_REFERENCE = ("default: every installed one; with --model, none: your model against the float64 "
                  "reference alone, as 'reference' says")
BATCH = Option(("--batch",), "{slot} (default {default})", slot="images per batch", type=positive_int)
THREADS = Option(("--threads",), "CPU threads for the framework, applied before import and pinned with CPU "
                 "affinity (default {default})", type=thread_count, default=1)
DEVICE = Option(("--device",), "auto|cpu|cuda|metal (default {default}; only auto falls back, and says what "
                "it chose)", default="cpu", choices=DEVICES, type=None)
TIMEOUT = Option(("--timeout",), "seconds before one framework's worker is killed (default {default:g})",
                 type=positive_float)
DTYPE = Option(("--dtype",), "the dtype the ports compute in (default {default})", default="float32",
               choices=("float32", "bfloat16", "float16"), type=None)
PRECISION = Option(("--precision",), "pure: parameters and activations in --dtype; mixed: float32 "
                   "parameters, matmuls in --dtype, LayerNorm/softmax/residual in float32 (default pure)",
                   choices=("pure", "mixed"), type=None)
ALLOW_TF32 = Option(("--allow-tf32",), "let float32 matmuls use TF32 tensor cores (CUDA only; off by "
                    "default)", action="store_true")

# ---- timing ---------------------------------------------------------------------------------------------
MODES = Option(("--modes",), "which of {default} to time (comma-separated; default all)",
               type=listed("comma-separated mode names"))
BUDGET = Option(("--budget",), "seconds of repeats per phase after warm-up (default {default})",
                type=non_negative_float)
PROCESSES = Option(("--processes",), "rounds, interleaved (a b c, a b c): {slot} (default {default})",
                   type=positive_int)
COMPILE_CACHE = Option(("--compile-cache",), "cold: a fresh torch.compile cache per worker; warm: reuse one "
                       "(default {default})", choices=("cold", "warm"), type=None)
RANK_BY = Option(("--rank-by",), "phase to rank by (default '{default}': each port's best forward mode)",
                 default="forward")
ALLOW_MIXED = Option(("--allow-mixed",), "rank even when frameworks ran on different device classes",
                     action="store_true")

# ---- what a command writes ------------------------------------------------------------------------------
JSON = Option(("--json",), "write {slot} as JSON to FILE", slot="the results", metavar="FILE")
CSV = Option(("--csv",), "write the CSV table to FILE", metavar="FILE")
CHART = Option(("--chart",), "write the PNG chart to FILE", metavar="FILE")
NO_CHART = Option(("--no-chart",), "do not draw the PNG chart", action="store_true")
HTML = Option(("--html",), "also write {slot} as one self-contained HTML page to FILE", slot="the run",
              metavar="FILE")
FORCE = Option(("--force",), "replace {slot}", slot="existing output files", action="store_true")

# ---- your own model (verify, trace, diagnose, time; spec --from-model) -----------------------------------
MODEL = Option(("--model",), "your own torch / Keras / Flax model: NAME is a class or function called with "
               "no arguments or with the spec", metavar="FILE.py:NAME",
               type=given("FILE.py:NAME or package.module:NAME"))
MODEL_FRAMEWORK = Option(("--framework",), "your model's framework, when the object is ambiguous: "
                         "keras-torch, say, since Keras on torch is also a torch.nn.Module")
INPUT_LAYOUT = Option(("--input-layout",), "what your model's forward takes (default: torch NCHW, Keras / "
                      "Flax NHWC)", choices=("NHWC", "NCHW", "NHW"), type=None)
OUTPUT = Option(("--output",), "the element of a tuple, list or dict forward result that holds the logits "
                "(default: the one (batch, classes) array, else a tower's one array of final tokens)",
                metavar="INDEX|KEY")
MAP = Option(("--map",), "rename rules: a [map] table of \"your-name-pattern\" = \"canonical-pattern\" (or "
             "[pattern, layout])", metavar="rules.toml")
SHOW_BINDING = Option(("--show-binding",), "print your parameter -> canonical tensor table",
                      action="store_true")

# ---- training (train, experiment) ----------------------------------------------------------------------
RECIPE = Option(("--recipe",), "recipe name (archive, mnist, quick), or a file or JSON whose missing fields "
                "are the archive recipe's (default: the preset's recipe; --rset changes one field of it)")
RSET = Option(("--rset",), "change one recipe field, repeatable", action="append", metavar="FIELD=VALUE",
              type=given("FIELD=VALUE"))
SEEDS = Option(("--seeds",), "comma-separated seeds (default {slot})",
               type=listed("comma-separated integers such as 0,1,2"))
EPOCHS = Option(("--epochs",), "epochs per run (a shortcut for --rset max_epochs=N; default: {slot})",
                slot="the recipe's", type=positive_int)

# Every row above: tests/test_bad_input_options.py holds each command's options to them.
TABLE = tuple(value for value in dict(globals()).values() if isinstance(value, Option))


def add_precision(parser: argparse.ArgumentParser) -> None:
    """--dtype, --precision and --allow-tf32: one rung of the precision ladder
    (shared/core/precision.py; `precision.from_args` reads them)."""
    DTYPE.add(parser)
    PRECISION.add(parser)
    ALLOW_TF32.add(parser)


class OneLineParser(argparse.ArgumentParser):
    """argparse's own errors as one line (`error: ...`, exit 2), like every other portbench
    error, instead of a usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from shared.core.terminal import printable  # an argument is the user's text: escaped

        self.exit(2, f"error: {self.prog}: {printable(message)} (see {self.prog} --help)\n")
