"""Where a timing run (`time`, the main job, `sweep`) writes, checked before any timing, and the
writing itself: every output staged, then published together (shared/core/files.py `Outputs`).
The main job's `index.html` is its own file beside its results JSON (`MAIN_PAGE_MARK` says so)."""

from __future__ import annotations

import argparse
import itertools
import os
from pathlib import Path
from typing import Any

from shared.core.terminal import wrapped

RESULTS_DIR = Path("results")


def output_paths(args: argparse.Namespace, stem: str, kind: str = "time") -> dict[str, Path | None]:
    """JSON, CSV, chart (and HTML) paths, each checked before any timing. Without --json, the
    name is the run's own (`results/KIND-SPEC-UTC-RUN.json`, `run_id`: no other run names it).
    Each: a safe name
    (shared/core/paths.py; a default name built from spec names stays in results/), not
    existing without --force, in a folder that exists or can be made (it is made when the
    outputs are written), not a file another output of this run names."""
    from shared.cli._common import read_files
    from shared.cli._options import refuse_unread
    from shared.core.paths import check_distinct, check_output, inside, output_path
    from shared.measure.environment import utc_now

    if args.no_chart:
        refuse_unread(args, ("chart",), "with --no-chart")
    if args.json:
        json_path = output_path(args.json)
    else:
        when = utc_now().replace(":", "").replace("-", "")
        json_path = inside(RESULTS_DIR, f"{kind}-{stem}-{when}-{run_id()}.json")
    paths: dict[str, Path | None] = {
        "json": json_path,
        "csv": output_path(args.csv) if args.csv else json_path.with_suffix(".csv"),
        "chart": None if args.no_chart else (output_path(args.chart) if args.chart
                                             else json_path.with_suffix(".png")),
    }
    if getattr(args, "html", None):
        paths["html"] = output_path(args.html)
    elif getattr(args, "html_index", False):  # the main job's own page, beside its results
        paths["main_page"] = json_path.parent / MAIN_PAGE_NAME
    for name, path in paths.items():
        if path is not None:
            (check_main_page if name == "main_page" else check_output)(path, args.force, creatable=True)
    check_distinct({f"--{name}" if name != "main_page" else "the main job's page": path
                    for name, path in paths.items()}, read_files(args))
    return paths


RUNS_IN_THIS_PROCESS = itertools.count(1)


def run_id() -> str:
    """This run among every run that may write results/ in the same second: its process id (no
    two live processes of a host share one), and its number within the process after the first
    (a notebook, a test, a script that calls compare.main twice)."""
    number = next(RUNS_IN_THIS_PROCESS)
    return str(os.getpid()) if number == 1 else f"{os.getpid()}-{number}"


MAIN_PAGE_NAME = "index.html"
MAIN_PAGE_MARK = '<meta name="generator" content="portbench main job">'


def check_main_page(path: Path, force: bool, creatable: bool = False) -> None:
    """The main job's `index.html` is its own file: replaced each run, but a file there that the
    main job did not write (no MAIN_PAGE_MARK) is kept unless --force."""
    from shared.core.paths import check_output
    from shared.errors import InputError

    check_output(path, force=True, creatable=creatable)  # a safe name, a regular file if any
    if path.exists() and not force:
        with open(path, "rb") as handle:
            head = handle.read(4096)
        if MAIN_PAGE_MARK.encode() not in head:
            raise InputError(f"{str(path)!r} exists and was not written by the main job (which writes "
                             "its page beside its results); move it, pass --json to another folder, "
                             "or --force to replace it")


def write_outputs(doc: dict[str, Any], rows: list[dict[str, Any]], paths: dict[str, Path | None], title: str,
                  force: bool, metric: str, allow_mixed: bool) -> None:
    """Every output of the run staged first (a full disk fails before anything is published),
    then published together, each exclusively unless --force: all of them or none."""
    from shared.core.files import Outputs
    from shared.measure import exports, schema

    schema.validate(doc, "results being written")  # never write a file this version cannot read back
    with Outputs(force, make_folders=True) as outputs:
        written = [outputs.add(paths["json"], schema.dumps(doc).encode()),  # type: ignore[arg-type]
                   outputs.add(paths["csv"], exports.csv_text(rows).encode())]  # type: ignore[arg-type]
        if paths["chart"] is not None and any(r.get("phases") for r in rows):
            written.append(outputs.add(paths["chart"], exports.chart_png(rows, title)))
        for name in ("html", "main_page"):
            if paths.get(name) is not None:
                page = run_page(doc, rows, paths, title, metric, allow_mixed)
                if name == "main_page":  # marked as its own; replaced each run
                    check_main_page(paths[name], force)  # type: ignore[arg-type]  # again: made meanwhile?
                    page = page.replace("<head>", f"<head>{MAIN_PAGE_MARK}", 1)
                written.append(outputs.add(paths[name], page.encode(),  # type: ignore[arg-type]
                                           force=True if name == "main_page" else None))
        outputs.publish()
    own = " (the main job's own page, replaced each run)" if paths.get("main_page") else ""
    print(wrapped("wrote " + ", ".join(str(p) for p in written) + own, paths=True))


def run_page(doc: dict[str, Any], rows: list[dict[str, Any]], paths: dict[str, Path | None],
             title: str, metric: str, allow_mixed: bool) -> str:
    from shared.report.pages import results_page

    json_path = Path(paths["json"])  # type: ignore[arg-type]
    source = {"file": str(json_path), "source": json_path.stem, "created": doc["created"],
              "environment": doc["environment"], "conditions": doc["conditions"]}
    return results_page(rows, [source], f"portbench: {title}", metric, allow_mixed)
