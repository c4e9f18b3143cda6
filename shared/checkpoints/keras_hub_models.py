"""The keras-hub vision models (v0.32, Keras 3) as checkpoint families: what a family states
(`Family`: its variable paths as a mapping table, what its `get_config()` says with keras-hub's
own defaults applied and printed where a key is absent, what its architecture fixes, and how its
`.weights.h5` groups are named when portbench writes one), and what the families share. The
families: keras_hub_vit.py (ViT, DeiT), keras_hub_dinov2.py (DINOv2), keras_hub_towers.py (the
SigLIP and CLIP image towers).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shared.checkpoints.common import Inference, Raw
from shared.checkpoints.hf_models import size_pair
from shared.core.spec import ModelSpec
from shared.errors import SpecError, WeightsError

Variables = dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class Family:
    """One keras-hub backbone class (and the task class that holds it), as a checkpoint family."""

    backbone: str
    task: str | None  # None: keras-hub has no task portbench can express around this backbone
    rows: Callable[[ModelSpec], str]
    infer: Callable[[Inference, Raw, dict[str, Any], dict[str, Any] | None], None]
    check: Callable[[str, ModelSpec], None]
    configs: Callable[[ModelSpec], tuple[dict[str, Any], dict[str, Any] | None]]
    group: Callable[[str], str]
    # A layer's variables in saving order, by the layer's name, for a backbone config: the h5
    # file stores them by index (`vars/0`, `vars/1`), and Keras names them `<layer path>/<name>`.
    variables: Callable[[dict[str, Any]], Variables]
    task_layers: tuple[str, ...] = ()  # the task's own layers (task.weights.h5); the rest is the backbone's
    inert: tuple[str, ...] = ()  # saved, but no part of the function (keras-hub rebuilds or ignores them)
    extras: Callable[[ModelSpec, Raw], Raw] = field(default=lambda s, raw: {})  # inert ones export writes
    features: tuple[str, ...] = ()  # the spec's later features (common.LATER_FEATURES) it builds


# ---- what the families share ---------------------------------------------------------------
COMMON_VARIABLES: Variables = {  # Keras' own layers: LayerNormalization, Dense/Conv2D, MultiHeadAttention
    **dict.fromkeys(("query", "key", "value", "attention_output"), ("kernel", "bias")),
}
NORM = ("gamma", "beta")
DENSE = ("kernel", "bias")


def with_defaults(inf: Inference, cls: str, required: tuple[str, ...], defaults: dict[str, Any],
                  backbone: dict[str, Any], task: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config with the class's keyword defaults for absent keys (each one noted)."""
    for key in required:
        if key not in backbone:
            raise SpecError(f"keras_hub config: {cls}'s {key!r} is missing (a required argument)")
    for key, value in defaults.items():
        if key not in backbone and key not in (task or {}):
            inf.notes.append(f"keras-hub default applied: {key}={value!r}")
    return {**defaults, **backbone, **(task or {})}


def size_facts(inf: Inference, raw: Raw, cfg: dict[str, Any], kernel: str, block: str) -> dict[str, Any]:
    """The sizes every family's config states: image_shape, patch_size and hidden_dim checked
    against the patch kernel (channels_last HWIO), num_layers against the blocks the checkpoint
    holds (`block`: one variable per block, its number as {i}), and num_heads."""
    dim, depth, heads = int(cfg["hidden_dim"]), int(cfg["num_layers"]), int(cfg["num_heads"])
    shape = cfg["image_shape"]
    if not (isinstance(shape, (list, tuple)) and len(shape) == 3):
        raise SpecError(f"keras_hub config image_shape = {shape!r}: expected [height, width, channels]")
    found = inf.need(raw, kernel)
    (ph, pw) = size_pair(cfg["patch_size"], "patch_size")
    if tuple(found.shape) != (ph, pw, shape[2], dim):
        raise SpecError(f"keras_hub config image_shape = {shape!r}, patch_size = {cfg['patch_size']!r} and "
                        f"hidden_dim = {dim} contradict tensor {kernel!r} {found.shape} (channels_last HWIO)")
    pattern = re.escape(block).replace(re.escape("{i}"), r"\d+")
    found = sum(1 for k in raw if re.fullmatch(pattern, k))
    what = block.partition("{i}")[0] + "*"
    if found != depth:
        raise SpecError(f"keras_hub config num_layers = {depth} contradicts the {found} {what!r} blocks "
                        "in the checkpoint")
    return {"image_height": int(shape[0]), "image_width": int(shape[1]), "channels": int(shape[2]),
            "patch_height": ph, "patch_width": pw, "dim": dim, "depth": depth, "heads": heads,
            "head_dim": dim // heads}


def check_position_ids(raw: Raw, name: str, rows: int) -> None:
    """SigLIP's and CLIP's embedding saves the row each token reads from the position table
    (`position_ids`): the spec adds row i to token i, so the file must hold 0 .. rows-1."""
    ids = raw.get(name)
    expected = np.arange(rows)[None]
    if ids is None or ids.shape != expected.shape or not np.array_equal(ids, expected):
        seen = "missing" if ids is None else f"{ids.shape} starting {np.asarray(ids).ravel()[:4].tolist()}"
        raise WeightsError(f"keras_hub checkpoint: tensor {name!r} is {seen}; expected [[0 .. {rows - 1}]] "
                           "(token i reads position row i; keras-hub's CLIP builds it as zeros and "
                           "relies on the preset to fill it)")


def position_ids(name: str, s: ModelSpec) -> Raw:
    """The position ids an exported SigLIP or CLIP preset needs: 0 .. rows-1, Keras' int64."""
    return {name: np.arange(s.derived.pos_rows_total, dtype=np.int64)[None]}


# Keras' MultiHeadAttention saves its four Dense layers under these attributes, in every family.
MHA_GROUPS = {"query": "query_dense", "key": "key_dense", "value": "value_dense",
              "attention_output": "output_dense"}


def layer_groups(stem: str, saved: str, base: int, named: dict[str, str]) -> Callable[[str], str]:
    """A family's `group`: one segment of a variable's layer path -> its h5 group (the attribute
    Keras saves the layer under). A block (`{stem}{k}`, numbered from `base`) is in the list Keras
    saves under the class's name, deduplicated (`saved`, `saved_1`, ...); another layer is
    `named`'s or Keras' MultiHeadAttention's, else its own name."""
    def group(name: str) -> str:
        number = name[len(stem):]
        if name.startswith(stem) and number.isdigit():
            k = int(number) - base
            return saved + (f"_{k}" if k else "")
        return named.get(name, MHA_GROUPS.get(name, name))

    return group


def keras_object(module: str, cls: str, config: dict[str, Any]) -> dict[str, Any]:
    """A keras-hub class as Keras serialises it (config.json, task.json); `module` under
    `keras_hub.src.models`."""
    return {"module": f"keras_hub.src.models.{module}", "class_name": cls,
            "registered_name": f"keras_hub>{cls}", "config": config}


def numbered_blocks(text: str, s: ModelSpec, layer: str) -> str:
    """A table's block rows once per block: Keras numbers these blocks from 1 (`layer` has {k})."""
    return "".join(text.replace("{b}", str(i)).replace("{layer}", layer.replace("{k}", str(i + 1)))
                   for i in range(s.depth))
