"""`verify --model` / `portbench.check` on small models written in the style of public ViT code
(tests/public_style_models.py, issue 38): a model whose logits match is never failed by a setting
that cannot change the inference logits; a real contradiction still fails, named; a tensor the
forward never reads is named and set aside, one it reads and the spec cannot place still refused."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

import portbench
from shared.core.spec import ModelSpec
from shared.your_model.spec_check import FUNCTION, LAYOUT, TRAIN, Contradiction, from_layers
from tests import background
from tests.adversarial import Outcome
from tests.public_style_models import (
    TINY,
    ClipVisionTower,
    DinoVisionTransformer,
    PaperViT,
    ViT,
    clip_spec,
    dino_spec,
    vit_pytorch_spec,
)

MODELS = str(Path(__file__).resolve().parent / "public_style_models.py")


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)


def test_clips_sequence_first_attention_is_a_note_when_the_model_permutes_for_it() -> None:
    result = portbench.check(ClipVisionTower(TINY), clip_spec(), trace=False)
    assert result.passed, result.explanation
    assert result.max_abs_diff < 1e-5
    assert len(result.contradictions) == 1
    assert result.contradictions[0].startswith("batch_first: your model MultiheadAttention batch_first=False")
    assert result.contradictions[0].endswith("right only where the model permutes its tokens to (L, N, D) "
                                             "itself: the logits decide")


def test_a_sequence_first_attention_fed_batch_first_tokens_fails_naming_batch_first() -> None:
    result = portbench.check(ClipVisionTower(TINY, transpose=False), clip_spec(), trace=False)
    assert not result.passed
    assert result.explanation.startswith("batch_first: your model MultiheadAttention batch_first=False")
    assert "max |logits - reference|" in result.explanation


def test_dropout_rates_are_notes_never_a_failure() -> None:
    model = PaperViT(TINY, mlp_dropout=0.1, embedding_dropout=0.1, attn_dropout=0.2)
    result = portbench.check(model, TINY, trace=False)
    assert result.passed, result.explanation
    fields = [line.split(":")[0] for line in result.contradictions]
    assert fields == ["dropout", "dropout_attn"]
    assert all(line.endswith("dropout acts only in train mode: a note, it cannot change the inference logits")
               for line in result.contradictions)


def test_a_real_contradiction_beside_a_dropout_note_still_fails_named() -> None:
    spec = TINY.replace(layer_norm_eps=1e-6)  # the model's LayerNorms use torch's 1e-5
    result = portbench.check(PaperViT(TINY), spec, trace=False)
    assert not result.passed
    assert result.explanation.startswith("layer_norm_eps: your model 1e-05, spec 1e-06")
    assert "dropout" not in result.explanation  # a note is not a reason


def test_each_contradiction_says_whether_it_can_fail_a_matching_model() -> None:
    layers = [{"kind": "dropout", "settings": {"rate": 0.3}, "path": "drop"},
              {"kind": "attention", "settings": {"batch_first": False, "rate": 0.1}, "path": "attn"},
              {"kind": "layer_norm", "settings": {"eps": 1e-3}, "path": "ln"}]
    found = {c.field: c for c in from_layers(TINY, layers)}
    assert {name: c.effect for name, c in found.items()} == {
        "dropout": TRAIN, "batch_first": LAYOUT, "dropout_attn": TRAIN, "layer_norm_eps": FUNCTION,
        "depth": FUNCTION}  # one attention layer where TINY has two blocks
    assert [name for name, c in found.items() if c.decisive] == ["layer_norm_eps", "depth"]
    assert Contradiction("x", "", 1, 2, "here").line() == "x: your model 1, spec 2 (here)"


@background.task("public-styles-cli", "test_user_public_styles.py::test_verify_cli_")
def public_styles_cli(start: background.Start) -> dict[str, Outcome]:
    """The CLI runs of this module's tests, in the background (tests/background.py): model -> outcome."""
    folder = Path(tempfile.mkdtemp(prefix="portbench-styles-"))
    (folder / "clip.json").write_text(clip_spec().to_json())
    (folder / "dino.json").write_text(dino_spec().to_json())
    runs = {"clip_tower": "clip.json", "clip_tower_untransposed": "clip.json", "dino_vit": "dino.json"}
    return {model: background.compare_py(start, "verify", "--model", f"{MODELS}:{model}", "--spec",
                                         folder / spec) for model, spec in runs.items()}


def test_verify_cli_exits_0_on_clips_style_and_1_when_untransposed() -> None:
    runs = background.result("public-styles-cli")
    good, bad = runs["clip_tower"], runs["clip_tower_untransposed"]
    assert good.code == 0, good.stdout + good.stderr
    assert "spec check: batch_first:" in good.stdout and "\nequivalent" in good.stdout
    assert bad.code == 1
    assert "NOT equivalent: batch_first: your model MultiheadAttention batch_first=False" in bad.stdout


@pytest.mark.parametrize("registers", [0, 2])
def test_dinov2s_unused_mask_token_is_set_aside_by_name(registers: int) -> None:
    spec = dino_spec(registers=registers)
    result = portbench.check(DinoVisionTransformer(spec), spec, trace=False)
    assert result.passed, result.explanation
    assert result.binding["inert"] == {"mask_token": "(1, 16): the forward never reads it (the logits are "
                                                     "bit-identical with it changed)"}
    assert "mask_token" not in {link["native"] for link in result.binding["links"]}


def test_vit_pytorchs_empty_class_token_is_set_aside_and_its_early_final_norm_binds() -> None:
    mean = portbench.check(ViT(TINY, pool="mean"), vit_pytorch_spec(pool="mean"), trace=False)
    assert mean.passed, mean.explanation
    assert mean.binding["inert"] == {"cls_token": "empty (0, 16): it holds no value"}
    cls = portbench.check(ViT(TINY), vit_pytorch_spec(), trace=False)  # its (1, dim) class token binds
    assert cls.passed, cls.explanation
    assert cls.binding["inert"] == {}
    final = next(link for link in cls.binding["links"] if link["canonical"] == "final_norm.scale")
    assert final["native"] == "transformer.norm.weight"  # registered before transformer.layers


def test_a_tensor_the_forward_reads_is_not_set_aside() -> None:
    """DINOv2's registers are read: against a spec without them, the refusal still names them."""
    result = portbench.check(DinoVisionTransformer(dino_spec(registers=2)), dino_spec(), trace=False)
    assert not result.passed and not result.binding  # refused: nothing bound
    assert "register_tokens" in result.explanation and "set registers=2" in result.explanation
    assert "mask_token" not in result.explanation


def test_verify_cli_names_the_tensor_it_sets_aside() -> None:
    outcome = background.result("public-styles-cli")["dino_vit"]
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    assert "set aside: mask_token (1, 16): the forward never reads it" in outcome.stdout


# ---- hints checked against their effect ----------------------------------------------------------------
class ClipWithProjection(ClipVisionTower):
    """CLIP's bias-free `x @ proj` (here added to the logits so the forward reads it): no spec field
    holds it, so no field is hinted."""

    def __init__(self, s: ModelSpec) -> None:
        super().__init__(s)
        self.proj = torch.nn.Parameter(torch.randn(s.dim, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + (self.class_embedding @ self.proj).sum()


def test_a_hint_names_only_the_setting_that_places_the_tensor() -> None:
    """DINOv2's two registers against a spec without them: registers=2 (their count, read from the
    shape), not distill_token=true, which does not place them."""
    result = portbench.check(DinoVisionTransformer(dino_spec(registers=2)), dino_spec(), trace=False)
    assert result.explanation == (
        "your model's layer register_tokens (parameter) fits no tensor of spec 'tiny-public': a learned "
        "tensor (1, 2, 16) outside the blocks (DINOv2's registers); set registers=2")
    spec = dino_spec(registers=2)
    fixed = portbench.check(DinoVisionTransformer(spec), spec, trace=False)
    assert fixed.passed, fixed.explanation  # the hint, followed, binds and passes


def test_a_tensor_no_setting_places_gets_no_field_hint() -> None:
    result = portbench.check(ClipWithProjection(TINY), clip_spec(), trace=False)
    assert not result.passed
    assert result.explanation == (
        "your model's layer proj (parameter) fits no tensor of spec 'tiny-public': a learned tensor (16, 8) "
        "outside the blocks; no spec setting places it (tried distill_token=true, registers=8: the layer "
        "stays unplaced)")


def test_a_hint_that_places_the_layer_is_kept_and_one_that_does_not_is_dropped() -> None:
    from shared.your_model.structure_parts import MisfitError

    misfit = MisfitError("head", [("a=1", {"a": 1}), ("b=2", {"b": 2})], "never", ("x.weight", "x.bias"))
    placed = {"a": {"x.weight", "x.bias", "y"}, "b": {"x.weight"}}
    assert str(misfit.checked(lambda o: placed[next(iter(o))])) == "head; set a=1"
    assert str(misfit.checked(lambda o: set())) == "head; no spec setting places it (tried a=1, b=2: the " \
                                                    "layer stays unplaced)"
    assert str(MisfitError("head", [], "never", ())) == "head; never"
