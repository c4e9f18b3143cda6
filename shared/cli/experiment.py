"""`compare.py experiment NAME`: the archive's experiments, each printing the numbers it measured.

- `pos-embed`: digits with learned positions vs none, 3 seeds, in each framework;
- `narrow`: quadrant vs quadrant-narrow, 3 seeds, per-seed final loss and accuracy (the archive
  says the narrow model stalls near ln(2)/2 = 0.3466: one pair of quadrants separated, the other
  not; `plateau` measures whether and how long);
- `sqrt-dk`: attention weights of random queries/keys at widths 1, 4, 512 with and without the
  1/sqrt(d_k) scaling (max weight, entropy): table and figure;
- `attention-map`: class-token attention of the last block on test digits, from the digits model
  trained in torch and run in every framework after weight transfer;
- `dead-rows`: archive-final (42-row position table, 35 used) vs archive-final-repaired: which
  rows receive a gradient, in every framework;
- `plateau`: how long the quadrant model's loss dwells at ln(2)/2 per width / heads and seed, in
  every port on the same batches (curves must agree), or `--sweep`: one setting at a time (init
  scheme and scale, position-table std, learning rate, noise, contrast, batch size), torch only.

Training experiments run `compare.py train` in a process per framework, started by the one
launcher (shared/runtime/launch.py), so their numbers are exactly what that command prints and
writes.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from shared.cli._options import positive_int
from shared.errors import InputError
from shared.runtime.launch import launch, run_worker
from shared.teaching.attention_scale import attention_statistics

ORDER = 45
NAMES = ("pos-embed", "narrow", "sqrt-dk", "attention-map", "dead-rows", "plateau")
FRAMEWORKS = ("torch", "keras", "flax", "mlx")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="the archive's experiments: " + ", ".join(NAMES))
    p.add_argument("name", choices=NAMES)
    p.add_argument("--out", default="runs/exp", help="folder for JSON, PNG and checkpoints")
    p.add_argument("--epochs", type=positive_int, help="epochs per run (default per experiment)")
    p.add_argument("--seeds", help="comma-separated seeds (default 0,1,2; plateau 0,1,2,3,4)")
    p.add_argument("--frameworks", help="default " + ",".join(FRAMEWORKS) + " (plateau --sweep: torch)")
    p.add_argument("--reuse", action="store_true", help="reuse result JSONs already in --out")
    p.add_argument("--recipe", help="recipe for the training runs (default: the preset's)")
    p.add_argument("--rset", action="append", default=[], metavar="FIELD=VALUE", help="recipe override")
    g = p.add_argument_group("plateau")
    g.add_argument("--shapes", default="16/2,24/3,32/4", help="WIDTH/HEADS list (head width = W/H)")
    g.add_argument("--steps", type=int, default=600, help="updates per run (default 600)")
    g.add_argument("--data", default="quadrant", help="quadrant[:noise=N,contrast=C] (default 0.1, 1)")
    g.add_argument("--band", type=float, default=0.05, help="half-width of the band around ln(2)/2")
    g.add_argument("--window", type=int, default=16, help="updates in the loss's trailing mean")
    g.add_argument("--sweep", action="store_true", help="vary one setting at a time (torch)")
    g.add_argument("--force", action="store_true", help="overwrite existing plateau files in --out")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from shared.core.budget import check_options
    from shared.core.paths import make_folders, output_path

    check_options({"--steps": args.steps, "--window": args.window, "--epochs": args.epochs})  # first
    make_folders(out := output_path(args.out, folder=True))
    plateau_sweep = args.name == "plateau" and args.sweep
    args.seeds = args.seeds or ("0,1,2,3,4" if args.name == "plateau" else "0,1,2")
    frameworks = [f.strip() for f in (args.frameworks or ("torch" if plateau_sweep else
                                                         ",".join(FRAMEWORKS))).split(",") if f.strip()]
    for fw in frameworks:
        if fw not in FRAMEWORKS:
            raise InputError(f"--frameworks: {fw!r} is not one of {', '.join(FRAMEWORKS)}")
    return {"pos-embed": pos_embed, "narrow": narrow, "sqrt-dk": sqrt_dk,
            "attention-map": attention_map, "dead-rows": dead_rows,
            "plateau": plateau_dwell}[args.name](args, out, frameworks)


def recipe_args(args: argparse.Namespace) -> list[str]:
    extra = ["--recipe", args.recipe] if args.recipe else []
    for item in args.rset:
        extra += ["--rset", item]
    return extra


def train_json(out: Path, tag: str, argv: list[str], reuse: bool) -> dict[str, Any]:
    path = out / f"{tag}.json"
    if not (reuse and path.is_file()):
        cmd = ["compare.py", "train", *argv, "--json", str(path), "--quiet", "--force",  # a re-run
               "--checkpoints", str(out / "ck" / tag)]
        print("$ " + " ".join(cmd), flush=True)
        done = launch(cmd, _framework(argv), None, echo=print)
        if done.error:
            raise InputError(f"experiment run {tag!r} failed ({done.error})")
    return json.loads(path.read_text())


def _framework(argv: list[str]) -> str:
    """The registry entry a `compare.py train` command line runs (its launch environment)."""
    return argv[argv.index("--framework") + 1]


# ---- position embeddings on/off on digits ------------------------------------------------------
def pos_embed(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    epochs = str(args.epochs or 15)
    rows = []
    for fw in frameworks:
        for pos in ("learned", "none"):
            extra = ([] if pos == "learned"
                     else ["--set", "pos_embed=none", "--set", "pos_embed_class_row=false"])
            doc = train_json(out, f"pos-{fw}-{pos}", ["--spec", "digits", *extra, "--framework", fw,
                                                     "--seeds", args.seeds, "--epochs", epochs,
                                                     *recipe_args(args)], args.reuse)
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


# ---- quadrant vs quadrant-narrow ----------------------------------------------------------------
def narrow(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    epochs = str(args.epochs or 10)
    fw = frameworks[0]
    print(f"ln(2)/2 = {math.log(2) / 2:.4f}: the loss when half the examples sit at ln 2 (two "
          "quadrants confused) and the rest at 0")
    print(f"{'spec':<16} {'seed':>4} {'final loss':>10} {'final acc':>9}  (test set, last epoch, {fw})")
    for spec in ("quadrant", "quadrant-narrow"):
        tag = f"narrow-{spec}" + ("-" + args.recipe if args.recipe else "")
        doc = train_json(out, tag, ["--spec", spec, "--framework", fw, "--seeds", args.seeds,
                                    "--epochs", epochs, *recipe_args(args)], args.reuse)
        for s in doc["seeds"]:
            flag = "  <- near ln(2)/2" if abs(s["final_loss"] - math.log(2) / 2) < 0.05 else ""
            print(f"{spec:<16} {s['seed']:>4} {s['final_loss']:10.4f} {s['final_accuracy']:9.4f}{flag}")
    return 0


# ---- why attention divides by sqrt(d_k) ------------------------------------------------------------
def sqrt_dk(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    dims, keys = (1, 4, 512), 16
    print(f"random standard-normal queries and {keys} keys; uniform attention has max weight "
          f"{1 / keys:.4f} and entropy ln {keys} = {math.log(keys):.4f}")
    print(f"{'d_k':>5} {'scaling':<12} {'max weight':>10} {'entropy':>8}")
    table = {}
    for d in dims:
        for scaled in (False, True):
            mx, ent = attention_statistics(d, scaled, keys)
            table[(d, scaled)] = (mx, ent)
            print(f"{d:>5} {'1/sqrt(d_k)' if scaled else 'none':<12} {mx:10.4f} {ent:8.4f}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, index, label in ((axes[0], 0, "mean max weight"), (axes[1], 1, "mean entropy (nats)")):
        for scaled in (False, True):
            ax.plot(dims, [table[(d, scaled)][index] for d in dims], marker="o",
                    label="q.k / sqrt(d_k)" if scaled else "q.k")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.set_ylabel(label)
        ax.legend()
    axes[1].axhline(math.log(keys), color="grey", linestyle="--")
    fig.suptitle("Without the scaling, score variance grows as d_k: softmax saturates to one key")
    fig.tight_layout()
    path = out / "sqrt-dk.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")
    return 0


# ---- class-token attention of the last block, in every framework ------------------------------
def attention_map(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    from shared.core.presets import get_preset
    from shared.training.checkpoint import latest_unit
    from shared.training.data import digits
    spec = get_preset("digits")
    train_json(out, "pos-torch-learned", ["--spec", "digits", "--framework", "torch", "--seeds",
                                          args.seeds, "--epochs", str(args.epochs or 15)], args.reuse)
    unit = latest_unit(out / "ck" / "pos-torch-learned" / f"seed{args.seeds.split(',')[0]}")
    if unit is None:
        raise InputError("the digits run left no checkpoint to read the attention map from")
    weights = unit / "weights.safetensors"
    _, test, _ = digits()
    images, labels = test.images[:4], test.labels[:4]
    images_file = (out / "attention-map-images.npy").resolve()
    np.save(images_file, images)
    job = {"kind": "taps", "weights": str(weights.resolve()), "input": str(images_file)}
    results = {fw: run_worker(fw, {"taps": job}, out / "workers", 600) for fw in frameworks}
    last = f"block{spec.depth - 1}.attn_probs"
    maps, grid = {}, spec.derived.grid_rows
    for fw, result in results.items():
        if result.error("taps"):
            raise InputError(f"experiment attention-map: {fw} could not run ({result.error('taps')})")
        taps = result.arrays["taps"]
        if last not in taps:
            print(f"{fw}: the port returns no {last!r} tap")
            continue
        probs = taps[last]  # (B, heads, N, N)
        cls = probs[:, :, 0, 1:].mean(axis=1)  # class-token row, patch columns, head mean
        maps[fw] = cls.reshape(len(images), grid, spec.derived.grid_cols)
    base = maps[frameworks[0]]
    for fw in frameworks[1:]:
        if fw in maps:
            print(f"max |attention({frameworks[0]}) - attention({fw})| = {np.abs(base - maps[fw]).max():.2e}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(maps), len(images), figsize=(2.2 * len(images), 2.3 * len(maps)))
    axes = np.atleast_2d(axes)
    for r, (fw, m) in enumerate(maps.items()):
        for c in range(len(images)):
            ax = axes[r, c]
            ax.imshow(images[c, :, :, 0], cmap="gray")
            ax.imshow(np.kron(m[c], np.ones((spec.patch_height, spec.patch_width))), cmap="inferno",
                      alpha=0.5)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{fw}: digit {labels[c]}", fontsize=9)
    fig.suptitle("class-token attention, last block (head mean); trained in torch")
    fig.tight_layout()
    path = out / "attention-map.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")
    return 0


# ---- archive-final's dead position rows ------------------------------------------------------------
def dead_rows(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    from shared.core.presets import get_preset
    from shared.training.parity import collect, start_training_jobs

    jobs = {name: {"kind": "grad", "spec": get_preset(name).replace(dropout_head=0.0).to_json()}
            for name in ("archive-final", "archive-final-repaired")}
    workers = {fw: start_training_jobs(fw, jobs) for fw in frameworks}
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


# ---- the quadrant plateau: dwell at ln(2)/2 per width / heads, seeds and ports ---------------------
def plateau_dwell(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    from shared.cli.train import parse_seeds
    from shared.training.data import quadrant_options
    from shared.training.plateau_experiment import Settings, parse_shapes, run_experiment
    from shared.training.plateau_report import check_outputs, summary_lines, write_outputs
    from shared.training.train_spec import resolve_recipe

    if args.data != "quadrant" and not args.data.startswith("quadrant:"):
        raise InputError(f"--data {args.data!r}: the plateau experiment needs quadrant[:noise=N,contrast=C]")
    quadrant_options(args.data)
    for name, value, low in (("--steps", args.steps, 1), ("--window", args.window, 1)):
        if value < low:
            raise InputError(f"{name} {value}: expected an integer >= {low}")
    if not 0 < args.band < 1:
        raise InputError(f"--band {args.band}: expected a number in (0, 1)")
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
