"""Position tables: which rows of the table each token receives, computed once for every port."""

from __future__ import annotations

import numpy as np

from shared.core.batching import image_grids, position_rows
from shared.core.resample import resample_grid
from shared.core.spec import ModelSpec, positioned_prefix

SINCOS_TEMPERATURE = 10_000.0


def sincos_2d(rows: int, cols: int, dim: int) -> np.ndarray:
    """big_vision's `posemb_sincos_2d`: [sin x, cos x, sin y, cos y] over a row-major grid."""
    quarter = dim // 4
    omega = np.arange(quarter, dtype=np.float64) / max(quarter - 1, 1)
    omega = 1.0 / SINCOS_TEMPERATURE**omega
    y, x = np.mgrid[:rows, :cols]
    x_angles = np.einsum("m,d->md", x.reshape(-1).astype(np.float64), omega)
    y_angles = np.einsum("m,d->md", y.reshape(-1).astype(np.float64), omega)
    return np.concatenate(
        [np.sin(x_angles), np.cos(x_angles), np.sin(y_angles), np.cos(y_angles)], axis=1
    )


def fixed_table(spec: ModelSpec) -> np.ndarray | None:
    """The non-trainable table a `sincos` spec adds, a row per patch (a prefix token carries no grid
    position and has no row: `sequence_positions` gives it zeros), else None."""
    if spec.pos_embed != "sincos":
        return None
    d = spec.derived
    return sincos_2d(d.grid_rows, d.grid_cols, spec.dim)


def sequence_positions(spec: ModelSpec, learned: np.ndarray | None = None) -> np.ndarray | None:
    """The (seq_len, D) table added to the whole sequence [prefix tokens, patches], or None:
    the rows used (of `learned`, the stored table, or the fixed one), with zero rows inserted
    for the prefix tokens the table has no row for. Adding a zero row is exact in every dtype,
    so this one addition computes what timm (class row), big_vision (patches only) and DINOv2
    (registers inserted after the positions) each compute in their own order. A learned table of
    another grid is first resampled to the image's (`resampled_table`)."""
    table = resampled_table(spec, learned) if spec.pos_embed == "learned" else fixed_table(spec)
    if table is None:
        return None
    k, missing = positioned_prefix(spec), unpositioned(spec)
    return np.concatenate([table[:k], np.zeros((missing, spec.dim)), table[k:]]) if missing else table


def resampled_table(spec: ModelSpec, learned: np.ndarray) -> np.ndarray:
    """The rows of the stored table a learned spec uses, its patch rows resampled from the table's
    grid to the image's by `spec.pos_resample` (float64); the prefix rows (class, distillation,
    registers) are kept aside unresampled, as timm's `num_prefix_tokens` and Transformers' class
    row. Without resampling: the first `pos_rows_used` rows, as stored."""
    d = spec.derived
    table = learned[: d.pos_rows_used]
    if spec.pos_resample == "none":
        return table
    k = positioned_prefix(spec)
    grid = table[k:].reshape(d.pos_grid_rows, d.pos_grid_cols, spec.dim)
    patches = resample_grid(grid, d.grid_rows, d.grid_cols, spec.pos_resample)
    return np.concatenate([table[:k], patches.reshape(d.num_patches, spec.dim)])


def image_positions(spec: ModelSpec, learned: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """A naflex or packed batch's (B, seq_len, D) positions: the table's grid resized to each image's
    (rows, cols) by `spec.pos_resample` and read by each of its patches at its (row, col)
    (batching.py's position_rows), as Transformers' `Siglip2VisionEmbeddings.resize_positional_embeddings`,
    timm's NaFlexEmbeds and Qwen3-VL's interpolated table compute it; zero rows for the prefix tokens
    (the table positions the patches only) and the padding (what a padding token holds moves no valid
    output)."""
    d = spec.derived
    grid = learned[: d.pos_rows_used].reshape(d.pos_grid_rows, d.pos_grid_cols, spec.dim)
    grids = image_grids(spec, batch)  # (B, images, 2)
    tables = np.zeros((*grids.shape[:2], d.grid_rows, d.grid_cols, spec.dim))  # each image's, spec grid
    for (b, j), (rows, cols) in zip(np.ndindex(grids.shape[:2]), grids.reshape(-1, 2).tolist(), strict=True):
        tables[b, j, :rows, :cols] = resample_grid(grid, rows, cols, spec.pos_resample)
    index = position_rows(spec, batch)
    picked = np.take_along_axis(tables.reshape(len(batch), -1, spec.dim), np.maximum(index, 0)[..., None], 1)
    return np.where(index[..., None] >= 0, picked, 0.0)


def unpositioned(spec: ModelSpec) -> int:
    """How many prefix tokens get no position row (they sit right after the positioned ones)."""
    return spec.derived.prefix_tokens - positioned_prefix(spec)
