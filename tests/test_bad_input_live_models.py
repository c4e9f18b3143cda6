"""Class: a live model's config is not believed over its layers (shared/your_model/proposal.py,
proposal_layers.py, ports/torch/user.py). A Transformers ViT whose `config` was edited after the build
(eps, heads, activation) proposes the spec its modules compute, the spec of the same model with an
honest config, and names each contradiction in a note; timm's `act_layer='quick_gelu'` and norm eps
1e-5 are read from the modules, not assumed from timm's defaults; and `portbench.check` passes on
each without a spec. Weights applied twice, which no binding can hold honestly (a spec's blocks
each have their own weights: the second write into a shared block would replace the first), are
refused in one line naming the module: a block held at two paths, a parameter tied to another, and
a block the forward applies twice. Through the CLI, `spec --from-model` prints the note and writes
the layers' spec, `verify --model` prints it and passes, and refuses a shared block with exit 2 and
nothing written."""

from __future__ import annotations

import copy
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import portbench
from shared.errors import WeightsError
from shared.your_model.proposal import propose_spec
from tests import background
from tests.adversarial import Outcome, snapshot

# The tiny ViT every case builds: width 32, two blocks of four heads, 32x32 images of 8x8 patches.
HF_CONFIG = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
             "image_size": 32, "patch_size": 8, "num_labels": 5}


def hf_vit(**config: Any) -> Any:
    import torch
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    return ViTForImageClassification(ViTConfig(**{**HF_CONFIG, **config}))


def timm_vit(depth: int = 2, **kwargs: Any) -> Any:
    import torch
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    return VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=depth, num_heads=4, mlp_ratio=2,
                             num_classes=5, **kwargs)


def said(source: str, field: str, stated: str, layers: str) -> str:
    return f"{source} says {field}={stated}, but {layers}; the layers are taken"


EPS = said("config.layer_norm_eps", "layer_norm_eps", "0.001", "every LayerNorm (5) has eps 1e-12")
HEADS = said("config.num_attention_heads", "heads", "{}", "every attention layer (2) has 4 heads")
HEAD_DIM = said("config.hidden_size / config.num_attention_heads", "head_dim", "16",
                "every attention layer (2) has heads of width 8")
ACT = said("config.hidden_act = 'gelu'", "activation", "gelu",
           "every activation layer (2) computes quick_gelu")
LIES = {  # id -> (the honest build's config, the key edited after the build and its value, the notes)
    "layer_norm_eps": ({}, ("layer_norm_eps", 1e-3), [EPS]),
    "heads": ({}, ("num_attention_heads", 2), [HEADS.format(2), HEAD_DIM]),
    # 3 does not divide the width: the hf format's reading is given the modules' heads, not refused
    "heads-not-dividing": ({}, ("num_attention_heads", 3), [HEADS.format(3)]),
    "activation": ({"hidden_act": "quick_gelu"}, ("hidden_act", "gelu"), [ACT]),
}

# The first block's modules that compute each field, by the names Transformers 4.x and 5.x hold them.
MODULES = {4: ("vit.encoder.layer.0", "attention.attention", "intermediate.intermediate_act_fn"),
           5: ("vit.layers.0", "attention", "mlp.activation_fn")}


def sources() -> dict[str, tuple[str, str]]:
    """The key edited -> its field and where the proposal read it: the first layer that computes it."""
    import transformers

    layer, attention, act = MODULES[min(5, int(transformers.__version__.split(".")[0]))]
    return {"layer_norm_eps": ("layer_norm_eps", f"eps of LayerNorm {layer}.layernorm_before"),
            "num_attention_heads": ("heads", f"num_heads of attention {layer}.{attention}"),
            "hidden_act": ("activation", f"GELU form of {layer}.{act}")}


@pytest.mark.parametrize("case", LIES)
def test_a_transformers_config_edited_after_the_build_gives_way_to_the_modules(case: str) -> None:
    built_with, (key, lie), notes = LIES[case]
    honest = propose_spec(hf_vit(**built_with))
    model = hf_vit(**built_with)
    setattr(model.config, key, lie)
    proposal = propose_spec(model)
    assert proposal.spec == honest.spec, [f for f in honest.spec.to_dict()
                                          if getattr(honest.spec, f) != getattr(proposal.spec, f)]
    assert proposal.notes == notes
    assert proposal.unread == []
    field, source = sources()[key]
    assert proposal.sources[field] == source
    result = portbench.check(model, trace=False, batch=2)  # no spec: the one read from the layers
    assert result.passed and result.contradictions == [], result.explanation


def test_timm_activation_and_eps_are_read_from_the_modules_not_timms_defaults() -> None:
    from torch import nn

    model = timm_vit(act_layer="quick_gelu", norm_layer=partial(nn.LayerNorm, eps=1e-5))
    proposal = propose_spec(model)
    assert (proposal.spec.activation, proposal.spec.layer_norm_eps) == ("quick_gelu", 1e-5)
    assert proposal.sources["activation"] == "GELU form of blocks.0.mlp.act"  # not the library's convention
    assert proposal.sources["layer_norm_eps"] == "eps of LayerNorm blocks.0.norm1"
    assert proposal.notes == [] and proposal.unread == []
    result = portbench.check(model, trace=False, batch=2)
    assert result.passed and result.contradictions == [], result.explanation


def block_held_twice() -> Any:
    from torch import nn

    model = timm_vit()
    model.blocks = nn.Sequential(model.blocks[0], model.blocks[0])  # one object at blocks.0 and blocks.1
    return model


def parameter_tied() -> Any:
    model = timm_vit()
    model.blocks[1].norm1.weight = model.blocks[0].norm1.weight
    return model


def block_applied_twice() -> Any:
    """One block, applied twice by the user's own forward: its one set of weights at one path."""
    from torch import nn

    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = timm_vit(depth=1)

        def forward(self, images: Any) -> Any:
            net = self.net
            tokens = net._pos_embed(net.patch_embed(images))
            tokens = net.norm(net.blocks[0](net.blocks[0](tokens)))
            return net.head(tokens[:, 0])

    return Twice()


SHARED = {  # id -> (builder, the refusal's words)
    "block-held-twice": (block_held_twice, "holds module 'blocks.0' at 2 paths (also 'blocks.1')"),
    "parameter-tied": (parameter_tied, "holds parameter 'blocks.0.norm1.weight' at 2 paths (also "
                                       "'blocks.1.norm1.weight')"),
    "block-applied-twice": (block_applied_twice, "forward applied module 'net.blocks.0' 2 times"),
}


@pytest.mark.parametrize("case", SHARED)
def test_weights_applied_twice_are_refused_by_name_not_counted_once(case: str) -> None:
    build, words = SHARED[case]
    with pytest.raises(WeightsError) as caught:
        propose_spec(build())
    message = str(caught.value)
    assert words in message and "cannot be bound to the spec" in message and "\n" not in message
    # with a spec stated, the model is refused where it binds or runs, by the same words
    depth = 1 if case == "block-applied-twice" else 2
    spec = propose_spec(timm_vit(depth=depth)).spec
    result = portbench.check(build(), spec, trace=False, batch=2)
    assert not result.passed and result.max_abs_diff is None and words in result.explanation


def test_the_same_model_with_its_own_blocks_passes() -> None:
    """The remedy the refusal names (copy.deepcopy) binds and passes: the check is the sharing."""
    model = block_held_twice()
    model.blocks[1] = copy.deepcopy(model.blocks[0])
    result = portbench.check(model, trace=False, batch=2)
    assert result.passed, result.explanation


HF_MODELS = """
import torch
from transformers import ViTConfig, ViTForImageClassification


def lying_eps():
    torch.manual_seed(0)
    model = ViTForImageClassification(ViTConfig(**{config!r}))
    model.config.layer_norm_eps = 1e-3
    return model
"""
TIMM_MODELS = """
from torch import nn
from timm.models.vision_transformer import VisionTransformer


def shared_block():
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, mlp_ratio=2,
                              num_classes=5)
    model.blocks = nn.Sequential(model.blocks[0], model.blocks[0])
    return model
"""


@background.task("lying-eps-verify", "test_bad_input_live_models.py::test_verify_prints_the_contradiction")
def lying_eps_verify(start: background.Start) -> Outcome:
    models = Path(tempfile.mkdtemp(prefix="portbench-lying-")) / "models.py"
    models.write_text(HF_MODELS.format(config=HF_CONFIG))
    return background.compare_py(start, "verify", "--model", f"{models}:lying_eps")


def test_verify_prints_the_contradiction_and_takes_the_layers() -> None:
    """Through the CLI's workers (`spec --from-model` reads it the same way: its writing is
    test_user_spec_inference.py's)."""
    verified = background.result("lying-eps-verify")
    assert verified.code == 0, verified.stdout + verified.stderr
    assert f"note: {EPS}" in verified.stdout.splitlines() and "PASS" in verified.stdout


@background.task("shared-block-verify", "test_bad_input_live_models.py::test_verify_refuses_a_shared")
def shared_block_verify(start: background.Start) -> tuple[dict[str, str], Outcome, dict[str, str]]:
    """The refusal in a folder of its own, with what the folder held before and after."""
    folder = Path(tempfile.mkdtemp(prefix="portbench-shared-"))
    (folder / "models.py").write_text(TIMM_MODELS)
    before = snapshot(folder)
    outcome = background.compare_py(start, "verify", "--model", "models.py:shared_block", cwd=folder)
    return before, outcome, snapshot(folder)


def test_verify_refuses_a_shared_block_in_one_line_and_writes_nothing() -> None:
    before, outcome, after = background.result("shared-block-verify")
    assert outcome.code == 2, outcome.stderr
    assert "'blocks.0' at 2 paths" in outcome.error and "cannot be bound to the spec" in outcome.error
    assert after == before, "a file was changed, added or left behind"
