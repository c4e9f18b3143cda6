"""`compare.py diagnose`: which catalogue setting explains the gap between your logits and the
reference (shared/teaching/gap_explanation.py)."""

from __future__ import annotations

import argparse
import re

from shared.cli._common import (
    add_json_arg,
    add_model_args,
    check_model_options,
    check_outputs,
    load_model,
    load_user_model,
    write_json,
)
from shared.cli._options import non_empty, positive_float
from shared.core.presets import resolve_spec
from shared.errors import InputError, WeightsError

ORDER = 62
HELP = "explain the gap between your port's logits and the reference"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "diagnose", help=HELP,
        description="Re-run the float64 reference under each catalogue alternative (Keras/Flax/"
                    "torch defaults and classic layout slips), alone and in pairs, and report which "
                    "one reproduces your logits. Exit 0: no gap or explained; 1: unexplained.")
    add_model_args(p)
    p.add_argument("--logits", type=non_empty,
                   help=".npy logits of your port, shape (batch, num_classes); or --model "
                   "to run your model itself")
    p.add_argument("--tolerance", type=positive_float, help="gap below which a setting explains it "
                   "(default: the project's logit tolerance, shared/core/tolerance.py)")
    p.add_argument("--no-pairs", action="store_true", help="try settings alone only")
    add_json_arg(p, "the result")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    check_model_options(args)
    check_outputs(args)
    if bool(args.logits) == bool(args.model):
        raise InputError("diagnose needs exactly one of --logits FILE.npy or --model FILE.py:NAME")
    from shared.teaching.gap_explanation import diagnose, load_user_logits

    if args.model:
        run, images, notes = load_user_model(args)
        spec, tensors, user, source = run.spec, run.tensors, run.logits, f"your model {args.model}"
    else:
        try:
            spec, tensors, images, notes = load_model(args)
        except WeightsError as exc:
            raise WeightsError(f"{exc}{_head_width_hint(str(exc), args)}") from None
        user, source = load_user_logits(args.logits), f"logits file {args.logits!r}"
    result = diagnose(spec, tensors, images, user, tolerance=args.tolerance, pairs=not args.no_pairs,
                      source=source, model_from=run.origin if args.model else None)
    for note in notes:
        print(note)
    for line in result.lines():
        print(line)
    if args.json:
        write_json(args.json, result.to_dict(), args.force)
    return 1 if result.verdict == "unexplained" else 0


def _head_width_hint(message: str, args: argparse.Namespace) -> str:
    """A q/k/v kernel whose head width is the model width is the 'same integer' trap (Keras
    key_dim=dim where torch meant dim/heads): say so in the same line."""
    match = re.search(r"attn\.(?:query|key|value)\.kernel' has shape \((\d+), (\d+), (\d+)\)", message)
    if not match or not args.spec:
        return ""
    dim, heads, width = (int(g) for g in match.groups())
    spec = resolve_spec(args.spec, args.set)
    if width == dim and spec.head_dim != dim:
        return (f" (head width {width} = dim: Keras' key_dim was given the model width where the spec "
                f"means {spec.head_dim} per head; the model has {heads} heads of {width}, not of "
                f"{spec.head_dim})")
    return ""
