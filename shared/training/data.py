"""Training data as NumPy, identical for every port: the same images, splits and batch order.

Datasets: `quadrant` (generated: 8x8, one bright quadrant, label = which quadrant), `digits`
(scikit-learn's bundled 8x8 handwritten digits, real data, optionally resized), and `mnist` (a
local `.npz` the user supplies, with x_train, y_train, x_test, y_test; nothing is downloaded).
Images are NHWC float32 in [0, 1] (quadrant adds Gaussian noise); labels int64.

Shuffling uses NumPy's PCG64 keyed by (seed, epoch), so batch k of epoch e is the same array in
every framework: the frameworks only ever receive finished batches.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shared.core.containers import read_npz
from shared.core.spec import ModelSpec
from shared.errors import InputError

QUADRANT_NOISE = 0.1  # background noise std
QUADRANT_LIMIT = 1e3  # the largest noise or contrast: images are about [0, 1], and float32 holds 1e3 squared
QUADRANT_CONTRAST = 1.0  # what the bright quadrant adds


@dataclass(frozen=True)
class Split:
    images: np.ndarray  # (N, H, W, C) float32
    labels: np.ndarray  # (N,) int64

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True)
class Dataset:
    name: str
    train: Split
    val: Split
    test: Split
    num_classes: int

    def majority_baseline(self) -> float:
        """Test accuracy of always answering the most common training label."""
        top = int(np.bincount(self.train.labels, minlength=self.num_classes).argmax())
        return float(np.mean(self.test.labels == top))

    def describe(self) -> str:
        return (f"{self.name}: train {len(self.train)}, val {len(self.val)}, test {len(self.test)}, "
                f"images {self.train.images.shape[1:]}, {self.num_classes} classes")


# ---- generators and loaders -------------------------------------------------------------------
def quadrant_images(count: int, seed: int, size: int = 8, noise: float = QUADRANT_NOISE,
                    contrast: float = QUADRANT_CONTRAST) -> Split:
    """`count` images of size x size: Gaussian noise of std `noise`, with one quadrant brightened
    by `contrast`. Labels: 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right."""
    rng = np.random.default_rng([seed, 0x51AD])
    labels = rng.integers(0, 4, size=count)
    images = noise * rng.standard_normal((count, size, size, 1))
    half = size // 2
    for q in range(4):
        r, c = divmod(q, 2)
        images[labels == q, r * half:(r + 1) * half, c * half:(c + 1) * half, :] += contrast
    return Split(images.astype(np.float32), labels.astype(np.int64))


def quadrant(seed: int, train: int = 2048, test: int = 512, size: int = 8, noise: float = QUADRANT_NOISE,
             contrast: float = QUADRANT_CONTRAST) -> tuple[Split, Split, int]:
    # Train and test come from different streams, so the test set is never seen in training.
    return (quadrant_images(train, seed, size, noise, contrast),
            quadrant_images(test, seed + 10_000, size, noise, contrast), 4)


def quadrant_options(name: str) -> dict[str, float]:
    """`quadrant` or `quadrant:noise=N,contrast=C` (either or both) -> the generator's settings."""
    options = {"noise": QUADRANT_NOISE, "contrast": QUADRANT_CONTRAST}
    for item in filter(None, name.removeprefix("quadrant").removeprefix(":").split(",")):
        key, sep, raw = item.partition("=")
        if not sep or key.strip() not in options:
            raise InputError(f"--data {name!r}: option {item!r} is not noise=N or contrast=C")
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not 0 <= value <= QUADRANT_LIMIT:  # NaN fails; 1e308 overflowed into NaN images
            raise InputError(f"--data {name!r}: {key.strip()} = {raw!r}, expected a number from 0 to "
                             f"{QUADRANT_LIMIT:g}")
        options[key.strip()] = value
    return options


def quadrant_name(noise: float = QUADRANT_NOISE, contrast: float = QUADRANT_CONTRAST) -> str:
    """The data name that `load_dataset` reads back as these generator settings."""
    if (noise, contrast) == (QUADRANT_NOISE, QUADRANT_CONTRAST):
        return "quadrant"
    return f"quadrant:noise={noise:g},contrast={contrast:g}"


def digits(size: tuple[int, int] = (8, 8), test_fraction: float = 0.25) -> tuple[Split, Split, int]:
    """scikit-learn's bundled digits (1797 images, 8x8, 0..16 -> [0, 1]); a fixed test split
    (the last quarter after a fixed permutation), resized bilinearly when `size` is not 8x8."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)[..., None]
    labels = bunch.target.astype(np.int64)
    if tuple(size) != (8, 8):
        from scipy.ndimage import zoom

        factors = (1, size[0] / 8, size[1] / 8, 1)
        images = np.clip(zoom(images, factors, order=1), 0, 1).astype(np.float32)
    order = np.random.default_rng(1797).permutation(len(labels))
    cut = round(len(labels) * (1 - test_fraction))
    tr, te = order[:cut], order[cut:]
    return Split(images[tr], labels[tr]), Split(images[te], labels[te]), 10


MNIST_KEYS = ("x_train", "y_train", "x_test", "y_test")


def mnist(path: str | Path) -> tuple[Split, Split, int]:
    """A user-supplied MNIST `.npz` (as keras.datasets.mnist writes it): uint8 images (N, 28, 28)
    or (N, 28, 28, 1), integer labels. Read without pickles."""
    path = Path(path)
    where = f"MNIST file {str(path)!r}"
    if not os.path.lexists(path):
        raise InputError(
            f"{where} does not exist; supply a .npz with {', '.join(MNIST_KEYS)} "
            "(e.g. the mnist.npz that keras.datasets.mnist.load_data() downloads)"
        )
    npz = read_npz(path, where, InputError)  # a directory or FIFO named; sizes checked before reading
    missing = [k for k in MNIST_KEYS if k not in npz]
    if missing:
        raise InputError(f"{where} lacks array {missing[0]!r}; expected {', '.join(MNIST_KEYS)}")
    arrays = {k: npz[k] for k in MNIST_KEYS}
    splits = []
    for part in ("train", "test"):
        x, y = arrays[f"x_{part}"], arrays[f"y_{part}"]
        where = f"MNIST file {str(path)!r}: x_{part}"
        if x.ndim == 3:
            x = x[..., None]
        if x.ndim != 4 or x.shape[-1] != 1 or x.shape[0] == 0:
            raise InputError(f"{where} has shape {x.shape}, expected (N, H, W) or (N, H, W, 1)")
        if y.shape != (x.shape[0],) or not np.issubdtype(y.dtype, np.integer):
            raise InputError(f"MNIST file {str(path)!r}: y_{part} has shape {y.shape} dtype {y.dtype}, "
                             f"expected ({x.shape[0]},) integers")
        if y.min() < 0 or y.max() > 9:
            raise InputError(f"MNIST file {str(path)!r}: y_{part} has labels outside 0..9")
        scale = 255.0 if x.dtype == np.uint8 or x.max() > 1.0 else 1.0
        splits.append(Split((x.astype(np.float32) / scale), y.astype(np.int64)))
    return splits[0], splits[1], 10


# ---- one entry point ----------------------------------------------------------------------------
def load_dataset(name: str, spec: ModelSpec, validation_fraction: float, seed: int) -> Dataset:
    """`name`: quadrant[:noise=N,contrast=C] | digits | mnist:PATH | PATH.npz. The validation
    split is a seeded `validation_fraction` of the training set; the test set is only reported."""
    if spec.batching != "fixed":  # every dataset here is NHWC images of one size, not a patch batch
        raise InputError(f"--data {name!r}: spec {spec.name!r} has batching {spec.batching!r}; training "
                         "reads NHWC images of one size, expected batching 'fixed'")
    if name == "quadrant" or name.startswith("quadrant:"):
        train, test, classes = quadrant(seed, size=spec.image_height, **quadrant_options(name))
        if spec.image_height != spec.image_width:
            raise InputError(f"data 'quadrant' needs a square image; spec {spec.name!r} is "
                             f"{spec.image_height}x{spec.image_width}")
    elif name == "digits":
        train, test, classes = digits((spec.image_height, spec.image_width))
    elif name.startswith("mnist:") or name.endswith(".npz"):
        train, test, classes = mnist(name.removeprefix("mnist:"))
    else:
        raise InputError(f"--data {name!r}: expected quadrant, digits, or mnist:PATH.npz")
    expected = (spec.image_height, spec.image_width, spec.channels)
    if tuple(train.images.shape[1:]) != expected:
        raise InputError(f"data {name!r} has images {tuple(train.images.shape[1:])}, spec "
                         f"{spec.name!r} expects {expected} (HWC)")
    if classes > spec.num_classes:
        raise InputError(f"data {name!r} has {classes} classes, spec {spec.name!r} has only "
                         f"num_classes = {spec.num_classes}")
    train, val = split_validation(train, validation_fraction, seed)
    short = name if name.startswith("quadrant") else (
        name.split(":")[0] if ":" in name else Path(name).stem if name.endswith(".npz") else name)
    return Dataset(short, train, val, test, classes)


def split_validation(train: Split, fraction: float, seed: int) -> tuple[Split, Split]:
    n = len(train)
    held = round(n * fraction)
    order = np.random.default_rng([seed, 0x7A1]).permutation(n)
    val_idx, train_idx = np.sort(order[:held]), np.sort(order[held:])
    return (Split(train.images[train_idx], train.labels[train_idx]),
            Split(train.images[val_idx], train.labels[val_idx]))


def check_batch_size(split: Split, batch_size: int) -> None:
    if batch_size > len(split):
        raise InputError(f"recipe field 'batch_size' = {batch_size}: expected at most the "
                         f"{len(split)} examples of the training set")


def batch_order(n: int, epoch: int, seed: int, shuffle: bool) -> np.ndarray:
    """Example indices for one epoch: a PCG64 permutation keyed by (seed, epoch)."""
    if not shuffle:
        return np.arange(n)
    return np.random.default_rng([seed, epoch, 0xBA7C]).permutation(n)


def steps_per_epoch(n: int, batch_size: int, drop_last: bool) -> int:
    return n // batch_size if drop_last else -(-n // batch_size)


def batches(split: Split, batch_size: int, epoch: int, seed: int, shuffle: bool = True,
            drop_last: bool = False) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The epoch's batches as (images, labels) NumPy arrays."""
    order = batch_order(len(split), epoch, seed, shuffle)
    for k in range(steps_per_epoch(len(split), batch_size, drop_last)):
        idx = order[k * batch_size:(k + 1) * batch_size]
        yield split.images[idx], split.labels[idx]
