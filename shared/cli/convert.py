"""`compare.py convert`: a torchvision / timm / Hugging Face / big_vision / vit_jax checkpoint to
the canonical file (which carries the full spec), or a canonical file back to any of them."""

from __future__ import annotations

import argparse
from pathlib import Path

from shared.cli._options import FORCE, SET, SPEC, non_empty, refuse_unread

ORDER = 60
HELP = "convert third-party ViT checkpoints to and from the canonical file"


def register(sub: argparse._SubParsersAction) -> None:
    from shared.checkpoints import FORMATS

    formats = "; ".join(f"{name}: {f.description}" for name, f in FORMATS.items())
    parser = sub.add_parser(
        "convert", help=HELP,
        description=f"Convert between the canonical file and other checkpoint formats. Formats: {formats}.",
    )
    direction = parser.add_mutually_exclusive_group(required=True)
    direction.add_argument("--from", type=non_empty, dest="source_format", metavar="FORMAT",
                           help="import a checkpoint in FORMAT into a canonical .safetensors file")
    direction.add_argument("--to", type=non_empty, dest="target_format", metavar="FORMAT",
                           help="export a canonical file to FORMAT")
    parser.add_argument("--in", type=non_empty, dest="input", required=True, metavar="PATH",
                        help="the checkpoint (a file; hf: a save_pretrained directory or a weights file)")
    parser.add_argument("--config", type=non_empty, metavar="PATH",
                        help="hf config.json, or a timm config.json (--from)")
    SPEC.add(parser, note="--from: the fields the checkpoint does not state; every field it fixes must agree")
    SET.add(parser, note="--from: a field the checkpoint cannot tell, e.g. heads=12")
    parser.add_argument("--out", type=non_empty, required=True, metavar="PATH",
                        help="--from: the canonical .safetensors; --to: the checkpoint (hf: a directory)")
    parser.add_argument("--arch", type=non_empty, metavar="NAME",
                        help="--to timm: the registry architecture the file is for (timm.create_model's "
                             "name, e.g. aimv2_large_patch14_224): its own layout (a SwiGLU split or "
                             "packed), every tensor checked against it")
    FORCE.add(parser, "an existing output file", note="a folder output, hf, is never replaced")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from shared.checkpoints import FORMATS
    from shared.core.paths import check_distinct, check_output

    target = FORMATS.get(args.target_format or "")
    check_distinct({"--out": args.out}, {"--in": args.input, "--config": args.config})
    check_output(args.out, args.force, folder=target is not None and target.writes_folder)
    if args.source_format is not None:
        return _import(args)
    return _export(args)


def _import(args: argparse.Namespace) -> int:
    from shared.checkpoints import format_module, import_checkpoint
    from shared.core.paths import check_suffix
    from shared.core.presets import resolve_spec
    from shared.core.weights import save_weights

    format_module(args.source_format)  # an unknown format fails before anything is read
    refuse_unread(args, ("arch",), "with --from, which reads the layout from the checkpoint's tensors")
    out = Path(args.out)
    check_suffix("--out", out, (".safetensors",), "the canonical weights")
    base = resolve_spec(args.spec) if args.spec else None
    converted = import_checkpoint(args.source_format, args.input, args.config, base, args.set)
    spec = converted.spec
    save_weights(out, spec, converted.tensors, force=args.force,
                 extra_metadata={"converted_from": args.source_format, "source": Path(args.input).name})
    for note in converted.notes:
        print(f"note: {note}")
    print(f"wrote {out}: {args.source_format} checkpoint -> spec {spec.name!r} (hash {spec.spec_hash}), "
          f"{len(converted.tensors)} tensors, {spec.derived.params:,} parameters")
    return 0


def _export(args: argparse.Namespace) -> int:
    from shared.checkpoints import export_checkpoint, format_module
    from shared.checkpoints.tensor_files import check_written_type
    from shared.core.weights import load_weights

    plugin = format_module(args.target_format)
    refuse_unread(args, ("spec", "set", "config"), "with --to, which exports the canonical file's own spec")
    if getattr(plugin, "OUT_SUFFIXES", None):  # a file its library loads (a folder writer has none)
        check_written_type(args.target_format, args.out, plugin.OUT_SUFFIXES)  # before the file is read
    loaded = load_weights(args.input)
    notes = export_checkpoint(args.target_format, loaded.spec, loaded.tensors, args.out, args.force,
                              arch=args.arch)
    for note in notes:
        print(f"note: {note}")
    print(f"wrote {args.out}: spec {loaded.spec.name!r} (hash {loaded.spec.spec_hash}) as a "
          f"{args.target_format} checkpoint")
    return 0
