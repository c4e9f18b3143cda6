"""`compare.py report RESULTS.json...`: merge result files (a Metal laptop, a CUDA box, a CPU
server) into one table, CSV and chart. Runs are ranked together only when the confound guard
passes (same spec hash, batch, dtype, threads and device); otherwise the table says which field
differs and shows no ranks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from shared.cli._options import ALLOW_MIXED, CHART, CSV, FORCE, HTML, JSON, RANK_BY, non_empty
from shared.core.terminal import printable
from shared.errors import InputError, PortbenchError

ORDER = 45
HELP = "merge timing result files into one table and chart"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("report", help=HELP,
                            description=__doc__)
    parser.add_argument("files", type=non_empty, nargs="+", metavar="RESULTS.json")
    JSON.add(parser, "the merged results")
    CSV.add(parser)
    CHART.add(parser)
    HTML.add(parser, "the merged tables, charts and conditions")
    FORCE.add(parser)
    ALLOW_MIXED.add(parser)
    RANK_BY.add(parser)
    parser.set_defaults(run=run)


def merge(paths: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows labelled with their source file, per-file environment records)."""
    from shared.measure import schema

    rows: list[dict[str, Any]] = []
    sources: list[dict[str, Any]] = []
    labels = _labels(paths)
    seen_runs: dict[str, str] = {}  # fingerprint of a run -> the file it came from
    for path, source in zip(paths, labels, strict=True):
        doc = schema.load(path)
        sources.append({"file": str(path), "source": source, "created": doc["created"],
                        "environment": doc["environment"], "conditions": doc["conditions"],
                        "sweep": doc.get("sweep")})
        for row in doc["runs"]:  # a run given twice would be ranked against itself
            # known by the row alone (its host, conditions and raw samples): a results file that
            # report --json wrote has a `created` of its own, and holds the runs it merged
            host = row.get("host") or doc["environment"]
            key = json.dumps([host.get("hostname"), row["framework"], row["conditions"], row["phases"]],
                             sort_keys=True, default=str)
            if key in seen_runs:
                raise InputError(f"results file {path!r} repeats the {row['framework']} run already "
                                 f"read from {seen_runs[key]!r}; give each run once")
            seen_runs[key] = path
            merged = dict(row)
            merged["source"] = source
            merged.setdefault("host", doc["environment"])
            rows.append(merged)
    return rows, sources


def _labels(paths: list[str]) -> list[str]:
    """Short names for the table: file stems, made unique with their parent folder if needed."""
    stems = [Path(p).stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    return [f"{Path(p).parent.name}/{Path(p).stem}" if stems.count(Path(p).stem) > 1 else Path(p).stem
            for p in paths]


def run(args: argparse.Namespace) -> int:
    from shared.measure import exports, output, schema
    from shared.measure.environment import host_record, utc_now
    from shared.measure.guard import RANK_METRICS

    if args.rank_by not in RANK_METRICS:
        raise PortbenchError(f"unknown ranking metric {args.rank_by!r}; expected one of: "
                             f"{', '.join(RANK_METRICS)}")
    outputs = {"json": args.json, "csv": args.csv, "chart": args.chart, "html": args.html}
    from shared.core.paths import check_distinct, check_output

    for path in outputs.values():
        if path:
            if any(Path(path).resolve() == Path(f).resolve() for f in args.files):
                raise PortbenchError(f"output {path!r} is one of the input files; choose another name")
            check_output(path, args.force, creatable=True)
    check_distinct({f"--{name}": path for name, path in outputs.items()})
    rows, sources = merge(args.files)
    print(output.table(rows, args.rank_by, args.allow_mixed))
    for s in sources:  # every field is the file's text: printed escaped (shared/core/terminal.py)
        env, dirty = s["environment"], "+dirty" if s["environment"].get("git_dirty") else ""
        print(printable(f"  {s['source']}: {s['file']} ({s['created']}; {env.get('cpu_model')}; "
                        f"git {str(env.get('git_revision'))[:10]}{dirty})"))
    from shared.core.files import Outputs

    with Outputs(args.force, make_folders=True) as staged:  # every output, or none
        written = []
        if args.json:
            doc = schema.new_results(host_record(), {"merged": [s["conditions"] for s in sources]}, rows,
                                     utc_now(), ["compare.py", "report", *args.files],
                                     {"merged_from": sources})
            schema.validate(doc, "results being written")
            written.append(staged.add(args.json, schema.dumps(doc).encode()))
        if args.csv:
            written.append(staged.add(args.csv, exports.csv_text(rows).encode()))
        if args.chart:
            title = f"merged: {', '.join(s['source'] for s in sources)}"
            written.append(staged.add(args.chart, exports.chart_png(rows, title)))
        if args.html:
            from shared.report.pages import results_page

            page = results_page(rows, sources, f"portbench timing: {', '.join(s['source'] for s in sources)}",
                                args.rank_by, args.allow_mixed)
            written.append(staged.add(args.html, page.encode()))
        staged.publish()
    if written:
        print(printable("wrote " + ", ".join(str(p) for p in written)))
    return 0
