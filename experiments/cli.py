"""`compare.py experiment NAME`: the archive's experiments, each printing the numbers it measured
(what each asks and what it found: experiments/README.md).

- `pos-embed`, `dead-rows`: experiments/positions.py;
- `sqrt-dk`, `attention-map`: experiments/attention.py;
- `narrow`, `plateau`: experiments/quadrant.py (the plateau's machinery: experiments/plateau/).

compare.py registers this subcommand beside shared/cli's; the product never imports this package.
"""

from __future__ import annotations

import argparse

from shared.cli._options import (
    EPOCHS,
    FORCE,
    FRAMEWORKS,
    RECIPE,
    RSET,
    SEEDS,
    listed,
    non_empty,
    refuse_unread,
)
from shared.errors import InputError

HELP = "the archive's experiments, by NAME (experiment --help lists them)"
NAMES = ("pos-embed", "narrow", "sqrt-dk", "attention-map", "dead-rows", "plateau")
FRAMEWORKS_RUN = ("torch", "keras", "flax", "mlx")
PLATEAU = {"shapes": "16/2,24/3,32/4", "steps": 600, "data": "quadrant", "band": 0.05, "window": 16}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help=HELP)
    p.add_argument("name", choices=NAMES)
    p.add_argument("--out", type=non_empty, default="runs/exp", help="folder for JSON, PNG and checkpoints")
    EPOCHS.add(p, "per experiment")
    SEEDS.add(p, "0,1,2; plateau 0,1,2,3,4")
    FRAMEWORKS.add(p, note=f"default: {','.join(FRAMEWORKS_RUN)}; plateau --sweep: torch")
    p.add_argument("--reuse", action="store_true", help="reuse result JSONs already in --out")
    FORCE.add(p, "the files in --out that this experiment writes, and start its training runs' "
                 "checkpoints over")
    RECIPE.add(p)
    RSET.add(p)
    g = p.add_argument_group("plateau")  # none given means its default (PLATEAU): refused for another
    g.add_argument("--shapes", type=listed("WIDTH/HEADS pairs such as 16/2,24/3"),
                   help="WIDTH/HEADS list (head width = W/H; default 16/2,24/3,32/4)")
    g.add_argument("--steps", type=int, help="updates per run (default 600)")
    g.add_argument("--data", type=non_empty, help="quadrant[:noise=N,contrast=C] (default quadrant: 0.1, 1)")
    g.add_argument("--band", type=float, help="half-width of the band around ln(2)/2 (default 0.05)")
    g.add_argument("--window", type=int, help="updates in the loss's trailing mean (default 16)")
    g.add_argument("--sweep", action="store_true", help="vary one setting at a time (torch)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from experiments import attention, positions, quadrant
    from shared.cli._lists import parse_frameworks
    from shared.cli.train import parse_seeds
    from shared.core.budget import check_options
    from shared.core.paths import make_folders, output_path

    if args.name != "plateau":  # it would be ignored, and the run look like its answer
        refuse_unread(args, (*PLATEAU, "sweep"), f"by the {args.name} experiment (only plateau reads it)")
    for name, default in PLATEAU.items():
        setattr(args, name, default if getattr(args, name) is None else getattr(args, name))
    for name, value in (("--steps", args.steps), ("--window", args.window)):  # before --out is made
        if value < 1:
            raise InputError(f"{name} {value}: expected an integer >= 1")
    if not 0 < args.band < 1:
        raise InputError(f"--band {args.band}: expected a number in (0, 1)")
    check_options({"--steps": args.steps, "--window": args.window, "--epochs": args.epochs})
    if args.window > args.steps:  # the trailing mean would never span a whole window, as its report says
        raise InputError(f"--window {args.window}: expected at most --steps = {args.steps} (the loss's "
                         "trailing mean is over that many updates)")
    if any(item.partition("=")[0].strip() == "max_epochs" for item in args.rset):  # each passes --epochs
        raise InputError("--rset max_epochs: an experiment sets its epochs with --epochs (default: each "
                         "experiment's own)")
    plateau_sweep = args.name == "plateau" and args.sweep
    default = ("torch",) if plateau_sweep else FRAMEWORKS_RUN
    frameworks = parse_frameworks(args.frameworks, default, offered=FRAMEWORKS_RUN)  # before --out is made
    args.seeds = args.seeds or ("0,1,2,3,4" if args.name == "plateau" else "0,1,2")
    parse_seeds(args.seeds)  # and every other option: a refused run leaves no --out behind
    if args.name == "plateau":
        from experiments.plateau.experiment import parse_shapes

        quadrant.check_plateau_data(args.data)
        parse_shapes(args.shapes)
    make_folders(out := output_path(args.out, folder=True))
    return {"pos-embed": positions.pos_embed, "narrow": quadrant.narrow, "sqrt-dk": attention.sqrt_dk,
            "attention-map": attention.attention_map, "dead-rows": positions.dead_rows,
            "plateau": quadrant.plateau_dwell}[args.name](args, out, frameworks)
