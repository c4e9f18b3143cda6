"""NaFlex batches against the libraries' own NaFlex models: Transformers 5's Siglip2VisionModel and
timm's NaFlexVit (its SigLIP configuration, antialiased bilinear, and its default, antialiased
bicubic), small and random-initialised, each fed one canonical batch of four images at their own
grids (non-square, one a single column, one larger than the table and one smaller, so the table is
both enlarged and shrunk), its padding masked. The spec is the converter's reading of the model asked
for a naflex batch (`--set batching=naflex`: the library's resize read as its convention); the
reference and every port give the library's output for every image, and the reference its last
hidden state on the valid tokens. Then the packed towers: Transformers' PixtralVisionModel, and its
Qwen2.5-VL vision tower (windows, merge-block order, the 2x2 patch merger) on its own processor's
input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import ports
from shared.checkpoints import import_tensors
from shared.core import reference
from shared.core.batching import grid_batch, segments, valid_rows
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.spec import ModelSpec, tensor_fields_differ
from shared.errors import SpecError, WeightsError
from shared.teaching.first_divergence import report_lines
from shared.your_model.proposal import propose_spec
from tests.checkpoints_support import ATOL, assert_ports_match, live_trace, perturbed, state_dict

GRIDS = np.array([[4, 5], [2, 7], [6, 2], [3, 1]], np.int32)  # the table is 4 x 4
MAX_PATCHES = 20


# what the test asks of the converter: the batch's patch budget and the images' bounds (8 x 8 patches)
NAFLEX = {"batching": "naflex", "max_patches": MAX_PATCHES, "image_height": 32, "image_width": 32}


def mixed_batch(spec: ModelSpec, seed: int = 0) -> np.ndarray:
    """GRIDS' images, standard-normal patches, zeros in the padding (as the image processors pad)."""
    shape = (len(GRIDS), MAX_PATCHES, spec.derived.patch_features)
    empty = grid_batch(spec, np.zeros(shape, np.float32), GRIDS)
    valid = segments(spec, empty) >= 0
    patches = np.random.default_rng(seed).standard_normal(shape) * valid[..., None]
    return grid_batch(spec, patches.astype(np.float32), GRIDS)


def patch_coords(spec: ModelSpec, batch: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """timm's NaFlex inputs beside the patches: each token's (row, col) in its image, and validity."""
    valid = segments(spec, batch) >= 0
    token, cols = np.arange(MAX_PATCHES)[None], batch["grid"][:, 1:2]
    coord = np.stack([token // cols, token % cols], axis=-1) * valid[..., None]
    return torch.from_numpy(coord).long(), torch.from_numpy(valid)


def test_siglip2_vision_model_on_a_mixed_batch() -> None:
    import transformers

    torch.manual_seed(0)
    config = transformers.Siglip2VisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                              patch_size=4, num_patches=16, intermediate_size=48)
    model = perturbed(transformers.Siglip2VisionModel(config), seed=1).eval()
    converted = import_tensors("hf", state_dict(model), model.config.to_dict(), NAFLEX)
    spec = converted.spec
    assert (spec.pos_grid_height, spec.pos_grid_width, spec.pos_resample) == (4, 4, "bilinear_antialias")
    batch = mixed_batch(spec)
    with torch.no_grad():
        out = model(pixel_values=torch.from_numpy(batch["patches"].copy()),
                    pixel_attention_mask=torch.from_numpy(segments(spec, batch) >= 0).long(),
                    spatial_shapes=torch.from_numpy(GRIDS.astype(np.int64)))
    assert_ports_match(spec, converted.tensors, batch, out.pooler_output.numpy(), ports=ports.NATIVE)
    taps: dict[str, np.ndarray] = {}
    reference.forward(spec, converted.tensors, batch, taps)
    hidden, tokens = out.last_hidden_state.numpy(), taps["final_norm"]
    valid = valid_rows(spec, batch, tokens)
    assert np.abs(hidden - tokens)[valid].max() <= ATOL


@pytest.mark.parametrize(("name", "activation"), [("naflexvit_base_patch16_siglip", "gelu_tanh"),
                                                  ("naflexvit_base_patch16_gap", "gelu")])
def test_timm_naflexvit_on_a_mixed_batch(name: str, activation: str) -> None:
    import timm

    torch.manual_seed(0)
    small = dict(embed_dim=32, depth=2, num_heads=4, img_size=16, patch_size=4, pos_embed_grid_size=(4, 4),
                 num_classes=0)
    model = perturbed(timm.create_model(name, pretrained=False, **small), seed=1).eval()
    config = {"architecture": name, "model_args": {"num_heads": 4, "act_layer": activation}}
    converted = import_tensors("timm", state_dict(model), config, NAFLEX)
    spec = converted.spec  # the siglip entry's registry resize is bilinear, NaFlexVit's own bicubic
    method = {"bilinear": "bilinear_antialias", "bicubic": "timm_bicubic_antialias"}
    assert spec.pos_resample == method[model.embeds.pos_embed_interp_mode]
    batch = mixed_batch(spec)
    coord, valid = patch_coords(spec, batch)
    with torch.no_grad():
        expected = model({"patches": torch.from_numpy(batch["patches"].copy()), "patch_coord": coord,
                          "patch_valid": valid}).numpy()
    assert_ports_match(spec, converted.tensors, batch, expected, ports=ports.NATIVE)


def test_a_naflex_resize_the_spec_cannot_compute_is_refused_in_one_line() -> None:
    """NaFlexEmbeds' options the spec has no method for: corners aligned, grid_sample, the aspect
    ratio kept, no antialiasing; and a mode it has none for."""
    import timm

    small = dict(embed_dim=32, depth=1, num_heads=4, img_size=16, patch_size=4, pos_embed_grid_size=(4, 4))
    tensors = state_dict(timm.create_model("naflexvit_base_patch16_siglip", pretrained=False, **small))
    refused = (({"pos_embed_align_corners": True}, "pos_embed_align_corners = True: expected False"),
               ({"pos_embed_interp_mode": "nearest"}, "pos_embed_interp_mode = 'nearest': expected one of "
                "bilinear, bicubic"))
    for args, message in refused:
        with pytest.raises(SpecError, match=message) as caught:
            import_tensors("timm", tensors, {"model_args": {"num_heads": 4, **args}}, NAFLEX)
        assert "\n" not in str(caught.value)


def test_verify_model_passes_a_live_siglip2_vision_model_on_its_naflex_forward(monkeypatch) -> None:
    """`verify --model` on a Siglip2VisionModel as a user holds it, no spec given: read as a naflex
    batch (its forward takes no image), the probe batch's mixed grids go through its own forward
    (patches, pixel_attention_mask, spatial_shapes: forward_io.model_inputs) and its pooled output
    matches the reference. Its positions resized by antialiased bicubic instead (an MLX port's slip)
    fail by more than 10 times the tolerance, and diagnose names that."""
    import transformers
    from transformers.models.siglip2 import modeling_siglip2

    import portbench

    torch.manual_seed(0)
    config = transformers.Siglip2VisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                              patch_size=4, num_patches=16, intermediate_size=48)
    model = transformers.Siglip2VisionModel(config).eval()
    spec = propose_spec(model).spec
    assert (spec.batching, spec.max_patches, spec.pos_resample) == ("naflex", 16, "bilinear_antialias")
    result = portbench.check(model, trace=False)
    assert result.passed, result.explanation

    def bicubic(table: torch.Tensor, shapes: torch.Tensor, max_length: int) -> torch.Tensor:
        grid = table[None].permute(0, 3, 1, 2).float()  # channels-last: see the torch port's image_positions
        out = torch.zeros(len(shapes), max_length, table.shape[-1])
        for i, (rows, cols) in enumerate(shapes.tolist()):
            resized = torch.nn.functional.interpolate(grid, size=(rows, cols), mode="bicubic", antialias=True)
            out[i, : rows * cols] = resized[0].flatten(1).T
        return out

    monkeypatch.setattr(modeling_siglip2.Siglip2VisionEmbeddings, "resize_positional_embeddings",
                        staticmethod(bicubic))
    failed = portbench.check(model, trace=False)
    assert not failed.passed and failed.max_abs_diff > 10 * failed.tolerance, failed.max_abs_diff
    named = [line for line in failed.diagnosis if "positions resized by antialiased bicubic" in line]
    assert named, failed.diagnosis


def unpatchified(spec: ModelSpec, batch: np.ndarray) -> list[np.ndarray]:
    """Each image of a packed batch as NCHW pixels, in the logits' order (sequence by sequence)."""
    ph, pw, c = spec.patch_height, spec.patch_width, spec.channels
    images = []
    for patches, grids in zip(batch["patches"], batch["grid"], strict=True):
        start = 0
        for rows, cols in grids.tolist():
            grid = patches[start: start + rows * cols].reshape(rows, cols, ph, pw, c)
            images.append(grid.transpose(4, 0, 2, 1, 3).reshape(c, rows * ph, cols * pw))
            start += rows * cols
    return images


def test_pixtral_vision_model_on_packed_images_of_their_own_sizes() -> None:
    """Transformers' PixtralVisionModel packs the images it is given, each at its own size, into one
    sequence with a block-diagonal mask and rotates each patch by its row and column within its own
    image: a packed batch of 3 images a sequence (4 sequences, grids from 1x1 to 4x4, non-square)
    gives its tokens image by image in the reference, and every port gives the images' mean tokens."""
    import transformers

    torch.manual_seed(0)
    config = transformers.PixtralVisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                              intermediate_size=64, head_dim=8, hidden_act="silu",
                                              image_size=16, patch_size=4)
    model = perturbed(transformers.PixtralVisionModel(config), seed=1).eval()
    packed = {"batching": "packed", "max_patches": 16, "pack_images": 3, "image_height": 16,
              "image_width": 16}
    converted = import_tensors("hf", state_dict(model), model.config.to_dict(), packed)
    spec = converted.spec
    assert (spec.rope, spec.rope_coords, spec.batching) == ("axial_half", "index", "packed")
    batch = probe_batch(spec, 4)
    images = unpatchified(spec, batch)
    height, width = max(i.shape[1] for i in images), max(i.shape[2] for i in images)
    pixels = np.zeros((len(images), spec.channels, height, width), np.float32)
    for i, image in enumerate(images):
        pixels[i, :, : image.shape[1], : image.shape[2]] = image
    sizes = [tuple(i.shape[1:]) for i in images]
    with torch.no_grad():
        tokens = model(pixel_values=torch.from_numpy(pixels), image_sizes=sizes).last_hidden_state[0].numpy()
    counts = [(h // spec.patch_height) * (w // spec.patch_width) for h, w in sizes]
    per_image = np.split(tokens, np.cumsum(counts)[:-1])
    taps: dict[str, np.ndarray] = {}
    reference.forward(spec, converted.tensors, batch, taps)
    ours = taps[reference.token_tap(spec)]
    seg = segments(spec, batch)
    mine = [ours[s][seg[s] == j] for s in range(len(batch)) for j in range(spec.pack_images)]
    budget = ATOL * max(1.0, float(np.abs(tokens).max()))  # trace's: the tolerance x the tensor's scale
    assert max(np.abs(a - b).max() for a, b in zip(mine, per_image, strict=True)) <= budget
    expected = np.stack([t.mean(axis=0) for t in per_image])  # the spec's pooling: each image's mean
    assert_ports_match(spec, converted.tensors, batch, expected, ports=ports.NATIVE)


# Qwen's images: even grids (its 2x2 merge units), one smaller than a window (2 x 2), non-square
QWEN_GRIDS = [[[6, 8], [2, 2], [4, 2]], [[8, 6], [2, 6], [2, 2]], [[4, 4], [6, 2], [8, 4]]]
# what the test asks of the converter: three images a sequence of 64 tokens, each within 8 x 8 patches
QWEN_BATCH = {"max_patches": 64, "pack_images": 3, "image_height": 32, "image_width": 32}


def qwen_case(model: torch.nn.Module, preset: str) -> tuple[ModelSpec, dict[str, np.ndarray], np.ndarray,
                                                          Any]:
    """A random-initialised Qwen tower read by `convert --from hf` (its spec the preset's tower, asked
    for QWEN_BATCH), QWEN_GRIDS' images in merge-block order, and the tower's own output on them: its
    processor's input is exactly these patches, each (ph, pw, C) as (C, frame, ph, pw), the frame
    repeated (a still image)."""
    converted = import_tensors("hf", state_dict(model), model.config.to_dict(), QWEN_BATCH)
    spec = converted.spec
    assert not tensor_fields_differ(spec, get_preset(preset).replace(num_classes=0, name=spec.name))
    shape = (len(QWEN_GRIDS), spec.max_patches, spec.derived.patch_features)
    grids = np.asarray(QWEN_GRIDS, np.int32)
    seg = segments(spec, grid_batch(spec, np.zeros(shape, np.float32), grids))
    patches = np.random.default_rng(0).standard_normal(shape) * (seg >= 0)[..., None]
    batch = grid_batch(spec, patches.astype(np.float32), grids)
    return spec, converted.tensors, batch, qwen_call(model, spec, batch)


def qwen_call(model: torch.nn.Module, spec: ModelSpec, batch: np.ndarray) -> Any:
    """The tower on the batch's images as its processor gives them: each patch (ph, pw, C) as (C,
    frame, ph, pw), the frame repeated (a still image), and each image's (frames, rows, cols)."""
    ph, pw, c = spec.patch_height, spec.patch_width, spec.channels
    seg = segments(spec, batch)
    mine = batch["patches"][seg >= 0].reshape(-1, ph, pw, c).transpose(0, 3, 1, 2)  # (C, ph, pw) a patch
    frames = np.stack([mine] * spec.temporal_patch_size, axis=2).reshape(len(mine), -1)
    thw = torch.tensor([[1, rows, cols] for rows, cols in batch["grid"].reshape(-1, 2).tolist()])
    with torch.no_grad():
        return model(torch.tensor(frames), thw)


def assert_exports_back(spec: ModelSpec, tensors: dict[str, np.ndarray], batch: np.ndarray,
                        model: torch.nn.Module, out: Any) -> None:
    """`convert --to hf` writes the tower's own state dict exactly (Qwen3-VL's deepstack mergers
    included), and the class its config names, built from that config, loads it strictly and gives
    its merged tokens."""
    from shared.checkpoints import export_tensors
    from shared.checkpoints.libraries.hf import build_model

    raw = export_tensors("hf", spec, tensors)
    theirs = state_dict(model)
    assert sorted(raw) == sorted(theirs) and all(np.array_equal(raw[k], theirs[k]) for k in raw)
    rebuilt = build_model(spec).eval()
    rebuilt.load_state_dict({k: torch.from_numpy(v) for k, v in raw.items()}, strict=True)
    assert type(rebuilt) is type(model)
    assert torch.equal(qwen_call(rebuilt, spec, batch).pooler_output, out.pooler_output)


def assert_verify_passes(model: torch.nn.Module) -> None:
    """`verify --model` of the live tower on the spec read from it: called on each image's patches as
    its processor gives them (the hf plug-in's `caller_live`), each image's mean merged token held to
    the reference's. `trace --model` compares its layers' outputs too, every image's tokens laid out
    where the batch has them (Qwen2.5-VL's blocks' taken back from its window order): none diverges;
    with the blocks' epsilon the spec's 1e5 times, the first norm does, and the image is named."""
    import portbench

    result = portbench.check(model, trace=False)
    assert result.passed, result.explanation
    trace = live_trace(model)
    compared = [row.name for row in trace.rows if row.error is not None]
    assert {"patch_embed", "block0.norm1", "block0.attn", "block1.mlp"} <= set(compared), compared
    assert trace.passed, report_lines([trace])
    spec = propose_spec(model).spec
    wrong = live_trace(model, spec.replace(layer_norm_eps=spec.layer_norm_eps * 1e5))
    assert wrong.first_divergence.name == "block0.norm1"
    assert "worst at image" in wrong.first_divergence.note


def merged_tokens(spec: ModelSpec, tensors: dict[str, np.ndarray], batch: np.ndarray,
                  tap: str = "merger") -> np.ndarray:
    """The reference's merged tokens on the valid rows, image after image (the tower's pooler_output;
    a deepstack `tap`: one of its deepstack_features)."""
    taps: dict[str, np.ndarray] = {}
    reference.forward(spec, tensors, batch, taps)
    return taps[tap][valid_rows(spec, batch, taps[tap])].reshape(-1, spec.merger_dim)


def merged_means(spec: ModelSpec, merged: np.ndarray) -> np.ndarray:
    """Each image's mean merged token: the spec's pooling, what every port outputs."""
    counts = (np.asarray(QWEN_GRIDS) // spec.merge_size).prod(axis=-1).reshape(-1)
    return np.stack([t.mean(axis=0) for t in np.split(merged, np.cumsum(counts)[:-1])])


def qwen2_5_tower() -> torch.nn.Module:
    """Transformers' Qwen2.5-VL vision tower at qwen2.5-vl-tiny's size, random-initialised, perturbed."""
    import transformers
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen

    torch.manual_seed(0)
    config = transformers.Qwen2_5_VLVisionConfig(
        depth=2, hidden_size=32, num_heads=4, intermediate_size=64, patch_size=4, in_channels=3,
        spatial_merge_size=2, temporal_patch_size=2, window_size=16, fullatt_block_indexes=[1],
        out_hidden_size=24, hidden_act="silu")
    return perturbed(qwen.Qwen2_5_VisionTransformerPretrainedModel(config), seed=1)


def test_qwen2_5_vl_tower_on_packed_images_of_their_own_sizes() -> None:
    """Transformers' Qwen2_5_VisionTransformerPretrainedModel, read by the converter as qwen2.5-vl-tiny's
    tower: windows of 2 x 2 merge units (4 x 4 patches) in block 0, each whole image in block 1, then
    its 2x2 patch merger. Nine images of their own grids (non-square, one smaller than a window) packed
    three a sequence give its merged tokens and its last block's tokens (taken back from its window
    order) in the reference, and the merged tokens' means in every port. Pixtral's bands, the windows
    ignored or the patches read row-major instead do not. Its two-frame Conv3d kernel is kept whole,
    `convert --to hf` gives the tower back, and `verify --model` passes it."""
    from transformers.vision_utils import get_vision_window_index

    model = qwen2_5_tower()
    spec, tensors, batch, out = qwen_case(model, "qwen2.5-vl-tiny")
    assert not tensor_fields_differ(propose_spec(model).spec.replace(**QWEN_BATCH), spec)  # --from-model's
    thw = torch.tensor([[1, rows, cols] for rows, cols in np.reshape(QWEN_GRIDS, (-1, 2)).tolist()])
    window_index, _ = get_vision_window_index(thw, spatial_merge_size=2, window_size=16, patch_size=4)
    units = out.last_hidden_state.numpy().reshape(-1, 4, spec.dim)[np.argsort(window_index.numpy())]
    taps: dict[str, np.ndarray] = {}
    reference.forward(spec, tensors, batch, taps)
    last = taps["block1.out"][valid_rows(spec, batch, taps["block1.out"])].reshape(-1, spec.dim)
    assert np.abs(last - units.reshape(-1, spec.dim)).max() <= ATOL * max(1.0, float(np.abs(units).max()))
    theirs = out.pooler_output.numpy()  # its merged tokens, image after image
    budget = ATOL * max(1.0, float(np.abs(theirs).max()))  # trace's: the tolerance x the tensor's scale
    gaps = {name: float(np.abs(merged_tokens(s, tensors, batch) - theirs).max()) for name, s in (
        ("qwen", spec), ("pixtral bands", spec.replace(rope_bands="alternating")),
        ("no windows", spec.replace(window_size=0, full_attention_blocks=())),
        ("read row-major", spec.replace(token_order="raster")))}
    assert gaps["qwen"] <= budget and min(v for k, v in gaps.items() if k != "qwen") > 100 * budget, gaps
    means = merged_means(spec, theirs)
    assert_ports_match(spec, tensors, batch, means, ports.NATIVE, ATOL * max(1.0, float(np.abs(means).max())))
    assert_exports_back(spec, tensors, batch, model, out)
    assert_verify_passes(model)


def test_qwen3_vl_tower_on_packed_images_of_their_own_sizes() -> None:
    """Transformers' Qwen3VLVisionModel, read by the converter as qwen3-vl-tiny's tower: its learned
    4 x 4 table resized to each image's grid by bilinear with corners aligned (`linspace(0, n - 1,
    size)`) and added in merge-block order, RoPE on top, LayerNorm blocks, its 2x2 merger and the
    deepstack merger of block 0. Qwen2.5-VL's nine images give its merged tokens and its deepstack
    features in the reference, and their means and the deepstack features in every port (the extra
    output the verdict holds); the table resized antialiased (SigLIP2's) instead does not.
    `convert --to hf` gives the tower back, deepstack mergers included, and `verify --model` passes it;
    with its deepstack merger's GELU in the tanh form, it fails naming that output."""
    import transformers
    from transformers.models.qwen3_vl import modeling_qwen3_vl as qwen3

    torch.manual_seed(0)
    config = transformers.Qwen3VLVisionConfig(
        depth=2, hidden_size=32, num_heads=4, intermediate_size=64, patch_size=4, in_channels=3,
        spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=24, num_position_embeddings=16,
        deepstack_visual_indexes=[0])
    model = perturbed(qwen3.Qwen3VLVisionModel(config), seed=1)
    spec, tensors, batch, out = qwen_case(model, "qwen3-vl-tiny")
    theirs = out.pooler_output.numpy()
    budget = ATOL * max(1.0, float(np.abs(theirs).max()))  # trace's: the tolerance x the tensor's scale
    gaps = {name: float(np.abs(merged_tokens(s, tensors, batch) - theirs).max()) for name, s in (
        ("qwen3", spec), ("antialiased table", spec.replace(pos_resample="bilinear_antialias")))}
    assert gaps["qwen3"] <= budget and gaps["antialiased table"] > 100 * budget, gaps
    deep = out.deepstack_features[0].numpy()  # block 0's deepstack merger, image after image
    deep_budget = ATOL * max(1.0, float(np.abs(deep).max()))
    assert np.abs(merged_tokens(spec, tensors, batch, "deepstack.0") - deep).max() <= deep_budget
    for name in ports.NATIVE:  # the extra output, as verify collects it: with the taps
        port = ports.create_port(name, spec)
        port.load(tensors)
        got = np.asarray(port.intermediates(batch)["deepstack.0"])
        assert np.abs(got[valid_rows(spec, batch, got)].reshape(deep.shape) - deep).max() <= deep_budget, name
    means = merged_means(spec, theirs)
    assert_ports_match(spec, tensors, batch, means, ports.NATIVE, ATOL * max(1.0, float(np.abs(means).max())))
    assert_exports_back(spec, tensors, batch, model, out)
    assert_verify_passes(model)
    import portbench

    model.deepstack_merger_list[0].act_fn = torch.nn.GELU(approximate="tanh")  # its merger alone is wrong
    result = portbench.check(model, spec=propose_spec(model).spec, trace=False)
    assert not result.passed and "max |deepstack.0 - reference|" in result.explanation, result.explanation


def test_a_port_that_reorders_merge_block_patches_as_row_major_fails_and_the_order_is_named() -> None:
    """A user's torch port around the Qwen2.5-VL tower that takes the batch's patches for row-major and
    puts them into merge-block order itself (the raster-order bug of the public Qwen ports, every shape
    right) fails `verify --model` on the tower's spec, and the verdict names the token order."""
    import portbench

    tower = qwen2_5_tower()
    spec = propose_spec(tower).spec

    class RowMajorPort(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tower = tower

        def forward(self, patches: torch.Tensor, valid: torch.Tensor, grids: torch.Tensor) -> torch.Tensor:
            pixels, shapes, counts = [], [], []
            for b in range(len(patches)):
                at = 0
                for rows, cols in grids[b].tolist():
                    n, j = rows * cols, torch.arange(rows * cols)
                    unit, within = j // 4, j % 4  # merge-block slot j <- the row-major patch it reads
                    row, col = unit // (cols // 2) * 2 + within // 2, unit % (cols // 2) * 2 + within % 2
                    image = patches[b, at:at + n][row * cols + col].reshape(n, 4, 4, 3).permute(0, 3, 1, 2)
                    pixels.append(torch.stack([image, image], dim=2).reshape(n, -1))
                    shapes.append([1, rows, cols])
                    counts.append(n // 4)
                    at += n
            merged = self.tower(torch.cat(pixels), torch.tensor(shapes)).pooler_output
            return torch.stack([t.mean(dim=0) for t in torch.split(merged, counts)])

    result = portbench.check(RowMajorPort(), spec, trace=False)
    assert not result.passed
    assert "with patches read in the other order" in result.explanation, result.explanation


def test_a_qwen_tower_the_spec_cannot_hold_is_refused_in_one_line() -> None:
    """A window that is not whole merge units, a table that is not a square grid, and a deepstack
    merger on a block past the depth, each named by its config key; a Conv3d kernel of another rank,
    and a config whose width the layers contradict, by the tensor. Full-attention blocks past the
    depth exist in no loop: said, not refused."""
    import transformers
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen

    config = transformers.Qwen2_5_VLVisionConfig(depth=1, hidden_size=32, num_heads=4, intermediate_size=64,
                                                  patch_size=4, out_hidden_size=24, window_size=16)
    raw = state_dict(qwen.Qwen2_5_VisionTransformerPretrainedModel(config))
    with pytest.raises(SpecError, match=r"^config window_size = 12: expected a multiple of patch_size x "
                                        r"spatial_merge_size = 8 \(its windows are whole merge units\)$"):
        import_tensors("hf", raw, {**config.to_dict(), "window_size": 12}, QWEN_BATCH)
    square = {"model_type": "qwen3_vl_vision", "depth": 1, "hidden_size": 32, "num_heads": 4, "patch_size": 4,
              "intermediate_size": 64, "out_hidden_size": 24, "num_position_embeddings": 12}
    with pytest.raises(SpecError, match=r"^config num_position_embeddings = 12: expected a square"):
        import_tensors("hf", {k: v for k, v in raw.items() if "mlp" not in k}, square, QWEN_BATCH)
    deepstack = {**square, "num_position_embeddings": 16, "deepstack_visual_indexes": [3]}
    with pytest.raises(SpecError, match=r"^config deepstack_visual_indexes = \[3\]: expected block indices "
                                        r"below depth 1, each once, in order$"):
        import_tensors("hf", {k: v for k, v in raw.items() if "mlp" not in k}, deepstack, QWEN_BATCH)
    notes = import_tensors("hf", raw, config.to_dict(), QWEN_BATCH).notes  # its default [7, 15, 23, 31]
    assert "config fullatt_block_indexes [7, 15, 23, 31]: only blocks below depth 1 exist, so [] attend" in \
        " ".join(notes)
    with pytest.raises(WeightsError, match=r"tensor 'blocks.0.mlp.gate_proj.weight' has shape \(64, 32\), "
                                           r"the spec expects \(48, 32\)"):
        import_tensors("hf", raw, {**config.to_dict(), "intermediate_size": 48}, QWEN_BATCH)
    flat = {**raw, "patch_embed.proj.weight": raw["patch_embed.proj.weight"][:, :, 0]}
    with pytest.raises(WeightsError, match=r"tensor 'patch_embed.proj.weight' has shape \(32, 3, 4, 4\): "
                                           r"expected 5 dimensions \(out, in, frames, height, width\)"):
        import_tensors("hf", flat, config.to_dict(), QWEN_BATCH)
