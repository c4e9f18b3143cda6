"""The spec read from a model's layers, whatever their names (issue 38, item 1): small models in the
style of public ports (tests/public_style_models.py, the Keras example) are read by their
structure (`shared/your_model/proposal_structure.py`) to the very spec they were built from, so
`verify --model` needs no `--spec`; where no layer states the heads (q, k, v Linears hold every
head alike) it is refused in one line naming `--set heads=N`, and with it head_dim follows. That
each of these specs passes its model is tests/test_user_public_styles.py's and
tests/test_user_public_forms.py's proof; here the reading itself, and one run end to end."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from shared.core.presets import get_preset
from shared.core.spec import ModelSpec
from shared.errors import SpecError
from shared.your_model.proposal import UNREAD_NAME, propose_spec
from tests import background
from tests import public_style_models as styles
from tests.adversarial import Outcome
from tests.test_user_models import load_example

MODELS = str(Path(__file__).resolve().parent / "public_style_models.py")
# pre or post norm, the remainder, cls or mean pooling beside a class token: no shape says them
UNREAD = ["remainder", "norm", "rope", "pooling"]


def _linen() -> Any:
    import jax
    import jax.numpy as jnp

    module = styles.vit_jax_module(styles.LINEN_SPEC)
    return module, module.init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)), train=False)


KERAS_SPEC = get_preset("mnist-vit-small").replace(norm="pre", dropout_mlp=0.0)  # the example's pre-norm form

# case -> (the model, the spec it was built from, the --set it needs, the fields nothing read)
CASES: dict[str, tuple[Callable[[], Any], ModelSpec, list[str], list[str]]] = {
    "openai-clip": (lambda: styles.ClipVisionTower(styles.TINY), styles.clip_spec(), [], UNREAD),
    "paper-replicating (dropout 0.1)": (lambda: styles.PaperViT(styles.TINY), styles.TINY, [], UNREAD),
    "dinov2 (registers, LayerScale)": (lambda: styles.DinoVisionTransformer(styles.dino_spec(registers=2)),
                                       styles.dino_spec(registers=2), ["heads=2"],
                                       ["remainder", "heads", "head_dim", "norm", "rope", "pooling"]),
    "vit-pytorch (pool='mean')": (lambda: styles.ViT(styles.TINY, pool="mean"),
                                  styles.vit_pytorch_spec(pool="mean"), ["heads=2"],
                                  ["remainder", "heads", "head_dim", "norm", "rope"]),
    "vit_jax (linen)": (_linen, styles.LINEN_SPEC, [], UNREAD),
    "mlx-image": (lambda: styles.mlx_image_vit(styles.TINY), styles.TINY, [], UNREAD),
    "mlx-examples clip (inline QuickGELU)": (lambda: styles.mlx_clip_tower(styles.MLX_CLIP_SPEC),
                                             styles.MLX_CLIP_SPEC, ["heads=2", "activation=quick_gelu"],
                                             ["remainder", "heads", "head_dim", "activation", "norm", "rope",
                                              "pooling"]),
    "equinox (inline exact GELU)": (lambda: styles.equinox_vit(styles.TINY), styles.TINY, [],
                                    ["remainder", "activation", "norm", "rope", "pooling"]),
    "open_clip (bare proj, LayerScale)": (lambda: styles.OpenClipVisionTransformer(styles.TINY, 1e-5),
                                          styles.open_clip_spec(layer_scale=True), [], UNREAD),
    "deit (a distilled timm subclass)": (lambda: styles.deit_distilled(styles.TINY), styles.deit_spec(), [],
                                         ["rope"]),
    "big_vision's MAPHead in torch": (lambda: styles.MapPoolViT(styles.TINY), styles.map_pool_spec(), [],
                                      ["remainder", "norm", "rope", "pool_qkv_bias"]),
    "keras functional example": (lambda: load_example("keras_functional_vit").build(KERAS_SPEC),
                                 KERAS_SPEC, [], UNREAD),
}


@pytest.mark.parametrize("case", CASES)
def test_the_spec_read_from_the_layers_is_the_one_the_model_was_built_from(case: str) -> None:
    build, built_from, sets, unread = CASES[case]
    torch.manual_seed(0)
    proposal = propose_spec(build())
    assert proposal.stated(sets) == built_from.replace(name=UNREAD_NAME)
    assert proposal.unread == unread


def test_each_field_read_from_the_structure_names_its_source() -> None:
    """vit-pytorch's ViT, whose names no library knows: Linear patches between two LayerNorms, an
    empty class token, a packed bias-free qkv, its final norm registered before its layers."""
    sources = propose_spec(styles.ViT(styles.TINY, pool="mean")).sources
    flat = "to_patch_embedding.1 (Linear) on flattened patches (192 -> 16)"
    table = "position table pos_embedding (16, 16): 16 rows"
    linears = ", ".join(f"transformer.layers.0.{n} (Linear)" for n in ("0.to_qkv", "0.to_out.0", "1.net.1",
                                                                         "1.net.4"))
    final = "LayerNorm transformer.norm (LayerNorm), the only norm outside the blocks, registered before " \
            "them, taken as the final norm"
    assert {name: sources[name] for name in ("dim", "patch_height", "image_height", "depth", "mlp_dim",
                                             "class_token", "pooling", "patch_norm_in", "patch_norm_out",
                                             "qkv_bias", "bias_free", "kv_heads", "final_norm",
                                             "num_classes")} == {
        "dim": flat,
        "patch_height": f"{flat}: 192 = 3 channels x 8x8 (square patches assumed; --set channels, "
                        "patch_height, patch_width state others)",
        "image_height": f"{table} = a 4x4 patch grid (square assumed for a flat table) x 8x8 patches",
        "depth": "2 alike blocks in transformer.layers",
        "mlp_dim": f"transformer.layers.0.1.net.4 (Linear) in features; the Linears of transformer.layers "
                   f"({linears})",
        "class_token": "the class token cls_token is empty (nothing of it reaches the logits)",
        "pooling": "follows class_token=False (no class token to read out)",
        "patch_norm_in": "LayerNorm to_patch_embedding.0 (LayerNorm) before the patch projection",
        "patch_norm_out": "LayerNorm to_patch_embedding.2 (LayerNorm) right after the patch projection, in "
                          "its module",
        "qkv_bias": "the q, k, v biases of transformer.layers",
        "bias_free": "every projection of transformer.layers but q, k, v (qkv_bias) has a bias",
        "kv_heads": "the k and v of transformer.layers as wide as q (keys and values with every head)",
        "final_norm": f"{final}: on every token",
        "num_classes": "mlp_head (Linear) (16 -> 5), the last Linear after the blocks",
    }


def test_the_image_is_the_position_tables_grid_less_its_class_and_register_rows() -> None:
    """DINOv2's registers have no row in its table (the parametrised case); timm's have one each."""
    model = styles.DinoVisionTransformer(styles.dino_spec(registers=2))
    model.pos_embed = torch.nn.Parameter(torch.zeros(1, 19, 16))  # 1 class + 2 register rows + 4x4
    proposal = propose_spec(model)
    assert (proposal.spec.pos_embed_register_rows, proposal.spec.image_height) == (True, 32)
    assert proposal.sources["image_height"] == (
        "position table pos_embed (1, 19, 16): 19 rows = 1 class row + 2 register rows + a 4x4 patch grid "
        "(square assumed for a flat table) x 8x8 patches")


def test_blocks_without_their_heads_are_refused_naming_the_set_and_head_dim_follows_it() -> None:
    proposal = propose_spec(styles.DinoVisionTransformer(styles.dino_spec()))
    with pytest.raises(SpecError) as refused:
        proposal.stated()
    assert str(refused.value) == (
        "the number of attention heads is not read from your model (2 blocks of width 16 read, but no "
        "attention layer states its heads: q, k, v Linears hold every head alike); pass --set heads=N "
        "(head_dim follows: 16 / N), or a --spec")
    assert proposal.stated(["heads=4"]).head_dim == 4
    assert proposal.stated(["heads=4", "head_dim=8"]).head_dim == 8  # a --set head_dim wins
    assert proposal.summary(proposal.stated(["heads=4"])).endswith(
        "(heads=4, dim=16, layer_norm_eps=1e-06, activation=gelu, pooling=cls); unread, at the spec default "
        "(--set FIELD=VALUE states one): remainder, norm, rope, pooling")


@background.task("public-style-heads", "test_user_public_spec.py::test_verify_reads_a_public_style")
def public_style_heads(start: background.Start) -> tuple[Path, Outcome, Outcome]:
    out = Path(tempfile.mkdtemp(prefix="portbench-public-")) / "dino.toml"
    return (out, background.compare_py(start, "spec", "--from-model", f"{MODELS}:dino_vit", "--out", out),
            background.compare_py(start, "verify", "--model", f"{MODELS}:dino_vit", "--set", "heads=2"))


def test_verify_reads_a_public_style_model_and_asks_only_for_its_heads() -> None:
    out, refused, verified = background.result("public-style-heads")
    assert refused.code == 2 and not out.exists()
    assert "  dim=16 (shape of patch_embed.weight (16, 3, 8, 8) (OIHW))" in refused.stdout  # shown first
    assert "pass --set heads=N (head_dim follows: 16 / N), or a --spec" in refused.stderr
    assert verified.code == 0, verified.stdout + verified.stderr
    assert "note: heads=2: head_dim follows (unread; dim 16 / 2 heads = 8)" in verified.stdout
    assert "\nequivalent: max abs gap" in verified.stdout


def test_an_unread_field_is_fitted_only_where_one_setting_reproduces_the_logits() -> None:
    """The nnx example as shipped is post-norm, which no layer states: read with no spec, the one
    catalogue setting of its unread fields that reproduces its logits is taken and said; given a
    pre-norm spec, the same model fails and diagnose names that setting."""
    import portbench

    model = load_example("flax_nnx_vit").build(KERAS_SPEC.replace(norm="post"))
    read = portbench.check(model, trace=False)
    assert read.passed, read.explanation
    assert read.notes[-1] == ("fitted: norm=post, a setting no layer of your model states (unread), is the "
                              "only one that reproduces its logits (diagnose tried 15 settings and 0 pairs); "
                              "--set it, or a --spec, to check against another")
    stated = portbench.check(model, KERAS_SPEC.replace(dropout_mlp=0.1), trace=False)
    assert not stated.passed and "with norm=post" in stated.explanation


@pytest.mark.parametrize("name", ["open_clip", "deit", "map_pool"])
def test_open_clip_deit_and_a_torch_map_head_pass_with_the_spec_read_from_them(name: str) -> None:
    """open_clip's output is `pooled @ proj`, a bare (width, out) parameter no Linear holds: read
    as a bias-free head and bound in (in, out) order. DeiT's own distilled model subclasses timm's
    VisionTransformer: read as its base, its two heads averaged as distill_token says. A MAPHead in
    torch: its attention is not a block (the depth counts the blocks' alike attention layers), its
    probe is not a class token."""
    import portbench

    torch.manual_seed(0)
    result = portbench.check(getattr(styles, name)(), trace=False)
    assert result.passed, result.explanation
    links = {link["native"]: (link["canonical"], link["layout"]) for link in result.binding["links"]}
    if name == "open_clip":
        assert links["proj"] == ("head.out.kernel", "same")
    elif name == "deit":
        assert links["head_dist.weight"][0] == "head_dist.out.kernel"
    else:
        assert links["head_pool.probe"][0] == "pool.probe"
