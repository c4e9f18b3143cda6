"""`compare.py logits [--spec S] [--weights W] --framework F [--input X.npy] --out Y.npy`:
logits of one port (or the float64 reference) on canonical NHWC float32 inputs, so any port,
including a user's own, can be compared on the same inputs."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ports import PORTS, create_port
from shared.cli._common import add_spec_args, print_note, resolve_model, save_npy
from shared.cli._options import DEVICE, FORCE, INPUT, add_precision, non_empty
from shared.core import reference
from shared.core.equivalence import first_nonfinite, nonfinite_message
from shared.core.files import check_output
from shared.core.inputs import load_images, probe_batch
from shared.core.paths import check_distinct, check_suffix
from shared.core.precision import from_args
from shared.errors import FrameworkUnavailable, InputError

ORDER = 30
HELP = "logits of one port (or the reference) on canonical inputs"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("logits", help=HELP)
    add_spec_args(parser)
    parser.add_argument("--framework", type=non_empty, required=True,
                        help=f"one of: reference, {', '.join(PORTS)}")
    INPUT.add(parser)
    DEVICE.add(parser)
    add_precision(parser)
    parser.add_argument("--out", type=non_empty, required=True, help="output .npy path")
    FORCE.add(parser, "an existing --out file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.framework != "reference" and args.framework not in PORTS:
        raise FrameworkUnavailable(
            f"unknown framework {args.framework!r}; expected one of: reference, {', '.join(PORTS)}"
        )
    precision = from_args(args)
    if args.framework == "reference" and precision.rung != "float32":
        raise FrameworkUnavailable(f"the reference computes in float64 only, not at {precision.rung}; "
                                   "drop --dtype/--precision/--allow-tf32 for it")
    check_distinct({"--out": args.out}, {"--weights": args.weights, "--input": args.input})
    check_output(args.out, args.force)
    check_suffix("--out", args.out, (".npy",), "the logits")
    model = resolve_model(args)
    print_note(model.note)
    images = load_images(args.input, model.spec) if args.input else probe_batch(model.spec)
    source = f"input {args.input!r}" if args.input else "the probe batch"
    if args.framework == "reference":
        if args.device not in ("cpu", "auto"):
            raise FrameworkUnavailable(f"the float64 reference runs on the CPU only, not on "
                                       f"{args.device!r}; pass --device cpu")
        logits = reference.forward(model.spec, model.tensors, images)
    else:
        from shared.runtime.jobs import low_precision_logits

        port = create_port(args.framework, model.spec, device=args.device, precision=precision)
        if args.device == "auto":
            print(f"device auto: {args.framework} runs on {port.device_class}", file=sys.stderr)
        port.load(model.tensors)
        logits = low_precision_logits(port, images)
    if not np.all(np.isfinite(logits)):  # never write a silently wrong result
        taps: dict = {}
        if args.framework == "reference":
            reference.forward(model.spec, model.tensors, images, taps)
        else:
            taps = port.intermediates(images)
        raise InputError(nonfinite_message(f"{args.framework} logits for {source}", first_nonfinite(taps)))
    save_npy(args.out, np.asarray(logits), force=args.force)
    print(f"wrote {args.out}: {args.framework} logits {tuple(np.shape(logits))} for spec "
          f"{model.spec.name!r} ({model.spec.spec_hash}) at {precision.rung} (stored as float32)")
    return 0
