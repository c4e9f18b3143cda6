"""The quadrant task: does the narrow model stall near ln(2)/2 = 0.3466 (`narrow`: quadrant vs
quadrant-narrow, per-seed final loss and accuracy), and how long does the loss dwell there per
width / heads and seed, in every port on the same batches (`plateau`; `--sweep`: one setting at a
time, torch only). The plateau's machinery is experiments/plateau/."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from experiments.training_runs import check_runs, recipe_args, train_json
from shared.errors import InputError


# ---- quadrant vs quadrant-narrow ----------------------------------------------------------------
def narrow(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    epochs = str(args.epochs or 10)
    fw = frameworks[0]
    tags = {spec: f"narrow-{spec}" + ("-" + args.recipe if args.recipe else "")
            for spec in ("quadrant", "quadrant-narrow")}
    check_runs(out, list(tags.values()), args)  # both runs' files, before the first trains
    print(f"ln(2)/2 = {math.log(2) / 2:.4f}: the loss when half the examples sit at ln 2 (two "
          "quadrants confused) and the rest at 0")
    print(f"{'spec':<16} {'seed':>4} {'final loss':>10} {'final acc':>9}  (test set, last epoch, {fw})")
    for spec, tag in tags.items():
        doc = train_json(out, tag, ["--spec", spec, "--framework", fw, "--seeds", args.seeds,
                                    "--epochs", epochs, *recipe_args(args)], args.reuse, args.force)
        for s in doc["seeds"]:
            flag = "  <- near ln(2)/2" if abs(s["final_loss"] - math.log(2) / 2) < 0.05 else ""
            print(f"{spec:<16} {s['seed']:>4} {s['final_loss']:10.4f} {s['final_accuracy']:9.4f}{flag}")
    return 0


# ---- the quadrant plateau: dwell at ln(2)/2 per width / heads, seeds and ports ---------------------
def check_plateau_data(name: str) -> None:
    """--data for the plateau: the quadrant generator, with its options read."""
    from shared.training.data import quadrant_options

    if name != "quadrant" and not name.startswith("quadrant:"):
        raise InputError(f"--data {name!r}: the plateau experiment needs quadrant[:noise=N,contrast=C]")
    quadrant_options(name)


def plateau_dwell(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    from experiments.plateau.experiment import Settings, parse_shapes, run_experiment
    from experiments.plateau.report import check_outputs, summary_lines, write_outputs
    from shared.cli.train import parse_seeds
    from shared.core.train_spec import resolve_recipe

    check_plateau_data(args.data)
    settings = Settings(parse_shapes(args.shapes), parse_seeds(args.seeds), frameworks,
                        resolve_recipe(args.recipe or "quick", args.rset), args.data, args.steps,
                        args.band, args.window)
    stem = out / ("plateau-sweep" if args.sweep else "plateau")
    check_outputs([stem.with_suffix(s) for s in (".json", ".csv", ".png")], args.force)
    document = run_experiment(settings, args.sweep)
    for line in summary_lines(document):
        print(line)
    for path in write_outputs(document, stem, args.force):
        print(f"wrote {path}")
    return 0
