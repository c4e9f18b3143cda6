"""Canonical inputs: NHWC float32 image batches, checked before any port sees them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shared.core.budget import check_fits
from shared.core.spec import ModelSpec
from shared.errors import InputError

PROBE_BATCH = 4
PROBE_SEED = 1234


def probe_batch(spec: ModelSpec, batch: int = PROBE_BATCH, seed: int = PROBE_SEED) -> np.ndarray:
    """The spec's seeded probe batch: standard-normal NHWC float32 images (same in every port)."""
    check_fits(spec, batch, "a probe batch and the float64 reference")
    rng = np.random.default_rng(seed)
    shape = (batch, spec.image_height, spec.image_width, spec.channels)
    return rng.standard_normal(shape).astype(np.float32)


def check_images(spec: ModelSpec, images: np.ndarray, source: str = "input") -> None:
    expected = (spec.image_height, spec.image_width, spec.channels)
    if not isinstance(images, np.ndarray):
        raise InputError(f"{source}: expected a NumPy array, got {type(images).__name__}")
    if images.ndim != 4 or tuple(images.shape[1:]) != expected:
        raise InputError(
            f"{source}: images have shape {tuple(images.shape)}, expected (batch, "
            f"{expected[0]}, {expected[1]}, {expected[2]}) NHWC for spec {spec.name!r}"
        )
    if images.dtype not in (np.float32, np.float64):
        raise InputError(f"{source}: images have dtype {images.dtype}, expected float32")
    if images.shape[0] < 1:
        raise InputError(f"{source}: the batch is empty")
    if not np.all(np.isfinite(images)):
        raise InputError(f"{source}: images contain NaN or inf")


def load_images(path: str | Path, spec: ModelSpec) -> np.ndarray:
    """Read a user's `.npy` batch without pickles, then check it against the spec."""
    path = Path(path)
    try:
        images = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"input file {str(path)!r} does not exist") from None
    except (ValueError, OSError, EOFError) as exc:  # EOFError: a zero-byte or truncated file
        why = "it holds pickled objects, which portbench never loads" if "pickle" in str(exc) else exc
        raise InputError(f"input file {str(path)!r} is not a readable .npy array ({why})") from None
    check_images(spec, images, source=f"input file {str(path)!r}")
    check_fits(spec, len(images), f"the {len(images):,} images of {str(path)!r} through the reference")
    if images.dtype != np.float32:
        raise InputError(f"input file {str(path)!r}: dtype {images.dtype}, expected float32")
    return images
