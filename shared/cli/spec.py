"""`compare.py spec NAME_OR_FILE [--json]`: the resolved spec, its derived quantities and the
layer table with the parameter count. `compare.py spec --from-model FILE.py:NAME [--out FILE]`:
the spec read from your model (shared/your_model/proposal.py), each field with its source,
written as a spec file to keep."""

from __future__ import annotations

import argparse
import json

from shared.cli._options import FORCE, MODEL_FRAMEWORK, SET, TIMEOUT, given, non_empty
from shared.core.files import check_output, write_output
from shared.core.paths import check_suffix
from shared.core.presets import PRESETS, resolve_spec
from shared.core.summary import layer_table
from shared.core.terminal import format_table
from shared.errors import InputError, SpecError

ORDER = 10
HELP = "show a spec, its derived quantities and layer table; or read one from your model (--from-model)"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("spec", help=HELP)
    parser.add_argument("name", type=non_empty, nargs="?", help="preset name, spec file or JSON document "
                        f"(presets: {', '.join(PRESETS)})")
    SET.add(parser)
    parser.add_argument("--json", action="store_true", help='print {"spec": ..., "derived": ...}')
    parser.add_argument("--from-model", type=given("FILE.py:NAME or package.module:NAME"),
                        metavar="FILE.py:NAME",
                        help="read the spec from your model (NAME: a class or function called with no "
                             "arguments); each field is printed with its source")
    MODEL_FRAMEWORK.add(parser, note="with --from-model")
    parser.add_argument("--out", type=non_empty, metavar="FILE.toml|FILE.json",
                        help="with --from-model: write the spec here")
    FORCE.add(parser, "an existing --out file")
    TIMEOUT.add(parser, default=300.0)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.from_model:
        return run_from_model(args)
    if args.out or args.framework:
        raise InputError(f"spec: --{'out' if args.out else 'framework'} goes with --from-model")
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


def run_from_model(args: argparse.Namespace) -> int:
    """The proposal, field by field with its source; `--set` applied on top; `--out` written
    exclusively (unless --force) as .toml or .json."""
    from pathlib import Path

    from shared.core.spec_overrides import followers
    from shared.core.terminal import printable
    from shared.your_model.run import propose_user_spec

    if args.name or args.json:
        raise InputError("spec --from-model reads the spec from your model: drop the spec name / --json")
    out = Path(args.out) if args.out else None
    if out is not None:
        check_suffix("--out", out, (".toml", ".json"), "the spec")
        check_output(out, args.force)  # before the worker, not after
    proposal = propose_user_spec(args.from_model, args.framework, args.timeout)
    try:  # refused (blocks read without their heads): every field is still shown, nothing written
        spec, refused = proposal.stated(args.set), None
    except SpecError as exc:
        spec, refused = proposal.spec.with_overrides(args.set), exc
    given = set(spec.parse_assignments(args.set))
    follows = followers(proposal.spec.to_dict(), proposal.spec.parse_assignments(args.set))
    follows |= {name: (getattr(spec, name), "") for name in proposal.sources
                if name not in given and getattr(spec, name) != getattr(proposal.spec, name)}
    where = proposal.library or "its layers (no library configuration recognised)"
    print(f"spec read from your model {printable(args.from_model)}: {where}")
    for line, name in zip(proposal.lines(), proposal.sources, strict=True):
        how = "--set" if name in given else "follows --set" if name in follows else None
        print(f"  {printable(line)}" if how is None else f"  {name}={getattr(spec, name)!r} ({how})")
    for note in [*proposal.notes, *(note for _, note in follows.values() if note)]:
        print(f"note: {printable(note)}")
    unread = [name for name in proposal.unread if name not in given and name not in follows]
    print(f"unread (the spec default is kept; --set FIELD=VALUE states it): {', '.join(unread)}" if unread
          else "every field that changes the function was read")
    if refused is not None:
        raise refused
    print(f"{spec.derived.params:,} parameters, spec hash {spec.spec_hash}")
    if out is not None:
        text = spec.to_toml() if out.suffix.lower() == ".toml" else spec.to_json() + "\n"
        write_output(out, text.encode(), force=args.force)
        print(f"wrote {out}: compare.py verify --model {printable(args.from_model)} --spec {out}")
    return 0
