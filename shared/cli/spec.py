"""`compare.py spec NAME_OR_FILE [--json]`: the resolved spec, its derived quantities and the
layer table with the parameter count."""

from __future__ import annotations

import argparse
import json

from shared.core.presets import PRESETS, resolve_spec
from shared.core.summary import format_table, layer_table

ORDER = 10


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("spec", help="show a spec, its derived quantities and layer table")
    parser.add_argument("name", nargs="?", help="preset name, spec file or JSON document "
                        f"(presets: {', '.join(PRESETS)})")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--json", action="store_true", help='print {"spec": ..., "derived": ...}')
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    spec = resolve_spec(args.name, args.set)
    d = spec.derived
    if args.json:
        derived = {**d.to_dict(), "spec_hash": spec.spec_hash}
        print(json.dumps({"spec": spec.to_dict(), "derived": derived}, indent=2))
        return 0
    print(f"spec {spec.name!r}  hash {spec.spec_hash}")
    if spec.name in PRESETS:
        print(PRESETS[spec.name].description)
    print()
    for key, value in spec.to_dict().items():
        print(f"  {key:20} {value}")
    print()
    print(f"  token grid {d.grid_rows} × {d.grid_cols} = {d.num_patches} patches, sequence {d.seq_len}; "
          f"attention inner width {d.attn_inner}; positions {d.pos_rows_used} used of "
          f"{d.pos_rows_total}")
    print()
    rows = [[r.layer, r.shape, f"{r.params:,}", r.note] for r in layer_table(spec)]
    rows.append(["total", "", f"{d.params:,}", "parameters"])
    print(format_table(["layer", "output", "params", "implementation"], rows))
    return 0
