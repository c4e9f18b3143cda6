"""Checkpoints as one unit: the weights, both Adam moments and `state.json` of one epoch appear
together or not at all.

A unit is written into a `.staging-*` folder beside the others, renamed to `epoch-NNNNNN`, and
only then named in `LATEST`, which is replaced atomically; older units and any staging folder an
interrupted save left behind are removed afterwards. So an interrupt (Ctrl-C, SIGTERM, a crash)
at any moment leaves `LATEST` naming a complete unit, and `--resume` continues from it. Files
are canonical safetensors (`shared.core.weights`), nothing is pickled.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from shared.core.files import UMASK, write_output
from shared.core.spec import ModelSpec
from shared.core.weights import load_weights, save_weights
from shared.errors import PortbenchError, WeightsError
from shared.training.schedule import Controller
from shared.training.train_spec import TrainSpec

LATEST = "LATEST"
STAGING = ".staging-"
MOMENTS = ("weights.safetensors", "adam_m.safetensors", "adam_v.safetensors")


class CheckpointError(PortbenchError):
    """A checkpoint that cannot be resumed; the message says which and why."""


def latest_unit(folder: Path) -> Path | None:
    """The complete unit `LATEST` names, or None when the folder holds no checkpoint."""
    pointer = folder / LATEST
    if pointer.is_file():
        unit = folder / pointer.read_text().strip()
        if unit.is_dir():
            return unit
    return None


def save(folder: Path, spec: ModelSpec, recipe: TrainSpec, trainer: Any, controller: Controller,
         result: dict[str, Any]) -> Path:
    """Write one epoch's unit and make it the one `LATEST` names."""
    folder.mkdir(parents=True, exist_ok=True)
    first, second, updates = trainer.export_state()
    meta = {"epoch": str(controller.epoch), "updates": str(updates)}
    staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=folder))
    staging.chmod(0o777 & ~UMASK)  # mkdtemp makes 0700; a published unit gets the usual mode
    try:
        for name, tensors in zip(MOMENTS, (trainer.port.export(), first, second), strict=True):
            save_weights(staging / name, spec, tensors, extra_metadata=meta)
        state = {"recipe": recipe.to_dict(), "spec_hash": spec.spec_hash, "updates": updates,
                 "precision": rung_of(trainer), "controller": controller.state(), "result": result}
        write_output(staging / "state.json", json.dumps(state, indent=1).encode())
        unit = folder / f"epoch-{controller.epoch:06d}"
        if unit.exists():  # a unit written before an interrupt, never named in LATEST
            shutil.rmtree(unit)
        os.replace(staging, unit)
        write_output(folder / LATEST, unit.name.encode(), force=True)
    except BaseException:  # interrupted: leave only what LATEST names
        tidy(folder, staging)
        raise
    tidy(folder)
    return unit


def rung_of(trainer: Any) -> str:
    """The precision rung the trainer's port computes at (shared/core/precision.py)."""
    precision = getattr(trainer.port, "precision", None)
    return precision.rung if precision is not None else "float32"


def tidy(folder: Path, *extra: Path) -> None:
    """Remove staging folders and every unit `LATEST` does not name."""
    for path in extra:
        shutil.rmtree(path, ignore_errors=True)
    keep = latest_unit(folder)
    for path in folder.iterdir():
        if path.is_dir() and path != keep and (path.name.startswith(STAGING)
                                               or path.name.startswith("epoch-")):
            shutil.rmtree(path, ignore_errors=True)


def restore(folder: Path, spec: ModelSpec, recipe: TrainSpec, trainer: Any) -> tuple[Controller, dict]:
    """Load the latest unit into `trainer`; (controller, the saved result as a dict)."""
    tidy(folder)  # what an interrupted save may have left
    unit = latest_unit(folder)
    if unit is None:
        raise CheckpointError(f"checkpoint folder {str(folder)!r} holds no complete checkpoint")
    try:
        state = json.loads((unit / "state.json").read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {str(unit / 'state.json')!r} is unreadable ({exc})") from None
    if state.get("spec_hash") != spec.spec_hash:
        raise CheckpointError(f"checkpoint {str(unit)!r} is for another spec (hash "
                              f"{state.get('spec_hash')!r}, expected {spec.spec_hash!r}); use another "
                              "--checkpoints folder")
    saved, current = state.get("precision", "float32"), rung_of(trainer)  # older units: float32
    if saved != current:
        raise CheckpointError(f"checkpoint {str(unit)!r} was trained at {saved}, not {current}; resume "
                              "at the same rung (--dtype/--precision) or use another --checkpoints folder")
    saved_recipe = TrainSpec.from_dict(state["recipe"])
    if saved_recipe.replace(max_epochs=recipe.max_epochs) != recipe:  # extending a run is fine
        saved_fields = saved_recipe.to_dict()
        changed = [k for k, v in recipe.to_dict().items() if saved_fields[k] != v and k != "max_epochs"]
        raise CheckpointError(f"checkpoint {str(unit)!r} was written with another recipe (field "
                              f"{changed[0]!r} differs); resume needs the same recipe (max_epochs may grow)")
    files = [load_weights(unit / name, spec) for name in MOMENTS]
    epochs = {f.metadata.get("epoch") for f in files}
    if len(epochs) != 1 or str(state["controller"]["epoch"]) not in epochs:
        raise WeightsError(f"checkpoint {str(unit)!r}: files from different epochs {sorted(epochs)}")
    trainer.port.load(files[0].tensors)
    trainer.load_state(files[1].tensors, files[2].tensors, int(state["updates"]))
    return Controller.from_state(recipe, state["controller"]), state["result"]
