"""`compare.py init --spec NAME --seed N --out FILE.safetensors`: seeded canonical weights."""

from __future__ import annotations

import argparse

from shared.cli._common import add_spec_args, init_seed
from shared.cli._options import FORCE, SEED, non_empty
from shared.core.budget import check_weights_file
from shared.core.files import check_output
from shared.core.paths import check_suffix
from shared.core.presets import resolve_spec
from shared.core.weights import init_weights, save_weights

ORDER = 20
HELP = "write seeded canonical weights for a spec"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("init", help=HELP)
    add_spec_args(parser, weights=False)
    SEED.add(parser, "")
    parser.add_argument("--out", type=non_empty, required=True, help="output .safetensors path")
    FORCE.add(parser, "an existing --out file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    spec = resolve_spec(args.spec, args.set)
    check_output(args.out, args.force)  # before the work; the write checks again, atomically
    check_suffix("--out", args.out, (".safetensors",), "the canonical weights")
    check_weights_file(spec)  # before a tensor is made
    seed = init_seed(args)
    save_weights(args.out, spec, init_weights(spec, seed), extra_metadata={"seed": str(seed)},
                 force=args.force)
    print(f"wrote {args.out}: spec {spec.name!r} ({spec.spec_hash}), {spec.derived.params:,} parameters, "
          f"seed {seed}")
    return 0
