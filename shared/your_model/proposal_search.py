"""Where the spec of a model no library reader recognises is read from
(`proposal.py`), in the model's own process:

- `wrapped_reading`: a library's model held in the user's own module (`self.net = timm_model`), at
  any depth: the first child, in definition order, that a library's plug-in (`read_live`) recognises and that
  holds every parameter of the model. Its reading's sources name the child's path
  (`timm: net.blocks[0].attn.num_heads`).
- `format_names`: the known checkpoint formats whose names the parameters carry (a linen
  big_vision ViT, an `nnx.bridge.ToNNX` of one, a user's copy of timm's module names): each
  format's `infer` is tried on the parameters, a common prefix stripped; the proposal accepts a
  format only when its table then binds every parameter exactly.

Framework-neutral: children are a torch module's `named_modules()`, or the public attributes (and a
Keras model's `layers`) that the framework's `ports/<fw>/user.py` `owns`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from shared.checkpoints import FORMATS, library_reading
from shared.checkpoints.live import Reading
from shared.your_model.binding import wrapper_prefix

MAX_DEPTH = 8  # a user's wrappers are a few levels deep; a walk never follows a cycle this far


def wrapped_reading(model: Any, port: Any, params: dict[str, np.ndarray]) -> tuple[Reading, dict] | None:
    """(the reading of the one child a library reader recognises that holds all of `model`'s
    parameters, that child's own parameters by its own names); None when there is none."""
    for path, child in _children(model, port):
        reading = library_reading(child)
        if reading is None:
            continue
        inner = port.parameters(child)
        if _same_tensors(inner, params):
            return _at(reading, path), inner
        # recognised, but the model holds more: a part of it, not the model
    return None


def format_names(params: dict[str, np.ndarray]) -> Iterator[tuple[Reading, dict[str, np.ndarray]]]:
    """(a reading naming the format, the parameters without their common prefix) per known
    checkpoint format, in `FORMATS` order; the proposal keeps the first whose table binds."""
    prefix = wrapper_prefix({name: value.shape for name, value in params.items()})
    inner = {name[len(prefix):]: value for name, value in params.items()}
    under = f" under {prefix!r}" if prefix else ""
    for fmt in FORMATS:
        yield Reading(f"the {fmt} format's names{under}", fmt=fmt), inner


def _same_tensors(inner: dict[str, np.ndarray], params: dict[str, np.ndarray]) -> bool:
    """The child holds every parameter: as many, of the same shapes (names differ by the path,
    or by framework: a Keras layer's variables are not named by the attribute holding it)."""
    def shapes(group: dict[str, np.ndarray]) -> list[tuple[int, ...]]:
        return sorted(tuple(value.shape) for value in group.values())

    return len(inner) == len(params) and shapes(inner) == shapes(params)


def _at(reading: Reading, path: str) -> Reading:
    """The reading with its sources naming the child's path instead of the model."""
    def moved(source: str) -> str:
        source = re.sub(r"(?<![\w.])model\.", f"{path}.", source)
        source = re.sub(r"(?<![\w.])get_config\(\)", f"{path}.get_config()", source)
        return re.sub(r"(?<![\w.])config\.", f"{path}.config.", source)

    facts = {name: (value, moved(source)) for name, (value, source) in reading.facts.items()}
    return Reading(f"{reading.library} at {path}", facts, reading.fmt, reading.config,
                   [moved(note) for note in reading.notes])


def _children(model: Any, port: Any) -> list[tuple[str, Any]]:
    """(path, sub-model) under `model` in definition order, each once."""
    if callable(getattr(model, "named_modules", None)):  # torch
        return [(path, child) for path, child in model.named_modules() if path]
    out: list[tuple[str, Any]] = []
    seen = {id(model)}

    def visit(node: Any, prefix: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        for key, value in _attributes(node):
            if id(value) in seen or not port.owns(value):
                continue
            seen.add(id(value))
            path = f"{prefix}.{key}" if prefix else key
            out.append((path, value))
            visit(value, path, depth + 1)

    visit(model, "", 0)
    return out


def _attributes(node: Any) -> list[tuple[str, Any]]:
    """A module's public attributes (list and tuple items by index) and a Keras model's `layers`."""
    out: list[tuple[str, Any]] = []
    for key, value in vars(node).items() if hasattr(node, "__dict__") else ():
        if key.startswith("_"):
            continue
        if isinstance(value, (list, tuple)):
            out += [(f"{key}.{i}", item) for i, item in enumerate(value)]
        else:
            out.append((key, value))
    layers = getattr(type(node), "layers", None)
    if isinstance(layers, property):  # Keras: a functional model's layers are not attributes
        out += [(getattr(layer, "name", str(i)), layer) for i, layer in enumerate(node.layers)]
    return out
