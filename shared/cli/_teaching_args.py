"""Arguments and loading shared by the teaching commands (divergences, diagnose, trace, audit,
lessons, rosetta), on top of shared/cli/_common.py. A leading underscore keeps this module out
of the subcommand discovery."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from shared.cli._common import add_spec_args, add_user_model_args, resolve_model, user_options, user_spec
from shared.core.inputs import load_images, probe_batch
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors


def add_model_args(parser: argparse.ArgumentParser, user: bool = False) -> None:
    add_spec_args(parser, weights=True)
    parser.add_argument("--input", help="NHWC float32 .npy images (default: the spec's probe batch)")
    if user:
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
