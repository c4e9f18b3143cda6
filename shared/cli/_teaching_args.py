"""Arguments and loading shared by the teaching commands (divergences, diagnose, trace, audit,
lessons, rosetta). A leading underscore keeps this module out of the subcommand discovery."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from shared.inputs import load_images, probe_batch
from shared.presets import resolve_spec
from shared.spec import ModelSpec
from shared.weights import Tensors, atomic_write_bytes, init_weights, load_weights


def add_model_args(parser: argparse.ArgumentParser, weights_help: str) -> None:
    parser.add_argument("--spec", help="preset name, spec file (.json/.toml) or JSON document")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="override one spec field (repeatable)")
    parser.add_argument("--weights", help=weights_help)
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the canonical weights when --weights is not given (default 0)")
    parser.add_argument("--input", help="NHWC float32 .npy images (default: the spec's probe batch)")


def load_model(args: argparse.Namespace) -> tuple[ModelSpec, Tensors, np.ndarray, list[str]]:
    """(spec, canonical weights, images, notes) from the common arguments."""
    spec = resolve_spec(args.spec, args.set)
    notes: list[str] = []
    if args.weights:
        loaded = load_weights(args.weights, spec)
        tensors = loaded.tensors
        if loaded.note():
            notes.append(loaded.note() or "")
    else:
        tensors = init_weights(spec, args.seed)
        notes.append(f"weights: canonical init_weights(spec, seed={args.seed})")
    images = load_images(args.input, spec) if args.input else probe_batch(spec)
    return spec, tensors, images, notes


def write_json(path: str, payload: Any) -> None:
    atomic_write_bytes(Path(path), (json.dumps(payload, indent=2) + "\n").encode())
