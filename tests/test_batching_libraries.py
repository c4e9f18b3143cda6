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

import numpy as np
import pytest
import torch

import ports
from shared.checkpoints import import_tensors
from shared.core import reference
from shared.core.batching import grid_batch, segments, valid_rows
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.spec import ModelSpec
from shared.core.weights import init_weights
from shared.errors import SpecError
from shared.your_model.proposal import propose_spec
from tests.checkpoints_support import ATOL, assert_ports_match, perturbed, state_dict

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


# Qwen2.5-VL's images: even grids (its 2x2 merge units), one smaller than a window (2 x 2), non-square
QWEN_GRIDS = [[[6, 8], [2, 2], [4, 2]], [[8, 6], [2, 6], [2, 2]], [[4, 4], [6, 2], [8, 4]]]


def qwen2_5_vl_state(spec: ModelSpec, w: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The canonical weights on Qwen2_5_VisionTransformerPretrainedModel's names. Its two-frame Conv3d
    holds the patch kernel in halves: a still image's frames are equal, so the halves sum to it."""
    d = spec.dim
    half = w["patch_embed.kernel"].transpose(3, 2, 0, 1) / 2  # (D, C, ph, pw), each frame's share
    state = {"patch_embed.proj.weight": np.stack([half, half], axis=2),
             "merger.ln_q.weight": w["merger.norm.scale"]}
    for ours, theirs in (("fc1", "0"), ("fc2", "2")):  # its merger's mlp: Linear, GELU, Linear
        state |= {f"merger.mlp.{theirs}.weight": w[f"merger.{ours}.kernel"].T,
                  f"merger.mlp.{theirs}.bias": w[f"merger.{ours}.bias"]}
    for i in range(spec.depth):
        c = f"blocks.{i}."  # the same prefix in both
        state |= {c + "norm1.weight": w[c + "norm1.scale"], c + "norm2.weight": w[c + "norm2.scale"]}
        parts = ("query", "key", "value")
        state[c + "attn.qkv.weight"] = np.concatenate([w[c + f"attn.{x}.kernel"].reshape(d, -1).T
                                                       for x in parts])
        state[c + "attn.qkv.bias"] = np.concatenate([w[c + f"attn.{x}.bias"].reshape(-1) for x in parts])
        state[c + "attn.proj.weight"] = w[c + "attn.out.kernel"].reshape(-1, d).T
        state[c + "attn.proj.bias"] = w[c + "attn.out.bias"]
        for ours, theirs in (("gate", "gate_proj"), ("fc1", "up_proj"), ("fc2", "down_proj")):
            state[c + f"mlp.{theirs}.weight"] = w[c + f"mlp.{ours}.kernel"].T
            state[c + f"mlp.{theirs}.bias"] = w[c + f"mlp.{ours}.bias"]
    return {k: torch.tensor(np.ascontiguousarray(v)) for k, v in state.items()}


def test_qwen2_5_vl_tower_on_packed_images_of_their_own_sizes() -> None:
    """Transformers' Qwen2_5_VisionTransformerPretrainedModel: windows of 2 x 2 merge units (4 x 4
    patches) in block 0, each whole image in block 1, then its 2x2 patch merger. Nine images of their
    own grids (non-square, one smaller than a window), packed three a sequence in its processor's
    merge-block order, are its very input (each patch's (ph, pw, C) as (C, frame, ph, pw), the frame
    repeated): the reference gives its merged tokens and its last block's tokens (taken back from its
    window order), and every port the merged tokens' means. Pixtral's bands, the windows ignored or
    the patches read row-major instead do not."""
    import transformers
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen
    from transformers.vision_utils import get_vision_window_index

    spec = get_preset("qwen2.5-vl-tiny").replace(num_classes=0)  # the merged tokens' mean is the output
    config = transformers.Qwen2_5_VLVisionConfig(
        depth=2, hidden_size=32, num_heads=4, intermediate_size=64, patch_size=4, in_channels=3,
        spatial_merge_size=2, temporal_patch_size=2, window_size=16, fullatt_block_indexes=[1],
        out_hidden_size=24, hidden_act="silu")
    model = qwen.Qwen2_5_VisionTransformerPretrainedModel(config).eval()
    w = init_weights(spec, 0)
    model.load_state_dict(qwen2_5_vl_state(spec, w), strict=True)
    shape = (len(QWEN_GRIDS), spec.max_patches, spec.derived.patch_features)
    grids = np.asarray(QWEN_GRIDS, np.int32)
    seg = segments(spec, grid_batch(spec, np.zeros(shape, np.float32), grids))
    patches = np.random.default_rng(0).standard_normal(shape) * (seg >= 0)[..., None]
    batch = grid_batch(spec, patches.astype(np.float32), grids)
    ph, pw, c = spec.patch_height, spec.patch_width, spec.channels
    mine = batch["patches"][seg >= 0].reshape(-1, ph, pw, c).transpose(0, 3, 1, 2)  # (C, ph, pw) a patch
    thw = torch.tensor([[1, rows, cols] for rows, cols in grids.reshape(-1, 2).tolist()])
    with torch.no_grad():
        out = model(torch.tensor(np.stack([mine, mine], axis=2).reshape(len(mine), -1)), thw)
    window_index, _ = get_vision_window_index(thw, spatial_merge_size=2, window_size=16, patch_size=4)
    units = out.last_hidden_state.numpy().reshape(-1, 4, spec.dim)[np.argsort(window_index.numpy())]

    def valid(s: ModelSpec, tap: str) -> np.ndarray:  # a tap's valid rows, image after image
        taps: dict[str, np.ndarray] = {}
        reference.forward(s, w, batch, taps)
        return taps[tap][valid_rows(s, batch, taps[tap])].reshape(-1, taps[tap].shape[-1])

    assert np.abs(valid(spec, "block1.out") - units.reshape(-1, spec.dim)).max() <= ATOL
    theirs = out.pooler_output.numpy()  # its merged tokens, image after image
    gaps = {name: float(np.abs(valid(s, "merger") - theirs).max()) for name, s in (
        ("qwen", spec), ("pixtral bands", spec.replace(rope_bands="alternating")),
        ("no windows", spec.replace(window_size=0, full_attention_blocks=())),
        ("read row-major", spec.replace(token_order="raster")))}
    assert gaps["qwen"] <= ATOL and min(v for k, v in gaps.items() if k != "qwen") > 100 * ATOL, gaps
    counts = (grids // 2).prod(axis=-1).reshape(-1)  # merged tokens per image
    expected = np.stack([t.mean(axis=0) for t in np.split(theirs, np.cumsum(counts)[:-1])])
    assert_ports_match(spec, w, batch, expected, ports=ports.NATIVE)


def test_qwen3_vl_tower_on_packed_images_of_their_own_sizes() -> None:
    """Transformers' Qwen3VLVisionModel: its learned 4 x 4 table resized to each image's grid by
    bilinear with corners aligned (`linspace(0, n - 1, size)`) and added in merge-block order, RoPE on
    top, LayerNorm blocks, its 2x2 merger. The same nine images as Qwen2.5-VL's, packed three a
    sequence, give its merged tokens in the reference and the merged tokens' means in every port; the
    table resized antialiased (SigLIP2's) instead does not."""
    import transformers
    from transformers.models.qwen3_vl import modeling_qwen3_vl as qwen3

    spec = get_preset("qwen3-vl-tiny").replace(num_classes=0)
    config = transformers.Qwen3VLVisionConfig(
        depth=2, hidden_size=32, num_heads=4, intermediate_size=64, patch_size=4, in_channels=3,
        spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=24, num_position_embeddings=16,
        deepstack_visual_indexes=[])
    model = qwen3.Qwen3VLVisionModel(config).eval()
    w = init_weights(spec, 0)
    half = w["patch_embed.kernel"].transpose(3, 2, 0, 1) / 2  # (D, C, ph, pw), each frame's share
    state = {"patch_embed.proj.weight": np.stack([half, half], axis=2), "patch_embed.proj.bias":
             w["patch_embed.bias"], "pos_embed.weight": w["pos_embed"]}
    for i in range(spec.depth):
        c = f"blocks.{i}."  # the same prefix in both
        for norm in ("norm1", "norm2"):
            state |= {c + norm + ".weight": w[c + norm + ".scale"], c + norm + ".bias": w[c + norm + ".bias"]}
        for ours, theirs in (("fc1", "linear_fc1"), ("fc2", "linear_fc2")):
            state |= {c + f"mlp.{theirs}.weight": w[c + f"mlp.{ours}.kernel"].T,
                      c + f"mlp.{theirs}.bias": w[c + f"mlp.{ours}.bias"]}
        parts = ("query", "key", "value")
        state[c + "attn.qkv.weight"] = np.concatenate([w[c + f"attn.{x}.kernel"].reshape(spec.dim, -1).T
                                                       for x in parts])
        state[c + "attn.qkv.bias"] = np.concatenate([w[c + f"attn.{x}.bias"].reshape(-1) for x in parts])
        state[c + "attn.proj.weight"] = w[c + "attn.out.kernel"].reshape(-1, spec.dim).T
        state[c + "attn.proj.bias"] = w[c + "attn.out.bias"]
    state |= {"merger.norm.weight": w["merger.norm.scale"], "merger.norm.bias": w["merger.norm.bias"]}
    for ours, theirs in (("fc1", "linear_fc1"), ("fc2", "linear_fc2")):
        state |= {f"merger.{theirs}.weight": w[f"merger.{ours}.kernel"].T,
                  f"merger.{theirs}.bias": w[f"merger.{ours}.bias"]}
    model.load_state_dict({k: torch.tensor(np.ascontiguousarray(v)) for k, v in state.items()}, strict=True)
    shape = (len(QWEN_GRIDS), spec.max_patches, spec.derived.patch_features)
    grids = np.asarray(QWEN_GRIDS, np.int32)
    seg = segments(spec, grid_batch(spec, np.zeros(shape, np.float32), grids))
    patches = np.random.default_rng(0).standard_normal(shape) * (seg >= 0)[..., None]
    batch = grid_batch(spec, patches.astype(np.float32), grids)
    ph, pw, c = spec.patch_height, spec.patch_width, spec.channels
    mine = batch["patches"][seg >= 0].reshape(-1, ph, pw, c).transpose(0, 3, 1, 2)  # (C, ph, pw) a patch
    thw = torch.tensor([[1, rows, cols] for rows, cols in grids.reshape(-1, 2).tolist()])
    with torch.no_grad():
        theirs = model(torch.tensor(np.stack([mine, mine], axis=2).reshape(len(mine), -1)), thw).pooler_output
    theirs = theirs.numpy()

    def merged(s: ModelSpec) -> np.ndarray:  # the merger's valid rows, image after image
        taps: dict[str, np.ndarray] = {}
        reference.forward(s, w, batch, taps)
        return taps["merger"][valid_rows(s, batch, taps["merger"])].reshape(-1, taps["merger"].shape[-1])

    gaps = {name: float(np.abs(merged(s) - theirs).max()) for name, s in (
        ("qwen3", spec), ("antialiased table", spec.replace(pos_resample="bilinear_antialias")))}
    assert gaps["qwen3"] <= ATOL and gaps["antialiased table"] > 100 * ATOL, gaps
    counts = (grids // 2).prod(axis=-1).reshape(-1)  # merged tokens per image
    expected = np.stack([t.mean(axis=0) for t in np.split(theirs, np.cumsum(counts)[:-1])])
    assert_ports_match(spec, w, batch, expected, ports=ports.NATIVE)
