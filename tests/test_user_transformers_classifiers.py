"""Transformers 5's vision classes, verified as a user holds them, with no `--spec` (issue 38): read
from what each class's forward computes, not only from its tower's config. CLIP's classifier reads
the patch tokens' mean before `post_layernorm`, SigLIP's the mean of all tokens after it, CLIP's
projection model the class token through a bias-free `visual_projection`, I-JEPA's the mean of its
tokens (no class token); what a class computes for an output it never compares (CLIP's and SigLIP's
`pooler_output`, ViTModel's dense-and-tanh pooler) is set aside by name, and ViTModel's tokens are
compared, not its pooler. CLIP's q/k/v, defined k, v, q, bind by their names. What no spec computes
is refused in one line naming what the class reads: DeiT's class-token-only head and its headless
DeiTModel, DINOv2's class-token-and-mean head, BEiT's relative position bias."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("USE_FLAX", "0")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import portbench  # noqa: E402
from shared.errors import SpecError  # noqa: E402
from shared.your_model.proposal import propose_spec  # noqa: E402

TOWER = {"image_size": 32, "patch_size": 8, "hidden_size": 16, "num_hidden_layers": 2,
         "num_attention_heads": 2, "intermediate_size": 32}
TEXT = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}


def build(name: str) -> Any:
    t = transformers
    torch.manual_seed(0)
    joint = {"vision_config": TOWER, "text_config": TEXT, "num_labels": 5}
    models = {
        "CLIPForImageClassification": lambda: t.CLIPForImageClassification(t.CLIPConfig(**joint)),
        "SiglipForImageClassification": lambda: t.SiglipForImageClassification(t.SiglipConfig(**joint)),
        "CLIPVisionModelWithProjection": lambda: t.CLIPVisionModelWithProjection(
            t.CLIPVisionConfig(**TOWER, projection_dim=8)),
        "ViTModel": lambda: t.ViTModel(t.ViTConfig(**TOWER)),  # with its pooler
        "IJepaForImageClassification": lambda: t.IJepaForImageClassification(
            t.IJepaConfig(**TOWER, num_labels=5)),
        "DeiTForImageClassification": lambda: t.DeiTForImageClassification(
            t.DeiTConfig(**TOWER, num_labels=5)),
        "DeiTModel": lambda: t.DeiTModel(t.DeiTConfig(**TOWER)),
        "Dinov2ForImageClassification": lambda: t.Dinov2ForImageClassification(
            t.Dinov2Config(**{**TOWER, "mlp_ratio": 2}, num_labels=5)),
        "BeitForImageClassification": lambda: t.BeitForImageClassification(
            t.BeitConfig(**TOWER, num_labels=5)),
    }
    return models[name]().eval()


# class -> (pooling, final_norm, outputs compared, the prefix of what is set aside)
PASSES = {
    "CLIPForImageClassification": ("mean", "none", 5, "vision_model.post_layernorm."),
    "SiglipForImageClassification": ("mean", "tokens", 5, "vision_model.head."),
    "CLIPVisionModelWithProjection": ("cls", "pooled", 8, None),
    "ViTModel": ("cls", "tokens", 0, "pooler."),
    "IJepaForImageClassification": ("mean", "tokens", 5, None),
}


@pytest.mark.parametrize("name", PASSES)
def test_a_class_is_read_from_what_its_forward_computes_and_passes(name: str) -> None:
    pooling, final_norm, classes, unread = PASSES[name]
    model = build(name)
    spec = propose_spec(model).spec
    assert (spec.pooling, spec.final_norm, spec.num_classes) == (pooling, final_norm, classes)
    result = portbench.check(model, trace=False)
    assert result.passed, result.explanation
    assert result.max_abs_diff is not None and result.max_abs_diff <= result.tolerance
    aside = set(result.binding["inert"])
    assert aside == {n for n, _ in model.named_parameters() if unread and n.startswith(unread)}
    if name == "CLIPForImageClassification":  # CLIP defines k_proj, v_proj, q_proj
        links = {link["native"]: link["canonical"] for link in result.binding["links"]}
        q = "vision_model.encoder.layers.0.self_attn.q_proj.weight"
        assert links[q] == "blocks.0.attn.query.kernel"


REFUSED = {
    "DeiTForImageClassification": "its classifier reads the class token alone beside a distillation token",
    "DeiTModel": "its tokens carry a distillation token whose head it lacks",
    "Dinov2ForImageClassification": "its classifier reads the class token concatenated with the patch "
                                    "tokens' mean",
    "BeitForImageClassification": "BEiT's attention adds a learned relative position bias in every block",
}


@pytest.mark.parametrize("name", REFUSED)
def test_what_no_spec_computes_is_refused_in_one_line(name: str) -> None:
    with pytest.raises(SpecError) as refused:
        portbench.check(build(name), trace=False)
    text = str(refused.value)
    assert text.startswith(f"your model is a {name}: {REFUSED[name]}") and "\n" not in text
