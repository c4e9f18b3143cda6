"""Parameters a user's model holds but its forward never reads, found when binding by structure
cannot place them (evaluate.py `bind_model`): DINOv2's `mask_token` (read only when masks are
passed), vit-pytorch's empty (0, dim) class token of a mean-pooling model. Each is named and set
aside, never turned into a hint to add tokens, where the spec has nothing to hold it.

A tensor is inert when it is empty (nothing in it can reach the logits), or when the forward on the
probe images gives bit-identical logits with it changed: each candidate in turn gets random noise
added (a uniform shift would not do: a LayerNorm removes it, and a class token read through one
would look unread), the forward runs, and its values are written back. Only the parameters no layer
of a known kind owns are candidates (tokens, tables, scales: a Linear's weights are always read),
so the cost is a forward per free parameter, on the failure path only. What a library declares
unread (a Transformers classifier's pooler, `without`) is set aside before any of this."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from shared.core.layer import Layer

NOISE_SEED = 20240538  # any fixed seed: the noise only has to differ from the values it is added to


def without(layers: list[Layer], params: dict[str, Any], declared: dict[str, str]) -> tuple[list[Layer],
                                                                                           dict[str, Any]]:
    """The layers and parameters left when those its library declares never read by the logits
    (`checkpoints.model_inert`: a Transformers classifier's unused pooler) are set aside: a layer
    all of whose parameters are declared goes, with every layer inside it."""
    if not declared:
        return layers, params
    gone = [layer.path for layer in layers if layer.params and set(layer.params) <= declared.keys()]
    kept = [layer for layer in layers
            if not any(layer.path == g or layer.path.startswith(g + ".") for g in gone)]
    return kept, {n: v for n, v in params.items() if n not in declared}


def candidates(layers: Iterable[Layer], shapes: dict[str, tuple[int, ...]]) -> list[str]:
    """The parameters no layer of a known kind owns (their first owner is a container, or none
    lists them), in the model's order: the only ones a forward may leave unread."""
    owner: dict[str, str] = {}
    for layer in layers:
        for name in layer.params:
            owner.setdefault(name, layer.kind)
    return [name for name in shapes if owner.get(name, "other") == "other"]


def inert_parameters(port: Any, model: Any, params: dict[str, np.ndarray], names: list[str],
                     images: np.ndarray, layout: str, output: str | None) -> dict[str, str]:
    """Of `names`, those the forward never reads: name -> why, in `names` order. A forward that
    fails on the probe images finds none (the binding's own refusal then stands)."""
    out = {n: f"empty {tuple(params[n].shape)}: it holds no value" for n in names if params[n].size == 0}
    rest = [n for n in names if n not in out]
    if not rest:
        return out
    rng = np.random.default_rng(NOISE_SEED)
    try:
        before = np.asarray(port.run(model, images, layout, output))
        for name in rest:
            original = params[name]
            port.assign(model, {name: original + rng.standard_normal(original.shape).astype(np.float32)})
            try:
                after = np.asarray(port.run(model, images, layout, output))
            finally:
                port.assign(model, {name: original})
            if after.shape == before.shape and np.array_equal(after, before):
                out[name] = f"{tuple(original.shape)}: the forward never reads it (the logits are " \
                            "bit-identical with it changed)"
    except Exception:  # whatever the user's forward raises: no tensor is called inert on a failed run
        return {n: why for n, why in out.items() if n not in rest}
    return {n: out[n] for n in names if n in out}
