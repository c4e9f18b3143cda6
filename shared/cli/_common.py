"""Argument helpers shared by the subcommands: `--spec` / `--set` / `--weights` (and a user's
`--model`) resolve the same way everywhere, and `--json` is checked and written the same way."""

from __future__ import annotations

import argparse
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.cli._options import non_negative_int
from shared.core.files import check_output, write_output
from shared.core.inputs import load_images, probe_batch
from shared.core.presets import resolve_spec
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors, init_weights, load_weights, read_weight_file
from shared.errors import SpecError


def add_spec_args(parser: argparse.ArgumentParser, weights: bool = True) -> None:
    parser.add_argument("--spec", help="preset name, spec file (.json/.toml) or JSON document "
                        "(default: the weight file's spec; with --model, the spec read from your model; "
                        "else archive-torch)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="change one spec field (repeatable)")
    if weights:
        parser.add_argument("--weights", help="canonical .safetensors file (default: seeded init)")
        parser.add_argument("--seed", type=non_negative_int, default=0,
                            help="init seed when no --weights (default 0)")


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
    if weights:
        if args.spec:
            spec = resolve_spec(args.spec, args.set)
        else:
            spec = read_weight_file(weights)[0].with_overrides(args.set)
        loaded = load_weights(weights, spec)
        return Model(loaded.spec, loaded.tensors, loaded.note())
    spec = resolve_spec(args.spec, args.set)
    return Model(spec, init_weights(spec, getattr(args, "seed", 0)))


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


def add_json_arg(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", metavar="FILE", help=f"also write {what} as JSON")
    parser.add_argument("--force", action="store_true", help="replace an existing --json file")


def check_json(args: argparse.Namespace) -> None:
    """Refuse an existing or unwritable --json file before the work, not after it."""
    if getattr(args, "json", None):
        check_output(args.json, args.force)


def write_json(path: str, payload: Any, force: bool = False) -> None:
    write_output(Path(path), (json.dumps(payload, indent=2) + "\n").encode(), force=force)


def add_user_model_args(parser: argparse.ArgumentParser) -> None:
    """`--model FILE.py:NAME` and what says how to run it (verify, trace, diagnose, time)."""
    parser.add_argument("--model", metavar="FILE.py:NAME", help="your own torch / Keras / Flax model: "
                        "NAME is a class or function called with no arguments or with the spec")
    parser.add_argument("--framework", help="your model's framework, when the object is ambiguous "
                        "(e.g. keras-torch: Keras on torch is also a torch.nn.Module)")
    parser.add_argument("--input-layout", choices=("NHWC", "NCHW", "NHW"),
                        help="what your model's forward takes (default: torch NCHW, Keras / Flax NHWC)")
    parser.add_argument("--output", metavar="INDEX|KEY", help="the element of a tuple, list or dict "
                        "forward result that holds the logits (default: the one (batch, classes) array)")
    parser.add_argument("--map", metavar="rules.toml", help="rename rules: a [map] table of "
                        "\"your-name-pattern\" = \"canonical-pattern\" (or [pattern, layout])")
    parser.add_argument("--show-binding", action="store_true",
                        help="print your parameter -> canonical tensor table")


def user_spec(args: argparse.Namespace) -> ModelSpec:
    """The spec a user's model is checked against: --spec/--set, else the --weights file's."""
    from shared.core.precision import from_args

    rung = from_args(args).rung
    if rung != "float32":  # a rung is a setting of portbench's ports, not of a model it imports
        raise SpecError(f"--model runs your model in the dtype it was written in, not at {rung}: "
                        "cast it yourself (or autocast inside it) and drop --dtype/--precision")
    if getattr(args, "weights", None) and not args.spec:
        return read_weight_file(args.weights)[0].with_overrides(args.set)
    if not args.spec:
        return spec_from_model(args, args.set)
    return resolve_spec(args.spec, args.set)


def spec_from_model(args: argparse.Namespace, overrides: list[str]) -> ModelSpec:
    """`--model` without `--spec`: the spec read from the model (in a worker), `--set` applied
    on top, said in one line before anything else is printed."""
    from shared.core.terminal import printable
    from shared.teaching.user_model import propose_user_spec

    proposal = propose_user_spec(args.model, args.framework, getattr(args, "timeout", 300.0))
    spec = proposal.spec.with_overrides(overrides)
    print(f"spec read from your model: {proposal.summary()}; compare.py spec --from-model "
          f"{printable(args.model)} --out FILE.toml keeps it")
    for note in proposal.notes:  # what the reading overruled or could not state, as spec --from-model says
        print(f"note: {printable(note)}")
    return spec


def user_options(args: argparse.Namespace) -> dict[str, object]:
    """The keyword arguments of `shared.teaching.user_model.run_user` from the common flags."""
    return {"framework": args.framework, "layout": args.input_layout, "output": args.output,
            "weights": getattr(args, "weights", None), "rules": args.map}


def add_model_args(parser: argparse.ArgumentParser) -> None:
    add_spec_args(parser)
    parser.add_argument("--input", help="NHWC float32 .npy images (default: the spec's probe batch)")
    add_user_model_args(parser)


def load_model(args: argparse.Namespace) -> tuple[ModelSpec, Tensors, np.ndarray, list[str]]:
    """(spec, canonical weights, images, notes) from the common arguments."""
    model = resolve_model(args)
    notes = [model.note] if model.note else []
    if not getattr(args, "weights", None):
        notes.append(f"weights: canonical init_weights(spec, seed={args.seed})")
    images = load_images(args.input, model.spec) if args.input else probe_batch(model.spec)
    return model.spec, model.tensors, images, notes


def load_user_model(args: argparse.Namespace, taps: bool = False) -> tuple[Any, np.ndarray, list[str]]:
    """`--model`: the user's model run once in the worker on the images (its `UserRun`), the
    images and notes (what weights it ran with, and how they were bound)."""
    from shared.teaching.user_model import run_user

    spec = user_spec(args)
    images = load_images(args.input, spec) if args.input else probe_batch(spec)
    run = run_user(args.model, spec, images, taps=taps, **user_options(args))
    how = "--weights loaded into your model" if args.weights else "your model's own parameters"
    notes = [run.framework_note] if run.framework_note else []
    notes.append(f"weights: {how}, bound by {run.binding['rule']}")
    notes += [f"spec check: {c.line()}" for c in run.contradictions]
    if args.show_binding:
        notes += run.binding_lines()
    return run, images, notes
