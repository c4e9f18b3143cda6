"""Transformers 5's image classifiers on a vision tower, verified as a user holds them, with no
`--spec` (issue 38): CLIP's and SigLIP's pass, read from the class's forward (CLIP's classifier
reads the patch tokens' mean before `post_layernorm`, SigLIP's the mean of all tokens after it);
what each computes for its unused `pooler_output` is set aside by name, and CLIP's q/k/v, defined
k, v, q, bind by their names. DeiT's class-token-only head and DINOv2's class-token-and-mean head
are functions no spec computes: refused in one line naming what the head reads."""

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
    if name == "CLIPForImageClassification":
        return t.CLIPForImageClassification(t.CLIPConfig(vision_config=TOWER, text_config=TEXT, num_labels=5))
    if name == "SiglipForImageClassification":
        config = t.SiglipConfig(vision_config=TOWER, text_config=TEXT, num_labels=5)
        return t.SiglipForImageClassification(config)
    if name == "DeiTForImageClassification":
        return t.DeiTForImageClassification(t.DeiTConfig(**TOWER, num_labels=5))
    return t.Dinov2ForImageClassification(t.Dinov2Config(**{**TOWER, "mlp_ratio": 2}, num_labels=5))


@pytest.mark.parametrize("name, final_norm, unread", [
    ("CLIPForImageClassification", "none", "vision_model.post_layernorm."),
    ("SiglipForImageClassification", "tokens", "vision_model.head."),
])
def test_clip_and_siglip_classifiers_pass_with_their_pooler_set_aside(name: str, final_norm: str,
                                                                      unread: str) -> None:
    model = build(name).eval()
    proposal = propose_spec(model)
    spec = proposal.spec
    assert (spec.pooling, spec.final_norm, spec.num_classes) == ("mean", final_norm, 5)
    assert proposal.sources["pooling"].startswith(f"{name}.forward: its logits read the mean of")
    result = portbench.check(model, trace=False)
    assert result.passed, result.explanation
    assert result.max_abs_diff is not None and result.max_abs_diff <= result.tolerance
    aside = result.binding["inert"]
    assert aside and all(n.startswith(unread) for n in aside)
    assert {n for n, _ in model.named_parameters() if n.startswith(unread)} == set(aside)
    links = {link["native"]: link["canonical"] for link in result.binding["links"]}
    q = next(n for n in links if n.endswith("layers.0.self_attn.q_proj.weight"))
    assert links[q] == "blocks.0.attn.query.kernel"  # CLIP defines k_proj, v_proj, q_proj


@pytest.mark.parametrize("name, reads", [
    ("DeiTForImageClassification", "the class token alone beside a distillation token"),
    ("Dinov2ForImageClassification", "the class token concatenated with the patch tokens' mean"),
])
def test_a_head_no_spec_computes_is_refused_in_one_line(name: str, reads: str) -> None:
    with pytest.raises(SpecError) as refused:
        portbench.check(build(name).eval(), trace=False)
    text = str(refused.value)
    assert text.startswith(f"your model is a {name}: its classifier reads {reads}") and "\n" not in text
    assert "; verify " in text
