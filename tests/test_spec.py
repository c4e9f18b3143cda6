"""ModelSpec: presets, derived quantities, serialisation, hashing and validation errors."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from shared.core.batching import image_grids, probe_grid_batch
from shared.core.positions import sequence_positions
from shared.core.presets import PRESETS, get_preset, resolve_spec
from shared.core.spec import ModelSpec
from shared.core.spec_overrides import follow_notes
from shared.core.summary import layer_table
from shared.errors import SpecError

# The parameter counts the sources state (archive-torch, mnist-vit) and torchvision's ViT-B/16.
STATED_PARAMS = {"archive-torch": 161_410, "mnist-vit": 1_199_626, "vit-b16": 86_567_656}


@pytest.mark.parametrize("name", sorted(STATED_PARAMS))
def test_stated_parameter_counts(name: str) -> None:
    assert get_preset(name).derived.params == STATED_PARAMS[name]


def test_archive_torch_drops_three_columns() -> None:
    d = get_preset("archive-torch").derived
    assert (d.grid_rows, d.grid_cols, d.num_patches, d.seq_len) == (4, 7, 28, 28)
    assert (d.cols_dropped, d.rows_dropped, d.cols_padded) == (3, 0, 0)
    assert d.attn_inner == 32 and d.pooled_dim == 896


def test_archive_keras_pads_to_32_tokens_with_wide_heads() -> None:
    s = get_preset("archive-keras")
    d = s.derived
    assert (d.grid_rows, d.grid_cols, d.seq_len) == (4, 8, 32)
    assert (d.cols_padded, d.cols_dropped, d.padded_width) == (1, 0, 32)
    assert s.head_dim == 32 and d.attn_inner == 128  # Keras key_dim=32 is per head
    assert s.layer_norm_eps == 1e-3 and s.pooling == "mean"


def test_archive_final_table_has_seven_dead_rows() -> None:
    d = get_preset("archive-final").derived
    assert (d.num_patches, d.pos_rows_total, d.pos_rows_used, d.pos_rows_unused) == (35, 42, 35, 7)
    repaired = get_preset("archive-final-repaired").derived
    assert (repaired.pos_rows_total, repaired.pos_rows_unused) == (35, 0)
    assert d.params - repaired.params == 7 * 128


def test_vit_b16_and_mnist_structure() -> None:
    vit = get_preset("vit-b16")
    assert vit.derived.seq_len == 197 and vit.layer_norm_eps == 1e-6
    mnist = get_preset("mnist-vit")
    assert mnist.norm == "post" and mnist.derived.seq_len == 50 and mnist.final_norm == "none"
    assert get_preset("mnist-vit-small").derived.seq_len == 17


def test_param_groups_sum_to_total() -> None:
    for preset in PRESETS.values():
        d = preset.spec.derived
        assert sum(d.param_groups.values()) == d.params


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_json_and_toml_round_trip(name: str) -> None:
    spec = get_preset(name)
    assert ModelSpec.from_json(spec.to_json()) == spec
    assert ModelSpec.from_toml(spec.to_toml()) == spec
    assert ModelSpec.from_json(spec.to_json()).name == spec.name


def test_spec_hash_is_stable() -> None:
    spec = get_preset("archive-torch")
    shuffled = dict(reversed(list(spec.to_dict().items())))
    assert ModelSpec.from_dict(shuffled).spec_hash == spec.spec_hash
    assert spec.replace(name="renamed").spec_hash == spec.spec_hash  # the name is not the function
    assert spec.replace(layer_norm_eps=1e-6).spec_hash != spec.spec_hash
    # Pinned: a change here means every stored weight file's hash changes. Update deliberately.
    assert spec.spec_hash == "b272c0e9d9c130bf"


def test_resolve_spec_accepts_preset_file_and_document(tmp_path) -> None:
    spec = get_preset("quadrant")
    (tmp_path / "s.toml").write_text(spec.to_toml())
    (tmp_path / "s.json").write_text(json.dumps({"spec": spec.to_dict(), "derived": {}}))
    assert resolve_spec("quadrant") == spec
    assert resolve_spec(str(tmp_path / "s.toml")) == spec
    assert resolve_spec(str(tmp_path / "s.json")) == spec
    assert resolve_spec(spec.to_json()) == spec
    assert resolve_spec("quadrant", ["layer_norm_eps=1e-3"]).layer_norm_eps == 1e-3


def test_overrides_parse_types() -> None:
    spec = get_preset("quadrant").with_overrides(
        ["class_token=true", "head_hidden=16,8", "pos_rows=10", "dim=64"])
    assert spec.head_hidden == (16, 8) and spec.pos_rows == 10 and spec.dim == 64
    # Python's one-element tuple reads; an empty item among others is refused, never skipped
    assert get_preset("quadrant").with_overrides(["head_hidden=(16,)"]).head_hidden == (16,)
    for text in ("16,,8", "16,", "(16,,)"):
        with pytest.raises(SpecError, match="expected a comma-separated list of integers"):
            get_preset("quadrant").with_overrides([f"head_hidden={text}"])


def test_the_map_pools_biases_follow_a_set_that_leaves_the_map_pool() -> None:
    """`--set pooling=mean` on a map pool without biases: pool_qkv_bias follows to its default (it
    has no effect without a map pool, where false is refused), and the note says so."""
    unbiased = get_preset("siglip-tiny").replace(pool_qkv_bias=False)
    assert unbiased.with_overrides(["pooling=mean"]).pool_qkv_bias is True
    assert follow_notes(unbiased, ["pooling=mean"]) == [
        "pooling=mean: pool_qkv_bias follows (false -> true: no map pool's query, key and value; --set "
        "pool_qkv_bias=... states it)"]


# quadrant as a packed batch of two images a sequence (no prefix token, no table): what windows and a
# merger need around them
PACKED = {"batching": "packed", "pack_images": 2, "max_patches": 8, "pos_embed": "none",
          "pos_embed_class_row": False, "class_token": False, "pooling": "mean"}
BAD_SPECS = [
    ({"patch_height": 40}, "patch_height", "at most image_height"),
    ({"patch_width": 32}, "patch_width", "at most image_width"),
    ({"class_token": False, "pos_embed_class_row": False}, "pooling", "mean, mean_all, flatten or map"),
    ({"pos_rows": 3}, "pos_rows", "at least the 5 rows"),
    ({"remainder": "crop"}, "remainder", "drop | pad"),
    ({"activation": "relu"}, "activation", "gelu | gelu_tanh"),
    ({"norm": "sandwich"}, "norm", "pre | post"),
    ({"pooling": "max"}, "pooling", "cls | mean | mean_all | flatten"),
    ({"final_norm": "both"}, "final_norm", "none | tokens | pooled"),
    ({"layer_norm_eps": 0.0}, "layer_norm_eps", "finite number > 0"),
    ({"layer_norm_eps": float("nan")}, "layer_norm_eps", "finite number > 0"),
    ({"dim": 0}, "dim", "positive integer"),
    ({"heads": -1}, "heads", "positive integer"),
    ({"head_dim": 2.5}, "head_dim", "positive integer"),
    ({"dropout_mlp": 1.0}, "dropout_mlp", "rate in [0, 1)"),
    ({"head_hidden": (8, 0)}, "head_hidden", "positive integers"),
    ({"pos_embed": "sincos", "pos_embed_class_row": False, "dim": 30, "heads": 2, "head_dim": 15}, "dim",
     "multiple of 4"),
    ({"pos_embed": "none", "pos_embed_class_row": False, "pos_rows": 10}, "pos_rows", "null"),
    # a class row only in a learned table: beside none or sincos it changed the hash alone
    ({"pos_embed": "none"}, "pos_embed_class_row", "false when pos_embed is 'none' (only a learned table"),
    ({"pos_embed": "sincos"}, "pos_embed_class_row", "false when pos_embed is 'sincos'"),
    ({"class_token": False, "pooling": "mean"}, "pos_embed_class_row", "false when class_token"),
    ({"registers": -1}, "registers", "an integer from 0"),
    ({"num_classes": True}, "num_classes", "an integer from 0"),
    ({"mlp": "swiglu"}, "mlp", "standard | gated"),
    ({"activation": "gelu_quick"}, "activation", "quick_gelu | silu"),
    ({"distill_token": True, "pooling": "mean"}, "distill_token", "unless pooling is cls"),
    ({"distill_token": True, "num_classes": 0}, "distill_token", "num_classes > 0"),
    ({"pos_embed_register_rows": True}, "pos_embed_register_rows", "unless registers > 0"),
    ({"registers": 2, "pos_embed_register_rows": True, "pos_embed_class_row": False},
     "pos_embed_register_rows", "no library positions the registers and not the class token"),
    ({"num_classes": 0, "head_hidden": (8,)}, "head_hidden", "empty when num_classes is 0"),
    # issue 36: the norm kind and each place's epsilon
    ({"norm_type": "batch_norm"}, "norm_type", "one of"),
    ({"final_norm_eps": 0.0}, "final_norm_eps", "a finite number > 0, or null"),
    ({"final_norm_eps": float("nan")}, "final_norm_eps", "a finite number > 0, or null"),
    ({"qk_norm_eps": 1e-5}, "qk_norm_eps", "null: the spec has no qk norm"),
    ({"patch_norm_eps": 1e-5}, "patch_norm_eps", "null: the spec has no patch norm"),
    ({"pool_norm_eps": 1e-5}, "pool_norm_eps", "null: the spec has no pool norm"),
    # the map pool's biases, false only where there is a map pool: elsewhere it changed the hash alone
    ({"pool_qkv_bias": False}, "pool_qkv_bias", "true (its default) when pooling is 'cls': only the map"),
    # issue 36: the projections without a bias
    ({"bias_free": ("attn.k",)}, "bias_free", "a list of projections from: attn.query"),
    ({"bias_free": ("mlp.fc1", "attn.out")}, "bias_free", "each name once, in the order"),
    ({"bias_free": ("attn.out", "attn.out")}, "bias_free", "each name once, in the order"),
    ({"qkv_bias": False, "bias_free": ("attn.key",)}, "bias_free", "no attn.key when qkv_bias is false"),
    ({"bias_free": ("attn.query", "attn.key", "attn.value")}, "bias_free", "none of the three with a bias is "
     "qkv_bias false"),
    ({"bias_free": ("mlp.gate",)}, "bias_free", "no mlp.gate unless mlp is 'gated'"),
    ({"num_classes": 0, "bias_free": ("head.out",)}, "bias_free", "no head.out when num_classes is 0"),
    # issue 36: grouped-query attention's key/value heads
    ({"kv_heads": 3}, "kv_heads", "a positive divisor of heads = 4, or null"),
    ({"kv_heads": 0}, "kv_heads", "a positive divisor of heads = 4, or null"),
    ({"kv_heads": 2.0}, "kv_heads", "a positive divisor of heads = 4, or null"),
    # issue 36: the rotary frequency bands per axis
    ({"rope_bands": "alternate"}, "rope_bands", "one of shared | alternating"),
    ({"rope_bands": "alternating"}, "rope_bands", "'shared' when rope is 'none' (no rotary embeddings)"),
    ({"rope_axes": "xy"}, "rope_axes", "one of rows_first | cols_first"),
    ({"temporal_patch_size": 0}, "temporal_patch_size", "an integer from 1 to 64 (the frames a patch spans"),
    ({"temporal_patch_size": 2, "patch_norm_in": True}, "temporal_patch_size",
     "1 with patch_norm_in (vit-pytorch's norm is over a 2-D patch"),
    ({"rope_axes": "cols_first"}, "rope_axes", "'rows_first' when rope is 'none' (no rotary embeddings)"),
    # issue 37: how inputs are batched (NaFlex: per-image grids padded to max_patches; packed: several
    # images one after another in each sequence)
    ({"batching": "tiled"}, "batching", "one of fixed | naflex | packed"),
    ({"max_patches": 4}, "max_patches", "null when batching is 'fixed'"),
    ({"pack_images": 2}, "pack_images", "1 unless batching is 'packed'"),
    ({"batching": "naflex"}, "max_patches", "an integer from 1 to 4 (up to the 2 x 2 patch grid"),
    ({"batching": "naflex", "max_patches": 5}, "max_patches", "an integer from 1 to 4"),
    ({"batching": "naflex", "max_patches": 4}, "pos_resample", "one of bilinear_antialias, "
     "timm_bicubic_antialias, big_vision_zoom when batching is 'naflex' with a learned table"),
    ({"batching": "naflex", "max_patches": 4, "pos_resample": "bilinear_antialias"}, "pos_embed_class_row",
     "false when batching is 'naflex' (the resized table positions the patches only"),
    ({"batching": "naflex", "max_patches": 4, "pos_embed": "none", "pos_embed_class_row": False,
      "rope": "axial_half", "rope_coords": "centered"}, "rope_coords",
     "'index' when batching is 'naflex' (coordinates that depend on each image's size"),
    ({"batching": "naflex", "max_patches": 4, "pos_embed": "sincos"}, "pos_embed",
     "'learned' (resized to each image's grid) or 'none' when batching is 'naflex'"),
    ({"batching": "packed", "pack_images": 2, "max_patches": 4}, "pos_resample",
     "big_vision_zoom when batching is 'packed' with a learned table"),
    ({"batching": "packed", "pack_images": 2, "max_patches": 4, "pos_embed": "sincos"}, "pos_embed",
     "'learned' (resized to each image's grid) or 'none' when batching is 'packed'"),
    ({"batching": "naflex", "max_patches": 4, "pos_embed": "none", "pos_embed_class_row": False,
      "pooling": "flatten"}, "pooling", "cls, mean, mean_all or map when batching is 'naflex'"),
    ({"batching": "packed", "max_patches": 4}, "pack_images", "an integer from 2 to 1,048,576 when batching"),
    ({"batching": "packed", "pack_images": 3, "max_patches": 2}, "max_patches",
     "an integer from 3 to 12 (pack_images = 3 images of one patch to the 2 x 2 patch grid"),
    ({"batching": "packed", "pack_images": 3, "max_patches": 13}, "max_patches", "an integer from 3 to 12"),
    ({"batching": "packed", "pack_images": 2, "max_patches": 8, "pos_embed": "none",
      "pos_embed_class_row": False}, "class_token", "False when batching is 'packed' (prefix tokens per"),
    # window attention and the patch merger (Qwen2.5-VL's): over a naflex or packed batch's own grids
    ({"window_size": 2}, "window_size", "0 when batching is 'fixed' (windows tile each image's own grid"),
    ({"full_attention_blocks": (0,)}, "full_attention_blocks", "empty when window_size is 0"),
    ({**PACKED, "window_size": 2, "full_attention_blocks": (5,)}, "full_attention_blocks",
     "block indices from 0 to 1 (depth - 1), each once, in order"),
    ({"token_order": "zigzag"}, "token_order", "one of raster | merge_block"),
    ({"token_order": "merge_block"}, "token_order", "'raster' when merge_size is 1 (no patch merger)"),
    ({"merger_dim": 8}, "merger_dim", "0 when merge_size is 1"),
    ({"merge_size": 2, "merger_dim": 8}, "merge_size", "1 when batching is 'fixed' (the merger reads"),
    ({**PACKED, "merge_size": 2}, "merger_dim", "a positive width when merge_size is 2"),
    ({**PACKED, "merge_size": 2, "merger_dim": 8, "max_patches": 6}, "max_patches",
     "a multiple of merge_size^2 = 4 (the padding, too, forms whole merge units)"),
    # the smallest image a batch holds is one merge unit: max_patches holds one per packed image, and
    # the patch grid one in each direction (else batching.probe_grids finds no grid to build)
    ({**PACKED, "merge_size": 2, "merger_dim": 8, "max_patches": 4}, "max_patches",
     "at least pack_images * merge_size^2 = 8 (one merge unit for each of the 2 images of a sequence)"),
    ({**PACKED, "merge_size": 2, "merger_dim": 8, "image_height": 4, "max_patches": 4}, "merge_size",
     "at most 1, the shorter side of the 1 x 2 patch grid of image_height x image_width"),
    ({**PACKED, "batching": "naflex", "pack_images": 1, "merge_size": 2, "merger_dim": 8, "image_height": 4,
      "image_width": 16, "max_patches": 4}, "merge_size", "at most 1, the shorter side of the 1 x 4 patch"),
    ({**PACKED, "merge_size": 2, "merger_dim": 8, "pooling": "map"}, "pooling",
     "'mean' when merge_size is 2"),
    # Qwen3-VL's deepstack mergers: beside a patch merger, on blocks that exist, each once, in order
    ({"deepstack_blocks": (0,)}, "deepstack_blocks", "() when merge_size is 1 (no patch merger)"),
    ({**PACKED, "merge_size": 2, "merger_dim": 8, "deepstack_blocks": (1, 0)}, "deepstack_blocks",
     "block indices from 0 to 1 (depth - 1), each once, in order"),
    ({**PACKED, "merge_size": 2, "merger_dim": 8, "deepstack_blocks": (2,)}, "deepstack_blocks",
     "block indices from 0 to 1 (depth - 1)"),
]


def test_fields_added_later_keep_the_hash_of_a_spec_that_does_not_use_them() -> None:
    spec = get_preset("archive-torch")
    assert spec.replace(registers=0, layer_scale=False, mlp="standard").spec_hash == "b272c0e9d9c130bf"
    assert len({spec.replace(**{name: value}).spec_hash for name, value in [
        ("registers", 1), ("layer_scale", True), ("mlp", "gated"), ("qk_norm", True)]}) == 4


def test_norm_fields_keep_every_hash_and_name_of_a_spec_that_does_not_use_them() -> None:
    """norm_type and the places' epsilons at their defaults: quadrant's hash and tensor names as
    before they existed (measured on the main checkout before issue 36)."""
    spec = get_preset("quadrant")
    assert spec.spec_hash == "85cf2ddd378a18dd"
    assert [n for n in spec.derived.tensor_shapes if "norm" in n] == [
        "blocks.0.norm1.scale", "blocks.0.norm1.bias", "blocks.0.norm2.scale", "blocks.0.norm2.bias",
        "blocks.1.norm1.scale", "blocks.1.norm1.bias", "blocks.1.norm2.scale", "blocks.1.norm2.bias",
        "final_norm.scale", "final_norm.bias"]
    assert set(spec.derived.norm_eps.values()) == {spec.layer_norm_eps}
    rms = spec.replace(norm_type="rms_norm")
    assert rms.spec_hash != spec.spec_hash
    assert not [n for n in rms.derived.tensor_shapes if n.endswith(".bias") and "norm" in n]
    assert spec.derived.params - rms.derived.params == (2 * spec.depth + 1) * spec.dim  # the biases
    own = spec.replace(final_norm_eps=1e-3)
    assert own.derived.norm_eps == {**spec.derived.norm_eps, "final": 1e-3}
    assert own.spec_hash != spec.spec_hash


def test_rope_bands_and_axes_keep_every_rotary_hash_at_their_default() -> None:
    """rope_bands at 'shared' and rope_axes at 'rows_first' leave rope-tiny's and dinov3-tiny's hashes
    as before the fields (measured on this branch before issue 36's rotary slice); 'alternating' and
    'cols_first' are other specs."""
    assert get_preset("rope-tiny").spec_hash == "5507d7cd2ea263dd"
    assert get_preset("dinov3-tiny").spec_hash == "76b51ec58f63a996"
    spec = get_preset("rope-tiny")
    assert spec.replace(rope_bands="alternating").spec_hash != spec.spec_hash
    assert spec.replace(rope_axes="cols_first").spec_hash != spec.spec_hash


def test_bias_free_drops_exactly_the_named_biases() -> None:
    """bias_free at its default keeps quadrant's hash (measured on main before issue 36); each name
    drops its bias from every block (the pool's and the patch projection's are their own fields)."""
    spec = get_preset("quadrant")
    assert spec.spec_hash == "85cf2ddd378a18dd"
    assert all(spec.derived.has_bias.values())
    free = spec.replace(bias_free=("attn.key", "attn.out", "mlp.fc2", "head.out"))
    assert free.spec_hash != spec.spec_hash
    dropped = set(spec.derived.tensor_shapes) - set(free.derived.tensor_shapes)
    names = ("attn.key", "attn.out", "mlp.fc2")
    assert dropped == {f"blocks.{i}.{n}.bias" for i in range(spec.depth) for n in names} | {"head.out.bias"}
    assert set(free.derived.tensor_shapes) <= set(spec.derived.tensor_shapes)
    assert spec.derived.params - free.derived.params == spec.depth * (
        spec.heads * spec.head_dim + 2 * spec.dim) + spec.num_classes
    assert [k for k, v in free.derived.has_bias.items() if not v] == [*names, "head.out"]
    without = spec.replace(qkv_bias=False).derived.has_bias
    assert [k for k, v in without.items() if not v] == ["attn.query", "attn.key", "attn.value"]


def test_kv_heads_narrow_exactly_the_blocks_keys_and_values() -> None:
    """kv_heads at its default keeps quadrant's hash and names; set, the blocks' k and v tensors (not
    q's, nor the map pool's) have kv_heads heads, and the parameter count drops by what they lose."""
    spec = get_preset("quadrant")
    assert spec.spec_hash == "85cf2ddd378a18dd"
    assert spec.replace(kv_heads=spec.heads).derived.tensor_shapes == spec.derived.tensor_shapes
    gqa = spec.replace(kv_heads=1)
    assert gqa.spec_hash != spec.spec_hash
    assert (gqa.derived.kv_heads, gqa.derived.kv_inner) == (1, spec.head_dim)
    narrowed = {n for n, shape in gqa.derived.tensor_shapes.items() if shape != spec.derived.tensor_shapes[n]}
    assert narrowed == {f"blocks.{i}.attn.{p}.{w}" for i in range(spec.depth) for p in ("key", "value")
                        for w in ("kernel", "bias")}
    assert gqa.derived.tensor_shapes["blocks.0.attn.key.kernel"] == (spec.dim, 1, spec.head_dim)
    lost = 2 * spec.depth * (spec.heads - 1) * spec.head_dim * (spec.dim + 1)
    assert spec.derived.params - gqa.derived.params == lost
    pooled = get_preset("siglip-tiny").replace(kv_heads=1).derived.tensor_shapes
    assert pooled["pool.attn.key.kernel"][1] == get_preset("siglip-tiny").heads


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_layer_table_rows_add_up_to_the_parameter_count(name: str) -> None:
    spec = get_preset(name)
    assert sum(row.params for row in layer_table(spec)) == spec.derived.params


def test_sequence_table_has_zero_rows_where_a_prefix_token_gets_no_position() -> None:
    spec = get_preset("dinov2-reg-tiny")  # class row, 2 registers without rows, 16 patches
    learned = np.arange(17 * 32, dtype=np.float64).reshape(17, 32)
    table = sequence_positions(spec, learned)
    assert table.shape == (19, 32) and not table[1:3].any()
    assert np.array_equal(table[0], learned[0]) and np.array_equal(table[3:], learned[1:])
    both = spec.replace(pos_embed_register_rows=True, pos_rows=None)
    assert np.array_equal(sequence_positions(both, np.ones((19, 32))), np.ones((19, 32)))


@pytest.mark.parametrize(("changes", "field", "expected"), BAD_SPECS)
def test_invalid_specs_name_field_value_and_expectation(changes, field, expected) -> None:
    base = get_preset("quadrant").to_dict()
    with pytest.raises(SpecError) as info:
        ModelSpec.from_dict({**base, **changes})
    message = str(info.value)
    assert f"'{field}'" in message and expected in message and "\n" not in message


@pytest.mark.parametrize("changes", [
    {"max_patches": 12},  # pack_images = 3 images of one 2 x 2 merge unit each
    {"batching": "naflex", "pack_images": 1, "max_patches": 4, "image_height": 8},  # a 2 x 8 grid
    {"max_patches": 12, "image_height": 8, "image_width": 8},  # three 2 x 2 grids, each the whole image
])
def test_the_smallest_merger_batches_still_build(changes: dict[str, object]) -> None:
    """At the least max_patches and patch grid the merger allows, the probe batch builds: one merge
    unit for every image (the bounds refused one below in BAD_SPECS)."""
    spec = get_preset("qwen2.5-vl-tiny").replace(**changes)
    grids = image_grids(spec, probe_grid_batch(spec, 2, np.random.default_rng(0)))
    assert grids.shape == (2, spec.pack_images, 2) and grids.min() == spec.merge_size
    assert (grids.prod(axis=-1).sum(axis=1) <= spec.max_patches).all()


def test_unknown_field_and_malformed_documents() -> None:
    with pytest.raises(SpecError, match="'depht' is unknown"):
        ModelSpec.from_dict({"depht": 2})
    with pytest.raises(SpecError, match="malformed"):
        ModelSpec.from_json("{not json")
    with pytest.raises(SpecError, match="neither a preset"):
        resolve_spec("no-such-preset")
    with pytest.raises(SpecError, match="expected FIELD=VALUE"):
        get_preset("quadrant").with_overrides(["dim"])
    with pytest.raises(SpecError, match="'dim' = 'wide'"):
        get_preset("quadrant").with_overrides(["dim=wide"])


DIGITS = sys.get_int_max_str_digits()
LONG_INTEGER = "9" * (DIGITS + 1)
TOO_DEEP = f"is nested too deeply to read (beyond Python's recursion limit of {sys.getrecursionlimit()})"
TOO_LONG = f"holds an integer longer than {DIGITS} digits (Python's int-string conversion limit)"
UNDECODABLE_FILES = [
    ("latin1.json", b'{"name": "caf\xe9"}',
     "is not UTF-8 text: byte 0xe9 at offset 13 (invalid continuation byte)"),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000, TOO_DEEP),
    ("deep.toml", b"a = " + b"[" * 100_000 + b"]" * 100_000, TOO_DEEP),
    ("long.json", b'{"dim": ' + LONG_INTEGER.encode() + b"}", TOO_LONG),
    ("long.toml", b"dim = " + LONG_INTEGER.encode() + b"\n", TOO_LONG),
    ("syntax.toml", b"dim = = 3\n", "is malformed TOML: Invalid value (at line 1, column 7)"),
    ("syntax.json", b'{"dim": 3,\n}',
     "is malformed JSON: Expecting property name enclosed in double quotes at line 2"),
    ("array.json", b"[1, 2]", "holds a JSON array, expected an object of fields"),
    ("number.json", b"3", "holds a JSON number, expected an object of fields"),
    ("spec.yaml", b"dim: 3\n", "is neither .json nor .toml (its suffix is '.yaml')"),
]


@pytest.mark.parametrize(("name", "content", "problem"), UNDECODABLE_FILES,
                         ids=[case[0] for case in UNDECODABLE_FILES])
def test_undecodable_spec_files_fail_in_one_line_naming_the_file(tmp_path, name, content, problem) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(SpecError) as info:
        resolve_spec(str(path))
    assert str(info.value) == f"spec file {str(path)!r} {problem}"


def test_documents_and_overrides_beyond_the_parsers_limits_are_one_line() -> None:
    with pytest.raises(SpecError) as info:
        ModelSpec.from_json('{"spec": ' * 100_000 + "{}" + "}" * 100_000)
    assert str(info.value) == f"spec document {TOO_DEEP}"
    with pytest.raises(SpecError) as info:
        ModelSpec.from_json("[]")
    assert str(info.value) == "spec document holds a JSON array, expected an object of fields"
    with pytest.raises(SpecError) as info:
        get_preset("quadrant").with_overrides([f"dim={LONG_INTEGER}"])
    message = str(info.value)  # the value is cut, so the line stays readable
    assert message.startswith("spec field 'dim' = '9999") and len(message) < 300
    assert message.endswith(f"({DIGITS + 3} characters): expected an integer of at most {DIGITS} digits")


def test_a_byte_order_mark_and_a_too_long_name_are_handled(tmp_path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + get_preset("quadrant").to_json().encode())
    assert resolve_spec(str(path)) == get_preset("quadrant")
    with pytest.raises(SpecError) as info:
        resolve_spec("x" * 5000)  # longer than a file name may be: not a file, and no traceback
    message = str(info.value)
    assert message.startswith("--spec 'xxxx") and "(5002 characters) is neither a preset" in message
