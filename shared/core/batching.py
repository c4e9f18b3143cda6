"""A batch of images at their own patch grids (`batching = "naflex"`): the canonical input every port
and the reference read, and the masks derived from it once.

SigLIP2's NaFlex (Transformers' `Siglip2VisionModel`, timm's `naflexvit_*`) patchifies each image at
its own grid of rows x cols patches, pads every image's token sequence to `max_patches` and hands the
model a key-padding mask (`pixel_attention_mask`). The canonical batch is one NumPy structured array,
so it travels wherever an image batch does (a worker's `.npy` file, without pickles): per image,

- `patches`: (max_patches, ph * pw * C) float32, the image's patches row-major over its own grid,
  each flattened (patch_row, patch_col, channel) as spec.py's fixed patchify; rows past rows * cols
  are padding, any finite values (they must change no valid output);
- `grid`: (rows, cols) int32, rows <= the spec's grid_rows, cols <= grid_cols, rows * cols <=
  max_patches.

The key mask (`token_mask`) covers the whole sequence: the prefix tokens (class, distillation,
registers) always valid, then each image's rows * cols patches. Every port masks keys only, never
queries, so no softmax row is ever fully masked: padded queries read the valid keys and their own
outputs are ignored (pooling and the verdict read valid tokens only).
"""

from __future__ import annotations

import numpy as np

from shared.core.spec import ModelSpec
from shared.errors import InputError


def batch_dtype(spec: ModelSpec) -> np.dtype:
    """The structured dtype of one image of a naflex batch."""
    d = spec.derived
    return np.dtype([("patches", "<f4", (d.num_patches, d.patch_features)), ("grid", "<i4", (2,))])


def naflex_batch(spec: ModelSpec, patches: np.ndarray, grids: np.ndarray) -> np.ndarray:
    """A canonical batch from (B, max_patches, features) patches and (B, 2) grids, checked."""
    batch = np.zeros(len(grids), dtype=batch_dtype(spec))
    batch["patches"], batch["grid"] = patches, grids
    check_batch(spec, batch)
    return batch


def probe_grids(spec: ModelSpec, batch: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded grids of different shapes: the first image fills max_patches as nearly as the spec's
    grid allows (the longest sequence), the later ones a seeded order of the other grids that fit
    (each shape once while there are enough), so the batch mixes sizes and holds padding."""
    d = spec.derived
    fits = [(r, c) for r in range(1, d.grid_rows + 1) for c in range(1, d.grid_cols + 1)
            if r * c <= spec.max_patches]
    largest = max(fits, key=lambda rc: (rc[0] * rc[1], -abs(rc[0] - rc[1])))
    others = [fits[i] for i in rng.permutation(len(fits)) if fits[i] != largest] or [largest]
    return np.asarray([largest, *(others * batch)][:batch], dtype=np.int32)


def probe_naflex(spec: ModelSpec, batch: int, rng: np.random.Generator) -> np.ndarray:
    """The seeded probe batch: standard-normal patches on each image's grid, zeros in the padding
    (Transformers' `Siglip2ImageProcessor` pads with zeros)."""
    grids = probe_grids(spec, batch, rng)
    patches = rng.standard_normal((batch, spec.derived.num_patches, spec.derived.patch_features))
    patches *= patch_mask(grids, spec.derived.num_patches)[..., None]
    return naflex_batch(spec, patches.astype(np.float32), grids)


def patch_mask(grids: np.ndarray, max_patches: int) -> np.ndarray:
    """(B, max_patches) bool: True on each image's rows * cols patch tokens."""
    counts = np.asarray(grids, dtype=np.int64).prod(axis=-1)
    return np.arange(max_patches)[None, :] < counts[:, None]


def token_mask(spec: ModelSpec, batch: np.ndarray) -> np.ndarray:
    """(B, seq_len) bool, the key-padding mask: prefix tokens valid, then each image's patches."""
    patches = patch_mask(batch["grid"], spec.derived.num_patches)
    prefix = np.ones((len(batch), spec.derived.prefix_tokens), dtype=bool)
    return np.concatenate([prefix, patches], axis=1)


def check_batch(spec: ModelSpec, batch: np.ndarray, source: str = "input") -> None:
    """A naflex batch: the structured dtype, at least one image, every grid within the spec's bounds,
    every patch value finite (padding included: a NaN there would still be a NaN in a masked port)."""
    wanted = batch_dtype(spec)
    if not isinstance(batch, np.ndarray) or batch.dtype != wanted or batch.ndim != 1:
        got = type(batch).__name__ if not isinstance(batch, np.ndarray) else f"{batch.dtype} {batch.shape}"
        raise InputError(f"{source}: a naflex batch is a 1-D structured array of {wanted} (patches, grid) "
                         f"for spec {spec.name!r}, got {got}")
    if len(batch) < 1:
        raise InputError(f"{source}: the batch is empty")
    d, grids = spec.derived, batch["grid"]
    for i, (rows, cols) in enumerate(grids.tolist()):
        if not (1 <= rows <= d.grid_rows and 1 <= cols <= d.grid_cols and rows * cols <= spec.max_patches):
            raise InputError(f"{source}: image {i} has grid {rows} x {cols}, expected rows 1..{d.grid_rows}, "
                             f"cols 1..{d.grid_cols} and rows * cols <= max_patches = {spec.max_patches}")
    if not np.all(np.isfinite(batch["patches"])):
        raise InputError(f"{source}: patches contain NaN or inf")


def valid_rows(spec: ModelSpec, batch: np.ndarray | None, tensor: np.ndarray) -> np.ndarray | None:
    """Which entries of a tensor of the forward count: for a (B, seq_len, ...) or (B, max_patches,
    ...) token tensor the valid tokens' rows (broadcast over the rest), None (everything) for any
    other tensor or a fixed batch. `compare_tensor` compares only these."""
    if batch is None or spec.batching == "fixed" or np.ndim(tensor) < 3:
        return None
    mask = token_mask(spec, batch)
    if tensor.shape[1] == spec.derived.num_patches and tensor.shape[1] != mask.shape[1]:
        mask = mask[:, spec.derived.prefix_tokens:]
    if tensor.shape[:2] != mask.shape:
        return None
    return np.broadcast_to(mask.reshape(*mask.shape, *([1] * (tensor.ndim - 2))), tensor.shape)
