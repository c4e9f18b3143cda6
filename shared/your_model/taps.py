"""Where a user's model's layers give the reference's taps (`trace --model`): which layer's output
each canonical tap is, through the binding (`tap_paths`), and those outputs captured by its
framework's `ports/<fw>/user.py` and laid out as the reference's tokens (`captured`): the model's
own, or through its library's caller, behind the caller's "model." (a Qwen tower's one sequence of
every image, a NaFlexVit's batch)."""

from __future__ import annotations

from typing import Any

import numpy as np

from shared.core.forward_io import tokens_of
from shared.core.spec import ModelSpec
from shared.your_model.binding import Binding


def tap_paths(binding: Binding, found: list[Any], spec: ModelSpec) -> dict[str, str]:
    """Canonical tap -> the user's layer whose output it is, through the binding. A block's attn and
    mlp taps are its branches as the residual adds them: with LayerScale, the output of the layer
    that holds the gamma and nothing else (timm's and Transformers' LayerScale modules); a gamma
    held beside other tensors (in the block itself) has no such output, and the tap is left out."""
    native = binding.canonical_of()
    owner, sole = {}, set()
    for layer in found:
        for p in layer.params:
            owner.setdefault(p, layer.path)
        if len(layer.params) == 1:
            sole.add(layer.path)
    taps = {"patch_embed": "patch_embed.kernel"}
    for i in range(spec.depth):
        b = f"blocks.{i}"
        attn, mlp = (f"{b}.ls1.gamma", f"{b}.ls2.gamma") if spec.layer_scale else \
            (f"{b}.attn.out.kernel", f"{b}.mlp.fc2.kernel")
        taps |= {f"block{i}.norm1": f"{b}.norm1.scale", f"block{i}.attn": attn,
                 f"block{i}.norm2": f"{b}.norm2.scale", f"block{i}.mlp": mlp}
        if i in spec.deepstack_blocks:  # Qwen3-VL's extra output: its merger's last layer's
            name = f"deepstack.{spec.deepstack_blocks.index(i)}"
            taps[name] = f"{name}.fc2.kernel"
    if spec.final_norm == "tokens":
        taps["final_norm"] = "final_norm.scale"
    if spec.merge_size > 1:
        taps["merger"] = "merger.fc2.kernel"
    paths = {tap: owner.get(native.get(tensor, ""), "") for tap, tensor in taps.items()}
    return {tap: path for tap, path in paths.items()
            if path and not (taps[tap].endswith(".gamma") and path not in sole)}


def tokens(value: np.ndarray, spec: ModelSpec, batch: int) -> np.ndarray:
    """A patch embedding's (B, D, h, w) or (B, h, w, D) output as tokens (B, h*w, D); a batch packed
    into one sequence (PixtralVisionModel's, as its output is: `forward_io.tokens_of`) split per image."""
    if value.ndim == 4:
        channels_first = value.shape[1] == spec.dim and value.shape[-1] != spec.dim
        value = value.reshape(*value.shape[:2], -1).transpose(0, 2, 1) if channels_first else \
            value.reshape(value.shape[0], -1, value.shape[-1])
    split = tokens_of(value, batch)  # None: not (batch, ...) tokens, as a vector tap
    return np.ascontiguousarray(value if split is None else split)


def captured(module: Any, model: Any, caller: Any, spec: ModelSpec, images: np.ndarray, layout: str,
              paths: dict[str, str]) -> dict[str, np.ndarray]:
    """Each tap's layer output as tokens: the model's own, or, where its library's caller runs it (a
    Qwen tower, a NaFlexVit), captured behind the caller's "model." and laid out as the batch's
    tokens by the caller (shared/checkpoints/__init__.py's `caller_live`)."""
    if caller is None:
        got = module.capture(model, images, layout, list(paths.values()))
        return {tap: tokens(got[p], spec, len(images)) for tap, p in paths.items() if p in got}
    got = module.capture(caller, images, layout, [f"model.{p}" for p in paths.values()])
    return {tap: np.asarray(caller.batch_tokens(p, got[f"model.{p}"]), np.float32)
            for tap, p in paths.items() if f"model.{p}" in got}
