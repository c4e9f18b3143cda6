"""Position tables: what learned positions are worth on digits (`pos-embed`), and which rows of
archive-final's 42-row table no input ever reads (`dead-rows`)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from experiments.training_runs import check_runs, recipe_args, train_json


# ---- position embeddings on/off on digits ------------------------------------------------------
def pos_embed(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    epochs = str(args.epochs or 15)
    runs = [(fw, pos) for fw in frameworks for pos in ("learned", "none")]
    check_runs(out, [f"pos-{fw}-{pos}" for fw, pos in runs], args)  # every run's files, before the first
    rows = []
    for fw, pos in runs:
        extra = [] if pos == "learned" else ["--set", "pos_embed=none", "--set", "pos_embed_class_row=false"]
        doc = train_json(out, f"pos-{fw}-{pos}", ["--spec", "digits", *extra, "--framework", fw,
                                                 "--seeds", args.seeds, "--epochs", epochs,
                                                 *recipe_args(args)], args.reuse, args.force)
        accs = [s["final_accuracy"] for s in doc["seeds"]]
        rows.append((fw, pos, accs))
    print(f"\ndigits, {epochs} epochs, recipe quick, test accuracy of the last epoch per seed:")
    print(f"{'framework':<9} {'positions':<9} {'mean':>7} {'min':>7} {'max':>7}  per seed")
    for fw, pos, accs in rows:
        print(f"{fw:<9} {pos:<9} {np.mean(accs):7.4f} {min(accs):7.4f} {max(accs):7.4f}  "
              + " ".join(f"{a:.4f}" for a in accs))
    for fw in frameworks:
        with_pos = np.mean(next(a for f, p, a in rows if f == fw and p == "learned"))
        without = np.mean(next(a for f, p, a in rows if f == fw and p == "none"))
        print(f"{fw}: positions are worth {100 * (with_pos - without):+.1f} points")
    return 0


# ---- archive-final's dead position rows ------------------------------------------------------------
def dead_rows(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    from shared.core.presets import get_preset
    from shared.training.parity import GRAD, collect, start_training_jobs

    jobs = {name: GRAD.job(spec=get_preset(name).replace(dropout_head=0.0).to_json())
            for name in ("archive-final", "archive-final-repaired")}
    with tempfile.TemporaryDirectory(prefix="dead-rows-") as work:  # the workers' job files, then gone
        workers = {fw: start_training_jobs(fw, jobs, Path(work) / fw) for fw in frameworks}
        results = {fw: collect(worker) for fw, worker in workers.items()}
    for name in jobs:
        spec = get_preset(name)
        print(f"{name}: position table {spec.derived.pos_rows_total} rows, {spec.derived.pos_rows_used} used")
        for fw in frameworks:
            grad = results[fw][name]["grad"]["pos_embed"]
            norms = np.linalg.norm(grad, axis=1)
            dead = [i for i, n in enumerate(norms) if n == 0.0]
            print(f"  {fw:<6} rows with exactly zero gradient: {_ranges(dead) or 'none'}; smallest "
                  f"non-zero row gradient norm {norms[norms > 0].min():.2e}")
    print("The dead rows change only by weight decay (archive recipe: decay on every tensor), "
          "and a file trained this way carries 7 x 128 parameters no input ever reads.")
    return 0


def _ranges(rows: list[int]) -> str:
    if not rows:
        return ""
    if rows == list(range(rows[0], rows[-1] + 1)):
        return f"{rows[0]}-{rows[-1]} ({len(rows)} rows)"
    return str(rows)
