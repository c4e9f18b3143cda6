"""The canonical weight file: round trip, layout transforms, and every way a file can be wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save, save_file

from shared.core import weights as W  # noqa: N812
from shared.core.presets import get_preset
from shared.core.weights import init_weights, load_weights, save_weights
from shared.errors import PortbenchError, WeightsError


@pytest.fixture
def spec():
    return get_preset("quadrant")


@pytest.fixture
def saved(tmp_path, spec):
    path = tmp_path / "w.safetensors"
    save_weights(path, spec, init_weights(spec, 3))
    return path


def test_round_trip_is_bit_exact_and_carries_the_spec(saved, spec) -> None:
    loaded = load_weights(saved)
    assert loaded.spec == spec and loaded.differing_fields == []
    assert loaded.metadata["spec_hash"] == spec.spec_hash and loaded.metadata["format_version"] == "1"
    original = init_weights(spec, 3)
    assert list(loaded.tensors) == list(original)
    for name, value in original.items():
        assert np.array_equal(loaded.tensors[name], value)


def test_init_is_seeded_and_per_tensor(spec) -> None:
    a, b = init_weights(spec, 0), init_weights(spec, 0)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["head.out.kernel"], init_weights(spec, 1)["head.out.kernel"])
    wider = spec.replace(num_classes=5)  # another tensor changes; this one must not
    assert np.array_equal(init_weights(wider, 0)["patch_embed.kernel"], a["patch_embed.kernel"])
    assert all(np.any(v != 0) for v in a.values())  # zero tensors would hide mapping errors


def test_layout_transforms_invert() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((6, 2, 5)).astype(np.float32) for _ in range(3))
    packed = W.qkv_pack(q, k, v)
    assert packed.shape == (30, 6)
    unpacked = W.qkv_unpack(packed, [(6, 2, 5)] * 3)
    assert all(np.array_equal(a, b) for a, b in zip(unpacked, (q, k, v), strict=True))
    # Row 5 of the packed weight is query head 1, column 0 (heads are head-major within a block).
    assert np.array_equal(packed[5], q[:, 1, 0])
    out = rng.standard_normal((2, 5, 6)).astype(np.float32)
    assert np.array_equal(W.attn_out_from_out_in(W.attn_out_to_out_in(out), 2, 5), out)
    conv = rng.standard_normal((8, 4, 3, 7)).astype(np.float32)
    assert W.conv_hwio_to_oihw(conv).shape == (7, 3, 8, 4)
    assert np.array_equal(W.conv_oihw_to_hwio(W.conv_hwio_to_oihw(conv)), conv)


def test_compatible_spec_runs_and_names_changed_fields(saved, spec) -> None:
    other = spec.replace(layer_norm_eps=1e-3, activation="gelu_tanh", norm="post")
    loaded = load_weights(saved, other)
    assert loaded.spec == other
    assert loaded.differing_fields == ["activation", "norm", "layer_norm_eps"]
    assert "layer_norm_eps=0.001 (file: 1e-05)" in loaded.note()


def test_incompatible_spec_names_first_tensor(saved, spec) -> None:
    with pytest.raises(WeightsError, match=r"does not fit spec .*'blocks.0.attn.query.kernel' has shape"):
        load_weights(saved, spec.replace(head_dim=16))
    with pytest.raises(WeightsError, match=r"'blocks\.2\.norm1\.scale' is missing"):
        load_weights(saved, spec.replace(depth=3))


def _rewrite(path, tensors, metadata):
    save_file(tensors, str(path), metadata=metadata)


@pytest.mark.parametrize("damage", ["missing", "extra", "shape", "nan", "dtype"])
def test_damaged_tensors_are_named(tmp_path, saved, spec, damage) -> None:
    from safetensors import safe_open

    with safe_open(str(saved), framework="numpy") as f:
        metadata = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    if damage == "missing":
        del tensors["head.out.bias"]
        expected = "'head.out.bias' is missing"
    elif damage == "extra":
        tensors["stray"] = np.zeros(3, np.float32)
        expected = "'stray' is not part of the spec"
    elif damage == "shape":
        tensors["head.out.bias"] = np.zeros(5, np.float32)
        expected = "'head.out.bias' has shape (5,)"
    elif damage == "nan":
        tensors["head.out.bias"] = np.array([0, np.nan, 0, 0], np.float32)
        expected = "'head.out.bias' has 1 non-finite values"
    else:
        tensors["head.out.bias"] = tensors["head.out.bias"].astype(np.float64)
        expected = "'head.out.bias' has dtype float64"
    path = tmp_path / "bad.safetensors"
    _rewrite(path, tensors, metadata)
    with pytest.raises(WeightsError) as info:
        load_weights(path)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_unreadable_files_are_one_line_errors(tmp_path, saved) -> None:
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(saved.read_bytes()[:200])
    text = tmp_path / "notes.safetensors"
    text.write_text("hello")
    pickle_like = tmp_path / "model.pt"
    pickle_like.write_bytes(b"\x80\x04\x95" + b"\x00" * 64)
    for path in (truncated, text, pickle_like):
        with pytest.raises(WeightsError, match="not a readable safetensors file"):
            load_weights(path)
    with pytest.raises(WeightsError, match="does not exist"):
        load_weights(tmp_path / "absent.safetensors")


def test_foreign_and_tampered_metadata(tmp_path, saved, spec) -> None:
    foreign = tmp_path / "foreign.safetensors"
    foreign.write_bytes(save({"x": np.zeros(2, np.float32)}, metadata={"format": "pt"}))
    with pytest.raises(WeightsError, match="metadata 'format' is 'pt'"):
        load_weights(foreign)
    from safetensors import safe_open

    with safe_open(str(saved), framework="numpy") as f:
        metadata = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    edited = json.loads(metadata["spec"])
    edited["layer_norm_eps"] = 1e-3
    metadata["spec"] = json.dumps(edited)
    tampered = tmp_path / "tampered.safetensors"
    _rewrite(tampered, tensors, metadata)
    with pytest.raises(WeightsError, match=r"spec_hash .* does not match"):
        load_weights(tampered)
    # JSON lets the last of two keys win silently: the stored spec is decoded as every document is
    metadata["spec"] = '{"dim": 8, ' + json.dumps(edited)[1:]
    _rewrite(tampered, tensors, metadata)
    with pytest.raises(WeightsError, match="the stored spec gives the key 'dim' twice"):
        load_weights(tampered)


# Specs the version before 3a6faf8 and b3a1033 wrote, with the spec_hash it stored (computed then):
# a field a later rule holds to its leader, at a value that has no effect there.
WRITTEN_BEFORE = [
    ({"pos_embed": "sincos"}, "5f1b538bcef5c2bc", "pos_embed_class_row", False,
     "pos_embed_class_row=true read as false (pos_embed=sincos: only a learned table has a row"),
    ({"pooling": "mean", "pool_qkv_bias": False}, "6c587d62e3c234be", "pool_qkv_bias", True,
     "pool_qkv_bias=false read as true (pooling=mean: no map pool's query, key and value"),
]


@pytest.mark.parametrize("fields, written_hash, settled, value, note", WRITTEN_BEFORE)
def test_a_file_written_before_a_rule_still_reads_with_the_field_settled(
        tmp_path, spec, fields, written_hash, settled, value, note) -> None:
    """Such a file was refused (\"stored spec is invalid\"), with or without --spec, once the rule
    came: its weights compute the same function, so it reads, the field settled and said so."""
    stored = {**spec.to_dict(), **fields}
    assert W.ModelSpec.stored_hash(stored) == written_hash  # the hash the old writer stored
    now = W.ModelSpec.from_dict({**stored, settled: value})
    path = tmp_path / "old.safetensors"
    metadata = {"format": W.FORMAT_NAME, "format_version": W.FORMAT_VERSION, "spec": json.dumps(stored),
                "spec_hash": written_hash}
    save_file(init_weights(now, 0), str(path), metadata=metadata)
    loaded = load_weights(path)
    assert loaded.spec == now and getattr(loaded.spec, settled) is value
    assert note in (loaded.note() or "")
    assert load_weights(path, now).spec == now  # and under the spec it computes


def test_failed_save_leaves_existing_file_untouched(saved, spec) -> None:
    before = saved.read_bytes()
    broken = init_weights(spec, 0)
    broken["head.out.bias"] = np.full(4, np.inf, np.float32)
    with pytest.raises(WeightsError, match="non-finite"):
        save_weights(saved, spec, broken)
    assert saved.read_bytes() == before
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # no temporary left behind


def test_unwritable_destination(tmp_path, spec) -> None:
    with pytest.raises(PortbenchError, match="does not exist"):
        save_weights(tmp_path / "no" / "dir" / "w.safetensors", spec, init_weights(spec, 0))
