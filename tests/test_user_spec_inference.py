"""The spec read from a model (shared/your_model/proposal.py): for tiny random-initialised
models of timm (class token, average pooling, no class token, pre-norm, and one held in the
user's own module), torchvision, Transformers (PyTorch in this process; TensorFlow, which
Transformers hides from this process, in a worker), keras-hub (token and gap pooling) and a
big_vision-style linen ViT (no library reads it: the big_vision format's names do), the proposal
is the spec the model was built from, each field with its source, and `portbench.check` without a
spec passes on it (the Transformers config's eps 1e-12 included). Flax's LayerNorms compute
`use_fast_variance=True`, which no spec field states: there the logits pass and the spec check's
one line is that variance, said in the proposal's notes. Through the CLI (timm: each run starts
workers), `verify --model` without `--spec` says what it read and passes, and `spec --from-model
--out` prints each source and writes the spec to keep. That a given `--spec` which contradicts the
model is named is tests/test_user_examples.py's proof; that the proposal binds and matches the
reference is portbench.check's verdict (shared/core/equivalence.py), tested there."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

import portbench
from shared.checkpoints.libraries import hf as hf_plugin
from shared.checkpoints.libraries import timm as timm_plugin
from shared.core.presets import resolve_spec
from shared.core.spec import ModelSpec
from shared.errors import InputError, SpecError
from shared.your_model.proposal import DEFAULT, Proposal, propose_spec
from tests import background
from tests.adversarial import Outcome, run_cli

# The tiny model every case builds: one block, width 16, two heads, 32x32 images of 8x8 patches.
TINY = ModelSpec(image_height=32, image_width=32, patch_height=8, patch_width=8, dim=16, depth=1, heads=2,
                 head_dim=8, mlp_dim=32, num_classes=5, name="tiny")
TIMM_CASES = {
    "token": TINY,
    "avg": TINY.replace(pooling="mean", final_norm="pooled"),
    "no-class-token": TINY.replace(class_token=False, pos_embed_class_row=False, pooling="mean",
                                   final_norm="pooled"),
    "pre-norm": TINY.replace(norm_before_blocks=True, patch_bias=False),  # timm's pre_norm: no patch bias
}
BIG_VISION = TINY.replace(activation="gelu_tanh", pos_embed_class_row=False)  # nn.gelu, no class row
VARIANCE = "layer_norm_variance: your model use_fast_variance=True (Flax's default: E[x^2] - E[x]^2), spec " \
           "two-pass variance ({}); the same function in exact arithmetic: the logits decide"


def timm_model(spec: ModelSpec) -> Any:
    return timm_plugin.build_model(spec)


def hf_model(spec: ModelSpec) -> Any:
    return hf_plugin.build_model(spec)


def torchvision_model(spec: ModelSpec) -> Any:
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(image_size=spec.image_height, patch_size=spec.patch_height,
                             num_layers=spec.depth, num_heads=spec.heads, hidden_dim=spec.dim,
                             mlp_dim=spec.mlp_dim, num_classes=spec.num_classes)


def wrapped_timm_model(spec: ModelSpec) -> Any:
    """timm's model held in the user's own module, as `self.net`: every name starts `net.`."""
    from torch import nn

    class Wrapper(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = timm_model(spec)

        def forward(self, images: Any) -> Any:
            return self.net(images)

    return Wrapper()


def keras_hub_model(spec: ModelSpec) -> Any:
    from ports import load_port_part

    load_port_part("keras", "user")  # the registry sets KERAS_BACKEND before keras is imported
    import keras_hub

    backbone = keras_hub.models.ViTBackbone(
        image_shape=(spec.image_height, spec.image_width, spec.channels), patch_size=spec.patch_height,
        num_layers=spec.depth, num_heads=spec.heads, hidden_dim=spec.dim, mlp_dim=spec.mlp_dim,
        layer_norm_epsilon=spec.layer_norm_eps)
    pooling = {"cls": "token", "mean_all": "gap"}[spec.pooling]
    return keras_hub.models.ViTImageClassifier(backbone=backbone, num_classes=spec.num_classes,
                                               pooling=pooling)


def eva_model(spec: ModelSpec) -> Any:
    """timm's RoPE ViT class, as the export target builds it (`attn_type='rope'` keeps a key bias)."""
    import torch
    from timm.models.eva import Eva

    torch.manual_seed(0)
    return Eva(img_size=spec.image_height, patch_size=spec.patch_height, embed_dim=spec.dim, depth=spec.depth,
               num_heads=spec.heads, mlp_ratio=spec.mlp_dim / spec.dim, num_classes=spec.num_classes,
               global_pool="token", use_rot_pos_emb=True, rope_rotate_half=spec.rope == "axial_half",
               rope_temperature=spec.rope_theta, attn_type="rope").eval()


def linen_model(spec: ModelSpec) -> Any:
    from tests.linen_vit import build

    return build(spec)  # the (module, variables) pair


CASES = {  # id -> (the spec it is built from, builder, one field's expected source)
    **{f"timm-{k}": (s, timm_model, ("heads", "timm: model.blocks[0].attn.num_heads")) for k, s in
       TIMM_CASES.items() if k != "pre-norm"},
    "timm-pre-norm": (TIMM_CASES["pre-norm"], timm_model, ("norm_before_blocks", "timm: model.norm_pre")),
    "timm-wrapped": (TINY, wrapped_timm_model, ("heads", "timm: net.blocks[0].attn.num_heads")),
    "torchvision": (TINY, torchvision_model, ("patch_height", "torchvision: model.patch_size")),
    "transformers": (TINY.replace(layer_norm_eps=1e-12), hf_model,
                     ("layer_norm_eps", "config.layer_norm_eps")),
    "keras-hub": (TINY, keras_hub_model,
                  ("layer_norm_eps", "keras-hub: get_config() (a preset's task.json)")),
    "keras-hub-gap": (TINY.replace(pooling="mean_all"), keras_hub_model,
                      ("pooling", "keras-hub: get_config() (a preset's task.json)")),
    "timm-eva-rope": (TINY.replace(rope="axial_half", rope_theta=100.0), eva_model,
                      ("rope_theta", "config model_args.rope_temperature")),
    "linen-big-vision": (BIG_VISION, linen_model, ("pos_embed_class_row", "big_vision's position table")),
}
LIBRARIES = {"timm-wrapped": "timm VisionTransformer at net",
             "linen-big-vision": "the big_vision format's names"}
FAST_VARIANCE = {"linen-big-vision": "Transformer/encoderblock_0/LayerNorm_0"}  # the first such LayerNorm


@pytest.mark.parametrize("case", CASES)
def test_the_spec_read_from_the_model_is_the_one_it_was_built_from_and_it_passes(case: str) -> None:
    spec, build, (field, source) = CASES[case]
    model = build(spec)
    proposal = propose_spec(model)
    assert proposal.spec == spec, [f for f in spec.to_dict() if getattr(spec, f) != getattr(proposal.spec, f)]
    assert proposal.unread == []
    assert proposal.sources[field] == source
    if case in LIBRARIES:
        assert proposal.library == LIBRARIES[case]
    assert Proposal.from_dict(proposal.to_dict()) == proposal  # the worker's report round-trips
    traced = case == "timm-wrapped"  # its taps found under `net.` (linen's: tests/test_user_linen.py)
    result = portbench.check(model, trace=traced, batch=2)  # no spec: the one read from the model
    assert_passes(result, FAST_VARIANCE.get(case), proposal.notes)
    assert result.first_divergence is None


def assert_passes(result: portbench.Result, fast_variance: str | None, notes: list[str]) -> None:
    """Passed; where the model's LayerNorms compute Flax's fast variance, that variance is said (in
    the proposal's notes and as the spec check's one line) and does not fail the model alone."""
    assert result.passed, result.explanation
    if fast_variance is None:
        assert notes == [] and result.contradictions == []
        return
    assert [n.split(" of LayerNorm ")[1].split(" ")[0] for n in notes] == [fast_variance], notes
    assert result.contradictions == [VARIANCE.format(fast_variance)], result.explanation


# Transformers' TensorFlow ViT, at the spec tests/test_user_linen.py verifies its Flax ViT with (its
# --spec) but with the tanh GELU, which 4.x's TensorFlow spells gelu_new: read in its own worker,
# since Transformers hides its TF classes from this process. Its Flax ViT is read by the same branch
# of `transformers_reading` (a class not named with PyTorch's tensors).
HF_SETS = ["depth=1", "layer_norm_eps=1e-12", "activation=gelu_tanh"]
HF_SPEC = resolve_spec("quadrant", HF_SETS)


@background.task("tf-vit-verify", "test_user_spec_inference.py::test_a_transformers_tensorflow_vit")
def tf_vit_verify(start: background.Start) -> Outcome:
    """`verify --model` of Transformers' TF ViT, no --framework, in the background (tests/background.py)."""
    path = Path(tempfile.mkdtemp(prefix="portbench-tf-vit-")) / "hf_models.py"
    path.write_text("from shared.core.presets import resolve_spec\n"
                    "from tests import hf_vit_models\n\n\n"
                    "def tf_vit():\n"
                    f"    return hf_vit_models.tf_vit(resolve_spec('quadrant', {HF_SETS!r}))\n")
    return background.compare_py(start, "verify", "--model", f"{path}:tf_vit",
                                 env=background.transformers4_environ())


def test_a_transformers_tensorflow_vit_is_read_from_its_config_and_passes() -> None:
    """The hf format's infer reads PyTorch's tensor names: for the TF class, the config and the
    ViT's architecture state every field. Verified with that spec, through the CLI's workers: its
    NCHW pixel_values in a channels-last framework are found by trying. No --framework, and the
    file imports no framework at its top: the worker, guessed torch, must still let Transformers
    load its TF classes (nothing hidden from the user's code)."""
    outcome = background.result("tf-vit-verify")
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    read = next(line for line in outcome.stdout.splitlines() if line.startswith("spec read from your model:"))
    assert " from transformers TFViTForImageClassification (" in read and "unread" not in read, read
    assert f"spec 'read-from-model' ({HF_SPEC.spec_hash}): 9,476 parameters" in outcome.stdout
    assert "input layout: NCHW, tried, since your model's forward raised on NHWC images" in outcome.stdout
    assert "bound by structure" in outcome.stderr and "yours (keras) | cpu    | 9,476  |" in outcome.stdout


@pytest.mark.fast
def test_a_model_no_library_built_keeps_unread_fields_at_the_default_and_names_them() -> None:
    """A plain torch model: only its layers' settings are read; the rest is reported unread."""
    from torch import nn

    model = nn.Sequential(nn.LayerNorm(16, eps=1e-5), nn.MultiheadAttention(16, 4, batch_first=True),
                          nn.GELU(approximate="tanh"))
    proposal = propose_spec(model)
    assert (proposal.spec.layer_norm_eps, proposal.spec.activation, proposal.spec.heads,
            proposal.spec.head_dim, proposal.spec.depth) == (1e-5, "gelu_tanh", 4, 4, 1)
    assert proposal.sources["layer_norm_eps"] == "eps of LayerNorm 0"
    assert proposal.sources["activation"] == "GELU form of 2"
    assert proposal.library is None
    assert "dim" in proposal.unread and proposal.sources["dim"] == DEFAULT
    assert proposal.spec.dim == ModelSpec().dim


def test_a_model_with_no_attention_and_no_mlp_is_not_read_as_a_vit() -> None:
    """A Linear on the flattened image reads as a patch projection and one block, but nothing in
    it is attention or an MLP: the refusal said to pass --set heads=N, as if heads were all that
    was missing; it now says the model does not read as a ViT-style classifier."""
    from torch import nn

    proposal = propose_spec(nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)))
    with pytest.raises(SpecError, match="no attention and no MLP were read in the 1 block"):
        proposal.stated()
    assert proposal.stated(["heads=2"]).heads == 2  # a --set states the model: the user's to check


def write_models(folder: Path) -> Path:
    path = folder / "models.py"
    path.write_text(
        "from functools import partial\n\n"
        "from timm.models.vision_transformer import VisionTransformer\n"
        "from torch import nn\n\n\n"
        "def timm_avg():\n"
        "    return VisionTransformer(img_size=32, patch_size=8, embed_dim=16, depth=1, num_heads=2, "
        "mlp_ratio=2, num_classes=5, global_pool='avg')\n\n\n"
        "def timm_quick_gelu():\n"
        "    return VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, "
        "mlp_ratio=2, num_classes=5, act_layer='quick_gelu',\n"
        "                             norm_layer=partial(nn.LayerNorm, eps=1e-5))\n\n\n"
        "def takes_spec(spec):\n"
        "    return timm_avg()\n")
    return path


@background.task("timm-verify-without-spec", "test_user_spec_inference.py::test_verify_without_spec")
def timm_verify_without_spec(start: background.Start) -> tuple[str, Outcome]:
    model = f"{write_models(Path(tempfile.mkdtemp(prefix='portbench-timm-')))}:timm_avg"
    return model, background.compare_py(start, "verify", "--model", model)


def test_verify_without_spec_reads_it_from_the_model_says_so_and_passes() -> None:
    model, outcome = background.result("timm-verify-without-spec")
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    first = outcome.stdout.splitlines()[0]
    assert re.match(r"spec read from your model: \d+ fields from timm VisionTransformer \(heads=2, dim=16",
                    first), first
    assert first.endswith(f"compare.py spec --from-model {model} --out FILE.toml keeps it")
    assert "yours (torch)" in outcome.stdout and "PASS" in outcome.stdout


def test_spec_from_model_prints_each_source_and_writes_the_spec_once(tmp_path: Path) -> None:
    model = f"{write_models(tmp_path)}:timm_avg"
    out = tmp_path / "timm.toml"
    outcome = run_cli("spec", "--from-model", model, "--out", out)
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    lines = outcome.stdout.splitlines()
    assert "  pooling='mean' (timm: model.global_pool = 'avg')" in lines
    assert "  final_norm='pooled' (timm: model.fc_norm / model.norm)" in lines
    assert ModelSpec.from_file(out) == TIMM_CASES["avg"]
    again = run_cli("spec", "--from-model", model, "--out", out)  # refused before the worker starts
    assert again.code == 2 and "already exists" in again.stderr


@background.task("timm-quick-gelu", "test_user_spec_inference.py::test_a_timm_quick_gelu")
def timm_quick_gelu(start: background.Start) -> tuple[Path, Outcome, Outcome | None]:
    folder = Path(tempfile.mkdtemp(prefix="portbench-timm-"))
    model, out = f"{write_models(folder)}:timm_quick_gelu", folder / "quick.toml"
    proposed = background.compare_py(start, "spec", "--from-model", model, "--out", out)
    if not out.exists():  # the test reports why `spec --from-model` wrote nothing
        return out, proposed, None
    verified = background.compare_py(start, "verify", "--model", model, "--spec", out)
    return out, proposed, verified


def test_a_timm_quick_gelu_model_with_eps_1e5_passes_on_the_spec_read_from_it() -> None:
    """timm resolves act_layer='quick_gelu' itself, and the LayerNorms hold eps 1e-5 (not timm's
    1e-6): `spec --from-model` writes what the modules compute, and `verify --model` against that
    file binds the model by the timm table (its worker reads the table from timm's plug-in itself)
    and passes with no contradiction."""
    out, proposed, verified = background.result("timm-quick-gelu")
    assert proposed.code == 0, proposed.stdout + proposed.stderr
    spec = ModelSpec.from_file(out)
    assert (spec.activation, spec.layer_norm_eps, spec.dim, spec.depth, spec.heads, spec.num_classes) == \
        ("quick_gelu", 1e-5, 32, 2, 2, 5)
    assert verified is not None and verified.code == 0, verified.stdout + verified.stderr
    assert "weights: your model's own parameters, bound by timm" in verified.stderr, verified.stderr
    assert "spec check:" not in verified.stdout + verified.stderr and "PASS" in verified.stdout


TRANSFORMERS_MODELS = """import torch
import transformers


def siglip():
    torch.manual_seed(0)
    return transformers.SiglipVisionModel(transformers.SiglipVisionConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, image_size=16,
        patch_size=8))


def dinov2_swiglu():
    torch.manual_seed(0)
    return transformers.Dinov2Model(transformers.Dinov2Config(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, mlp_ratio=2, use_swiglu_ffn=True,
        image_size=16, patch_size=8))
"""


@background.task("transformers-verify-trace", "test_user_spec_inference.py::test_a_transformers_model_is")
def transformers_verify_trace(start: background.Start) -> tuple[Outcome, Outcome]:
    path = Path(tempfile.mkdtemp(prefix="portbench-transformers-")) / "transformers_models.py"
    path.write_text(TRANSFORMERS_MODELS)
    return (background.compare_py(start, "verify", "--model", f"{path}:dinov2_swiglu"),
            background.compare_py(start, "trace", "--model", f"{path}:siglip"))


def test_a_transformers_model_is_bound_by_the_names_it_holds_in_verify_and_trace() -> None:
    """Through the CLI's workers, without a spec: Transformers 5 holds a SigLIP tower without
    `vision_model.` and cuts DINOv2's SwiGLU `weights_in` into `gate_proj` and `up_proj`; each is
    read, bound by the hf table in the names the installed library holds it by, and passes."""
    import transformers

    names = "hf" if int(transformers.__version__.split(".")[0]) < 5 else \
        f"hf in transformers {transformers.__version__}'s names"
    verified, traced = background.result("transformers-verify-trace")
    assert verified.code == 0, verified.stdout + verified.stderr
    assert f"weights: your model's own parameters, bound by {names}" in verified.stdout + verified.stderr
    assert "from transformers Dinov2Model" in verified.stdout and "activation=silu" in verified.stdout
    assert traced.code == 0, traced.stdout + traced.stderr
    assert f"bound by {names}" in traced.stdout + traced.stderr
    assert "yours (torch): all 12 taps within budget" in traced.stdout


def test_a_factory_that_takes_the_spec_cannot_propose_one(tmp_path: Path) -> None:
    from shared.your_model.guard import build

    with pytest.raises(InputError, match=r"takes the spec \('spec'\).*pass --spec"):
        build(f"{write_models(tmp_path)}:takes_spec", None)


def test_a_conv3d_patch_projection_states_its_frames_and_passes() -> None:
    """A patch projection over frames (Qwen's Conv3d, here each port's own at temporal_patch_size 2)
    states the frames from its kernel in the framework's layout, and torch's model passes on the spec
    read from it (its heads given: q, k and v Linears hold every head alike)."""
    from ports import create_port
    from shared.core.weights import init_weights

    spec = TINY.replace(temporal_patch_size=2)
    sources = {"torch": "shape of patch_embed.proj.weight (16, 3, 2, 8, 8) (OITHW)",
               "mlx": "shape of patch_embed.proj.weight (16, 2, 8, 8, 3) (OTHWI)"}
    models = {}
    for framework, source in sources.items():
        port = create_port(framework, spec)
        port.load(init_weights(spec, 0))
        models[framework], proposal = port.model, propose_spec(port.model)
        assert proposal.spec.temporal_patch_size == 2 and proposal.sources["temporal_patch_size"] == source
    read = propose_spec(models["torch"]).spec.replace(heads=spec.heads, head_dim=spec.head_dim)
    result = portbench.check(models["torch"], read, trace=False, batch=2)
    assert result.passed, result.explanation
