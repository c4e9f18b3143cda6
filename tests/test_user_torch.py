"""A user's own torch model (examples/torch_mha_vit.py) where our ports stand: verify in both
weight directions, the planted mistake caught by verify and named by diagnose and trace,
`time --model` producing a row, and the Python API."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from shared.core.presets import get_preset
from shared.core.weights import init_weights, load_weights, save_weights
from tests import background
from tests.adversarial import Outcome, run_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "examples" / "torch_mha_vit.py")
GOOD, MISTAKE = f"{EXAMPLE}:build", f"{EXAMPLE}:build_with_mistake"
SPEC = "mnist-vit-small"


def test_verify_binds_the_users_own_parameters_and_passes(tmp_path) -> None:
    out = tmp_path / "v.json"
    outcome = run_cli("verify", "--model", GOOD, "--spec", SPEC, "--show-binding", "--json", out)
    assert outcome.code == 0, outcome.stderr
    assert "yours (torch)" in outcome.stdout and "PASS" in outcome.stdout
    assert "layers.0.attention.in_proj_weight" in outcome.stdout  # the binding table
    document = json.loads(out.read_text())
    assert document["binding"]["rule"] == "structure" and document["entries"][0]["passed"]


@background.task("user-torch-weights", "test_user_torch.py::test_verify_loads_canonical_weights")
def user_torch_weights(start: background.Start) -> tuple[Path, Outcome]:
    folder = Path(tempfile.mkdtemp(prefix="portbench-user-torch-"))
    spec = get_preset(SPEC)
    save_weights(folder / "w.safetensors", spec, init_weights(spec, 7))
    return folder, background.compare_py(start, "verify", "--model", GOOD, "--spec", SPEC, "--weights",
                                         folder / "w.safetensors", "--json", folder / "v.json",
                                         "--frameworks", "torch")


def test_verify_loads_canonical_weights_into_the_users_model() -> None:
    folder, outcome = background.result("user-torch-weights")
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    entries = json.loads((folder / "v.json").read_text())["entries"]
    assert [e["framework"] for e in entries] == ["yours (torch)", "torch"]
    assert all(e["passed"] for e in entries)
    assert "pairwise max abs: yours (torch)~torch" in outcome.stdout
    assert load_weights(folder / "w.safetensors").tensors["head.out.bias"].shape == (10,)  # untouched


def test_the_planted_mistake_fails_verify_naming_the_field_and_diagnose_names_the_setting() -> None:
    outcome = run_cli("verify", "--model", MISTAKE, "--spec", SPEC)
    assert outcome.code == 1
    assert "spec check: activation: your model gelu_tanh, spec gelu" in outcome.stdout
    assert "diagnose: gap" in outcome.stdout and "gelu form flipped (MLP)" in outcome.stdout
    assert "NOT equivalent" in outcome.stdout


def test_diagnose_runs_the_users_model_itself() -> None:
    outcome = run_cli("diagnose", "--model", MISTAKE, "--spec", SPEC)
    assert outcome.code == 0, outcome.stderr  # explained
    assert "falls to" in outcome.stdout and "GELU form" in outcome.stdout


@background.task("user-torch-trace", "test_user_torch.py::test_trace_locates")
def user_torch_trace(start: background.Start) -> tuple[Path, Outcome, Outcome]:
    page = Path(tempfile.mkdtemp(prefix="portbench-user-torch-")) / "trace.html"
    return (page, background.compare_py(start, "trace", "--model", MISTAKE, "--spec", SPEC, "--html", page),
            background.compare_py(start, "trace", "--model", GOOD, "--spec", SPEC))


def test_trace_locates_the_planted_mistake_at_the_first_mlp() -> None:
    page, outcome, clean = background.result("user-torch-trace")
    assert outcome.code == 1
    assert "yours (torch): first divergence at block0.mlp" in outcome.stdout
    assert "block0.mlp" in page.read_text()
    assert clean.code == 0 and "within budget" in clean.stdout


@background.task("user-torch-time", "test_user_torch.py::test_time_puts")
def user_torch_time(start: background.Start) -> tuple[Path, Outcome]:
    out = Path(tempfile.mkdtemp(prefix="portbench-user-torch-")) / "t.json"
    return out, background.compare_py(
        start, "time", "--model", GOOD, "--spec", SPEC, "--frameworks", "torch", "--modes", "eager",
        "--budget", "0.05", "--min-repeats", "3", "--max-repeats", "3", "--eval-batches", "1", "--processes",
        "1", "--json", out, "--csv", out.with_suffix(".csv"), "--no-chart")


def test_time_puts_the_users_model_in_the_same_harness_as_one_more_row() -> None:
    out, outcome = background.result("user-torch-time")
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    rows = {r["framework"]: r for r in json.loads(out.read_text())["runs"]}
    mine = rows["yours (torch)"]
    assert mine["status"] == "ok" and mine["equivalence"]["eager"]["passed"]
    assert mine["phases"]["forward_eager"]["status"] == "ok"
    assert mine["param_count"] == rows["torch"]["param_count"]
    assert mine["conditions"]["spec_hash"] == rows["torch"]["conditions"]["spec_hash"]


def test_the_python_api_checks_a_model_object_in_this_process() -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import torch_mha_vit
    finally:
        sys.path.remove(str(ROOT / "examples"))
    import portbench

    spec = get_preset(SPEC)
    result = portbench.check(torch_mha_vit.build(spec), spec)
    assert result.passed and result.max_abs_diff < result.tolerance and result.binding["rule"] == "structure"
    expected = r"activation: your model gelu_tanh.*first divergent tensor: block0\.mlp"
    with pytest.raises(AssertionError, match=expected):
        portbench.assert_equivalent(torch_mha_vit.build_with_mistake(spec), SPEC)
    # the model's own parameters are what the reference ran on
    assert np.isfinite(result.max_abs_diff)


DICT_MODEL = f"""
import sys
sys.path.insert(0, {str(ROOT / "examples")!r})
from torch_mha_vit import MnistViT


class TwoHeads(MnistViT):
    def forward(self, images):  # (B, 28, 28): the channel axis dropped, as the archive's MNIST ViT
        logits = super().forward(images.unsqueeze(1))
        return {{"{{key}}": logits, "doubled": 2 * logits}}


def build(spec):
    return TwoHeads(spec)
"""


@background.task("user-torch-dict", "test_user_torch.py::test_an_nhw_model_returning_a_dict")
def user_torch_dict(start: background.Start) -> tuple[Outcome, Outcome, Outcome]:
    folder = Path(tempfile.mkdtemp(prefix="portbench-user-torch-"))
    (folder / "two.py").write_text(DICT_MODEL.replace("{key}", "logits"))
    (folder / "other.py").write_text(DICT_MODEL.replace("{key}", "scores"))
    nhw = ("--spec", SPEC, "--input-layout", "NHW")
    return (background.compare_py(start, "verify", "--model", f"{folder / 'two.py'}:build", *nhw),
            background.compare_py(start, "verify", "--model", f"{folder / 'other.py'}:build", *nhw),
            background.compare_py(start, "verify", "--model", f"{folder / 'other.py'}:build", *nhw,
                                  "--output", "scores"))


def test_an_nhw_model_returning_a_dict_gives_its_logits_or_needs_output_to_pick_them() -> None:
    logits, two, picked = background.result("user-torch-dict")
    assert logits.code == 0, logits.stdout + logits.stderr  # the dict's `logits`
    assert two.code == 2 and "the model returns no logits and 2 arrays" in two.error
    assert "(scores (4, 10), doubled (4, 10)); pick the logits with --output KEY" in two.error
    assert picked.code == 0, picked.stdout + picked.stderr


def test_a_model_on_a_missing_cuda_device_is_one_line() -> None:
    import torch

    from ports.torch import user
    from shared.errors import InputError

    module = torch.nn.Module()  # its parameters report CUDA, as a model moved with .cuda() does
    fake = type("P", (), {"device": torch.device("cuda", 0)})()
    module.parameters = lambda recurse=True: iter([fake])  # type: ignore[method-assign]
    if torch.cuda.is_available():
        assert user._check_device(module) == torch.device("cuda", 0)
    else:
        with pytest.raises(InputError, match="on CUDA and this machine has no CUDA device"):
            user._check_device(module)


# ---- binding by structure: the zoo's features in a user's own model, a wrapped library model -------
ZOO_LINKS = {  # preset -> (your parameter, the canonical tensors it holds): the feature's own link
    "dinov2-reg-tiny": ("blocks.1.w1.weight", "blocks.1.mlp.gate.kernel"),  # SwiGLU's gate: w1
    "deit3-tiny": ("blocks.0.gamma_mlp", "blocks.0.ls2.gamma"),  # LayerScale as a loose parameter
    "siglip-tiny": ("pool.kv.weight", "pool.attn.key.kernel, pool.attn.value.kernel"),  # MAP head
    "clip-tiny": ("ln_pre.weight", "norm_pre.scale"),
    "deit-distilled-tiny": ("head_dist.weight", "head_dist.out.kernel"),
    "vit-pytorch-tiny": ("to_patches.0.weight", "patch_norm_in.scale"),
}


@pytest.mark.parametrize("preset", list(ZOO_LINKS))
def test_a_users_own_vit_of_each_zoo_family_binds_by_structure_and_is_the_spec(preset: str) -> None:
    """A lucidrains-style model (tests/user_style_models.py: no library's names) with the family's
    features binds by structure, and its own logits match the float64 reference at float32."""
    import torch

    import portbench
    from tests.user_style_models import UserViT

    torch.manual_seed(0)
    result = portbench.check(UserViT(get_preset(preset)), preset, trace=False)
    assert result.passed, result.explanation
    links = {link["native"]: link["canonical"] for link in result.binding["links"]}
    native, canonical = ZOO_LINKS[preset]
    assert result.binding["rule"] == "structure" and links[native] == canonical
    assert links["blocks.0.to_qkv.weight"] == "blocks.0.attn.query.kernel, blocks.0.attn.key.kernel, " \
                                             "blocks.0.attn.value.kernel"  # a packed qkv Linear


def _timm(spec, **changes):
    from shared.checkpoints.libraries.timm import construct, target

    cls, kwargs = target(spec)
    return construct(cls, {**kwargs, **changes})


def test_a_timm_model_held_in_the_users_module_binds_by_its_table_and_by_structure() -> None:
    """Names under `net.`: the timm table binds them without the prefix; with no table at all,
    structure binds the same tensors (packed qkv, LayerScale modules, qk-norm)."""
    import torch

    import portbench
    from ports.torch import user
    from shared.your_model.binding import bind

    class Mine(torch.nn.Module):
        def __init__(self, spec) -> None:
            super().__init__()
            self.net = _timm(spec)

        def forward(self, images):
            return self.net(images)

    spec = get_preset("deit3-tiny")
    torch.manual_seed(0)
    model = Mine(spec)
    result = portbench.check(model, spec, trace=False)
    assert result.passed and result.binding["rule"] == "timm", result.explanation
    assert result.binding["links"][0]["why"] == "timm table (under net.)"
    params = user.parameters(model)
    by_structure = bind(spec, {n: v.shape for n, v in params.items()}, user.layers(model), "torch", [])
    assert by_structure.rule == "structure"
    by_table = {(k["native"], k["canonical"], k["layout"]) for k in result.binding["links"]}
    assert {tuple(row[:3]) for row in by_structure.table()} == by_table


MISFITS = {  # what the timm model has beyond the spec -> the one line naming it
    "norm_pre": ({"pre_norm": True}, "layer norm_pre (LayerNorm) fits no tensor of spec 'quadrant-rgb': a "
                 "LayerNorm before the blocks (timm's pre_norm=True); set norm_before_blocks=true"),
    "patch": ({"embed_norm_layer": "layernorm"}, "layer patch_embed.norm (LayerNorm) fits no tensor of spec "
              "'quadrant-rgb': a LayerNorm on each patch token, after the projection (timm's "
              "embed_norm_layer); set patch_norm_out=true"),
    "fc_norm": ({"global_pool": "avg", "fc_norm": True, "final_norm": True}, "layer fc_norm (LayerNorm) "
                "fits no tensor of spec 'quadrant-rgb': a LayerNorm after the blocks (timm's fc_norm, on the "
                "pooled vector); set final_norm=pooled"),
}


@pytest.mark.parametrize("case", list(MISFITS))
def test_a_layer_the_spec_lacks_is_named_with_the_field_that_expresses_it(case: str) -> None:
    from ports.torch import user
    from shared.errors import WeightsError
    from shared.your_model.binding import bind
    from tests.test_user_binding import conventions

    spec = get_preset("quadrant").replace(name="quadrant-rgb", channels=3, layer_norm_eps=1e-6)
    spec = spec.replace(final_norm="none", pooling="mean") if case == "fc_norm" else spec
    changes, expected = MISFITS[case]
    model = _timm(spec, **changes)
    shapes = {n: v.shape for n, v in user.parameters(model).items()}
    with pytest.raises(WeightsError) as caught:
        bind(spec, shapes, user.layers(model), "torch", conventions(spec))
    assert str(caught.value) == f"your model's {expected}"


# ---- the framework from the object, outputs beside the logits, every verdict a Result ------------
MENTIONS_FLAX = """
import flax  # mentioned, not used: the model is torch, built through Transformers
from transformers import ViTConfig, ViTForImageClassification


def build():
    config = ViTConfig(image_size=28, patch_size=7, num_channels=1, hidden_size=64, num_hidden_layers=1,
                       num_attention_heads=4, intermediate_size=256, num_labels=10)
    return ViTForImageClassification(config)
"""
HF_SPEC = ("--spec", SPEC, "--set", "depth=1", "--set", "norm=pre", "--set", "final_norm=tokens",
           "--set", "layer_norm_eps=1e-12")


@background.task("user-torch-mentions-flax", "test_user_torch.py::test_a_file_that_imports_flax")
def user_torch_mentions_flax(start: background.Start) -> Outcome:
    path = Path(tempfile.mkdtemp(prefix="portbench-user-torch-")) / "mine.py"
    path.write_text(MENTIONS_FLAX)
    return background.compare_py(start, "verify", "--model", f"{path}:build", *HF_SPEC)


def test_a_file_that_imports_flax_runs_its_transformers_torch_model_as_torch() -> None:
    # The guess by imports says flax; nothing is hidden from the file (Transformers still gives it
    # its torch class), and the object says torch. Before: "calling it raised ImportError: " (empty).
    outcome = background.result("user-torch-mentions-flax")
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    note = ("framework: guessed flax (from line 2 of mine.py: 'import flax'), but the factory returned a "
            "transformers.models.vit.modeling_vit.ViTForImageClassification, a torch model: ran it as "
            "torch; --framework torch skips the guess")
    assert note in outcome.stdout.splitlines() and "yours (torch)" in outcome.stdout


def _with_extras(spec, extras):
    """The example model whose forward returns its logits followed by `model.extras(logits)`."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import torch_mha_vit
    finally:
        sys.path.remove(str(ROOT / "examples"))

    class Extras(torch_mha_vit.MnistViT):
        def forward(self, images):
            logits = super().forward(images)
            return (logits, *self.extras(logits))

    model = Extras(spec)
    model.extras = extras
    return model


def test_none_scalars_and_attention_maps_beside_the_logits_are_passed_over() -> None:
    import torch

    from ports.torch import user
    from shared.core.inputs import probe_batch
    from shared.errors import InputError

    spec = get_preset(SPEC)
    images = probe_batch(spec, 4)
    model = _with_extras(spec, lambda y: [])
    logits = user.run(model, images, "NCHW", None)
    for extras in (lambda y: [None], lambda y: [torch.ones(4, 4, 17, 17), torch.tensor(0.5)],
                   lambda y: [{"attention": torch.ones(4, 17, 17), "step": 3}]):
        model.extras = extras
        assert np.array_equal(user.run(model, images, "NCHW", None), logits)
        assert np.array_equal(user.run(model, images, "NCHW", "0"), logits)
    model.extras = lambda y: [None, {"doubled": 2 * y, "step": 3}]
    with pytest.raises(InputError) as error:
        user.run(model, images, "NCHW", None)
    assert str(error.value) == ("the model returns 2 arrays of shape (batch=4, classes) (0 (4, 10), 1 None, "
                                "2.doubled (4, 10), 2.step int); pick the logits with --output INDEX|KEY")
    with pytest.raises(InputError, match=r"--output '1' is None, expected the logits"):
        user.run(model, images, "NCHW", "1")
    assert np.array_equal(user.run(model, images, "NCHW", "2.doubled"), 2 * logits)


def test_check_returns_a_result_for_every_verdict_and_raises_only_for_its_own_arguments() -> None:
    import dataclasses

    import torch

    import portbench
    from shared.errors import InputError

    spec = get_preset(SPEC)
    unbindable = _with_extras(spec, lambda y: [])
    unbindable.extra = torch.nn.Parameter(torch.ones(3))
    forward = unbindable.forward  # the forward reads it: an unread one would be set aside as inert
    unbindable.forward = lambda images: (forward(images)[0] + unbindable.extra.sum(),)
    result = portbench.check(unbindable, spec, trace=False)
    assert not result.passed and result.max_abs_diff is None and result.binding == {}
    # the binder's own one line (its wording is the binder's): the parameter that does not fit
    assert "do not bind" in result.explanation and "extra" in result.explanation
    result = portbench.check(_with_extras(spec, lambda y: [2 * y]), spec, trace=False)
    assert not result.passed and "returns 2 arrays of shape (batch=4, classes)" in result.explanation
    # A torch model's epsilon is named as its own, not as the framework default the value happens to be.
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import torch_mha_vit
    finally:
        sys.path.remove(str(ROOT / "examples"))
    result = portbench.check(torch_mha_vit.MnistViT(dataclasses.replace(spec, layer_norm_eps=1e-6)), spec,
                             trace=False)
    assert not result.passed and "Flax" not in result.explanation
    assert "with layer_norm_eps=1e-06: your torch model's LayerNorms use layer_norm_eps=1e-06" in \
        result.explanation
    mismatch = r"^--framework flax, but --model returned a MnistViT, a torch model; pass --framework torch"
    with pytest.raises(InputError, match=mismatch + ", or no --framework$"):
        portbench.check(torch_mha_vit.build(spec), spec, framework="flax")
