"""2-D rotary position embeddings (RoPE): the tables every port and the oracle rotate each head's
queries and keys by, computed once here in float64.

What the libraries compute, which the spec's fields pin:
- frequencies (`rope_bands`): `shared`, `rope_theta ** (-j / (head_dim / 4))` for j < head_dim / 4,
  the same bands for the row axis and the column axis (timm's `freq_bands(step=1)`; Transformers'
  DINOv3 `1 / base ** arange(0, 1, 4 / head_dim)`; Qwen2.5-VL's vision rotary); or `alternating`,
  the 1-D RoPE's head_dim / 2 bands `rope_theta ** (-2j / head_dim)`, the even-indexed ones for rows
  and the odd-indexed ones for columns (Pixtral: Mistral's `precompute_freqs_cis_2d`, Transformers'
  `PixtralVisionRotaryEmbedding`'s `inv_freq[0::2]`, `inv_freq[1::2]`);
- coordinates: `index` is timm's `_build_grid(grid_type='index')` (integer row and column, scaled
  by `ref_feat_shape / grid` when `rope_ref_grid` is set, EVA-02's fine-tune scheme); `centered` is
  DINOv3's `get_patches_center_coordinates` (patch centres, each axis normalised to [-1, 1]) with
  its angles multiplied by 2 pi (`DINOv3ViTRopePositionEmbedding.forward`);
- per head, the angles are [row bands, column bands] (head_dim / 2 of them), or [column bands, row
  bands] with `rope_axes='cols_first'` (timm's `rope_grid_indexing='xy'`, the Perception Encoder's,
  whose meshgrid puts x first), laid out as
  `axial_half`: [angles, angles], dimension i rotated with i + head_dim / 2 (timm's
  `rotate_half=True` layout and `rope_rotate_half`, Transformers' DINOv3 `rotate_half`), or
  `axial_interleaved`: each angle twice, dimension 2i with 2i + 1 (timm's default, EVA-02;
  `apply_rot_embed(half=False)`'s `rot`);
- prefix tokens (class, distillation, registers) are not rotated (timm's `AttentionRope` /
  `EvaAttention` split at `num_prefix_tokens`; DINOv3's `apply_rotary_pos_emb`).

Every port computes `x * cos + x[..., partner] * sin` with the tables below: `partner` is the
dimension each one is rotated with and `sin` carries the rotation's sign, so the one formula is
timm's `apply_rot_embed` in both layouts (a negated factor is exact). Prefix rows hold cos 1 and
sin 0, so they pass through exactly, as the zero rows of `positions.sequence_positions` do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shared.core.batching import patch_coordinates, segments
from shared.core.spec import ModelSpec


@dataclass(frozen=True)
class RotaryTables:
    cos: np.ndarray  # (seq_len, head_dim), float64; prefix rows 1
    sin: np.ndarray  # (seq_len, head_dim), float64, signed for `partner`; prefix rows 0
    partner: np.ndarray  # (head_dim,) int: the dimension each dimension is rotated with


def axis_coordinates(spec: ModelSpec, size: int, axis: int) -> np.ndarray:
    """The coordinate of each of `size` rows (axis 0) or columns (axis 1) of the patch grid."""
    if spec.rope_coords == "centered":  # DINOv3: (i + 0.5) / size in [0, 1], then to [-1, 1]
        return 2.0 * ((np.arange(size) + 0.5) / size) - 1.0
    coords = np.arange(size, dtype=np.float64)
    if spec.rope_ref_grid:  # timm's ref_feat_shape: positions rescaled to the pretraining grid
        coords = coords / size * spec.rope_ref_grid[axis]
    return coords


def axis_bands(spec: ModelSpec) -> tuple[np.ndarray, np.ndarray]:
    """The head_dim / 4 frequencies of the row axis and of the column axis (`rope_bands`)."""
    quarter = spec.head_dim // 4
    if spec.rope_bands == "alternating":  # 1-D RoPE's head_dim / 2 bands, dealt out rows, columns, ...
        bands = 1.0 / spec.rope_theta ** (np.arange(0, spec.head_dim, 2) / spec.head_dim)
        rows, cols = bands[0::2], bands[1::2]
    else:
        rows = cols = 1.0 / spec.rope_theta ** (np.arange(quarter) / quarter)
    if spec.rope_coords == "centered":
        return 2 * math.pi * rows, 2 * math.pi * cols
    return rows, cols


def patch_angles(spec: ModelSpec) -> np.ndarray:
    """(num_patches, head_dim / 2): [row angles, column angles] per patch (`rope_axes`: the other way
    round with cols_first), patches row-major."""
    d = spec.derived
    row_bands, col_bands = axis_bands(spec)
    rows = np.repeat(axis_coordinates(spec, d.grid_rows, 0), d.grid_cols)
    cols = np.tile(axis_coordinates(spec, d.grid_cols, 1), d.grid_rows)
    return in_axis_order(spec, rows[:, None] * row_bands, cols[:, None] * col_bands)


def in_axis_order(spec: ModelSpec, row_angles: np.ndarray, col_angles: np.ndarray) -> np.ndarray:
    """Each patch's row and column angles side by side in `rope_axes`' order: the rows' first, or with
    cols_first (timm's rope_grid_indexing='xy') the columns'."""
    blocks = [row_angles, col_angles][::-1] if spec.rope_axes == "cols_first" else [row_angles, col_angles]
    return np.concatenate(blocks, axis=1)


def rotary_tables(spec: ModelSpec) -> RotaryTables | None:
    """The tables for `spec` (None without rope): rows for the whole sequence, prefix first."""
    if spec.rope == "none":
        return None
    return laid_out(spec, patch_angles(spec))


def laid_out(spec: ModelSpec, angles: np.ndarray) -> RotaryTables:
    """Tables from (num_patches, head_dim / 2) angles in `spec.rope`'s pairing, prefix rows first
    (the catalogue lays out the angles of a port that computes others the same way)."""
    hd, prefix = spec.head_dim, spec.derived.prefix_tokens
    if spec.rope == "axial_half":  # [a, a]: i with i + hd/2; the first half takes -sin
        angles = np.concatenate([angles, angles], axis=1)
        partner = np.concatenate([np.arange(hd // 2, hd), np.arange(hd // 2)])
        sign = np.repeat([-1.0, 1.0], hd // 2)
    else:  # [a0, a0, a1, a1, ...]: 2i with 2i + 1; the even one takes -sin
        angles = np.repeat(angles, 2, axis=1)
        partner = np.arange(hd) ^ 1
        sign = np.tile([-1.0, 1.0], hd // 2)
    cos = np.concatenate([np.ones((prefix, hd)), np.cos(angles)])
    sin = np.concatenate([np.zeros((prefix, hd)), np.sin(angles) * sign])
    return RotaryTables(cos=cos, sin=sin, partner=partner)


def token_rows(spec: ModelSpec, batch: np.ndarray) -> np.ndarray:
    """(B, seq_len) int: the row of `rotary_tables(spec)` each token of a naflex or packed batch reads.
    With index coordinates a patch's angles are its (row, col) within its own image, whatever that
    image's size (Pixtral's and Qwen's per-image position ids), so a patch reads the spec grid's row at
    its own (row, col); prefix tokens read their own rows, and the padding the first prefix or patch
    row (what a padding token computes is never read)."""
    d = spec.derived
    row, col = np.moveaxis(patch_coordinates(spec, batch), -1, 0)  # (0, 0) on the padding
    rows = np.where(segments(spec, batch) >= 0, d.prefix_tokens + row * d.grid_cols + col, d.prefix_tokens)
    prefix = np.broadcast_to(np.arange(d.prefix_tokens), (len(batch), d.prefix_tokens))
    return np.concatenate([prefix, rows], axis=1)


def tables_for_tokens(tables: RotaryTables, rows: np.ndarray) -> RotaryTables:
    """The tables' rows for each sequence's tokens (`token_rows`), (B, 1, seq_len, head_dim): one
    table per sequence, broadcast over the heads."""
    return RotaryTables(cos=tables.cos[rows][:, None], sin=tables.sin[rows][:, None], partner=tables.partner)

