"""A batch of images at their own patch grids (`batching = "naflex"` or `"packed"`): the canonical
input every port and the reference read, and the masks derived from it once.

SigLIP2's NaFlex (Transformers' `Siglip2VisionModel`, timm's `naflexvit_*`) patchifies each image at
its own grid of rows x cols patches, pads every image's token sequence to `max_patches` and hands the
model a key-padding mask (`pixel_attention_mask`). Pixtral packs several images, each at its own
grid, one after another into one sequence and attends block-diagonally. The canonical batch is one
NumPy structured array, so it travels wherever an image batch does (a worker's `.npy` file, without
pickles): per sequence,

- `patches`: (max_patches, ph * pw * C) float32, its images' patches one image after another, each
  row-major over its own grid and flattened (patch_row, patch_col, channel) as spec.py's fixed
  patchify; rows past the images' patches are padding, any finite values (they must change no
  valid output);
- `grid`: naflex: (rows, cols) int32 of its one image; packed: (pack_images, 2), each image's; rows
  <= the spec's grid_rows, cols <= grid_cols, and the images' rows * cols together <= max_patches.

The masks: `segments` numbers each patch token by its image within the sequence (-1: padding).
`attention_mask` is naflex's key-padding mask (B, seq_len), prefix tokens always valid, or packed's
block-diagonal (B, tokens, tokens): a token attends to its own image's tokens, a padding token to the
padding. No softmax row is ever fully masked (a padding query reads valid keys, or the padding), so
none becomes NaN; what padding tokens compute is ignored. `pool_mask` (B, images, seq_len) says which
tokens each image pools (the patches alone for `mean`, its prefix tokens too for `mean_all` and `map`).
"""

from __future__ import annotations

import numpy as np

from shared.core.spec import ModelSpec
from shared.errors import InputError


def batch_dtype(spec: ModelSpec) -> np.dtype:
    """The structured dtype of one sequence of a naflex or packed batch."""
    d = spec.derived
    grid = (2,) if spec.batching == "naflex" else (spec.pack_images, 2)
    return np.dtype([("patches", "<f4", (d.num_patches, d.patch_features)), ("grid", "<i4", grid)])


def image_grids(spec: ModelSpec, batch: np.ndarray) -> np.ndarray:
    """(B, images per sequence, 2): every image's (rows, cols), naflex's one per sequence included."""
    grids = np.asarray(batch["grid"], dtype=np.int64)
    return grids[:, None] if spec.batching == "naflex" else grids


def grid_batch(spec: ModelSpec, patches: np.ndarray, grids: np.ndarray) -> np.ndarray:
    """A canonical batch from (B, max_patches, features) patches and its grids, checked."""
    batch = np.zeros(len(grids), dtype=batch_dtype(spec))
    batch["patches"], batch["grid"] = patches, grids
    check_batch(spec, batch)
    return batch


def probe_grids(spec: ModelSpec, batch: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded grids of different shapes. naflex: the first image fills max_patches as nearly as the
    spec's grid allows (the longest sequence), the later ones a seeded order of the other grids that
    fit (each shape once while there are enough). packed: each sequence's images drawn in a seeded
    order among the grids that still leave every later image of the sequence one patch."""
    d, k = spec.derived, spec.pack_images
    m = spec.merge_size  # with a merger, grids of whole merge units
    fits = [(r, c) for r in range(m, d.grid_rows + 1, m) for c in range(m, d.grid_cols + 1, m)
            if r * c <= spec.max_patches]
    if spec.batching == "naflex":
        largest = max(fits, key=lambda rc: (rc[0] * rc[1], -abs(rc[0] - rc[1])))
        others = [fits[i] for i in rng.permutation(len(fits)) if fits[i] != largest] or [largest]
        return np.asarray([largest, *(others * batch)][:batch], dtype=np.int32)
    sequences = []
    for _ in range(batch):
        left, grids = spec.max_patches, []
        for j in range(k):
            room = left - (k - j - 1) * m * m  # every later image keeps at least one merge unit
            grids.append(next(fits[i] for i in rng.permutation(len(fits)) if fits[i][0] * fits[i][1] <= room))
            left -= grids[-1][0] * grids[-1][1]
        sequences.append(grids)
    return np.asarray(sequences, dtype=np.int32)


def probe_grid_batch(spec: ModelSpec, batch: int, rng: np.random.Generator) -> np.ndarray:
    """The seeded probe batch: standard-normal patches on each image's grid, zeros in the padding
    (Transformers' `Siglip2ImageProcessor` pads with zeros)."""
    grids = probe_grids(spec, batch, rng)
    patches = rng.standard_normal((batch, spec.derived.num_patches, spec.derived.patch_features))
    batch_array = np.zeros(batch, dtype=batch_dtype(spec))
    batch_array["grid"] = grids
    patches *= (segments(spec, batch_array) >= 0)[..., None]
    return grid_batch(spec, patches.astype(np.float32), grids)


def segments(spec: ModelSpec, batch: np.ndarray) -> np.ndarray:
    """(B, max_patches) int: the image each patch token belongs to within its sequence, -1 padding."""
    counts = image_grids(spec, batch).prod(axis=-1)  # (B, images)
    ends = np.cumsum(counts, axis=1)
    tokens = np.arange(spec.derived.num_patches)
    image = (tokens[None, :, None] >= ends[:, None, :]).sum(axis=-1)  # images ending at or before
    return np.where(tokens[None, :] < ends[:, -1:], image, -1)


def own_images(spec: ModelSpec, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per patch token (B, max_patches): its image in its sequence (`segments`, -1 on the padding),
    the first token of that image, and that image's columns (the padding reads image 0's)."""
    grids, seg = image_grids(spec, batch), segments(spec, batch)  # (B, images, 2), (B, max_patches)
    counts = grids.prod(axis=-1)
    image = np.maximum(seg, 0)
    start = np.take_along_axis(np.cumsum(counts, axis=1) - counts, image, axis=1)
    return seg, start, np.take_along_axis(grids[..., 1], image, axis=1)


def patch_coordinates(spec: ModelSpec, batch: np.ndarray) -> np.ndarray:
    """(B, max_patches, 2) int: each patch token's (row, col) within its own image, (0, 0) on the
    padding, as the spec's token_order lays the image out (raster: row-major; merge_block: each merge
    unit's patches together, row-major within, the units row-major). Rotary rows, windows and the
    merger are read from these."""
    seg, start, cols = own_images(spec, batch)
    local = np.arange(seg.shape[1])[None] - start
    if spec.token_order == "merge_block":
        m = spec.merge_size
        unit, within = local // (m * m), local % (m * m)
        units_across = np.maximum(cols // m, 1)
        coords = np.stack([unit // units_across * m + within // m, unit % units_across * m + within % m], -1)
    else:
        coords = np.stack([local // cols, local % cols], axis=-1)
    return np.where((seg >= 0)[..., None], coords, 0)


def position_rows(spec: ModelSpec, batch: np.ndarray) -> np.ndarray | None:
    """(B, seq_len) int, the row each token reads of its sequence's resized tables (None without a
    learned table): image j's table resized to its grid and held in the spec's whole grid_rows x
    grid_cols, the images one after another, so patch (row, col) of image j reads row
    j * grid_rows * grid_cols + row * grid_cols + col, in whatever order the batch lays it out;
    -1 (no position) for the prefix tokens and the padding."""
    if spec.pos_embed != "learned":
        return None
    d, seg = spec.derived, segments(spec, batch)
    row, col = np.moveaxis(patch_coordinates(spec, batch), -1, 0)
    rows = np.where(seg >= 0, (seg * d.grid_rows + row) * d.grid_cols + col, -1)
    return np.concatenate([np.full((len(batch), d.prefix_tokens), -1), rows], axis=1)


def merge_index(spec: ModelSpec, batch: np.ndarray) -> np.ndarray | None:
    """(B, max_patches) int, the merger's gather (None without one): slot u * m^2 + s of a sequence
    holds the token of its merged token u's s-th patch, s = (row % m) * m + col % m; the merged tokens
    run image by image, each image's merge units row-major (Qwen's order), so a merge_block batch's
    index is the identity and a raster batch's gathers each 2-D neighbourhood; the padding stays put."""
    if spec.merge_size == 1:
        return None
    m, (seg, start, cols) = spec.merge_size, own_images(spec, batch)
    row, col = np.moveaxis(patch_coordinates(spec, batch), -1, 0)
    unit = (row // m) * (cols // m) + col // m  # its merge unit, row-major over its image's
    slot = start + unit * m * m + (row % m) * m + col % m
    slot = np.where(seg >= 0, slot, np.arange(seg.shape[1])[None])  # each token's slot: a permutation
    return np.argsort(slot, axis=1, kind="stable")


def merged_segments(spec: ModelSpec, batch: np.ndarray) -> np.ndarray:
    """(B, max_patches / m^2) int: the image each merged token belongs to, -1 padding (an image's merge
    units fill the slots its patches did)."""
    return segments(spec, batch)[:, :: spec.merge_size**2]


def patch_counts(spec: ModelSpec, images: np.ndarray) -> tuple[int, int]:
    """(the real patches, the patch slots) a batch holds: its images' patches, and what the model
    computes on (every sequence's max_patches); equal for a fixed batch, which has no padding."""
    if spec.batching == "fixed":
        patches = len(images) * spec.derived.num_patches
        return patches, patches
    return int((segments(spec, images) >= 0).sum()), len(images) * spec.derived.num_patches


def token_mask(spec: ModelSpec, batch: np.ndarray) -> np.ndarray:
    """(B, seq_len) bool, the valid tokens: prefix tokens, then each sequence's images' patches."""
    prefix = np.ones((len(batch), spec.derived.prefix_tokens), dtype=bool)
    return np.concatenate([prefix, segments(spec, batch) >= 0], axis=1)


def attention_mask(spec: ModelSpec, batch: np.ndarray) -> np.ndarray:
    """naflex: the key-padding mask (B, seq_len); packed: the block-diagonal (B, tokens, tokens)."""
    if spec.batching == "naflex":
        return token_mask(spec, batch)
    seg = segments(spec, batch)  # packed specs have no prefix tokens
    return seg[:, :, None] == seg[:, None, :]


def window_mask(spec: ModelSpec, batch: np.ndarray) -> np.ndarray | None:
    """(B, tokens, tokens) bool, the window blocks' mask (None without window_size): a patch attends
    to the patches of its own image in its own window_size x window_size tile, counted from the
    image's top-left corner (Qwen2.5-VL's windows, which it tiles over 2x2 merge units: the same tiles
    when the window is whole merge units), a padding token to the padding. Computed from each
    patch's (row, col), independent of the order a port lays the tiles out in."""
    if not spec.window_size:
        return None
    seg = segments(spec, batch)  # window specs have no prefix tokens
    tile = patch_coordinates(spec, batch) // spec.window_size  # (B, max_patches, 2)
    same_tile = (tile[:, :, None] == tile[:, None, :]).all(axis=-1)
    return (seg[:, :, None] == seg[:, None, :]) & (same_tile | (seg < 0)[:, :, None])


def pool_mask(spec: ModelSpec, batch: np.ndarray) -> np.ndarray:
    """(B, images, seq_len) bool: the tokens each image pools (mean: its patches; mean_all and map:
    its prefix tokens too, which only naflex has); with a merger, its merged tokens."""
    seg = segments(spec, batch) if spec.merge_size == 1 else merged_segments(spec, batch)
    images = np.arange(image_grids(spec, batch).shape[1])
    own = seg[:, None, :] == images[None, :, None]
    prefix = np.full((*own.shape[:2], spec.derived.prefix_tokens), spec.pooling != "mean")
    return np.concatenate([prefix, own], axis=2)


def check_batch(spec: ModelSpec, batch: np.ndarray, source: str = "input") -> None:
    """A naflex or packed batch: the structured dtype, at least one sequence, every grid within the
    spec's bounds and the images' patches within max_patches, every patch value finite (padding
    included: a NaN there would still be a NaN in a masked port)."""
    wanted = batch_dtype(spec)
    if not isinstance(batch, np.ndarray) or batch.dtype != wanted or batch.ndim != 1:
        got = type(batch).__name__ if not isinstance(batch, np.ndarray) else f"{batch.dtype} {batch.shape}"
        raise InputError(f"{source}: a {spec.batching} batch is a 1-D structured array of {wanted} (patches, "
                         f"grid) for spec {spec.name!r}, got {got}")
    if len(batch) < 1:
        raise InputError(f"{source}: the batch is empty")
    d, m = spec.derived, spec.merge_size
    for i, grids in enumerate(image_grids(spec, batch).tolist()):
        for rows, cols in grids:
            if not (1 <= rows <= d.grid_rows and 1 <= cols <= d.grid_cols):
                raise InputError(f"{source}: sequence {i} has an image of grid {rows} x {cols}, expected "
                                 f"rows 1..{d.grid_rows} and cols 1..{d.grid_cols}")
            if rows % m or cols % m:
                raise InputError(f"{source}: sequence {i} has an image of grid {rows} x {cols}, expected "
                                 f"rows and cols multiples of merge_size = {m} (whole merge units)")
        total = sum(rows * cols for rows, cols in grids)
        if total > spec.max_patches:
            shown = " + ".join(f"{r} x {c}" for r, c in grids)
            raise InputError(f"{source}: sequence {i} holds {total} patches ({shown}), expected at most "
                             f"max_patches = {spec.max_patches}")
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
    if spec.merge_size > 1 and tensor.shape[1] == spec.derived.merged_tokens:
        mask = merged_segments(spec, batch) >= 0  # the merger's output: merged tokens
    if tensor.shape[:2] != mask.shape:
        return None
    return np.broadcast_to(mask.reshape(*mask.shape, *([1] * (tensor.ndim - 2))), tensor.shape)


def entry_images(spec: ModelSpec, batch: np.ndarray | None, tensor: np.ndarray) -> np.ndarray | None:
    """The image each entry of a packed batch's tensor belongs to, numbered as the logits' rows
    (sequence s's image j is s * pack_images + j; -1 on padding): a (B, tokens, ...) tensor by its
    token, an attention map (B, heads, queries, keys) by its query (a block's token, or the pool's
    probe of one image). None where axis 0 already is the image (a naflex batch; logits and pooled
    vectors) or for a fixed batch. `compare_tensor` names the worst entry's image by it."""
    if batch is None or spec.batching != "packed" or np.ndim(tensor) < 3 or len(tensor) != len(batch):
        return None
    seg, k, shape = segments(spec, batch), spec.pack_images, np.shape(tensor)
    if spec.merge_size > 1 and len(shape) >= 3 and shape[1] == spec.derived.merged_tokens:
        seg = merged_segments(spec, batch)  # the merger's output: merged tokens
    first = k * np.arange(len(batch))[:, None]  # each sequence's first image's number
    if shape[1] == seg.shape[1]:  # (B, tokens, ...): packed specs have no prefix tokens
        image = np.where(seg >= 0, first + seg, -1)
        return np.broadcast_to(image.reshape(*image.shape, *([1] * (len(shape) - 2))), shape)
    if len(shape) == 4 and shape[2] in (seg.shape[1], k):  # (B, heads, queries, keys)
        image = np.where(seg >= 0, first + seg, -1) if shape[2] == seg.shape[1] else first + np.arange(k)
        return np.broadcast_to(image[:, None, :, None], shape)
    return None
