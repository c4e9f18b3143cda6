"""The forms public ports take as their authors wrote them (issue 38, item 4), each on a small model
in its source's style, with no wrapper and no `--map`: a forward that returns a dict or a
dataclass (Transformers' ModelOutput) gives its `logits`; a linen or nnx forward with dropout and a
`train` / `deterministic` keyword runs in inference mode; `--set class_token=false` takes the
fields that follow it along; MLX's own `Conv2d` (OHWI) and `MultiHeadAttention` bind by
structure. Each passes `check_logits` (through `portbench.check`) at the float32 tolerance, and
each bad case is one line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

import portbench
from shared.core.forward_io import numpy_outputs, pick_logits
from shared.core.presets import resolve_spec
from shared.core.spec import ModelSpec
from shared.errors import InputError, SpecError
from tests.adversarial import run_cli
from tests.public_style_models import (
    LINEN_SPEC,
    MLX_CLIP_SPEC,
    TINY,
    PaperViT,
    ViT,
    equinox_vit,
    mlx_clip_tower,
    mlx_image_vit,
    vit_jax_module,
    vit_pytorch_spec,
)

MODELS = str(Path(__file__).resolve().parent / "public_style_models.py")


def passes(result: portbench.Result) -> None:
    """The one verdict (check_logits, inside portbench.check): within the float32 tolerance."""
    assert result.passed, result.explanation
    assert result.max_abs_diff is not None and result.max_abs_diff <= result.tolerance


# ---- outputs: a dict, a dataclass, a named tuple, an object with .logits ----------------------------
@dataclass
class ImageClassifierOutput:
    """Transformers' output dataclass, as a user's model returns it (loss None at inference)."""

    loss: Any = None
    logits: Any = None
    pooler_output: Any = None  # (batch, dim): a second 2-D array, so only the name picks the logits


class HFStylePaperViT(PaperViT):
    def forward(self, x: Any) -> ImageClassifierOutput:
        logits = super().forward(x)
        return ImageClassifierOutput(logits=logits, pooler_output=logits[:, :1].expand(-1, 16))


class DeiTStyleDict(PaperViT):
    """DeiT's three heads' outputs, all (batch, classes), with and without a `logits` key."""

    def __init__(self, s: ModelSpec, key: str = "logits") -> None:
        super().__init__(s)
        self.key = key

    def forward(self, x: Any) -> dict[str, Any]:
        logits = super().forward(x)
        return {self.key: logits, "cls_logits": logits + 1, "distillation_logits": logits - 1}


def test_a_dataclass_output_gives_its_logits() -> None:
    passes(portbench.check(HFStylePaperViT(TINY), TINY, trace=False))


def test_a_dict_with_logits_gives_them_and_one_without_names_its_keys_in_one_line() -> None:
    passes(portbench.check(DeiTStyleDict(TINY), TINY, trace=False))
    result = portbench.check(DeiTStyleDict(TINY, key="head_logits"), TINY, trace=False)
    assert not result.passed
    assert result.explanation == (
        "the model returns no logits and 3 arrays of shape (batch=4, classes) (head_logits (4, 5), "
        "cls_logits (4, 5), distillation_logits (4, 5)); pick the logits with --output KEY")
    passes(portbench.check(DeiTStyleDict(TINY, key="head_logits"), TINY, trace=False, output="head_logits"))


def test_named_tuples_and_objects_with_a_logits_attribute_are_read_by_name() -> None:
    class Pair(NamedTuple):
        features: Any
        logits: Any

    class Output:
        def __init__(self, logits: Any) -> None:
            self.logits, self.features = logits, np.zeros((4, 5))

    logits = np.arange(20, dtype=np.float32).reshape(4, 5)
    for result in (Pair(np.ones((4, 5)), logits), Output(logits), {"logits": logits, "other": logits + 1}):
        picked = pick_logits(numpy_outputs(result, np.asarray), None, 4)
        assert np.array_equal(picked, logits)
    with pytest.raises(InputError, match=r"^--output 'missing' is not among the model's outputs "
                                         r"\(features, logits\)$"):
        pick_logits(numpy_outputs(Pair(logits, logits), np.asarray), "missing", 4)


def test_a_tower_that_returns_only_tokens_gives_them_and_what_cannot_be_compared_is_one_line() -> None:
    """A vision tower's ModelOutput with tokens and no pooled output (Transformers' Aimv2VisionModel,
    InternVLVisionModel) gives its tokens, and PixtralVisionModel's batch packed into one sequence
    is split per image (the models themselves pass in tests/test_checkpoints_families.py); two token
    arrays, tokens under a spec with a classifier, or of another length than the spec's, are refused."""
    from shared.your_model.evaluate import check_logits

    tower = TINY.replace(num_classes=0)  # 16 patches + the class token, dim 16
    tokens = np.arange(2 * 17 * 16, dtype=np.float32).reshape(2, 17, 16)
    for result in ({"last_hidden_state": tokens, "pooler_output": None}, {"x": tokens.reshape(1, 34, 16)}):
        picked = pick_logits(numpy_outputs(result, np.asarray), None, 2)
        assert np.array_equal(picked, tokens)
        check_logits(picked, tower, 2)
    with pytest.raises(InputError) as two:
        pick_logits({"a": tokens, "b": tokens}, None, 2)
    assert str(two.value) == ("the model returns no logits and no array of shape (batch=2, classes) and 2 of "
                              "tokens (batch=2, tokens, dim) (a (2, 17, 16), b (2, 17, 16)); pick the logits "
                              "with --output KEY")
    with pytest.raises(InputError, match=r"^your model's forward returns tokens of shape \(2, 17, 16\), "
                                         r"but the spec ends in a classifier \(num_classes 5\): .* "
                                         r"--set num_classes=0$"):
        check_logits(tokens, TINY, 2)
    with pytest.raises(InputError) as short:
        check_logits(tokens[:, 1:], tower, 2)
    assert str(short.value) == ("your model's forward returns tokens of shape (2, 16, 16), expected "
                                "(2, 17, 16) (batch 2 x the spec's 17 tokens x dim 16)")


# ---- inference mode: linen's train / deterministic keyword, nnx's Dropout ----------------------------

def test_a_linen_forward_with_a_required_train_keyword_runs_in_inference_mode() -> None:
    import jax
    import jax.numpy as jnp

    module = vit_jax_module(LINEN_SPEC)
    variables = module.init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)), train=False)
    first = portbench.check((module, variables), LINEN_SPEC, trace=False)
    passes(first)
    assert first.notes == ["mode: ran in inference mode, as the reference computes: its forward was passed "
                           "train=False"]
    again = portbench.check((module, variables), LINEN_SPEC, trace=False)
    assert again.max_abs_diff == first.max_abs_diff  # deterministic: dropout off


def test_a_bare_linen_module_is_initialised_at_the_spec_and_without_one_refused_naming_it() -> None:
    module = vit_jax_module(LINEN_SPEC)  # no variables: linen holds them outside the module
    result = portbench.check(module, LINEN_SPEC, trace=False)
    passes(result)
    assert result.notes[0] == ("variables: your linen module was initialised with module.init(key 0, "
                               "zeros(1, 32, 32, 3)), as the (module, variables) pair it is held as")
    with pytest.raises(InputError, match=r"no spec gives the image size to initialise it: pass --spec, or "):
        portbench.check(module)


def test_inference_flags_name_only_the_keywords_a_call_takes() -> None:
    from ports.flax.linen import inference_flags

    class Both:
        def __call__(self, x: Any, *, train: bool, deterministic: bool = False) -> Any:
            return x

    assert inference_flags(Both()) == {"deterministic": True, "train": False}
    assert inference_flags(lambda x: x) == {}


def test_an_nnx_model_with_dropout_and_a_deterministic_keyword_runs_in_inference_mode() -> None:
    """The nnx tutorial's habits: nnx.Dropout(0.1) modules, and here a `__call__` that takes the
    mode as a required keyword."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    try:
        import flax_nnx_vit
    finally:
        sys.path.pop(0)

    class Tutorial(flax_nnx_vit.PatchViT):
        def __call__(self, images: Any, *, deterministic: bool) -> Any:
            assert deterministic is True
            return super().__call__(images)

    spec = resolve_spec("mnist-vit-small", [])
    dropped = spec.replace(dropout_embed=0.1, dropout_mlp=0.1)
    import jax
    from flax import nnx

    model = Tutorial(dropped, jax.nn.gelu if spec.activation == "gelu_tanh" else
                     lambda x: jax.nn.gelu(x, approximate=False), nnx.Rngs(0, dropout=1))
    images = np.ones((2, 28, 28, 1), np.float32)
    train = [np.asarray(model(images, deterministic=True)) for _ in range(2)]
    assert not np.array_equal(*train)  # called as it is, its dropout is live
    passes(portbench.check(model, spec, trace=False))


# ---- --set class_token=false: the fields that follow it -------------------------------------------
def test_setting_class_token_false_takes_pooling_and_the_class_row_along() -> None:
    spec = vit_pytorch_spec().with_overrides(["class_token=false"])
    assert spec == vit_pytorch_spec(pool="mean")  # pooling mean, no class row
    passes(portbench.check(ViT(TINY, pool="mean"), spec, trace=False))
    kept = TINY.with_overrides(["class_token=false", "pooling=flatten"])  # an explicit --set wins
    assert (kept.pooling, kept.pos_embed_class_row) == ("flatten", False)
    with pytest.raises(SpecError, match=r"^spec field 'pooling' = 'cls': expected mean, mean_all, flatten "
                                        r"or map when class_token is false \(no class token\)$"):
        TINY.with_overrides(["class_token=false", "pooling=cls"])
    deit = TINY.replace(distill_token=True).with_overrides(["class_token=false"])
    assert (deit.distill_token, deit.pooling) == (False, "mean")
    assert TINY.replace(pooling="map").with_overrides(["class_token=false"]).pooling == "map"  # it can stand


def test_verify_says_what_followed_a_set(tmp_path) -> None:
    spec = tmp_path / "vit.json"
    spec.write_text(vit_pytorch_spec().to_json())
    outcome = run_cli("verify", "--model", f"{MODELS}:vit_pytorch_mean", "--spec", spec,
                      "--set", "class_token=false")
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    assert "note: class_token=false: pooling follows (cls -> mean: no class token to read" in outcome.stdout
    assert "note: class_token=false: pos_embed_class_row follows (true -> false" in outcome.stdout


# ---- MLX: its own Conv2d (OHWI) and MultiHeadAttention, bound by structure ---------------------------

# MLX's OHWI Conv2d and MultiHeadAttention; equinox's (D, 1, 1) conv bias and MultiheadAttention
# (its forward: jax.vmap of eqx.nn.inference_mode, channels first)
OWN_LAYERS = {
    "mlx-image": (mlx_image_vit, {"conv_proj.weight": "conv_ohwi",
                                  "layers.0.self_attention.query_proj.weight": "heads_linear",
                                  "layers.0.self_attention.out_proj.weight": "heads_out_linear"}),
    "equinox": (equinox_vit, {"patch_embedding.weight": "conv", "patch_embedding.bias": "channel_bias",
                              "blocks.0.attention.query_proj.weight": "heads_linear",
                              "blocks.0.attention.output_proj.weight": "heads_out_linear"}),
}


@pytest.mark.parametrize("case", OWN_LAYERS)
def test_a_frameworks_own_conv_and_attention_bind_by_structure(case: str) -> None:
    build, expected = OWN_LAYERS[case]
    result = portbench.check(build(TINY), TINY, trace=False)
    passes(result)
    assert result.binding["rule"] == "structure"
    layouts = {link["native"]: link["layout"] for link in result.binding["links"]}
    assert {name: layouts[name] for name in expected} == expected


def test_mlx_examples_clip_tower_binds_by_structure() -> None:
    passes(portbench.check(mlx_clip_tower(MLX_CLIP_SPEC), MLX_CLIP_SPEC, trace=False))


def test_an_mlx_model_the_spec_does_not_describe_is_refused_in_one_line() -> None:
    result = portbench.check(mlx_image_vit(TINY, bias=False), TINY, trace=False)  # qkv_bias true
    assert not result.passed and "\n" not in result.explanation
    assert result.explanation.startswith("your model's parameters do not bind to spec 'tiny-public' "
                                         "(structure): 8 canonical tensors missing (blocks.0.attn.query.bias")


# ---- weights too small to judge by ------------------------------------------------------------
def test_a_zero_initialised_head_is_judged_on_the_canonical_weights_and_its_mistake_seen() -> None:
    """A zero-initialised head (timm's jax init, DINOv3's near-zero one) gives its bias whatever
    the image, which every model matches: the verdict loads portbench's canonical weights instead,
    says so, and so sees the class token read out where the spec pools the mean."""
    import torch

    model = PaperViT(TINY)
    with torch.no_grad():
        model.classifier[-1].weight.zero_()
    result = portbench.check(model, TINY.replace(pooling="mean"), trace=False)
    assert not result.passed and "with pooling=cls" in result.explanation, result.explanation
    assert result.notes[-1] == ("weights: with your model's own parameters its logits move by at most 0 "
                                "over the probe images, under 1000 x the tolerance 5.0e-06, where a wrong "
                                "function passes unseen: portbench's canonical weights (seed 0) were loaded "
                                "into it instead")
    passes(portbench.check(model, TINY, trace=False))
