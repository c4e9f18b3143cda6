"""`compare.py experiment plateau`: the quadrant plateau across widths, head counts, seeds, ports.

A condition is a recipe (`TrainSpec`: optimiser, learning rate, batch size, init scheme, kernel
gain, position-table std) and a data name (`quadrant[:noise=N,contrast=C]`); every condition runs
at every shape (width / heads) and seed for the same step budget. The sweep varies one setting
at a time from the base condition, in torch only; the plain experiment runs the base condition
in every port and checks that their per-update losses agree (the lesson's "the plateau is the
model's, not the runtime's").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from experiments.plateau import bookkeeping
from experiments.plateau.runs import job, run_all
from shared.cli._lists import comma_list
from shared.core.train_spec import TrainSpec, get_recipe
from shared.training.data import quadrant_name, quadrant_options

# The largest per-update loss difference between two ports that still counts as "the same run":
# the training-parity bound on every parameter after 10 AdamW steps (measured 1.6e-6).
PARITY_TOL = 2e-5

# One setting at a time, from the base condition: (name, recipe changes, data changes); a
# "recipe" entry replaces the base recipe by that preset (its init fields are the base's).
SWEEP: tuple[tuple[str, dict[str, Any], dict[str, float]], ...] = (
    ("init=torch", {"init": "torch"}, {}), ("init=keras", {"init": "keras"}, {}),
    ("init=flax", {"init": "flax"}, {}), ("init=vit", {"init": "vit"}, {}),
    ("kernel_gain=0.25", {"init_kernel_gain": 0.25}, {}), ("kernel_gain=3", {"init_kernel_gain": 3.0}, {}),
    ("pos_std=0", {"init_pos_std": 0.0}, {}), ("pos_std=1", {"init_pos_std": 1.0}, {}),
    ("lr=1e-4", {"learning_rate": 1e-4, "min_learning_rate": 0.0}, {}),
    ("lr=1e-2", {"learning_rate": 1e-2}, {}),
    ("noise=1", {}, {"noise": 1.0}), ("contrast=0.3", {}, {"contrast": 0.3}),
    ("batch=16", {"batch_size": 16}, {}), ("batch=256", {"batch_size": 256}, {}),
    ("recipe=archive", {"recipe": "archive"}, {}),
)


@dataclass(frozen=True)
class Settings:
    shapes: list[tuple[int, int]]
    seeds: list[int]
    frameworks: list[str]
    recipe: TrainSpec
    data: str
    budget: int  # updates per run
    band: float = bookkeeping.BAND
    window: int = bookkeeping.WINDOW


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """`16/2,24/3,32/4` -> [(width, heads), ...]; the head width is width / heads."""
    def shape(item: str) -> tuple[int, int]:
        width, heads = (int(part) for part in item.split("/", 1)) if "/" in item else (0, 0)
        if width < 1 or heads < 1 or width % heads:
            raise ValueError(item)
        return width, heads

    return comma_list(text, "--shapes", "distinct WIDTH/HEADS pairs, HEADS dividing WIDTH, e.g. 16/2,32/4",
                      shape)


def shape_spec(width: int, heads: int) -> Any:
    """The quadrant preset at this width and head count (quadrant is 32/4, quadrant-narrow 16/2)."""
    from shared.core.presets import get_preset

    return get_preset("quadrant").replace(name=f"quadrant-{width}x{heads}", dim=width, heads=heads,
                                          head_dim=width // heads)


def conditions(settings: Settings, sweep: bool) -> list[tuple[str, TrainSpec, str]]:
    """(name, recipe, data) for the base condition and, with `sweep`, each one-setting change."""
    out = [("base", settings.recipe, settings.data)]
    init = {k: getattr(settings.recipe, k) for k in ("init", "init_kernel_gain", "init_pos_std")}
    for name, changes, data_changes in SWEEP if sweep else ():
        data = quadrant_name(**{**quadrant_options(settings.data), **data_changes})
        recipe = (get_recipe(changes["recipe"]).replace(**init) if "recipe" in changes
                  else settings.recipe.replace(**changes))
        out.append((name, recipe, data))
    return out


def summarise_run(run: dict[str, Any], band: float, window: int) -> dict[str, Any]:
    """Dwell, final accuracy, the plateau epoch and its confusion matrix for one run."""
    per_epoch = max(1, run["steps"] // max(1, run["epochs"]))
    accuracy = bookkeeping.per_step(run["test_accuracy"], per_epoch, len(run["step_loss"]))
    dw = bookkeeping.dwell(run["step_loss"], accuracy, band, window)
    epoch = bookkeeping.plateau_epoch(run["test_loss"], run["test_accuracy"], band)
    out: dict[str, Any] = {
        "steps": len(run["step_loss"]), "steps_in_band": dw.steps_in_band,
        "plateau_steps": dw.plateau_steps, "longest_plateau": dw.longest_plateau,
        "first_in_band": dw.first_step, "stalled": dw.stalled,
        "final_accuracy": run["test_accuracy"][-1], "final_loss": run["test_loss"][-1],
        "plateau_epoch": epoch, "plateau_accuracy": None, "plateau_confusion": None,
        "unresolved_pair": None,
    }
    if epoch is not None:
        counts = np.asarray(run["confusion"][epoch])
        i, j, mixed = bookkeeping.unresolved_pair(counts)
        out.update(plateau_confusion=counts.tolist(), plateau_accuracy=run["test_accuracy"][epoch],
                   unresolved_pair=f"{bookkeeping.pair_name(i, j)} ({mixed} of {int(counts.sum())} confused)")
    return out


def agreement(reference: list[float], other: list[float], tol: float = PARITY_TOL) -> dict[str, Any]:
    """Largest per-update loss difference, and the first update where it exceeds `tol`."""
    n = min(len(reference), len(other))
    diff = np.abs(np.asarray(reference[:n], dtype=float) - np.asarray(other[:n], dtype=float))
    over = np.flatnonzero(diff > tol)
    return {"steps": n, "max_abs_diff": float(diff.max()) if n else 0.0,
            "first_step_over_tol": int(over[0]) + 1 if len(over) else None}


def group_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Over seeds: the plateau dwell (mean, min, max), how many stalled, the mean final accuracy."""
    dwell = np.array([r["plateau_steps"] for r in rows], dtype=float)
    return {"seeds": len(rows), "plateau_steps_mean": float(dwell.mean()),
            "plateau_steps_min": int(dwell.min()), "plateau_steps_max": int(dwell.max()),
            "steps_in_band_mean": float(np.mean([r["steps_in_band"] for r in rows])),
            "stalled": int(sum(r["stalled"] for r in rows)),
            "final_accuracy_mean": float(np.mean([r["final_accuracy"] for r in rows]))}


def run_experiment(settings: Settings, sweep: bool = False,
                   echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Every condition x shape x seed, in each framework (one worker process per framework,
    one after another: the CPUs are shared); returns the JSON document."""
    plan = [(name, recipe, data, shape, seed) for name, recipe, data in conditions(settings, sweep)
            for shape in settings.shapes for seed in settings.seeds]
    jobs = [job(shape_spec(*shape), recipe, data, seed, settings.budget)
            for _, recipe, data, shape, seed in plan]
    rows: list[dict[str, Any]] = []
    curves: dict[tuple[str, str, int, int, int], list[float]] = {}
    for fw in settings.frameworks:
        echo(f"{fw}: {len(jobs)} runs of {settings.budget} updates")
        for (name, _, data, (width, heads), seed), run in zip(plan, run_all(fw, jobs), strict=True):
            curves[(fw, name, width, heads, seed)] = run["step_loss"]
            rows.append({"condition": name, "framework": fw, "width": width, "heads": heads,
                         "seed": seed, "data": data, **summarise_run(run, settings.band, settings.window),
                         "step_loss": run["step_loss"], "wall_s": run["wall_s"]})
    groups = []
    for name, _, _ in conditions(settings, sweep):
        for fw in settings.frameworks:
            for width, heads in settings.shapes:
                chosen = [r for r in rows if (r["condition"], r["framework"], r["width"], r["heads"])
                          == (name, fw, width, heads)]
                groups.append({"condition": name, "framework": fw, "width": width, "heads": heads,
                               **group_summary(chosen)})
    return {"settings": settings_dict(settings, sweep), "groups": groups, "runs": rows,
            "agreement": cross_port(rows, curves, settings.frameworks)}


def cross_port(rows: list[dict[str, Any]], curves: dict, frameworks: list[str]) -> list[dict[str, Any]]:
    """Each port against the first, run for run: loss curves, and whether the bookkeeping agrees."""
    first, out = frameworks[0], []
    by_key = {(r["framework"], r["condition"], r["width"], r["heads"], r["seed"]): r for r in rows}
    for (fw, name, width, heads, seed), curve in curves.items():
        if fw == first:
            continue
        ref = by_key[(first, name, width, heads, seed)]
        mine = by_key[(fw, name, width, heads, seed)]
        out.append({"framework": fw, "against": first, "condition": name, "width": width,
                    "heads": heads, "seed": seed,
                    **agreement(curves[(first, name, width, heads, seed)], curve),
                    "same_plateau_steps": ref["plateau_steps"] == mine["plateau_steps"],
                    "same_stalled": ref["stalled"] == mine["stalled"]})
    return out


def settings_dict(settings: Settings, sweep: bool) -> dict[str, Any]:
    return {"shapes": [list(s) for s in settings.shapes], "seeds": settings.seeds,
            "frameworks": settings.frameworks, "recipe": settings.recipe.to_dict(),
            "data": settings.data, "budget": settings.budget, "band": settings.band,
            "window": settings.window, "target": bookkeeping.TARGET, "accuracy_tol": bookkeeping.ACCURACY_TOL,
            "parity_tol": PARITY_TOL, "sweep": sweep,
            "conditions": {name: {"recipe": recipe.to_dict(), "data": data}
                           for name, recipe, data in conditions(settings, sweep)}}
