"""The experiments' training runs: `compare.py train` in a process per framework, started by the
one launcher (shared/runtime/launch.py), so an experiment's numbers are exactly what that command
prints and writes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from shared import REPO_ROOT
from shared.core.files import check_output
from shared.errors import InputError
from shared.runtime.launch import launch


def recipe_args(args: argparse.Namespace) -> list[str]:
    """`--recipe` and every `--rset` of the experiment, passed on to `compare.py train`."""
    extra = ["--recipe", args.recipe] if args.recipe else []
    for item in args.rset:
        extra += ["--rset", item]
    return extra


def check_runs(out: Path, tags: list[str], args: argparse.Namespace) -> None:
    """Refuse, before the experiment's first run, what its training runs would replace without
    --force: out/TAG.json, the TAG.png `train` writes beside it, and a checkpoint of any of the
    seeds under out/ck/TAG. A run `--reuse` reads instead (its TAG.json is there) writes nothing.
    `train` checks again, and publishes exclusively: this check is what makes a refusal cost
    no training, rather than come after the runs before it."""
    from shared.cli.train import parse_seeds
    from shared.training.checkpoint import holds_checkpoint

    for tag in tags:
        path = out / f"{tag}.json"
        if args.reuse and path.is_file():
            continue
        for output in (path, path.with_suffix(".png")):
            check_output(output, args.force, creatable=True)
        folder = out / "ck" / tag
        kept = [s for s in parse_seeds(args.seeds) if holds_checkpoint(folder / f"seed{s}")]
        if kept and not args.force:
            raise InputError(f"{folder} already holds a checkpoint for seed {kept[0]}; pass --force to "
                             "start it over (the old one is replaced)")


def train_json(out: Path, tag: str, argv: list[str], reuse: bool, force: bool) -> dict[str, Any]:
    """Run `compare.py train ARGV` into out/TAG.json (checkpoints under out/ck/TAG) and read it;
    with `reuse`, read the file a previous run left instead. `force` (the experiment's --force)
    lets the run replace its JSON and PNG and start its checkpoints over; without it `train`
    refuses what exists (`check_runs` said so before any run)."""
    path = out / f"{tag}.json"
    if not (reuse and path.is_file()):
        # compare.py by its path: the launcher starts it in this process's working directory
        cmd = [str(REPO_ROOT / "compare.py"), "train", *argv, "--json", str(path), "--quiet",
               *(["--force"] if force else []), "--checkpoints", str(out / "ck" / tag)]
        print("$ " + " ".join(cmd), flush=True)
        done = launch(cmd, _framework(argv), None, echo=print)
        if done.error:
            raise InputError(f"experiment run {tag!r} failed ({done.error})")
    return json.loads(path.read_text())


def _framework(argv: list[str]) -> str:
    """The registry entry a `compare.py train` command line runs (its launch environment)."""
    return argv[argv.index("--framework") + 1]
