"""Attention: why the scores divide by sqrt(d_k) (`sqrt-dk`), and where the digits model's class
token looks (`attention-map`).

With standard-normal queries and keys, q.k has variance d, so unscaled scores sharpen the softmax
as the head width grows: `sqrt-dk` prints the statistics per width, scaled and unscaled."""

from __future__ import annotations

import argparse
import io
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from experiments.training_runs import check_runs, train_json
from shared.core.files import Outputs, check_output, write_output
from shared.errors import InputError
from shared.runtime.jobs import TAPS
from shared.runtime.launch import run_worker


def attention_statistics(dim: int, scaled: bool, keys: int = 16, queries: int = 2000,
                         seed: int = 0) -> tuple[float, float]:
    """Mean max weight and mean entropy (nats) of softmax(q.k [/ sqrt(d)]) for standard-normal q, k."""
    rng = np.random.default_rng([seed, dim])
    q = rng.standard_normal((queries, dim))
    k = rng.standard_normal((queries, keys, dim))
    scores = np.einsum("qd,qkd->qk", q, k) / (math.sqrt(dim) if scaled else 1.0)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    entropy = -np.sum(weights * np.log(np.maximum(weights, 1e-300)), axis=-1)
    return float(weights.max(axis=-1).mean()), float(entropy.mean())


# ---- why attention divides by sqrt(d_k) ------------------------------------------------------------
def sqrt_dk(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    dims, keys = (1, 4, 512), 16
    figure = check_output(out / "sqrt-dk.png", args.force)  # refused now, before the tables
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
    write_output(figure, png_bytes(fig), force=args.force)
    print(f"wrote {figure}")
    return 0


# ---- class-token attention of the last block, in each framework -------------------------------
def attention_map(args: argparse.Namespace, out: Path, frameworks: list[str]) -> int:
    from shared.core.presets import get_preset
    from shared.training.checkpoint import latest_unit
    from shared.training.data import digits
    spec = get_preset("digits")
    check_runs(out, ["pos-torch-learned"], args)  # every file of the run, before it trains
    # The images the maps are drawn over, and the maps: published together once the ports have run.
    images_path, figure = (check_output(out / name, args.force)
                           for name in ("attention-map-images.npy", "attention-map.png"))
    train_json(out, "pos-torch-learned", ["--spec", "digits", "--framework", "torch", "--seeds",
                                          args.seeds, "--epochs", str(args.epochs or 15)],
               args.reuse, args.force)
    unit = latest_unit(out / "ck" / "pos-torch-learned" / f"seed{args.seeds.split(',')[0]}")
    if unit is None:
        raise InputError("the digits run left no checkpoint to read the attention map from")
    weights = unit / "weights.safetensors"
    _, test, _ = digits()
    images, labels = test.images[:4], test.labels[:4]
    # The workers' input and job files are theirs alone: in a folder of this run's own, then gone.
    with tempfile.TemporaryDirectory(prefix="attention-map-") as work:
        images_file = Path(work) / "images.npy"
        np.save(images_file, images)
        job = TAPS.job(weights=str(weights.resolve()), input=str(images_file))
        results = {fw: run_worker(fw, {"taps": job}, Path(work) / "workers", 600) for fw in frameworks}
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
    buffer = io.BytesIO()
    np.save(buffer, images)
    with Outputs(args.force) as outputs:  # both, or neither
        outputs.add(images_path, buffer.getvalue())
        outputs.add(figure, png_bytes(fig))
        outputs.publish()
    for path in (images_path, figure):
        print(f"wrote {path}")
    return 0


def png_bytes(fig: Any) -> bytes:
    """A figure as the experiments draw it (PNG, 100 dpi), closed: the bytes an output publishes."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()
