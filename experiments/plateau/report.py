"""The plateau experiment's files: JSON (everything), CSV (one row per run), PNG (the curves),
published together (shared/core/files.py `Outputs`: all three or none, each exclusively unless
the caller passes force)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from experiments.plateau import bookkeeping
from shared.core.files import Outputs
from shared.core.paths import check_output


# ---- the printed report -----------------------------------------------------------------------
def summary_lines(document: dict[str, Any]) -> list[str]:
    """One row per condition x shape x framework, the unresolved pair of each run caught at 3/4,
    and each port's agreement with the first."""
    s = document["settings"]
    lines = [f"\nplateau: smoothed train loss (mean of {s['window']} updates) within {s['band']} of "
             f"ln(2)/2 = {s['target']:.4f} and test accuracy within {s['accuracy_tol']} of 3/4; "
             f"{s['budget']} updates, recipe {s['recipe']['name']}, data {s['data']}",
             f"{'condition':<17} {'W/H':<5} {'framework':<9} {'plateau steps: mean (min-max)':<30} "
             f"{'in band':>7} {'stalled':>8} {'final acc':>9}"]
    for g in document["groups"]:
        dwell = f"{g['plateau_steps_mean']:.1f} ({g['plateau_steps_min']}-{g['plateau_steps_max']})"
        lines.append(f"{g['condition']:<17} {g['width']:>2}/{g['heads']:<2} {g['framework']:<9} "
                     f"{dwell:<30} {g['steps_in_band_mean']:7.1f} {g['stalled']:>4}/{g['seeds']:<3} "
                     f"{g['final_accuracy_mean']:9.4f}")
    for r in document["runs"]:
        if r["unresolved_pair"] and r["plateau_accuracy"] < 1 - bookkeeping.ACCURACY_TOL:
            lines.append(f"  {r['condition']} {r['width']}/{r['heads']} {r['framework']} seed {r['seed']}: "
                         f"epoch {r['plateau_epoch'] + 1} test accuracy {r['plateau_accuracy']:.3f}, "
                         f"unresolved pair {r['unresolved_pair']}")
    for fw in dict.fromkeys(a["framework"] for a in document["agreement"]):
        rows = [a for a in document["agreement"] if a["framework"] == fw]
        over = [a["first_step_over_tol"] for a in rows if a["first_step_over_tol"] is not None]
        verdict = ("within it at every update of every run" if not over else
                   f"first beyond it at update {min(over)} ({len(over)} of {len(rows)} runs go beyond)")
        lines.append(f"{fw} vs {rows[0]['against']}, {len(rows)} runs: largest per-update loss difference "
                     f"{max(a['max_abs_diff'] for a in rows):.2e} (tolerance {s['parity_tol']:.0e}), "
                     f"{verdict}; same plateau steps in {sum(a['same_plateau_steps'] for a in rows)}, "
                     f"same stalled verdict in {sum(a['same_stalled'] for a in rows)}")
    return lines


# ---- files ------------------------------------------------------------------------------------
CSV_FIELDS = ("condition", "framework", "width", "heads", "seed", "data", "steps", "steps_in_band",
              "plateau_steps", "longest_plateau", "first_in_band", "stalled", "final_accuracy",
              "final_loss", "plateau_epoch", "plateau_accuracy", "unresolved_pair")


def check_outputs(paths: list[Path], force: bool) -> None:
    """Refuse, before the experiment, an output that exists (unless --force) or cannot be made."""
    for path in paths:
        check_output(path, force, creatable=True)


def write_outputs(document: dict[str, Any], stem: Path, force: bool = False) -> list[Path]:
    """`stem`.json (everything), `stem`.csv (one row per run) and `stem`.png, together."""
    json_path, csv_path, png_path = (stem.with_suffix(s) for s in (".json", ".csv", ".png"))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for row in document["runs"]:
        writer.writerow(row)
    with Outputs(force, make_folders=True) as outputs:
        outputs.add(json_path, json.dumps(document, indent=1).encode())
        outputs.add(csv_path, buffer.getvalue().encode())
        outputs.add(png_path, plot(document))
        outputs.publish()
    return [json_path, csv_path, png_path]


def plot(document: dict[str, Any]) -> bytes:
    """Per-update training loss (smoothed) of every run, one panel per condition and shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["condition"], r["width"], r["heads"]) for r in document["runs"]},
                    key=lambda k: (k[0], k[1], k[2]))
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    styles = {"torch": "-", "keras": "--", "flax": ":"}
    window = document["settings"]["window"]
    for ax, (condition, width, heads) in zip(axes.flat, panels, strict=False):
        for r in document["runs"]:
            if (r["condition"], r["width"], r["heads"]) == (condition, width, heads):
                curve = bookkeeping.smoothed(r["step_loss"], window)
                ax.plot(np.arange(1, len(curve) + 1), curve, styles.get(r["framework"], "-"),
                        color=f"C{r['seed'] % 10}", linewidth=1)
        ax.axhline(bookkeeping.TARGET, color="grey", linestyle="--", linewidth=1)
        ax.set_yscale("log")
        ax.set_title(f"{condition}: width {width}, {heads} heads", fontsize=9)
        ax.set_xlabel("update")
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    axes[0, 0].set_ylabel(f"train loss (mean of {window} updates)")
    fig.suptitle("dashed: ln(2)/2 = 0.3466; colour: seed; line style: torch - keras -- flax :",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / (3.2 * rows)))  # room for the title
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()
