"""Checkpoints as one unit: the weights, both Adam moments and `state.json` of one epoch appear
together or not at all, and a unit is never deleted unless a newer one is complete.

A unit is written into a `.staging-<pid>-*` folder beside the others, renamed to
`epoch-NNNNNN`, and only then named in `LATEST`, which is replaced atomically; units older than
it are removed afterwards (and, when a run started over with --force, the previous run's), each
renamed aside before it is deleted. So an interrupt (Ctrl-C, SIGTERM, a crash) at any moment
leaves a complete unit; one landing after `LATEST` names the new unit may also leave the unit it
superseded, whole, which the next save removes. `--resume`
continues from the last unit it can prove complete (shared/training/checkpoint_proof.py), whatever
`LATEST` says (missing, truncated, garbage), or refuses in one line; it never deletes a unit.
A staging folder is removed by its own writer, or later once its writer's process is gone.
Files are canonical safetensors (`shared.core.weights`), nothing is pickled.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.core.files import UMASK, write_output
from shared.core.paths import make_folders, output_path, remove_empty, writer_alive
from shared.core.spec import ModelSpec
from shared.core.train_spec import TrainSpec
from shared.core.weights import load_weights, save_weights
from shared.errors import InputError, PortbenchError, WeightsError
from shared.training.checkpoint_proof import MOMENTS, STATE, CheckpointError, prove
from shared.training.schedule import Controller

__all__ = ["LATEST", "MOMENTS", "CheckpointError", "holds_checkpoint", "latest_unit", "restore",
           "resume_point", "save"]

LATEST = "LATEST"
STAGING = ".staging-"
UNIT = re.compile(r"^epoch-(\d{6,})$")
STAGED = re.compile(rf"^{re.escape(STAGING)}(\d+)-")


def units(folder: Path) -> list[Path]:
    """The folder's `epoch-NNNNNN` folders, oldest first (complete or not)."""
    try:
        found = [p for p in folder.iterdir() if UNIT.match(p.name) and p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    return sorted(found, key=lambda p: int(UNIT.match(p.name).group(1)))  # type: ignore[union-attr]


def named_unit(folder: Path) -> Path | None:
    """The unit `LATEST` names, if `LATEST` is a short regular file naming a unit folder."""
    pointer = folder / LATEST
    try:
        if not pointer.is_file() or pointer.is_symlink() or pointer.stat().st_size > 64:
            return None
        name = pointer.read_bytes().decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    unit = folder / name
    return unit if UNIT.match(name) and unit.is_dir() else None


def holds_checkpoint(folder: Path) -> bool:
    """Whether a fresh run would replace something here: any unit, complete or not, or LATEST."""
    return bool(units(folder)) or os.path.lexists(folder / LATEST)


def latest_unit(folder: Path) -> Path | None:
    """The unit a resume continues from (see `resume_point`), or None when there is none."""
    try:
        return resume_point(folder)
    except CheckpointError:
        return None


def resume_point(folder: Path, log: Callable[[str], None] | None = None) -> Path | None:
    """The last unit provably complete; None when the folder holds no checkpoint at all. When
    units are there but none can be proven complete, or a later unit is not complete (a resume
    from an earlier one would write over it), CheckpointError: nothing is changed."""
    found = units(folder)
    if not found:
        if os.path.lexists(folder / LATEST):
            raise CheckpointError(f"checkpoint folder {str(folder)!r} has a LATEST but no epoch-NNNNNN unit; "
                                  "nothing to resume (remove LATEST, or pass --force to start over)")
        return None
    reasons: dict[Path, str] = {}
    for unit in reversed(found):
        try:
            prove(unit)
        except CheckpointError as exc:
            reasons[unit] = str(exc)
            continue
        if reasons:
            later = next(iter(reasons.items()))
            raise CheckpointError(f"{later[1]}; it is newer than the complete {unit.name}, and a resume from "
                                  "there would write over it: move it away to resume, or pass --force to "
                                  "start over")
        named = named_unit(folder)
        if log is not None and named != unit:
            log(f"note: {str(folder / LATEST)!r} does not name the last complete unit; resuming from "
                f"{unit.name}")
        return unit
    newest = next(iter(reasons.items()))
    raise CheckpointError(f"checkpoint folder {str(folder)!r} holds no unit that can be proven complete "
                          f"({newest[1]}); nothing was changed; pass --force to start over")


def save(folder: Path, spec: ModelSpec, recipe: TrainSpec, trainer: Any, controller: Controller,
         result: dict[str, Any], data: str) -> Path:
    """Write one epoch's unit, make it the one `LATEST` names, then remove the units it supersedes.
    `data`: the dataset's name, which a resume must train on again."""
    created = make_folders(output_path(folder, folder=True))
    first, second, updates = trainer.export_state()
    meta = {"epoch": str(controller.epoch), "updates": str(updates)}
    unit, staging, aside, placed = folder / f"epoch-{controller.epoch:06d}", None, None, False
    try:
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-", dir=folder))
        staging.chmod(0o777 & ~UMASK)  # mkdtemp makes 0700; a published unit gets the usual mode
        for name, tensors in zip(MOMENTS, (trainer.port.export(), first, second), strict=True):
            # a message names the file as the unit will hold it, not the staging folder
            save_weights(staging / name, spec, tensors, extra_metadata=meta, shown_as=unit / name)
        state = {"recipe": recipe.to_dict(), "spec_hash": spec.spec_hash, "updates": updates,
                 "precision": rung_of(trainer), "framework": trainer.port.framework, "data": data,
                 "controller": controller.state(), "result": result}
        write_output(staging / STATE, json.dumps(state, indent=1).encode(), shown_as=unit / STATE)
        if unit.exists():  # a run started over (--force) reaches an epoch the previous one saved
            aside = Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-old-", dir=folder))
            os.replace(unit, aside / unit.name)
        os.replace(staging, unit)
        placed = True
        write_output(folder / LATEST, unit.name.encode(), force=True)
    except BaseException as exc:  # interrupted or failed
        if placed:  # complete and in place, only not yet named in LATEST: kept, since a resume
            # proves it complete whatever LATEST says (taking it back would lose a unit that a
            # reader may already have seen); what it replaced under --force is superseded
            if aside is not None:
                shutil.rmtree(aside, ignore_errors=True)
            tidy(folder, own=True)
            raise
        if staging is not None:  # not placed: the folder is as it was
            shutil.rmtree(staging, ignore_errors=True)
        if aside is not None and (aside / unit.name).exists():
            os.replace(aside / unit.name, unit)
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        tidy(folder, own=True)  # one made by an mkdtemp the interrupt landed in has no name here
        remove_empty(created)
        if isinstance(exc, OSError):  # the unit the user would find, not the staging folder
            raise InputError(f"checkpoint {str(unit)!r} cannot be written: {exc.strerror}") from None
        raise
    try:
        for old in [p for p in units(folder) if p != unit]:
            discard(old)  # superseded by `unit`, complete and named in LATEST
    finally:  # an interrupt inside a removal leaves its staging folder: it holds nothing to keep
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        tidy(folder, own=True)
    tidy(folder)
    return unit


def discard(old: Path) -> None:
    """Remove a superseded unit: renamed into a staging name first, so an interrupt leaves it
    whole under its own name (the next save removes it) or gone, never half deleted; a staging
    folder left by an interrupted removal is removed by `save` on its way out."""
    gone = Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-old-", dir=old.parent))
    os.replace(old, gone / old.name)
    shutil.rmtree(gone, ignore_errors=True)


def rung_of(trainer: Any) -> str:
    """The precision rung the trainer's port computes at (shared/core/precision.py)."""
    precision = getattr(trainer.port, "precision", None)
    return precision.rung if precision is not None else "float32"


def tidy(folder: Path, own: bool = False) -> None:
    """Remove staging folders whose writing process is gone (a SIGKILL mid-save), or with `own`
    this process's (a save interrupted at any moment, even inside the mkdtemp that made one and
    so before its name was kept); never a unit."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for path in entries:
        match = STAGED.match(path.name)
        if not (match and path.is_dir() and not path.is_symlink()):
            continue
        pid = int(match.group(1))
        if (pid == os.getpid()) if own else not writer_alive(pid):
            shutil.rmtree(path, ignore_errors=True)


def restore(folder: Path, spec: ModelSpec, recipe: TrainSpec, trainer: Any, data: str,
            log: Callable[[str], None] | None = None) -> tuple[Controller, dict]:
    """Load the last complete unit into `trainer`; (controller, the saved result as a dict). The
    unit must be of this spec, rung, framework, dataset `data` and recipe (max_epochs may grow):
    a run continued otherwise would be reported as one run of this one's settings."""
    tidy(folder)  # what a killed save may have left
    unit = resume_point(folder, log)
    if unit is None:
        raise CheckpointError(f"checkpoint folder {str(folder)!r} holds no complete checkpoint")
    state = prove(unit)
    if state["spec_hash"] != spec.spec_hash:
        raise CheckpointError(f"checkpoint {str(unit)!r} is for another spec (hash "
                              f"{state['spec_hash']!r}, expected {spec.spec_hash!r}); use another "
                              "--checkpoints folder")
    saved, current = state.get("precision", "float32"), rung_of(trainer)  # older units: float32
    if saved != current:
        raise CheckpointError(f"checkpoint {str(unit)!r} was trained at {saved}, not {current}; resume "
                              "at the same rung (--dtype/--precision) or use another --checkpoints folder")
    for key, current in (("framework", trainer.port.framework), ("data", data)):
        saved = state.get(key, current)  # units written before it was recorded: taken as this run's
        if saved != current:
            raise CheckpointError(f"checkpoint {str(unit)!r} was trained with {key} {saved!r}, not "
                                  f"{current!r}; resume with the same --{key} or use another --checkpoints "
                                  "folder")
    try:
        saved_recipe = TrainSpec.from_dict(state["recipe"])
    except PortbenchError as exc:
        raise CheckpointError(f"checkpoint {str(unit / STATE)!r}: its recipe is unusable ({exc})") from None
    if saved_recipe.replace(max_epochs=recipe.max_epochs) != recipe:  # extending a run is fine
        saved_fields = saved_recipe.to_dict()
        changed = [k for k, v in recipe.to_dict().items() if saved_fields[k] != v and k != "max_epochs"]
        raise CheckpointError(f"checkpoint {str(unit)!r} was written with another recipe (field "
                              f"{changed[0]!r} differs); resume needs the same recipe (max_epochs may grow)")
    done = int(state["controller"]["epoch"])  # the epochs the unit has trained
    if done > recipe.max_epochs:  # a result of more epochs than its recipe says would be written
        raise CheckpointError(f"checkpoint {str(unit)!r} has trained {done} epochs, more than max_epochs "
                              f"{recipe.max_epochs}: resume with --epochs {done} or more")
    files = [load_weights(unit / name, spec) for name in MOMENTS]
    epochs = {f.metadata.get("epoch") for f in files}
    if len(epochs) != 1 or str(state["controller"]["epoch"]) not in epochs:
        raise WeightsError(f"checkpoint {str(unit)!r}: files from different epochs {sorted(epochs)}")
    trainer.port.load(files[0].tensors)
    trainer.load_state(files[1].tensors, files[2].tensors, int(state["updates"]))
    return Controller.from_state(recipe, state["controller"]), state["result"]
