"""The experiments' training runs: `compare.py train` in a process per framework, started by the
one launcher (shared/runtime/launch.py), so an experiment's numbers are exactly what that command
prints and writes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from shared import REPO_ROOT
from shared.errors import InputError
from shared.runtime.launch import launch


def recipe_args(args: argparse.Namespace) -> list[str]:
    """`--recipe` and every `--rset` of the experiment, passed on to `compare.py train`."""
    extra = ["--recipe", args.recipe] if args.recipe else []
    for item in args.rset:
        extra += ["--rset", item]
    return extra


def train_json(out: Path, tag: str, argv: list[str], reuse: bool) -> dict[str, Any]:
    """Run `compare.py train ARGV` into out/TAG.json (checkpoints under out/ck/TAG) and read it;
    with `reuse`, read the file a previous run left instead."""
    path = out / f"{tag}.json"
    if not (reuse and path.is_file()):
        # compare.py by its path: the launcher starts it in this process's working directory
        cmd = [str(REPO_ROOT / "compare.py"), "train", *argv, "--json", str(path), "--quiet",
               "--force", "--checkpoints", str(out / "ck" / tag)]  # --force: a re-run
        print("$ " + " ".join(cmd), flush=True)
        done = launch(cmd, _framework(argv), None, echo=print)
        if done.error:
            raise InputError(f"experiment run {tag!r} failed ({done.error})")
    return json.loads(path.read_text())


def _framework(argv: list[str]) -> str:
    """The registry entry a `compare.py train` command line runs (its launch environment)."""
    return argv[argv.index("--framework") + 1]
