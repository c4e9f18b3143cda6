"""Resampling a learned position table's patch grid to another grid, in float64, from each
library's definition: the one source of truth the ports' resampling is proven against.

Every method here is separable: one (out, in) weight matrix per axis, applied as
out[r, c] = sum_ij rows[r, i] * grid[i, j] * cols[c, j]. The methods, each as its library computes it:

- `timm_bicubic`, `hf_bicubic`: torch's `F.interpolate(mode="bicubic", align_corners=False,
  antialias=False)` at a given size (timm's `resample_abs_pos_embed(antialias=False)`, Transformers'
  `interpolate_pos_encoding`). Cubic convolution with a = -0.75, source coordinate
  (i + 0.5) * in / out - 0.5, the four taps clamped to the edge (torch repeats the edge row).
- `timm_bicubic_antialias`: torch's antialiased bicubic (timm's default): PIL's filter, cubic
  convolution with a = -0.5, centred at (i + 0.5) * in / out; when shrinking (in / out >= 1) the
  kernel is stretched by in / out (support 2 * in / out); taps outside the table are dropped and
  the rest renormalised to sum 1 (no edge clamping). It differs from the plain bicubic even when
  enlarging (a = -0.5, no clamping).
- `dinov2_legacy`: DINOv2's original `interpolate_pos_encoding` with its +0.1 offset: torch's plain
  bicubic called with `scale_factor = (out + 0.1) / in` instead of a size, so the coordinate step is
  in / (out + 0.1), not in / out (the output size floor(in * scale_factor) is still `out`, the
  offset's purpose and DINOv2's assert: the tests check every pair of sizes up to 128).
- `big_vision_zoom`: big_vision's `resample_posemb`, `scipy.ndimage.zoom(order=1)`: a first-order
  spline sampled at i * (in - 1) / (out - 1), corners on corners (scipy's grid_mode=False), not
  the half-pixel grid of a bilinear resize. It is bilinear with `align_corners=True`, no antialiasing:
  Qwen3-VL's resize of its 48 x 48 table to each image (`linspace(0, n - 1, size)`).
- `bilinear`: torch's `F.interpolate(mode="bilinear", align_corners=False, antialias=False)`:
  coordinate (i + 0.5) * in / out - 0.5 clamped at 0, two taps, the last one repeated at the edge.
- `bilinear_antialias`: torch's antialiased bilinear (SigLIP2's NaFlex, Transformers'
  `Siglip2VisionEmbeddings.resize_positional_embeddings`): PIL's triangle filter centred at
  (i + 0.5) * in / out, stretched by in / out when shrinking (support in / out), taps outside the
  table dropped and the rest renormalised. Enlarging, it equals `bilinear`; shrinking, every input
  row under the stretched triangle contributes, not only the two nearest.

A grid resampled to its own size is returned unchanged, as every library returns early then.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

TORCH_CUBIC_A = -0.75  # torch's bicubic without antialiasing (OpenCV's)
PIL_CUBIC_A = -0.5  # torch's antialiased bicubic (PIL's, Keys')
DINOV2_OFFSET = 0.1  # DINOv2's `interpolate_offset`, "to avoid floating point error"


def cubic_kernel(x: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with parameter `a`, support [-2, 2]."""
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def clamped_cubic_weights(size_in: int, size_out: int, step: float) -> np.ndarray:
    """torch's plain bicubic along one axis: output i samples coordinate step * (i + 0.5) - 0.5,
    from the four inputs around it, indices clamped to the table (the edge row repeated)."""
    weights = np.zeros((size_out, size_in))
    for i in range(size_out):
        source = step * (i + 0.5) - 0.5
        base = math.floor(source)
        t = source - base
        taps = cubic_kernel(np.array([t + 1.0, t, 1.0 - t, 2.0 - t]), TORCH_CUBIC_A)
        for offset, w in zip(range(-1, 3), taps, strict=True):
            weights[i, min(max(base + offset, 0), size_in - 1)] += w
    return weights


def triangle_kernel(x: np.ndarray) -> np.ndarray:
    """The linear (tent) filter, support [-1, 1]."""
    return np.maximum(1.0 - np.abs(x), 0.0)


def antialiased_weights(size_in: int, size_out: int, kernel: Callable[[np.ndarray], np.ndarray],
                        reach: float) -> np.ndarray:
    """torch's antialiased resampling along one axis (PIL's filter, `reach` its kernel's half-width):
    output i centred at (i + 0.5) * in / out, the kernel stretched by in / out when shrinking, the
    taps inside the table renormalised to sum 1. See the module note."""
    step = size_in / size_out
    support = reach * step if step >= 1.0 else reach
    stretch = 1.0 / step if step >= 1.0 else 1.0
    weights = np.zeros((size_out, size_in))
    for i in range(size_out):
        centre = step * (i + 0.5)
        lo = max(int(centre - support + 0.5), 0)
        hi = min(int(centre + support + 0.5), size_in)
        taps = kernel((np.arange(lo, hi) - centre + 0.5) * stretch)
        weights[i, lo:hi] = taps / taps.sum()
    return weights


def antialiased_cubic_weights(size_in: int, size_out: int) -> np.ndarray:
    """torch's antialiased bicubic along one axis: Keys' a = -0.5, half-width 2."""
    return antialiased_weights(size_in, size_out, lambda x: cubic_kernel(x, PIL_CUBIC_A), 2.0)


def antialiased_linear_weights(size_in: int, size_out: int) -> np.ndarray:
    """torch's antialiased bilinear along one axis: the triangle, half-width 1."""
    return antialiased_weights(size_in, size_out, triangle_kernel, 1.0)


def zoom_coordinates(size_in: int, size_out: int) -> np.ndarray:
    """Where scipy.ndimage.zoom (grid_mode=False) samples along one axis: i * (in - 1) / (out - 1),
    corners on corners (0 when the output has one row). The ports that compute the zoom with their
    framework's `map_coordinates` (order 1) sample it here."""
    ratio = (size_in - 1) / (size_out - 1) if size_out > 1 else 1.0
    return np.arange(size_out) * ratio


def zoom_points(source: tuple[int, int], target: tuple[int, int], channels: int) -> np.ndarray:
    """The (3, rows, cols, channels) coordinates at which a framework's `map_coordinates` (order 1)
    computes scipy.ndimage.zoom of a (h, w, channels) grid: `zoom_coordinates` along each axis, every
    channel at its own index."""
    rows, cols = (zoom_coordinates(n_in, n_out) for n_in, n_out in zip(source, target, strict=True))
    return np.stack(np.meshgrid(rows, cols, np.arange(channels), indexing="ij"))


def spline_linear_weights(size_in: int, size_out: int) -> np.ndarray:
    """scipy.ndimage.zoom(order=1) along one axis: at `zoom_coordinates`, linear between the two
    inputs around each."""
    weights = np.zeros((size_out, size_in))
    for i, source in enumerate(zoom_coordinates(size_in, size_out)):
        base = min(math.floor(source), size_in - 1)
        t = source - base
        weights[i, base] += 1.0 - t
        if t:
            weights[i, base + 1] += t
    return weights


def half_pixel_linear_weights(size_in: int, size_out: int) -> np.ndarray:
    """torch's bilinear along one axis: coordinate (i + 0.5) * in / out - 0.5, clamped at 0."""
    step = size_in / size_out
    weights = np.zeros((size_out, size_in))
    for i in range(size_out):
        source = max(step * (i + 0.5) - 0.5, 0.0)
        base = int(source)
        t = source - base
        weights[i, base] += 1.0 - t
        weights[i, min(base + 1, size_in - 1)] += t
    return weights


def dinov2_legacy_factor(size_in: int, size_out: int) -> float:
    """The scale factor DINOv2 passes to torch: float(out + 0.1) / in."""
    return float(size_out + DINOV2_OFFSET) / size_in


# One entry per `ModelSpec.pos_resample` method but "none".
AXIS_WEIGHTS: dict[str, Callable[[int, int], np.ndarray]] = {
    "timm_bicubic": lambda n_in, n_out: clamped_cubic_weights(n_in, n_out, n_in / n_out),
    "hf_bicubic": lambda n_in, n_out: clamped_cubic_weights(n_in, n_out, n_in / n_out),
    "timm_bicubic_antialias": antialiased_cubic_weights,
    # torch uses 1 / scale_factor as the step when a factor is given (area_pixel_compute_scale)
    "dinov2_legacy": lambda n_in, n_out: clamped_cubic_weights(
        n_in, n_out, 1.0 / dinov2_legacy_factor(n_in, n_out)),
    "big_vision_zoom": spline_linear_weights,
    "bilinear": half_pixel_linear_weights,
    "bilinear_antialias": antialiased_linear_weights,
}


def resample_grid(grid: np.ndarray, rows: int, cols: int, method: str) -> np.ndarray:
    """A (h, w, D) grid of position rows resampled to (rows, cols, D) by `method`, in float64."""
    grid = np.asarray(grid, dtype=np.float64)
    if grid.shape[:2] == (rows, cols):
        return grid
    by_row = AXIS_WEIGHTS[method](grid.shape[0], rows)
    by_col = AXIS_WEIGHTS[method](grid.shape[1], cols)
    return np.einsum("ri,ijd,cj->rcd", by_row, grid, by_col)
