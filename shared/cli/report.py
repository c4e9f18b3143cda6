"""`compare.py report RESULTS.json...`: merge result files (a Metal laptop, a CUDA box, a CPU
server) into one table, CSV and chart. Runs are ranked together only when the confound guard
passes (same spec hash, batch, dtype, threads and device); otherwise the table says which field
differs and shows no ranks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from shared.core.terminal import printable
from shared.errors import InputError, PortbenchError

ORDER = 45
HELP = "merge timing result files into one table and chart"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("report", help=HELP,
                            description=__doc__)
    parser.add_argument("files", nargs="+", metavar="RESULTS.json")
    parser.add_argument("--json", dest="json_path", help="write the merged results here")
    parser.add_argument("--csv", dest="csv_path", help="write the merged CSV here")
    parser.add_argument("--chart", dest="chart_path", help="write the merged PNG chart here")
    parser.add_argument("--html", dest="html_path",
                        help="write one self-contained HTML page (tables, charts, conditions) here")
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")
    parser.add_argument("--allow-mixed", action="store_true", help="rank across device classes")
    parser.add_argument("--rank-by", default="forward", help="phase to rank by (default 'forward')")
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
            key = json.dumps([doc["created"], doc["environment"].get("hostname"), row["framework"],
                              row["conditions"], row["phases"]], sort_keys=True, default=str)
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
    outputs = {"json": args.json_path, "csv": args.csv_path, "chart": args.chart_path,
               "html": args.html_path}
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
        if args.json_path:
            doc = schema.new_results(host_record(), {"merged": [s["conditions"] for s in sources]}, rows,
                                     utc_now(), ["compare.py", "report", *args.files],
                                     {"merged_from": sources})
            schema.validate(doc, "results being written")
            written.append(staged.add(args.json_path, schema.dumps(doc).encode()))
        if args.csv_path:
            written.append(staged.add(args.csv_path, exports.csv_text(rows).encode()))
        if args.chart_path:
            title = f"merged: {', '.join(s['source'] for s in sources)}"
            written.append(staged.add(args.chart_path, exports.chart_png(rows, title)))
        if args.html_path:
            from shared.report.pages import results_page

            page = results_page(rows, sources, f"portbench timing: {', '.join(s['source'] for s in sources)}")
            written.append(staged.add(args.html_path, page.encode()))
        staged.publish()
    if written:
        print(printable("wrote " + ", ".join(str(p) for p in written)))
    return 0
