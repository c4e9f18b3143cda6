"""Canonical inputs: NHWC float32 image batches (or, with `batching` naflex or packed, the per-image
patch batch of shared/core/batching.py), checked before any port sees them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shared.core.batching import check_batch, probe_grid_batch
from shared.core.budget import check_fits
from shared.core.containers import read_npy
from shared.core.spec import ModelSpec
from shared.errors import InputError

PROBE_BATCH = 4
PROBE_SEED = 1234


def probe_batch(spec: ModelSpec, batch: int = PROBE_BATCH, seed: int = PROBE_SEED) -> np.ndarray:
    """The spec's seeded probe batch: standard-normal NHWC float32 images (same in every port), or
    a naflex or packed spec's patch batch at seeded grids (`batch` sequences)."""
    check_fits(spec, batch, "a probe batch and the float64 reference")
    rng = np.random.default_rng(seed)
    if spec.batching != "fixed":
        return probe_grid_batch(spec, batch, rng)
    shape = (batch, spec.image_height, spec.image_width, spec.channels)
    return rng.standard_normal(shape).astype(np.float32)


def check_images(spec: ModelSpec, images: np.ndarray, source: str = "input") -> None:
    if spec.batching != "fixed":
        check_batch(spec, images, source)
        return
    if not isinstance(images, np.ndarray):
        raise InputError(f"{source}: expected a NumPy array, got {type(images).__name__}")
    _check_shape(spec, tuple(images.shape), source)
    if images.dtype not in (np.float32, np.float64):
        raise InputError(f"{source}: images have dtype {images.dtype}, expected float32")
    if images.shape[0] < 1:
        raise InputError(f"{source}: the batch is empty")
    if not np.all(np.isfinite(images)):
        raise InputError(f"{source}: images contain NaN or inf")


def _check_shape(spec: ModelSpec, shape: tuple[int, ...], source: str) -> None:
    expected = (spec.image_height, spec.image_width, spec.channels)
    if len(shape) != 4 or shape[1:] != expected:
        raise InputError(
            f"{source}: images have shape {shape}, expected (batch, "
            f"{expected[0]}, {expected[1]}, {expected[2]}) NHWC for spec {spec.name!r}"
        )


def load_images(path: str | Path, spec: ModelSpec) -> np.ndarray:
    """Read a user's `.npy` batch without pickles, then check it against the spec. Its header's
    shape, dtype and batch are checked before the data is read (a header may lie); a
    big-endian float32 array is converted to this machine's order."""
    source = f"input file {str(path)!r}"
    if spec.batching != "fixed":
        raise InputError(f"{source}: batching {spec.batching!r} reads no image file yet; expected batching "
                         "'fixed' (the probe batch carries the per-image grids)")

    def expect(shape: tuple[int, ...], dtype: np.dtype) -> None:
        _check_shape(spec, shape, source)
        if dtype.kind != "f" or dtype.itemsize != 4:
            raise InputError(f"{source}: dtype {dtype.newbyteorder('=')}, expected float32")
        if shape[0] < 1:
            raise InputError(f"{source}: the batch is empty")
        check_fits(spec, shape[0], f"the {shape[0]:,} images of {str(path)!r} through the reference")

    images = read_npy(path, source, InputError, expect)
    check_images(spec, images, source=source)
    return images
