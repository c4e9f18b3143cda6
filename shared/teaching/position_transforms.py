"""The catalogue's alternatives for positions at another resolution and for 2-D rotary embeddings
(issue 23), in the style of `shared.teaching.transforms`: each turns one run of the reference into
what a port that took another library's convention computes, or None when it does not apply.

A resampled table is one spec field (`pos_resample`, shared/core/resample.py), and so are the
RoPE layout (`rope`) and coordinates (`rope_coords`): those alternatives are spec changes on the
same canonical weights. Rotating the prefix tokens too has no field (the spec fixes that the
prefix is never rotated, as timm and DINOv3 split it off): `prefix_rotated_tables` builds the
tables such a port holds, and the demonstration and the mutation test load them into the torch
port's rotary buffers.
"""

from __future__ import annotations

import numpy as np

from shared.core.rotary import RotaryTables, rotary_tables
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
