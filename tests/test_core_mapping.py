"""The weight-name engine: one table gives both directions, bit-exactly; every way a table or a
set of native tensors can fail to map is one line naming the tensor."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from shared.checkpoints import FORMATS, plan
from shared.core import weights as W  # noqa: N812
from shared.core.mapping import Table, lookup
from shared.core.presets import get_preset
from shared.core.weights import init_weights
from shared.errors import WeightsError

D, H, HD = 6, 2, 3
SHAPES = {
    "cls_token": (D,),
    "blocks.0.norm1.scale": (D,), "blocks.0.norm1.bias": (D,),
    "blocks.0.attn.query.kernel": (D, H, HD), "blocks.0.attn.key.kernel": (D, H, HD),
    "blocks.0.attn.value.kernel": (D, H, HD), "blocks.0.attn.out.kernel": (H, HD, D),
    "blocks.0.mlp.fc1.kernel": (D, 4), "blocks.0.mlp.fc2.kernel": (4, D),
}
ROWS = """
cls_token                                   class_token                   batch_token
blocks.{i}.norm1.{w:scale=weight|bias}      layer_{i}.ln.{w}              # a rename choice
blocks.{i}.attn.{p:query|key|value}.kernel  layer_{i}.in_proj_weight      heads_linear  # packs
blocks.{i}.attn.out.kernel                  layer_{i}.out_proj.weight     heads_out_linear
blocks.{i}.mlp.{fc:fc1=0|fc2=3}.kernel      layer_{i}.mlp.{fc}.weight     linear
"""
NATIVE = {
    "class_token": (1, 1, D), "layer_0.ln.weight": (D,), "layer_0.ln.bias": (D,),
    "layer_0.in_proj_weight": (3 * H * HD, D), "layer_0.out_proj.weight": (D, H * HD),
    "layer_0.mlp.0.weight": (4, D), "layer_0.mlp.3.weight": (D, 4),
}


def tensors(shapes: dict[str, tuple[int, ...]] = SHAPES) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


def test_one_table_gives_both_directions_bit_exactly() -> None:
    bound = Table(ROWS, "demo").bind(SHAPES)
    canonical = tensors()
    native = bound.to_native(canonical)
    assert {name: value.shape for name, value in native.items()} == NATIVE == bound.native_shapes
    qkv = [canonical[f"blocks.0.attn.{p}.kernel"] for p in ("query", "key", "value")]
    assert np.array_equal(native["layer_0.in_proj_weight"], W.qkv_pack(*qkv))  # q, k, v in order
    assert np.array_equal(native["layer_0.mlp.3.weight"], canonical["blocks.0.mlp.fc2.kernel"].T)
    back = bound.from_native(native, "demo file")
    assert list(back) == list(SHAPES)  # canonical order
    assert all(np.array_equal(back[name], canonical[name]) for name in SHAPES)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_checkpoint_table_round_trips(fmt: str) -> None:
    """Each format's table on a spec it can express (names unchanged, values bit-exact)."""
    spec = get_preset("quadrant").replace(
        pos_embed="learned", class_token=True, pooling="cls", final_norm="tokens", head_hidden=(),
        pos_embed_class_row=fmt != "big_vision", head_dim=get_preset("quadrant").dim // 4, heads=4)
    canonical = init_weights(spec, seed=1)
    bound = plan(fmt, spec)
    back = bound.from_native(bound.to_native(canonical), fmt)
    assert list(back) == list(canonical)
    assert all(np.array_equal(back[name], canonical[name]) for name in canonical)


def test_a_table_extends_its_base() -> None:
    base = Table("a.{w}  x.{w}\nb.{w}  y.{w}", "base")
    bound = Table("b.kernel  z.weight  linear", "extended", base=base).bind(
        {"a.kernel": (2, 3), "b.kernel": (2, 3), "b.bias": (3,)})
    assert bound.native_shapes == {"x.kernel": (2, 3), "z.weight": (3, 2), "y.bias": (3,)}


def test_fill_names_the_spec_dependent_part_of_a_native_name() -> None:
    bound = Table("final_norm.{w}  {final}.{w}", "t", final="fc_norm").bind({"final_norm.scale": (4,)})
    assert bound.paths() == {"final_norm.scale": "fc_norm.scale"}


def test_native_tensors_that_do_not_map_are_refused_by_name() -> None:
    bound = Table(ROWS, "demo").bind(SHAPES)
    native = bound.to_native(tensors())
    missing = {k: v for k, v in native.items() if k != "layer_0.ln.bias"}
    with pytest.raises(WeightsError, match=r"^f: does not map onto the spec: 1 missing \(layer_0.ln.bias\)$"):
        bound.from_native(missing, "f")
    extra = {**native, "extra.weight": np.zeros(3, np.float32)}
    with pytest.raises(WeightsError, match=r"1 unused \(extra.weight\)"):
        bound.from_native(extra, "f")
    both = {**missing, **{f"x{k}": np.zeros(1, np.float32) for k in range(6)}}
    with pytest.raises(WeightsError, match=r"1 missing \(layer_0.ln.bias\); 6 unused \(x0, x1, x2, x3, "
                                           r"\.\.\. 2 more\)"):
        bound.from_native(both, "f")
    bad = {**native, "layer_0.in_proj_weight": np.zeros((2 * H * HD, D), np.float32)}
    with pytest.raises(WeightsError, match=r"tensor 'layer_0.in_proj_weight' has shape \(12, 6\), "
                                           r"the spec expects \(18, 6\)"):
        bound.from_native(bad, "f")


@pytest.mark.parametrize(("rows", "shapes", "message"), [
    ("a.{w}  x.{w}\na.kernel  y.weight", {"a.kernel": (2,)},
     "canonical tensor 'a.kernel' is ambiguous: rows 'a.{w}' and 'a.kernel' both match it"),
    ("a.bias  x.weight\nb.{w}  x.{w}", {"a.bias": (2,), "b.weight": (2,)},
     "native tensor 'x.weight' is ambiguous: 'a.bias' and 'b.weight' both land on it"),
    ("a.{w:kernel=weight|bias=weight}  x.{w}", {"a.kernel": (2,), "a.bias": (2,)},
     "native tensor 'x.weight' is ambiguous: 'a.kernel' and 'a.bias' both land on it"),
    ("a.kernel  x.weight", {"a.kernel": (2,), "b.kernel": (2,)},
     "canonical tensor 'b.kernel' matches no row"),
    ("{p:q|k|v}.kernel  qkv.weight  heads_linear", {"q.kernel": (2, 1, 2), "k.kernel": (2, 1, 2)},
     "native tensor 'qkv.weight' packs 3 tensors ({p:q|k|v}.kernel), the spec has 2: q.kernel, k.kernel"),
])
def test_tables_that_do_not_name_every_tensor_once_are_refused(rows, shapes, message) -> None:
    with pytest.raises(WeightsError) as error:
        Table(rows, "t").bind(shapes)
    assert str(error.value) == f"t table: {message}"


@pytest.mark.parametrize(("row", "message"), [
    ("a.kernel  x.weight  transpose", "layout 'transpose' is unknown; expected one of: same, batch"),
    ("a.{w}  x.{v}", "native placeholder {v} is not a plain name from the canonical pattern"),
    ("a.{i}.kernel  x.weight", "every {name} without choices must appear in the native name"),
    ("{p:q|k}.kernel  x.weight", "packs p, but layout 'same' takes one tensor"),
    ("{w}.{w}  x.{w}", "placeholder {w} appears twice"),
    ("a.kernel", "needs a canonical and a native pattern, then at most a layout"),
])
def test_malformed_rows_are_refused(row: str, message: str) -> None:
    with pytest.raises(WeightsError) as error:
        Table(row, "t")
    assert str(error.value).startswith("t table: row ") and message in str(error.value)


def test_paths_are_attribute_paths_for_rename_only_tables() -> None:
    model = SimpleNamespace(blocks=[SimpleNamespace(fc=SimpleNamespace(kernel="k0"))])
    table = Table("blocks.{i}.mlp.fc1.{w}  blocks.{i}.fc.{w}", "t")
    paths = table.bind({"blocks.0.mlp.fc1.kernel": (1,)}).paths()
    assert {name: lookup(model, path) for name, path in paths.items()} == {"blocks.0.mlp.fc1.kernel": "k0"}
    with pytest.raises(WeightsError, match=r"^demo table: native tensor 'class_token' is not a plain"):
        Table(ROWS, "demo").bind(SHAPES).paths()
