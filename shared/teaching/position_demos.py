"""The catalogue's demonstrations for positions at another resolution and 2-D rotary embeddings
(issue 23): the same canonical weights and input run with the pin and without it through the
float64 reference, laid out per target grid (`over_grids`) or with the tap where `trace` first
sees the difference (`with_trace_lines`: the first block's attention for RoPE); and RoPE on the
prefix tokens, by a 1-D token index or by one axis's table on both halves, which have no spec
field, run in the torch port (`demo_rope_prefix`, `demo_rope_1d`, `demo_rope_half_reused`).

Resampling runs on DINOv2's features at a tiny size (class token, two registers without position
rows, LayerScale, SwiGLU; one block) with a 4x4 source table, at two target grids: 6x5 (enlarged,
non-square) and 3x3 (shrunk). RoPE runs on `rope-tiny` (DINOv3's layout: halves, centred
coordinates, theta 100, a class and a register token).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ports import create_port
from shared.core.presets import get_preset
from shared.core.reference import forward
from shared.core.resample import AXIS_WEIGHTS
from shared.core.rotary import RotaryTables
from shared.core.spec import ModelSpec
from shared.teaching.demo import Demo, demo_case, first_seen, gap, variant_demo
from shared.teaching.first_divergence import compare_taps, reference_taps
from shared.teaching.position_transforms import axis_reused_tables, one_d_tables, prefix_rotated_tables
from shared.teaching.row import On
from shared.teaching.transforms import Case, Variant

SOURCE_GRID = (4, 4)  # the table's grid; the images' grids below are other
TARGET_GRIDS = {"enlarged 4x4 -> 6x5": (24, 20), "shrunk 4x4 -> 3x3": (12, 12)}  # image (h, w), 4x4 patches


def resampled_spec(method: str, image: tuple[int, int]) -> ModelSpec:
    """dinov2-reg-tiny, one block, with a 4x4 table resampled by `method` to the image's patch grid."""
    h, w = image
    return get_preset("dinov2-reg-tiny").replace(
        name=f"dinov2-reg-tiny {h}x{w} ({method})", depth=1, image_height=h, image_width=w,
        pos_grid_height=SOURCE_GRID[0], pos_grid_width=SOURCE_GRID[1], pos_resample=method)


def resampled_on(method: str) -> On:
    """What a resampling entry is measured on: `resampled_spec` at the enlarged grid (6x5)."""
    h, w = TARGET_GRIDS["enlarged 4x4 -> 6x5"]
    return On("dinov2-reg-tiny", {"depth": 1, "image_height": h, "image_width": w,
                                  "pos_grid_height": SOURCE_GRID[0], "pos_grid_width": SOURCE_GRID[1],
                                  "pos_resample": method})


def over_grids(spec: ModelSpec, variants: Sequence[Variant]) -> Demo:
    """The template at each target grid, the table resampled by `spec`'s method, each line headed
    by its grid and naming the tap where the trace first sees the variant."""
    demo = Demo(None, ran_with=["reference"])
    for label, image in TARGET_GRIDS.items():
        part = variant_demo(resampled_spec(spec.pos_resample, image), variants, traced=True)
        demo.gap = max(demo.gap or 0.0, part.gap or 0.0)
        demo.lines += [f"{label}: {line}" for line in part.lines]
    return demo


def conventions_paired(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """The two alternatives against each other, and the two libraries that compute one function."""
    for label, image in TARGET_GRIDS.items():
        spec = resampled_spec(case.spec.pos_resample, image)
        grid = demo_case(spec)
        logits = {m: forward(spec.replace(pos_resample=m), grid.weights, grid.images)
                  for m in ("big_vision_zoom", "bilinear")}
        zoom_bilinear = gap(logits["big_vision_zoom"], logits["bilinear"])
        demo.lines.append(f"{label}: big_vision zoom vs bilinear {zoom_bilinear:.3g} (corners on corners "
                          "vs the half-pixel grid)")
    demo.lines.append("timm's resample_abs_pos_embed(antialias=False) and Transformers' "
                      "interpolate_pos_encoding both call F.interpolate(bicubic, size=...): gap 0")


def antialias_kernels(demo: Demo, _case: Case, _variants: Sequence[Variant]) -> None:
    """How far the two bicubic kernels' weights differ along one axis."""
    for n_out in (6, 3):
        moved = gap(AXIS_WEIGHTS["timm_bicubic_antialias"](4, n_out), AXIS_WEIGHTS["hf_bicubic"](4, n_out))
        demo.lines.append(f"one axis 4 -> {n_out}: the two kernels' weights differ by up to {moved:.3g}")


def with_trace_lines(spec: ModelSpec, variants: Sequence[Variant]) -> Demo:
    """The template, then for each variant the tap where the trace first sees it."""
    demo = variant_demo(spec, variants)
    case = demo_case(spec)
    for v in variants:
        changed = v.apply(case)
        if changed is not None:
            demo.lines.append(f"{v.key}: trace first sees it at {first_seen(case, changed)}")
    return demo


def on_timm_layout(demo: Demo, case: Case, variants: Sequence[Variant]) -> None:
    """The same on timm's layout: interleaved pairs, index coordinates, theta 1e4."""
    timm_like = case.spec.replace(name="rope-tiny (timm: interleaved, index, theta 1e4)",
                                  rope="axial_interleaved", rope_coords="index", rope_theta=10_000.0)
    more = with_trace_lines(timm_like, variants)
    demo.gap = max(demo.gap or 0.0, more.gap or 0.0)
    demo.lines += more.lines


def prefix_rotated_port(spec: ModelSpec, weights: dict[str, np.ndarray]) -> object:
    """The torch port with every block's rotary buffers replaced by `prefix_rotated_tables`: the
    tables of a port that rotates the class and register tokens too (no spec field: the spec
    never rotates the prefix)."""
    return port_with_tables(spec, weights, prefix_rotated_tables(spec))


def port_with_tables(spec: ModelSpec, weights: dict[str, np.ndarray], tables: RotaryTables) -> object:
    """The torch port with every block's rotary buffers replaced by `tables` (another port's)."""
    port = create_port("torch", spec)
    port.load(weights)
    for blk in port.model.blocks:
        rope = blk.attn.rope
        rope.cos, rope.sin = rope.cos.new_tensor(tables.cos), rope.sin.new_tensor(tables.sin)
    return port


def demo_rope_prefix() -> Demo:
    """RoPE on the class and register tokens too: the torch port with the rotated-prefix tables,
    against the float64 reference."""
    spec = get_preset("rope-tiny")
    case = demo_case(spec)
    pinned = reference_taps(spec, case.weights, case.images)
    port = prefix_rotated_port(spec, case.weights)
    moved = gap(port.logits(case.images), pinned["logits"])
    trace = compare_taps(spec, pinned, port.intermediates(case.images), "torch")
    first = trace.first_divergence
    return Demo(moved, ran_with=["reference", "torch"], lines=[
        f"spec 'rope-tiny' ({spec.derived.prefix_tokens} prefix tokens), same canonical weights: the "
        f"torch port whose table puts the unrotated rows at the end (the prefix rotated by the first "
        f"patches' angles) moves the logits by {moved:.3g} from the reference",
        f"trace first sees it at {first.name if first else 'none'}",
        "timm's EvaAttention and DINOv3's apply_rotary_pos_emb rotate q[:, :, npt:] only; rotating the "
        "prefix at the origin's angle (0) would be the same function: only a non-zero angle shows"])


def _tables_demo(spec: ModelSpec, tables: RotaryTables, what: str, libraries: str) -> Demo:
    """The torch port holding another port's `tables`, against the float64 reference: the gap and
    the tap where the trace first sees it."""
    case = demo_case(spec)
    pinned = reference_taps(spec, case.weights, case.images)
    port = port_with_tables(spec, case.weights, tables)
    moved = gap(port.logits(case.images), pinned["logits"])
    first = compare_taps(spec, pinned, port.intermediates(case.images), "torch").first_divergence
    return Demo(moved, ran_with=["reference", "torch"], lines=[
        f"spec {spec.name!r} ({spec.derived.grid_rows}x{spec.derived.grid_cols} patches), same canonical "
        f"weights: the torch port that {what} moves the logits by {moved:.3g} from the reference",
        f"trace first sees it at {first.name if first else 'none'}", libraries])


def demo_rope_1d() -> Demo:
    """RoPE by a 1-D token index instead of 2-D (row, column) positions, on pixtral-tiny."""
    spec = get_preset("pixtral-tiny")
    return _tables_demo(spec, one_d_tables(spec), "rotates patch t by t times the 1-D RoPE bands",
                        "Transformers' Pixtral and Qwen2.5-VL build (row, column) position ids "
                        "(meshgrid 'ij'); a language model's rotary op fed 0 .. N-1 rotates by the index")


def demo_rope_half_reused() -> Demo:
    """One axis's table reused for both halves: the column angles from the row coordinate."""
    spec = get_preset("pixtral-tiny")
    return _tables_demo(spec, axis_reused_tables(spec), "takes the column angles from each patch's row",
                        "Transformers' Pixtral and Qwen2.5-VL concatenate a row table and a column table "
                        "(recomposition_frequencies); one table on both halves leaves the columns unseen")
