"""Issue 37's first slices: a NaFlex batch (each image at its own patch grid, padded to max_patches,
with a key-padding mask) and a packed one (Pixtral's: several images one after another in each
sequence, attending block-diagonally) through the float64 reference and the four ports, judged on
the tokens that count. Tiny: naflex-tiny (32,170 parameters), four images of 3x4, 4x1, 3x1 and 1x1
patches; packed-tiny (the same tower, mean-pooled), four sequences of 16 tokens of three images each;
siglip2-naflex-tiny (naflex-tiny with a learned 4x4 table resized to each image's grid by antialiased
bilinear, as SigLIP2's)."""

from __future__ import annotations

import numpy as np
import pytest

import ports
from shared.core import reference
from shared.core.batching import (
    attention_mask,
    entry_images,
    grid_batch,
    image_grids,
    merge_index,
    pool_mask,
    position_rows,
    segments,
    valid_rows,
    window_mask,
)
from shared.core.equivalence import check_logits, check_outputs, compare_tensor, tap_budget
from shared.core.inputs import probe_batch
from shared.core.precision import Precision
from shared.core.presets import get_preset
from shared.core.tolerance import logit_atol
from shared.core.weights import init_weights
from shared.errors import InputError, SpecError
from shared.runtime.verify import VerifyCase, fill_reference
from shared.teaching.first_divergence import PortTrace, compare_taps, report_lines
from shared.training.data import load_dataset
from tests import background
from tests.adversarial import Outcome
from tests.ports_cache import port

SPEC = get_preset("naflex-tiny")
# The same tower with a class token and a register (prefix keys always valid) and masked mean pooling.
MEAN = SPEC.replace(name="naflex-mean", class_token=True, registers=1, pooling="mean")
PACKED = get_preset("packed-tiny")
# Packed with an attention pool: a probe per image, each over its own image's tokens.
PACKED_MAP = PACKED.replace(name="packed-map", pooling="map")
# SigLIP2's positions: a learned 4x4 table resized to each image's grid (antialiased bilinear).
POSITIONED = get_preset("siglip2-naflex-tiny")
# Pixtral's: 2-D RoPE (index coordinates, alternating bands), each patch by its row and column in its image.
ROTARY = get_preset("pixtral-tiny").replace(name="pixtral-packed-tiny", batching="packed", max_patches=16,
                                            pack_images=3)
# Qwen2.5-VL's tower: block 0 attends within each image's 4 x 4-patch windows, block 1 over the whole
# image, then its 2x2 patch merger; the patches in its processor's merge-block order. RASTER: the same
# tower on each image's patches row-major.
QWEN = get_preset("qwen2.5-vl-tiny")
RASTER = QWEN.replace(name="qwen2.5-vl-tiny-raster", token_order="raster")
# Qwen3-VL's: a learned 4 x 4 table resized to each packed image's grid (corners aligned), merge-block order.
QWEN3 = get_preset("qwen3-vl-tiny")


def padded_with_noise(spec, batch: np.ndarray) -> np.ndarray:
    """The batch with large random values where its padding was zeros: no valid output may move."""
    noisy = batch.copy()
    pad = segments(spec, batch) < 0
    noisy["patches"][pad] = 50 * np.random.default_rng(7).standard_normal(noisy["patches"][pad].shape)
    return noisy


def test_probe_batch_mixes_grids_and_is_checked() -> None:
    batch = probe_batch(SPEC, 4)
    assert batch["grid"].tolist() == [[3, 4], [4, 1], [3, 1], [1, 1]]
    assert (segments(SPEC, batch) == 0).sum(axis=1).tolist() == [12, 4, 3, 1]
    assert not batch["patches"][segments(SPEC, batch) < 0].any()  # zeros in the padding
    bad = batch.copy()
    bad["grid"][1] = (4, 4)  # 16 patches > max_patches 12
    with pytest.raises(InputError, match=r"sequence 1 holds 16 patches \(4 x 4\), expected at"):
        reference.forward(SPEC, init_weights(SPEC, 0), bad)
    with pytest.raises(InputError, match="a naflex batch is a 1-D structured array"):
        reference.forward(SPEC, init_weights(SPEC, 0), np.zeros((4, 32, 32, 3), np.float32))


def test_packed_probe_batch_masks_and_bounds() -> None:
    """Three images a sequence at seeded grids, one after another; attention block-diagonal (the
    padding attends to itself), so every row keeps a key; each image pools its own patches."""
    batch = probe_batch(PACKED, 4)
    assert batch["grid"].tolist() == [[[4, 2], [2, 2], [1, 3]], [[1, 3], [3, 2], [1, 1]],
                                      [[1, 3], [1, 2], [3, 3]], [[2, 2], [4, 1], [2, 3]]]
    seg = segments(PACKED, batch)
    assert seg[1].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1, 2, -1, -1, -1, -1, -1, -1]
    assert not batch["patches"][seg < 0].any()  # zeros in the padding
    mask = attention_mask(PACKED, batch)
    assert mask.shape == (4, 16, 16) and mask.any(axis=-1).all()  # no softmax row fully masked
    assert mask[1, 4].tolist() == [False] * 3 + [True] * 6 + [False] * 7  # image 1 reads image 1 only
    assert mask[1, 12].tolist() == [False] * 10 + [True] * 6  # padding reads the padding
    pools = pool_mask(PACKED, batch)
    assert pools.shape == (4, 3, 16) and pools.sum(axis=-1).tolist()[1] == [3, 6, 1]
    bad = batch.copy()
    bad["grid"][2, 2] = (4, 3)  # 3 + 2 + 12 = 17 patches > max_patches 16
    with pytest.raises(InputError, match=r"sequence 2 holds 17 patches \(1 x 3 \+ 1 x 2 \+ 4 x 3\), expected "
                                         r"at most max_patches = 16"):
        reference.forward(PACKED, init_weights(PACKED, 0), bad)
    bad["grid"][2, 2] = (5, 1)  # 5 rows > the 32 x 32 image's 4
    with pytest.raises(InputError, match=r"sequence 2 has an image of grid 5 x 1, expected rows 1..4"):
        reference.forward(PACKED, init_weights(PACKED, 0), bad)


def test_window_mask_tiles_each_image_from_its_corner() -> None:
    """Qwen2.5-VL's windows as a mask over each image's own grid (raster order, to read it): a 6 x 8
    image's patches in 4 x 4 tiles from its top-left corner (the bottom tiles 2 rows short), a 2 x 2
    image (smaller than a window) one tile, and no token reading another image or the padding; the
    full blocks keep the packed mask."""
    batch = grid_batch_of(RASTER, [[[6, 8], [2, 2], [2, 4]]])
    windows, seg = window_mask(RASTER, batch)[0], segments(RASTER, batch)[0]
    first = windows[:48, :48]  # the 6 x 8 image, row-major: token r * 8 + c
    tile = [(r // 4, c // 4) for r in range(6) for c in range(8)]
    assert first.tolist() == [[a == b for b in tile] for a in tile]
    assert windows[:48].sum(axis=1).reshape(6, 8)[:, ::4].tolist() == [[16, 16]] * 4 + [[8, 8]] * 2
    assert windows[48:52].tolist() == [[j in range(48, 52) for j in range(64)]] * 4  # 2 x 2: one window
    assert (windows <= attention_mask(RASTER, batch)[0]).all()  # never across images or onto padding
    assert windows[seg < 0][:, seg < 0].all()  # the padding reads the padding: no row fully masked
    assert window_mask(PACKED, probe_batch(PACKED, 1)) is None  # no windows, no mask


def grid_batch_of(spec, grids: list) -> np.ndarray:
    """A batch at the given grids, standard-normal patches, zeros in the padding."""
    shape = (len(grids), spec.derived.num_patches, spec.derived.patch_features)
    empty = grid_batch(spec, np.zeros(shape, np.float32), np.asarray(grids, np.int32))
    valid = segments(spec, empty) >= 0
    patches = np.random.default_rng(0).standard_normal(shape) * valid[..., None]
    return grid_batch(spec, patches.astype(np.float32), np.asarray(grids, np.int32))


def test_merge_block_order_is_the_same_tower_on_the_same_images() -> None:
    """token_order says how the batch lays each image out, not what is computed: the tower on a batch in
    merge-block order equals the tower on the same images row-major, to float64 rounding (rotary rows,
    windows and the merger's gather all follow each patch's (row, col)); the merge index gathers a
    raster image's 2 x 2 neighbourhoods and is the identity on a merge-block batch."""
    weights, raster = init_weights(QWEN, 0), probe_batch(RASTER, 4)
    index = merge_index(RASTER, raster)
    cols = int(raster["grid"][0, 0, 1])
    assert index[0, :4].tolist() == [0, 1, cols, cols + 1]  # the first image's first 2 x 2 unit
    blocks = grid_batch(QWEN, np.take_along_axis(raster["patches"], index[..., None], axis=1), raster["grid"])
    assert (merge_index(QWEN, blocks) == np.arange(QWEN.max_patches)).all()
    ours = reference.forward(QWEN, weights, blocks)
    assert np.abs(ours - reference.forward(RASTER, weights, raster)).max() < 1e-12
    # the patches read in the other order than the batch's (mlxcel's Qwen3-VL port): another function
    assert np.abs(ours - reference.forward(RASTER, weights, blocks)).max() > 0.1


@pytest.mark.parametrize("spec", [SPEC, MEAN, PACKED, PACKED_MAP, POSITIONED, ROTARY],
                         ids=["map", "mean", "packed", "packed-map", "positioned", "rotary"])
def test_reference_on_a_padded_image_is_that_image_alone(spec) -> None:
    """Independent of any port: each image's logits in the padded (or packed), masked batch equal the
    fixed-size forward of that image alone at its own grid (no padding, no neighbour; a learned table
    resampled to that grid as a fixed-size model at that resolution resamples it), to float64
    rounding. The logits' rows are the images, sequence by sequence."""
    weights, batch = init_weights(spec, 0), probe_batch(spec, 4)
    logits = reference.forward(spec, weights, batch)
    ph, pw, c = spec.patch_height, spec.patch_width, spec.channels
    grids = image_grids(spec, batch).tolist()
    assert logits.shape == (4 * spec.pack_images, spec.num_classes)
    table = {"pos_grid_height": spec.derived.pos_grid_rows, "pos_grid_width": spec.derived.pos_grid_cols}
    for i, sequence in enumerate(grids):
        start = 0
        for j, (rows, cols) in enumerate(sequence):
            alone = spec.replace(batching="fixed", max_patches=None, pack_images=1, image_height=rows * ph,
                                 image_width=cols * pw, **(table if spec.pos_embed == "learned" else {}))
            patches = batch["patches"][i, start: start + rows * cols].reshape(rows, cols, ph, pw, c)
            image = patches.transpose(0, 2, 1, 3, 4).reshape(1, rows * ph, cols * pw, c)
            row = i * spec.pack_images + j
            assert np.abs(reference.forward(alone, weights, image)[0] - logits[row]).max() < 1e-12
            start += rows * cols


@pytest.mark.parametrize("framework", ports.NATIVE)
@pytest.mark.parametrize("spec", [SPEC, MEAN, PACKED, POSITIONED],
                         ids=["map", "mean", "packed", "positioned"])
def test_padding_moves_no_valid_output_and_an_ignored_mask_fails(framework: str, spec, monkeypatch) -> None:
    weights, batch = init_weights(spec, 0), probe_batch(spec, 4)
    noisy = padded_with_noise(spec, batch)
    ref = reference.forward(spec, weights, batch)
    assert np.array_equal(reference.forward(spec, weights, noisy), ref)  # exact: -inf keys weigh 0
    p = port(framework, spec)
    p.load(weights)
    # Exact in every port too: a masked key's weight underflows to 0, and the pools select, never
    # multiply, so what sits in the padding moves no valid output by a single bit.
    logits = p.logits(batch)
    assert np.array_equal(p.logits(noisy), logits), framework
    verdict = check_logits(spec, logits, ref, p.param_count())
    assert verdict.passed, f"{framework}: {verdict.reason}"
    # The valid tokens of every token tap agree with the reference's on the zero-padded batch; what
    # sits in the padded rows differs, and the verdict does not read it.
    ref_taps, got = {}, p.intermediates(noisy)
    reference.forward(spec, weights, batch, ref_taps)
    tolerance = logit_atol(spec) * 10
    for name in ("patch_embed", "block1.out", "final_norm"):
        valid = valid_rows(spec, batch, ref_taps[name])
        assert compare_tensor(got[name], ref_taps[name], tolerance, name, valid).passed, name
        assert not compare_tensor(got[name], ref_taps[name], tolerance, name).passed, name
    # No softmax row is fully masked, the padding's included: no tap holds a NaN.
    assert all(np.isfinite(np.asarray(t)).all() for t in got.values()), framework
    # Mutation: the port handed an all-True attention mask (padding attended; packed: every image
    # attending to its neighbours, Pixtral without its block-diagonal mask) fails by a wide margin.
    module = ports.load_port_module(framework)
    monkeypatch.setattr(module, "attention_mask", lambda s, b: np.ones_like(attention_mask(s, b)))
    mutated = check_logits(spec, p.logits(noisy), ref, p.param_count())
    assert not mutated.passed and mutated.max_abs_diff > 100 * mutated.tolerance, mutated.max_abs_diff


@pytest.mark.parametrize("framework", ports.NATIVE)
@pytest.mark.parametrize("method", ["timm_bicubic_antialias", "big_vision_zoom"], ids=["bicubic", "corners"])
def test_each_ports_per_image_positions_follow_pos_resample(framework: str, method: str) -> None:
    """The table resized to each image's grid by the spec's method in every port: the same weights
    with the positions resized by antialiased bicubic (timm's NaFlexVit default) or by bilinear with
    corners aligned (Qwen3-VL's) where SigLIP2's antialiased bilinear was meant (the LFM2-VL MLX port's
    mistake, with bicubic) fail by a margin; each port computes the other spec itself within tolerance."""
    other = POSITIONED.replace(name=f"siglip2-naflex-tiny-{method}", pos_resample=method)
    weights, batch = init_weights(POSITIONED, 0), probe_batch(POSITIONED, 4)
    p = port(framework, other)
    p.load(weights)
    logits = p.logits(batch)
    assert check_logits(other, logits, reference.forward(other, weights, batch), p.param_count()).passed
    mutated = check_logits(POSITIONED, logits, reference.forward(POSITIONED, weights, batch), p.param_count())
    assert not mutated.passed and mutated.max_abs_diff > 100 * mutated.tolerance, mutated.max_abs_diff


def row_major_tables(spec, batch: np.ndarray) -> np.ndarray:
    """Each token's row of the resized tables as if the batch were row-major (position_rows)."""
    return position_rows(spec.replace(token_order="raster"), batch)


# What a port gets wrong with every shape right, each as the batch helper its prepare calls replaced
# by the wrong one: (spec, the helper, the wrong helper). Each is a public port's slip:
# - Pixtral's packed images rotated by the rows of one image of the whole grid (the packed sequence
#   rotated as if it were one image: a 1-D RoPE or an ONNX fusion's);
# - Qwen2.5-VL's window blocks handed the packed mask (windows ignored: a kernel given the images'
#   boundaries where the windows' were meant, vLLM's);
# - a raster batch merged four consecutive tokens at a time (read as merge-block order: the merge
#   layout slip of the Qwen-VL ports in MLX and Swift);
# - Qwen3-VL's resized tables read row-major in a merge-block batch (an MLX runtime's Qwen3-VL tower).
SLIPS = {
    "rotary-rows-of-one-grid": (ROTARY, "token_rows", lambda s, b: np.broadcast_to(
        np.arange(s.derived.seq_len), (len(b), s.derived.seq_len)).copy()),
    "windows-ignored": (QWEN, "window_mask", attention_mask),
    "merged-consecutively": (RASTER, "merge_index", lambda s, b: np.broadcast_to(
        np.arange(s.max_patches), (len(b), s.max_patches)).copy()),
    "tables-read-row-major": (QWEN3, "position_rows", row_major_tables),
}


@pytest.mark.parametrize("framework", ports.NATIVE)
@pytest.mark.parametrize("slip", list(SLIPS))
def test_each_port_follows_the_batchs_helpers_and_a_slip_fails(framework: str, slip: str,
                                                                monkeypatch) -> None:
    """Each tower's batch in every port, computed from the helpers shared/core/batching.py and
    rotary.py derive once (rotary rows, window mask, merge index, position rows), padding moving
    nothing; the port handed the wrong helper (SLIPS) fails by a margin."""
    spec, helper, wrong = SLIPS[slip]
    weights, batch = init_weights(spec, 0), probe_batch(spec, 4)
    ref = reference.forward(spec, weights, batch)
    p = port(framework, spec)
    p.load(weights)
    logits = p.logits(batch)
    verdict = check_logits(spec, logits, ref, p.param_count())
    assert verdict.passed, f"{framework}: {verdict.reason}"
    assert np.array_equal(p.logits(padded_with_noise(spec, batch)), logits)
    monkeypatch.setattr(ports.load_port_module(framework), helper, wrong)
    mutated = check_logits(spec, p.logits(batch), ref, p.param_count())
    assert not mutated.passed and mutated.max_abs_diff > 100 * mutated.tolerance, mutated.max_abs_diff


def test_a_fault_in_one_image_is_named_by_trace_and_verdict() -> None:
    """A planted gap in image 2's valid tokens (and its logits): the trace's first divergent tap and
    the verdict both name image 2; the same gap in image 2's padding is no divergence at all."""
    weights, batch = init_weights(SPEC, 0), probe_batch(SPEC, 4)
    ref = {}
    reference.forward(SPEC, weights, batch, ref)
    planted = {name: np.array(t, dtype=np.float32) for name, t in ref.items()}
    planted["block1.out"][2, 0] += 1.0  # image 2 (3 x 1 grid): token 0 is valid
    trace = compare_taps(SPEC, ref, planted, "planted", images=batch)
    assert trace.first_divergence.name == "block1.out"
    assert "worst at image 2" in report_lines([trace])[0]
    padding = {name: np.array(t, dtype=np.float32) for name, t in ref.items()}
    padding["block1.out"][2, 5] += 1.0  # token 5 of a 3-patch image is padding
    assert compare_taps(SPEC, ref, padding, "padding", images=batch).first_divergence is None
    logits = ref["logits"].copy()
    logits[2, 3] += 1.0
    assert "(worst at image 2)" in check_logits(SPEC, logits, ref["logits"]).reason


@pytest.mark.parametrize("framework", ports.NATIVE)
def test_qwen3_deepstack_output_is_held_like_the_logits_on_its_valid_tokens(framework: str) -> None:
    """Qwen3-VL's deepstack merger (block 0's) is an extra output: each port's, collected with the taps
    as verify collects it, passes the verdict and moves by not one bit when the padding changes. A gap
    planted in one image's merged tokens fails the verdict and names the output and the image, while
    the logits still agree; the same gap in the padding is no failure, and a port that gives no such
    output fails, named."""
    weights, batch = init_weights(QWEN3, 0), probe_batch(QWEN3, 4)
    ref: dict[str, np.ndarray] = {}
    logits = reference.forward(QWEN3, weights, batch, ref)
    p = port(framework, QWEN3)
    p.load(weights)
    got = {name: np.asarray(t) for name, t in p.intermediates(batch).items()}
    noisy = np.asarray(p.intermediates(padded_with_noise(QWEN3, batch))["deepstack.0"])
    valid = valid_rows(QWEN3, batch, got["deepstack.0"])
    assert np.array_equal(noisy[valid], got["deepstack.0"][valid]), framework

    def verdict(outputs: dict[str, np.ndarray]):
        return check_logits(QWEN3, got["logits"], logits, p.param_count(), outputs=outputs, references=ref,
                            images=batch)

    assert verdict(got).passed, verdict(got).reason
    image_of = entry_images(QWEN3, batch, ref["deepstack.0"])[..., 0]
    planted = {**got, "deepstack.0": got["deepstack.0"].copy()}
    planted["deepstack.0"][tuple(np.argwhere(image_of == 4)[0])] += 1.0
    failed = verdict(planted)
    assert not failed.passed and failed.max_abs_diff <= failed.tolerance  # the logits agree
    assert "max |deepstack.0 - reference|" in failed.reason and "(worst at image 4)" in failed.reason
    padding = {**got, "deepstack.0": got["deepstack.0"].copy()}
    padding["deepstack.0"][tuple(np.argwhere(image_of < 0)[0])] += 1.0
    assert verdict(padding).passed
    assert "gave no 'deepstack.0' output" in verdict({}).reason


def test_a_deepstack_output_below_float32_is_bounded_by_its_own_emulated_rounding_gap() -> None:
    """At bfloat16 the extra output's budget is the rung's multiple of its own emulated gap, from
    the one rung-emulating pass that bounds the logits (verify's fill_reference; without it the
    verdict could not be made: an internal error once): the emulating reference's own output
    passes, and one image's tokens moved by ten budgets fail, named."""
    case = VerifyCase(QWEN3, init_weights(QWEN3, 0), probe_batch(QWEN3, 2), precision=Precision("bfloat16"))
    fill_reference([case])
    emulated = case.emulated_outputs["deepstack.0"]
    assert case.emulated_gap > 0 and np.abs(emulated - case.reference_outputs["deepstack.0"]).max() > 0

    def reason(output: np.ndarray) -> str | None:
        return check_outputs(QWEN3, {"deepstack.0": output}, case.reference_outputs, case.images,
                             case.precision, case.emulated_outputs)

    assert reason(emulated) is None
    budget = tap_budget(QWEN3, case.reference_outputs["deepstack.0"], case.precision, emulated)
    moved = emulated.copy()
    moved[0, 0] += 10 * budget  # sequence 0's first merged token: its image 0
    assert "max |deepstack.0 - reference|" in reason(moved) and "(worst at image 0)" in reason(moved)


def test_a_fault_in_one_packed_image_is_named_by_its_logits_row() -> None:
    """Packed, sequence 1 holds images 3, 4 and 5 (3, 6 and 1 patches, then padding): a gap planted
    in image 4's tokens, or in the attention of one of its queries, is named image 4, the number
    of its logits row; the same gap in the padding after image 5 is no divergence."""
    weights, batch = init_weights(PACKED, 0), probe_batch(PACKED, 4)
    ref = {}
    reference.forward(PACKED, weights, batch, ref)

    def planted(name: str, index: tuple[int, ...]) -> PortTrace:
        taps = {tap: np.array(t, dtype=np.float32) for tap, t in ref.items()}
        taps[name][index] += 1.0
        return compare_taps(PACKED, ref, taps, "planted", images=batch)

    for name, index in (("block1.out", (1, 5, 0)), ("block0.attn_probs", (1, 0, 4, 3))):
        trace = planted(name, index)
        assert trace.first_divergence.name == name and "worst at image 4" in report_lines([trace])[0]
    assert planted("block1.out", (1, 12, 0)).first_divergence is None  # token 12 is padding


@background.task("packed-trace", "test_batching.py::test_cli_trace_runs_a_packed_batch_in_a_worker")
def packed_trace(start: background.Start) -> Outcome:
    return background.compare_py(start, "trace", "--spec", "packed-tiny", "--frameworks", "torch")


def test_cli_trace_runs_a_packed_batch_in_a_worker() -> None:
    """`compare.py trace` end to end: the structured patch batch reaches a torch worker through its
    .npy file, every tap is within budget, and the batch is counted in images."""
    proc = background.result("packed-trace")
    assert proc.code == 0, proc.stderr
    assert "spec 'packed-tiny': 12 images in 4 sequences at float32" in proc.stdout
    assert "torch: all 17 taps within budget" in proc.stdout


def test_an_export_of_a_patch_batch_spec_says_it_is_the_one_image_model(tmp_path) -> None:
    """What `convert --to timm` writes for a naflex or packed spec is timm's VisionTransformer of one
    image: the same weights, each image's function (the reference's per-image equality above), and the
    note says so rather than leave a NaFlex or packing class implied. A windowed spec is refused: that
    one-image model attends over the whole image, and one with a patch merger: it has none. Qwen's
    tower is written to hf as its own packing class, which the note names alone."""
    from shared.checkpoints import export_checkpoint

    for spec in (SPEC, PACKED):
        notes = export_checkpoint("timm", spec, init_weights(spec, 0), tmp_path / f"{spec.name}.safetensors")
        said = f"batching {spec.batching!r}: written as the library's model of one image at a time"
        assert said in notes[-1]
    with pytest.raises(SpecError, match=r"^spec field 'window_size' = 4: expected 0 for an export to timm "):
        export_checkpoint("timm", QWEN, init_weights(QWEN, 0), tmp_path / "windowed.safetensors")
    merged = QWEN.replace(window_size=0, full_attention_blocks=())
    with pytest.raises(SpecError, match=r"^spec field 'merge_size' = 2: expected 1 for an export to timm "):
        export_checkpoint("timm", merged, init_weights(merged, 0), tmp_path / "merged.safetensors")
    assert not list(tmp_path.glob("windowed*")) and not list(tmp_path.glob("merged*"))
    tower = QWEN.replace(num_classes=0)
    notes = export_checkpoint("hf", tower, init_weights(tower, 0), tmp_path / "qwen")
    assert notes == [f"load with transformers.Qwen2_5_VisionTransformerPretrainedModel.from_pretrained("
                     f"{str(tmp_path / 'qwen')!r})"]


def test_training_refuses_a_patch_batch_spec_in_one_line() -> None:
    """Every training dataset is NHWC images of one size: a packed (or naflex) spec is refused before
    any data is read, where its port once met a float image array instead of its structured batch."""
    expected = (r"^--data 'digits': spec 'packed-tiny' has batching 'packed'; training reads NHWC images "
                r"of one size, expected batching 'fixed'$")
    with pytest.raises(InputError, match=expected):
        load_dataset("digits", PACKED, 0.2, 0)
