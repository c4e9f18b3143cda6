"""Argument helpers shared by the subcommands: `--spec` / `--set` / `--weights` (and a user's
`--model`) resolve the same way everywhere, and `--json` is checked and written the same way."""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.cli._options import (
    FORCE,
    INPUT,
    INPUT_LAYOUT,
    JSON,
    MAP,
    MODEL,
    MODEL_FRAMEWORK,
    OUTPUT,
    SEED,
    SET,
    SHOW_BINDING,
    SPEC,
    WEIGHTS,
)
from shared.core.documents import names_a_path
from shared.core.files import Outputs, check_output, write_output
from shared.core.inputs import load_images, probe_batch
from shared.core.paths import check_distinct
from shared.core.presets import resolve_spec
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors, init_weights, load_weights, read_weight_file
from shared.errors import InputError, SpecError


def add_spec_args(parser: argparse.ArgumentParser, weights: bool = True, model: bool = False) -> None:
    """--spec and --set, and with `weights` --weights and --seed; `model`: the command also takes
    a user's --model, whose spec is the default without --spec."""
    note: str | None = None  # the row's: the default preset
    if model:
        note = ("default: the weight file's spec; with --model, the spec read from your model; "
                "else archive-torch")
    elif weights:
        note = "default: the weight file's spec; else archive-torch"
    SPEC.add(parser, note=note)
    SET.add(parser)
    if weights:
        WEIGHTS.add(parser)
        SEED.add(parser)


@dataclass
class Model:
    spec: ModelSpec
    tensors: Tensors
    note: str | None = None


def resolve_model(args: argparse.Namespace) -> Model:
    """Spec and weights from --spec/--set/--weights/--seed. With --weights and no --spec, the
    file's own spec; with both, the file must fit the spec's tensors, and fields that differ
    without changing a tensor are reported in one line."""
    weights = getattr(args, "weights", None)
    seed = init_seed(args)  # refused beside --weights, before the file is read
    if weights:
        if args.spec:
            spec = resolve_spec(args.spec, args.set)
        else:
            spec = read_weight_file(weights)[0].with_overrides(args.set)
        loaded = load_weights(weights, spec)
        return Model(loaded.spec, loaded.tensors, loaded.note())
    spec = resolve_spec(args.spec, args.set)
    return Model(spec, init_weights(spec, seed))


def init_seed(args: argparse.Namespace) -> int:
    """`--seed` (0 when not given), refused where it would seed nothing and the run would look
    seeded: beside --weights, which gives the weights, and beside --model, whose own parameters run."""
    seed = getattr(args, "seed", None)
    if seed is None:
        return 0
    if getattr(args, "weights", None):
        raise InputError(f"--seed {seed} seeds the weights made when no --weights is given, and --weights "
                         "gives them here: drop --seed")
    if getattr(args, "model", None):
        raise InputError(f"--seed {seed} seeds portbench's initial weights, and your --model runs with its "
                         "own parameters (or --weights): drop --seed")
    return seed


def installed_ports() -> tuple[str, ...]:
    """Every registered port whose framework is installed here: a command's default set."""
    from ports import installed

    return tuple(name for name, reason in installed().items() if reason is None)


def print_note(note: str | None) -> None:
    if note:
        print(note, file=sys.stderr)


def save_npy(path: str | Path, array: np.ndarray, force: bool = False) -> None:
    buffer = io.BytesIO()
    np.save(buffer, array)
    write_output(path, buffer.getvalue(), force=force)


def add_json_arg(parser: argparse.ArgumentParser, what: str,
                 replaced: str = "an existing --json file") -> None:
    """--json FILE holding `what`, and --force, which replaces `replaced`."""
    JSON.add(parser, what)
    FORCE.add(parser, replaced)


READ_OPTIONS = ("weights", "input", "logits", "map")  # the options naming a file a command reads
# verify and trace without --model: the float64 reference against nothing
REFERENCE_ALONE = ("--frameworks reference: the reference alone has nothing to compare with; name a port "
                   "too (or --model: your model against it)")


def read_files(args: argparse.Namespace) -> dict[str, str | None]:
    """The files a command reads, by the option naming each: no output of the run may name one
    (`check_distinct`), --force or not."""
    def a_file(text: str | None) -> str | None:  # not a preset's, recipe's or dataset's name, nor a
        # JSON document (too long a name for is_file to ask about)
        return text if text and names_a_path(text) and Path(text).is_file() else None

    inputs = {f"--{name}": getattr(args, name, None) for name in READ_OPTIONS}
    model = getattr(args, "model", None)
    inputs["--model"] = model.rpartition(":")[0] if model and ".py:" in model else None
    for name in ("spec", "recipe"):
        inputs[f"--{name}"] = a_file(getattr(args, name, None))
    inputs["--data"] = a_file((getattr(args, "data", None) or "").removeprefix("mnist:"))
    for which, spec in zip(("SPEC_A", "SPEC_B"), getattr(args, "factorial", None) or (), strict=False):
        inputs[f"--factorial {which}"] = a_file(spec)
    return inputs


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before the work and not after it, a --json or --html file that exists (without
    --force) or cannot be written, the two naming one file, or either naming a file the run reads."""
    outputs = {f"--{name}": getattr(args, name, None) for name in ("json", "html")}
    check_distinct(outputs, read_files(args))
    for path in outputs.values():
        if path:
            check_output(path, args.force)


def write_json(path: str, payload: Any, force: bool = False) -> None:
    write_output(Path(path), (json.dumps(payload, indent=2) + "\n").encode(), force=force)


def write_json_and_page(args: argparse.Namespace, payload: Any, page: Callable[[], str]) -> None:
    """A command's --json (`payload`) and --html (`page()`, built only when asked for) published
    together: both, or neither (a page refused or failing never leaves the JSON behind)."""
    with Outputs(args.force) as outputs:
        if args.json:
            outputs.add(args.json, (json.dumps(payload, indent=2) + "\n").encode())
        if args.html:
            outputs.add(args.html, page().encode())
        outputs.publish()


def add_user_model_args(parser: argparse.ArgumentParser) -> None:
    """`--model FILE.py:NAME` and what says how to run it (verify, trace, diagnose, time)."""
    for option in (MODEL, MODEL_FRAMEWORK, INPUT_LAYOUT, OUTPUT, MAP, SHOW_BINDING):
        option.add(parser)


def check_model_options(args: argparse.Namespace) -> None:
    """The options that say how to run a user's model, refused without --model: they would be
    ignored, and the ports run instead of the model the user meant."""
    init_seed(args)  # beside --model too
    if getattr(args, "model", None):
        return
    given = [o.flags[0] for o in (MODEL_FRAMEWORK, INPUT_LAYOUT, OUTPUT, MAP, SHOW_BINDING)
             if getattr(args, o.dest, None)]
    if given:
        raise InputError(f"{given[0]} says how to run your own model: it needs --model FILE.py:NAME "
                         "(the ports are chosen with --frameworks)")


def user_spec(args: argparse.Namespace) -> ModelSpec:
    """The spec a user's model is checked against: --spec/--set, else the --weights file's."""
    from shared.core.precision import from_args

    rung = from_args(args).rung
    if rung != "float32":  # a rung is a setting of portbench's ports, not of a model it imports
        raise SpecError(f"--model runs your model in the dtype it was written in, not at {rung}: "
                        "cast it yourself (or autocast inside it) and drop --dtype/--precision")
    if not args.spec and not getattr(args, "weights", None):
        return spec_from_model(args, args.set)
    base = read_weight_file(args.weights)[0] if not args.spec else resolve_spec(args.spec, [])
    spec = base.with_overrides(args.set)
    _say_followers(base, args.set)
    return spec


def spec_from_model(args: argparse.Namespace, overrides: list[str]) -> ModelSpec:
    """`--model` without `--spec`: the spec read from the model (in a worker), `--set` applied
    on top, said in one line before anything else is printed."""
    from shared.core.terminal import printable
    from shared.your_model.run import propose_user_spec

    proposal = propose_user_spec(args.model, args.framework, getattr(args, "timeout", 300.0))
    spec = proposal.stated(overrides)
    args.unread = proposal.open_fields(overrides)  # what verify's verdict may fit (user_check.fit_unread)
    print(f"spec read from your model: {proposal.summary(spec)}; compare.py spec --from-model "
          f"{printable(args.model)} --out FILE.toml keeps it")
    for note in proposal.notes:  # what the reading overruled or could not state, as spec --from-model says
        print(f"note: {printable(note)}")
    _say_followers(proposal.spec, overrides)
    if spec.head_dim != proposal.spec.with_overrides(overrides).head_dim:  # Proposal.stated's own follower
        print(f"note: heads={spec.heads}: head_dim follows (unread; dim {spec.dim} / {spec.heads} heads = "
              f"{spec.head_dim})")
    return spec


def _say_followers(spec: ModelSpec, overrides: list[str]) -> None:
    """One note for each field that followed a `--set` (shared/core/spec_overrides.py)."""
    from shared.core.spec_overrides import follow_notes

    for note in follow_notes(spec, overrides or []):
        print(f"note: {note}")


def user_options(args: argparse.Namespace) -> dict[str, object]:
    """The keyword arguments of `shared.your_model.run.run_user` from the common flags."""
    return {"framework": args.framework, "layout": args.input_layout, "output": args.output,
            "weights": getattr(args, "weights", None), "rules": args.map}


def add_model_args(parser: argparse.ArgumentParser) -> None:
    add_spec_args(parser, model=True)
    INPUT.add(parser)
    add_user_model_args(parser)


def load_model(args: argparse.Namespace) -> tuple[ModelSpec, Tensors, np.ndarray, list[str]]:
    """(spec, canonical weights, images, notes) from the common arguments."""
    model = resolve_model(args)
    notes = [model.note] if model.note else []
    if not getattr(args, "weights", None):
        notes.append(f"weights: canonical init_weights(spec, seed={init_seed(args)})")
    images = load_images(args.input, model.spec) if args.input else probe_batch(model.spec)
    return model.spec, model.tensors, images, notes


def load_user_model(args: argparse.Namespace, taps: bool = False) -> tuple[Any, np.ndarray, list[str]]:
    """`--model`: the user's model run once in the worker on the images (its `UserRun`), the
    images and notes (what weights it ran with, and how they were bound)."""
    from shared.your_model.run import run_user

    spec = user_spec(args)
    images = load_images(args.input, spec) if args.input else probe_batch(spec)
    run = run_user(args.model, spec, images, taps=taps, **user_options(args))
    how = "--weights loaded into your model" if args.weights else "your model's own parameters"
    notes = [run.framework_note] if run.framework_note else []
    notes.append(f"weights: {how}, bound by {run.binding['rule']}")
    notes += run.report.get("notes", [])  # how it was run: a layout found by trying, a mode keyword
    notes += run.inert_lines()
    notes += [f"spec check: {c.line()}" for c in run.contradictions]
    if args.show_binding:
        notes += run.binding_lines()
    return run, images, notes
