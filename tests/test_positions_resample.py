"""Resampled position tables (issue 23): the float64 reference's methods against each library's own
function, the spec fields that name them, and the refusals where nothing resamples yet.

Every comparison runs the library in float64 and asserts agreement to float64 rounding:
FLOAT64_ROUNDING * max|table|. An output is a sum of at most 16 products of the table with weights
of absolute sum below 2; the reference and the library compute the same weights by the same
formulas in another order, so they may differ by a few ulps of the largest input (measured: at
most 8.2 ulps on these grids); 64 ulps leaves room and is still about 10^12 times below the
smallest gap between two of the conventions (MIN_CONVENTION_GAP, measured below).
"""

from __future__ import annotations

import math
import types
from typing import get_args

import numpy as np
import pytest
import scipy.ndimage
import torch
import torch.nn.functional as F  # noqa: N812

from ports import NATIVE, create_port
from shared.checkpoints.common import require_plain_blocks
from shared.core import reference
from shared.core.equivalence import check_logits
from shared.core.positions import sequence_positions
from shared.core.presets import get_preset
from shared.core.resample import AXIS_WEIGHTS, dinov2_legacy_factor, resample_grid
from shared.core.spec import ModelSpec, PosResample
from shared.core.summary import layer_table
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable, SpecError

FLOAT64_ROUNDING = 64 * np.finfo(np.float64).eps
# (source grid, target grid): up and down, square and not, one axis kept while the other changes.
GRID_PAIRS = [((4, 4), (6, 6)), ((6, 6), (4, 4)), ((3, 5), (5, 4)), ((5, 3), (2, 7)), ((4, 6), (4, 3))]
DIM = 3


def source_grid(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """A (rows, cols, DIM) float64 grid whose values are float32 numbers (timm casts to float32)."""
    values = np.random.default_rng(seed).standard_normal((rows, cols, DIM))
    return values.astype(np.float32).astype(np.float64)


def as_nchw(grid: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(grid).permute(2, 0, 1)[None]


def as_grid(nchw: torch.Tensor) -> np.ndarray:
    return nchw[0].permute(1, 2, 0).numpy()


def assert_rounding_equal(got: np.ndarray, want: np.ndarray, scale: np.ndarray) -> None:
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= FLOAT64_ROUNDING * np.abs(scale).max()


def tiny_spec(source: tuple[int, int], target: tuple[int, int], method: str, **changes) -> ModelSpec:
    """A one-block model on 1x1 patches, so the image size is the target grid; a class token and
    two registers with rows (timm's prefix of three rows, kept aside)."""
    fields = dict(image_height=target[0], image_width=target[1], channels=1, patch_height=1, patch_width=1,
                  dim=DIM, class_token=True, registers=2, pos_embed_register_rows=True, depth=1, heads=1,
                  head_dim=DIM, mlp_dim=4, num_classes=2, pos_grid_height=source[0],
                  pos_grid_width=source[1], pos_resample=method)
    return ModelSpec(**(fields | changes))


# ---- each method against its library's own function ----------------------------------------------
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize(("source", "target"), GRID_PAIRS)
def test_timm_resample_abs_pos_embed_equals_the_reference(monkeypatch, source, target, antialias) -> None:
    """timm's own function, prefix rows and all, through `sequence_positions` (what every consumer
    reads). timm casts the table to float32 around `F.interpolate`: the table holds float32 numbers
    (the cast is exact) and the interpolation is run in float64, so only timm's arithmetic is left."""
    from timm.layers import pos_embed as timm_pos_embed

    def interpolate_in_float64(x: torch.Tensor, **kwargs) -> torch.Tensor:
        return F.interpolate(x.double(), **kwargs)

    monkeypatch.setattr(timm_pos_embed, "F", types.SimpleNamespace(interpolate=interpolate_in_float64))
    spec = tiny_spec(source, target, "timm_bicubic_antialias" if antialias else "timm_bicubic")
    prefix = np.random.default_rng(1).standard_normal((3, DIM))
    table = np.concatenate([prefix, source_grid(*source).reshape(-1, DIM)])
    want = timm_pos_embed.resample_abs_pos_embed(
        torch.from_numpy(table)[None], new_size=list(target), old_size=list(source), num_prefix_tokens=3,
        antialias=antialias)[0].numpy()
    got = sequence_positions(spec, table)
    assert np.array_equal(got[:3], prefix)  # the prefix rows, untouched
    assert_rounding_equal(got, want, table)


def torch_call(method: str, grid: np.ndarray, target: tuple[int, int]) -> np.ndarray:
    """The library call each method is defined by, in float64."""
    x, (rows, cols) = as_nchw(grid), target
    if method == "hf_bicubic":
        # Transformers 4.57, models/dinov2/modeling_dinov2.py, Dinov2Embeddings.interpolate_pos_encoding:
        #   nn.functional.interpolate(patch_pos_embed.to(torch.float32), size=(new_height, new_width),
        #                             mode="bicubic", align_corners=False)
        # (ViT's is the same call without the float32 cast).
        return as_grid(F.interpolate(x, size=(rows, cols), mode="bicubic", align_corners=False))
    if method == "dinov2_legacy":
        # Transformers 4.57's torch DINOv2 has only the size-based call above; the +0.1 offset lives in
        # DINOv2's own code (facebookresearch/dinov2, dinov2/models/vision_transformer.py,
        # interpolate_pos_encoding, interpolate_offset=0.1 and interpolate_antialias=False by default):
        #   sx = float(w0 + self.interpolate_offset) / M; sy = float(h0 + self.interpolate_offset) / M
        #   nn.functional.interpolate(patch_pos_embed.reshape(1, M, M, dim).permute(0, 3, 1, 2),
        #                             mode="bicubic", antialias=self.interpolate_antialias,
        #                             scale_factor=(sx, sy))
        # (its w0 is the image's first spatial size, the rows; M per axis here, for non-square grids).
        factors = (float(rows + 0.1) / grid.shape[0], float(cols + 0.1) / grid.shape[1])
        return as_grid(F.interpolate(x, scale_factor=factors, mode="bicubic", antialias=False))
    if method == "bilinear_antialias":
        # Transformers' Siglip2VisionEmbeddings.resize_positional_embeddings (models/siglip2)
        # as first released (5.25 writes the same weights out by hand: test_batching_libraries runs it),
        # on its (H, W, D) table permuted to (1, D, H, W):
        #   F.interpolate(positional_embeddings, size=(height, width), mode="bilinear",
        #                 align_corners=False, antialias=True)
        resized = F.interpolate(x, size=(rows, cols), mode="bilinear", align_corners=False, antialias=True)
        return as_grid(resized)
    assert method == "bilinear"
    return as_grid(F.interpolate(x, size=(rows, cols), mode="bilinear", align_corners=False, antialias=False))


@pytest.mark.parametrize("method", ["hf_bicubic", "dinov2_legacy", "bilinear", "bilinear_antialias"])
@pytest.mark.parametrize(("source", "target"), GRID_PAIRS)
def test_torch_interpolate_equals_the_reference(source, target, method) -> None:
    grid = source_grid(*source)
    assert_rounding_equal(resample_grid(grid, *target, method), torch_call(method, grid, target), grid)


@pytest.mark.parametrize(("source", "target"), GRID_PAIRS)
def test_scipy_zoom_equals_the_reference(source, target) -> None:
    """big_vision's resample_posemb: scipy.ndimage.zoom(grid, (new/old, new/old, 1), order=1),
    per axis here for non-square grids."""
    grid = source_grid(*source)
    want = scipy.ndimage.zoom(grid, (target[0] / source[0], target[1] / source[1], 1), order=1)
    assert_rounding_equal(resample_grid(grid, *target, "big_vision_zoom"), want, grid)


# The smallest max-abs gap between two conventions on these grids and tables is 0.168 (measured:
# hf_bicubic vs dinov2_legacy on (4,4)->(6,6)); timm_bicubic and hf_bicubic are one function by
# definition and are left out; bilinear with and without antialiasing are one function when enlarging.
MIN_CONVENTION_GAP = 0.1
SAME_WHEN_ENLARGING = {"bilinear", "bilinear_antialias"}


@pytest.mark.parametrize(("source", "target"), GRID_PAIRS)
def test_each_equality_pins_its_own_convention(source, target) -> None:
    """The conventions differ far beyond rounding, so each equality above holds for its own only;
    antialiasing a bilinear resize changes nothing on an axis that is enlarged or kept."""
    grid = source_grid(*source)
    methods = [m for m in AXIS_WEIGHTS if m != "timm_bicubic"]
    out = {m: resample_grid(grid, *target, m) for m in methods}
    enlarged = all(t >= s for s, t in zip(source, target, strict=True))
    pairs = [(a, b) for i, a in enumerate(methods) for b in methods[i + 1:]]
    compared = [(a, b) for a, b in pairs if not (enlarged and {a, b} == SAME_WHEN_ENLARGING)]
    gaps = [np.abs(out[a] - out[b]).max() for a, b in compared]
    assert min(gaps) > MIN_CONVENTION_GAP
    linear = np.abs(out["bilinear"] - out["bilinear_antialias"]).max()
    assert linear <= FLOAT64_ROUNDING if enlarged else linear > MIN_CONVENTION_GAP


def test_every_spec_method_has_a_definition() -> None:
    assert set(AXIS_WEIGHTS) == set(get_args(PosResample)) - {"none"}


@pytest.mark.parametrize("method", sorted(AXIS_WEIGHTS))
def test_a_grid_kept_at_its_size_is_returned_unchanged(method) -> None:
    """Every library returns early at the same size. For DINOv2's offset the early return matters:
    its factor 4.1 / 4 would otherwise move the samples (by 0.229 here, measured)."""
    grid = source_grid(4, 4)
    assert resample_grid(grid, 4, 4, method) is grid
    moved = torch_call("dinov2_legacy", grid, (4, 4))
    assert np.abs(moved - grid).max() > MIN_CONVENTION_GAP
    assert dinov2_legacy_factor(4, 4) == 4.1 / 4


# ---- the spec ---------------------------------------------------------------------------------
def test_the_canonical_table_is_the_source_grid_and_the_reference_resamples_it() -> None:
    spec = tiny_spec((3, 5), (5, 4), "timm_bicubic_antialias")
    d = spec.derived
    assert (d.pos_grid_rows, d.pos_grid_cols, d.num_patches, d.pos_rows_used) == (3, 5, 20, 18)
    assert d.tensor_shapes["pos_embed"] == (18, DIM) and d.seq_len == 23
    note = next(row.note for row in layer_table(spec) if row.layer == "pos_embed")
    assert note.endswith("; its 3 × 5 grid resampled to 5 × 4 by timm_bicubic_antialias")
    weights = init_weights(spec, seed=3)
    images = np.random.default_rng(4).standard_normal((2, 5, 4, 1)).astype(np.float32)
    # The same model with the resampled table stored at the image's grid computes the same logits.
    plain = spec.replace(pos_grid_height=None, pos_grid_width=None, pos_resample="none")
    resampled = weights | {"pos_embed": sequence_positions(spec, weights["pos_embed"])}
    logits = reference.forward(spec, weights, images)
    assert np.array_equal(logits, reference.forward(plain, resampled, images))


def test_resampling_fields_enter_the_hash_only_when_set() -> None:
    spec = get_preset("archive-torch")
    assert spec.spec_hash == "b272c0e9d9c130bf"  # the hash its weight files were saved with
    methods = [m for m in get_args(PosResample) if m != "none"]
    hashes = {spec.spec_hash} | {spec.replace(pos_grid_height=5, pos_resample=m).spec_hash for m in methods}
    assert len(hashes) == len(methods) + 1


BAD_RESAMPLING = [
    ({"pos_resample": "bicubic"}, "pos_resample", "expected one of none | timm_bicubic"),
    ({"pos_resample": "none"}, "pos_grid_height", "expected 5 (the image's patch grid) when pos_resample"),
    ({"pos_grid_height": 0}, "pos_grid_height", "a positive integer of at most 1,048,576, or null"),
    ({"pos_grid_width": True}, "pos_grid_width", "a positive integer of at most 1,048,576, or null"),
    ({"pos_grid_height": 2048, "pos_grid_width": 1024}, "pos_grid_width", "a table grid of at most"),
    ({"pos_rows": 40}, "pos_rows", "null when pos_resample is set"),
    ({"pos_embed": "sincos", "dim": 4, "head_dim": 4, "pos_grid_height": None, "pos_grid_width": None,
      "pos_embed_register_rows": False, "pos_embed_class_row": False}, "pos_resample",
     "'none' when pos_embed is 'sincos'"),
    ({"pos_embed": "none", "pos_embed_class_row": False, "pos_embed_register_rows": False},
     "pos_grid_height", "null when pos_embed is 'none'"),
]


@pytest.mark.parametrize(("changes", "field", "expected"), BAD_RESAMPLING)
def test_invalid_resampling_names_field_value_and_expectation(changes, field, expected) -> None:
    with pytest.raises(SpecError) as info:
        tiny_spec((3, 5), (5, 4), "bilinear", **changes)
    message = str(info.value)
    assert f"'{field}'" in message and expected in message and "\n" not in message


def test_dinov2_offset_always_makes_the_target_size() -> None:
    """torch makes floor(in * (out + 0.1) / in) rows, and DINOv2 asserts that is `out`: the offset
    guarantees it (so the spec need not check), here for every pair of sizes up to 128."""
    sizes = range(1, 129)
    assert all(math.floor(float(i) * dinov2_legacy_factor(i, o)) == o for i in sizes for o in sizes)


# ---- each port resamples with its own framework's operation, or refuses the method by name ---------
# What each port states it offers (RESAMPLE_OPS in its model.py), written out here so a port that
# drops or adds a method fails: torch's F.interpolate computes every method; Keras' and JAX's cubic
# is Keys' a = -0.5 (no clamped a = -0.75 bicubic, no DINOv2 factor path); MLX's Upsample centres a
# scale factor's grid (no DINOv2 factor path). The ONNX backend (the torch port exported) offers none.
METHODS = [m for m in get_args(PosResample) if m != "none"]
ANTIALIAS_LINEAR_ZOOM = {"timm_bicubic_antialias", "bilinear", "bilinear_antialias", "big_vision_zoom"}
OFFERED = {"torch": set(METHODS), "keras": ANTIALIAS_LINEAR_ZOOM, "flax": ANTIALIAS_LINEAR_ZOOM,
           "mlx": set(METHODS) - {"dinov2_legacy"}, "onnx": set()}
MISSING_OPERATION = {"keras": "keras.ops.image.resize's bicubic", "flax": "jax.image.resize's",
                     "mlx": "mlx.nn.Upsample centres a scale factor's", "onnx": "export of a resampled"}
# (source grid, target grid): non-square up on one axis and down on the other, and square down.
PORT_GRID_PAIRS = [((3, 5), (5, 4)), ((6, 6), (4, 4))]


def port_spec(source: tuple[int, int], target: tuple[int, int], method: str) -> ModelSpec:
    """One block of width 16 on 2 x 2 patches, a class token and a register with rows."""
    return ModelSpec(image_height=2 * target[0], image_width=2 * target[1], channels=3, patch_height=2,
                     patch_width=2, dim=16, class_token=True, registers=1, pos_embed_register_rows=True,
                     depth=1, heads=2, head_dim=8, mlp_dim=32, num_classes=3, pos_grid_height=source[0],
                     pos_grid_width=source[1], pos_resample=method)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("framework", [*NATIVE, "onnx"])
def test_each_port_resamples_with_its_own_operation_or_names_the_missing_one(framework, method) -> None:
    """An offered method: the port's logits equal the reference's at the float32 bound, on both grid
    pairs, with a table of unit scale so positions weigh in the logits (the nearest other convention
    moves them by more than 50 times the bound: measured below, on the reference). Not offered: one
    line naming the framework's missing operation, before any weight is loaded."""
    for source, target in PORT_GRID_PAIRS:
        spec = port_spec(source, target, method)
        if method not in OFFERED[framework]:
            with pytest.raises(FrameworkUnavailable) as info:
                create_port(framework, spec)
            message = str(info.value)
            assert message.startswith(f"{framework}: pos_resample={method!r} is not offered: ")
            assert MISSING_OPERATION[framework] in message and "\n" not in message
            return
        weights = init_weights(spec, seed=1)
        weights["pos_embed"] = np.random.default_rng(2).standard_normal(weights["pos_embed"].shape)
        weights["pos_embed"] = weights["pos_embed"].astype(np.float32)
        shape = (2, spec.image_height, spec.image_width, spec.channels)
        images = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
        want = reference.forward(spec, weights, images)
        port = create_port(framework, spec)
        port.load(weights)
        verdict = check_logits(spec, port.logits(images), want, port.param_count())
        assert verdict.passed, f"{framework} {method} {source}->{target}: {verdict.reason}"
        others = [reference.forward(spec.replace(pos_resample=m), weights, images) for m in METHODS
                  if {m, method} not in ({m}, {"timm_bicubic", "hf_bicubic"})]  # one function twice named
        assert min(np.abs(other - want).max() for other in others) > 50 * verdict.tolerance


def test_exporters_refuse_a_resampled_table() -> None:
    spec = tiny_spec((3, 5), (5, 4), "hf_bicubic")
    with pytest.raises(SpecError, match=r"^cannot export to timm: spec field pos_resample='hf_bicubic'"):
        require_plain_blocks("timm", spec)
