"""The catalogue's alternatives for positions at another resolution and for 2-D rotary embeddings
(issue 23), in the style of `shared.teaching.transforms`: each turns one run of the reference into
what a port that took another library's convention computes, or None when it does not apply.

A resampled table is one spec field (`pos_resample`, shared/core/resample.py), and so are the
RoPE layout (`rope`), coordinates (`rope_coords`), frequency bands (`rope_bands`) and axis order
(`rope_axes`): those alternatives are spec changes on the same canonical weights. Rotating the
prefix tokens too, by a 1-D token index, or by one axis's angles on both halves has no field (the
spec fixes 2-D (row, column) positions on the patches alone): `prefix_rotated_tables`,
`one_d_tables` and `axis_reused_tables` build the tables such a port holds; the demonstrations load
them into the torch port's rotary buffers, the mutation tests into every port's.
"""

from __future__ import annotations

import numpy as np

from shared.core.rotary import (
    RotaryTables,
    axis_bands,
    axis_coordinates,
    in_axis_order,
    laid_out,
    rotary_tables,
)
from shared.core.spec import ModelSpec
from shared.teaching.transforms import Case, Transform, with_spec

# The methods that compute one function: timm's `resample_abs_pos_embed(antialias=False)` and
# Transformers' `interpolate_pos_encoding` both call F.interpolate(bicubic, size=...) (resample.py).
SAME_FUNCTION = {"timm_bicubic": "hf_bicubic"}


def _function(method: str) -> str:
    return SAME_FUNCTION.get(method, method)


def resampled_by(method: str) -> Transform:
    """The same source table resampled by `method` instead of the spec's: a port that took
    another library's convention (None unless the spec resamples, and when both name one
    function)."""
    def run(case: Case) -> Case | None:
        pinned = case.spec.pos_resample
        if pinned == "none" or _function(pinned) == _function(method):
            return None
        return with_spec(case, pos_resample=method)
    return run


def rope_layout_swapped(case: Case) -> Case | None:
    """Halves <-> interleaved pairs: dimension i rotated with i + head_dim / 2 (timm's
    rotate_half, DINOv3) read as 2i with 2i + 1 (timm's default, EVA-02), or the reverse."""
    swap = {"axial_half": "axial_interleaved", "axial_interleaved": "axial_half"}
    if case.spec.rope not in swap:
        return None
    return with_spec(case, rope=swap[case.spec.rope])


def rope_coords_swapped(case: Case) -> Case | None:
    """Integer patch indices (timm's `_build_grid(grid_type='index')`) <-> patch centres in
    [-1, 1] times 2 pi (DINOv3's `get_patches_center_coordinates`), same frequencies. None with
    timm's ref_feat_shape (it rescales index coordinates only)."""
    swap = {"index": "centered", "centered": "index"}
    if case.spec.rope == "none" or case.spec.rope_ref_grid:
        return None
    return with_spec(case, rope_coords=swap[case.spec.rope_coords])


def rope_bands_swapped(case: Case) -> Case | None:
    """The same head_dim / 4 bands on both axes (timm, DINOv3, Qwen2.5-VL) <-> Pixtral's alternating
    ones (the 1-D RoPE's head_dim / 2 bands, even ones on rows, odd ones on columns), or the reverse."""
    swap = {"shared": "alternating", "alternating": "shared"}
    if case.spec.rope == "none":
        return None
    return with_spec(case, rope_bands=swap[case.spec.rope_bands])


def rope_axes_swapped(case: Case) -> Case | None:
    """Each head's first angles from the rows (timm's 'ij', DINOv3, Pixtral, Qwen) <-> from the
    columns (timm's rope_grid_indexing='xy', the Perception Encoder), or the reverse."""
    swap = {"rows_first": "cols_first", "cols_first": "rows_first"}
    if case.spec.rope == "none":
        return None
    return with_spec(case, rope_axes=swap[case.spec.rope_axes])


def one_d_tables(spec: ModelSpec) -> RotaryTables | None:
    """The tables of a port that rotates each patch by its 1-D token index (a language model's RoPE,
    onnxruntime's RotaryEmbedding op fed position_ids 0 .. N-1, as onnxruntime-mobius-style ports
    do): patch t (row-major) at t * rope_theta ** (-2j / head_dim) for the head_dim / 2 bands, in
    the spec's pairing. Row 0 and the first row's patches move least; the rest by their index."""
    if spec.rope == "none":
        return None
    t = np.arange(spec.derived.num_patches, dtype=np.float64)
    bands = 1.0 / spec.rope_theta ** (np.arange(0, spec.head_dim, 2) / spec.head_dim)
    return laid_out(spec, t[:, None] * bands)


def axis_reused_tables(spec: ModelSpec) -> RotaryTables | None:
    """The tables of a port that computes the row axis's table and reuses it for the columns (as
    ncnn-style ports do): every patch's column angles taken from its row coordinate, so patches of
    one row all share one rotation and columns are told apart by nothing."""
    if spec.rope == "none":
        return None
    d = spec.derived
    row_bands, col_bands = axis_bands(spec)
    rows = np.repeat(axis_coordinates(spec, d.grid_rows, 0), d.grid_cols)
    return laid_out(spec, in_axis_order(spec, rows[:, None] * row_bands, rows[:, None] * col_bands))


def prefix_rotated_tables(spec: ModelSpec) -> RotaryTables | None:
    """The tables of a port that rotates the prefix tokens too: its unrotated rows (cos 1, sin 0)
    padded at the end of the table instead of the start, so token t takes patch t's angles. The
    class and register tokens are rotated by the first patches' angles and every patch by its
    predecessor's (shifted by the number of prefix tokens); the last ones go unrotated. None
    without RoPE or prefix tokens (nothing to misplace)."""
    t = rotary_tables(spec)
    prefix = spec.derived.prefix_tokens
    if t is None or not prefix:
        return None
    return RotaryTables(cos=np.roll(t.cos, -prefix, axis=0), sin=np.roll(t.sin, -prefix, axis=0),
                        partner=t.partner)
