"""`compare.py train`: train one spec in one framework over one or more seeds, with the shared
recipe, data, schedule and checkpoints; write a results JSON and a PNG of the curves."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from shared.cli._common import read_files
from shared.cli._lists import comma_list, whole_number
from shared.cli._options import (
    EPOCHS,
    FORCE,
    JSON,
    RECIPE,
    RSET,
    SEEDS,
    SET,
    SPEC,
    THREADS,
    add_precision,
    non_empty,
)
from shared.core.budget import check_fits, check_work
from shared.core.files import Outputs
from shared.core.paths import check_distinct, check_output, inside, output_path
from shared.core.terminal import wrapped
from shared.errors import InputError, SpecError

ORDER = 40
HELP = "train a spec in one framework (seeds, curves, checkpoints)"

# A preset's sensible defaults: (recipe, data). None: the user must say (no bundled data).
DEFAULTS: dict[str, tuple[str, str | None]] = {
    "quadrant": ("quick", "quadrant"), "quadrant-narrow": ("quick", "quadrant"),
    "digits": ("quick", "digits"), "mnist-vit": ("mnist", None), "mnist-vit-small": ("mnist", None),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help=HELP)
    SPEC.add(p, note="default: quadrant", default="quadrant")
    SET.add(p)
    RECIPE.add(p)
    RSET.add(p)
    p.add_argument("--framework", type=non_empty, default="torch",
                   help="torch | keras | flax | mlx (default torch)")
    SEEDS.add(p, "0", default="0")
    p.add_argument("--data", type=non_empty, help="quadrant | digits | mnist:PATH.npz (default per preset)")
    EPOCHS.add(p)
    JSON.add(p)
    p.add_argument("--png", type=non_empty, help="curves PNG path (default: beside --json)")
    p.add_argument("--checkpoints", type=non_empty,
                   help="checkpoint folder (default runs/<spec>-<framework>)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoints' last epoch")
    FORCE.add(p, "existing --json/--png files and start over existing checkpoints")
    THREADS.add(p)
    add_precision(p)  # mixed rungs only: a pure rung is refused (shared.core.train_spec)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def parse_seeds(text: str) -> list[int]:
    seeds = comma_list(text, "--seeds", "distinct whole numbers >= 0, e.g. 0,1,2", whole_number(0))
    check_work("the number of --seeds", len(seeds), "seeds")
    return seeds


def resolve(args: argparse.Namespace) -> tuple[Any, Any, str]:
    from shared.core.presets import resolve_spec
    from shared.core.train_spec import resolve_recipe

    spec = resolve_spec(args.spec, args.set)
    default_recipe, default_data = DEFAULTS.get(spec.name, ("archive", None))
    if args.epochs is not None and any(r.partition("=")[0].strip() == "max_epochs" for r in args.rset):
        raise InputError("--epochs and --rset max_epochs both set the epochs; give one")
    if any(r.partition("=")[0].strip() == "seed" for r in args.rset):  # trained seed 0, recorded 5
        raise InputError("--rset seed: the seeds a run trains are --seeds (each replaces the recipe's "
                         "seed); give them there")
    overrides = list(args.rset) + ([f"max_epochs={args.epochs}"] if args.epochs is not None else [])
    recipe = resolve_recipe(args.recipe or default_recipe, overrides)
    data = args.data or default_data
    if data is None:
        raise SpecError(f"spec {spec.name!r} has no bundled data; pass --data (quadrant, digits or "
                        "mnist:PATH.npz with x_train, y_train, x_test, y_test)")
    return spec, recipe, data


def run(args: argparse.Namespace) -> int:
    from ports import NATIVE, load_port_module
    from shared.core.precision import from_args
    from shared.core.train_spec import check_training_precision
    from shared.training.data import check_batch_size, load_dataset
    from shared.training.writer_lock import hold, owner_record

    spec, recipe, data_name = resolve(args)
    seeds = parse_seeds(args.seeds)
    check_work("--epochs", recipe.max_epochs, "epochs")  # --epochs or --rset max_epochs
    check_fits(spec, recipe.batch_size, "a training batch")
    precision = from_args(args)  # one-line SpecError for a rung that does not exist
    check_training_precision(precision)
    if args.framework not in NATIVE:  # keras-jax, keras-torch and onnx run the forward only
        raise InputError(f"--framework {args.framework!r}: expected one of {', '.join(NATIVE)} "
                         "(the ports that train)")
    # Data and recipe are checked before any framework is imported: mistakes cost nothing.
    dataset = load_dataset(data_name, spec, recipe.validation_fraction, seeds[0])
    check_batch_size(dataset.train, recipe.batch_size)
    load_port_module(args.framework).set_threads(args.threads)
    # The default folder is built from content (the spec's name): `inside` keeps it in runs/.
    folder = output_path(args.checkpoints, folder=True) if args.checkpoints else \
        inside("runs", f"{spec.name}-{args.framework}")
    png = args.png or (str(Path(args.json).with_suffix(".png")) if args.json else None)
    for path in (args.json, png):  # refused now, not after the training
        if path:
            check_output(path, args.force)
    check_distinct({"--json": args.json, "--png": png}, read_files(args))
    owner = owner_record(recipe=recipe.name, spec=spec.name, framework=args.framework, seeds=args.seeds)
    # One folder, one writer: what it holds is judged, and written, under its lock.
    with hold(folder, owner, note=lambda line: print(wrapped(line), file=sys.stderr)):
        check_checkpoints(args, folder, seeds)
        print(f"train {spec.name} ({spec.derived.params:,} parameters) with {args.framework} at "
              f"{precision.rung}, recipe {recipe.name}, seeds {','.join(map(str, seeds))}, "
              f"checkpoints in {folder}")
        print(f"data {dataset.describe()}; majority-class baseline {dataset.majority_baseline():.3f}")
        document = train_seeds(args, spec, recipe, data_name, seeds, folder, precision)
    with Outputs(args.force) as outputs:  # both, or neither (a full disk leaves no half)
        if args.json:
            outputs.add(args.json, json.dumps(document, indent=1).encode())
        if png:
            outputs.add(png, curves_png(document))
        outputs.publish()
    for path in (args.json, png):
        if path:
            print(f"wrote {path}")
    return 0


def check_checkpoints(args: argparse.Namespace, folder: Path, seeds: list[int]) -> None:
    """A resume that cannot continue says so now, before any framework starts; a fresh run
    without --force never replaces a checkpoint."""
    from shared.training.checkpoint import holds_checkpoint, resume_point

    if args.resume:
        for s in seeds:
            resume_point(folder / f"seed{s}")
    elif not args.force:
        kept = [s for s in seeds if holds_checkpoint(folder / f"seed{s}")]
        if kept:
            raise InputError(f"{folder} already holds a checkpoint for seed {kept[0]}; pass --resume to "
                             "continue it or --force to start over (the old one is replaced)")


def train_seeds(args: argparse.Namespace, spec: Any, recipe: Any, data_name: str, seeds: list[int],
                folder: Path, precision: Any) -> dict[str, Any]:
    """Each seed trained in turn, checkpointed under `folder`; the run's summary document."""
    from shared.training.data import load_dataset
    from shared.training.trainloop import stderr_progress, train_seed

    results, started = [], time.perf_counter()
    for seed in seeds:
        dataset = load_dataset(data_name, spec, recipe.validation_fraction, seed)
        result, _ = train_seed(args.framework, spec, recipe, dataset, seed,
                               checkpoint_dir=folder / f"seed{seed}", resume=args.resume,
                               progress=None if args.quiet else stderr_progress, precision=precision)
        r = result.to_dict()
        print(f"[{args.framework} seed {seed}] final (last epoch, test set): loss {r['final_loss']:.4f} "
              f"accuracy {r['final_accuracy']:.4f} after {r['epochs']} epochs / {r['steps']} steps"
              + (f"; {r['stopped_because']}" if r["stopped_because"] else ""))
        results.append(r)
    document = summarise(spec, recipe, args.framework, dataset, results, time.perf_counter() - started,
                         precision.to_dict())
    print(f"summary: test accuracy mean {document['summary']['final_accuracy_mean']:.4f} "
          f"(min {document['summary']['final_accuracy_min']:.4f}, max "
          f"{document['summary']['final_accuracy_max']:.4f}) over {len(seeds)} seed(s)")
    return document


def summarise(spec: Any, recipe: Any, framework: str, dataset: Any, results: list[dict[str, Any]],
              wall: float, precision: dict[str, Any]) -> dict[str, Any]:
    finals = np.array([r["final_accuracy"] for r in results], dtype=float)
    return {
        "spec": spec.to_dict(), "spec_hash": spec.spec_hash, "recipe": recipe.to_dict(),
        "precision": precision,  # the rung the port trained at
        "framework": framework, "data": dataset.describe(), "data_name": dataset.name,
        "majority_baseline": dataset.majority_baseline(),
        "seeds": results,
        "summary": {"final_accuracy_mean": float(finals.mean()), "final_accuracy_min": float(finals.min()),
                    "final_accuracy_max": float(finals.max()),
                    "final_loss": {str(r["seed"]): r["final_loss"] for r in results}},
        "wall_s": {"total": wall, **{phase: float(sum(r["wall_s"][phase] for r in results))
                                     for phase in results[0]["wall_s"]}},
    }


def curves_png(document: dict[str, Any]) -> bytes:
    """Loss and accuracy per epoch: mean over seeds, min-max band, majority-class baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, names in ((ax_loss, ("train_loss", "val_loss", "test_loss")),
                      (ax_acc, ("val_accuracy", "test_accuracy"))):
        for name in names:
            curves = [r["curves"][name] for r in document["seeds"]]
            length = max(len(c) for c in curves)
            grid = np.full((len(curves), length), np.nan)
            for i, c in enumerate(curves):
                grid[i, :len(c)] = c
            epochs = np.arange(1, length + 1)
            line, = ax.plot(epochs, np.nanmean(grid, axis=0), label=f"{name} (mean)")
            ax.fill_between(epochs, np.nanmin(grid, axis=0), np.nanmax(grid, axis=0),
                            color=line.get_color(), alpha=0.2)
        ax.set_xlabel("epoch")
    ax_acc.axhline(document["majority_baseline"], color="grey", linestyle="--", label="majority class")
    ax_loss.set_ylabel("cross-entropy")
    ax_acc.set_ylabel("accuracy")
    ax_loss.legend(fontsize=8)
    ax_acc.legend(fontsize=8)
    seeds = ",".join(str(r["seed"]) for r in document["seeds"])
    fig.suptitle(f"{document['spec']['name']} / {document['framework']} / recipe "
                 f"{document['recipe']['name']} / seeds {seeds} (band: min-max over seeds)")
    fig.tight_layout()
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()
