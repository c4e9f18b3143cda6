"""Every preset in every port against the float64 reference; parameter counts; bit-exact weight
round trips; cross-port weight exchange; and the port-side input errors. Gradients are compared
across ports in tests/test_training_parity.py, whose training jobs compute them anyway."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import numpy as np
import pytest

import ports
from shared.cli._lists import parse_frameworks
from shared.core import reference
from shared.core.equivalence import check_logits, check_pair
from shared.core.inputs import probe_batch
from shared.core.presets import FULL_SIZE_PRESETS, PRESETS, get_preset
from shared.core.tolerance import LARGE_MODEL_PARAMS, logit_atol, max_abs_diff
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable, InputError, WeightsError
from shared.runtime.verify import VerifyCase, collect_logits, start_logits
from tests import background
from tests.ports_cache import case, port, port_logits

FRAMEWORKS = ports.NATIVE
# The full-size family presets (dinov2-s14-reg4, siglip-b16, ...) would cost minutes per port here;
# each adds no code path to its tiny family member (dinov2-reg-tiny, siglip-tiny, ...), which every
# port is checked on below, and their parameter counts are checked against the libraries'
# constructors in tests/test_checkpoints_families.py.
# Presets that run another preset's code at another size, as the precision ladder also leaves them
# out (tests/ladder_support.py): each would repeat that preset's proof here, in every port, at a
# cost of about 70 s of CPU together (mostly Flax's per-op compilation of the wider ones). Their
# parameter counts are still checked (tests/test_spec.py) and `compare.py verify --spec` runs them.
SAME_CODE_AS = {"quadrant-narrow": "quadrant", "digits": "quadrant", "mnist-vit": "mnist-vit-small",
                "archive-final-repaired": "archive-final", "vit-ti16": "vit-b16", "vit-s16": "vit-b16"}
PRESET_NAMES = sorted(set(PRESETS) - set(FULL_SIZE_PRESETS) - set(SAME_CODE_AS))
# ViT-B/16 (87M parameters) runs in one background worker per framework (tests/background.py): in
# this process it would cost ~30 s, mostly MLX's reference BLAS on Linux.
LARGE_PRESETS = [p for p in PRESET_NAMES if get_preset(p).derived.params >= LARGE_MODEL_PARAMS]
SMALL_PRESETS = [p for p in PRESET_NAMES if p not in LARGE_PRESETS]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("preset", SMALL_PRESETS)
def test_port_matches_reference(preset: str, framework: str) -> None:
    spec, _, _, ref = case(preset)
    verdict = check_logits(spec, port_logits(framework, preset), ref, port(framework, spec).param_count())
    assert verdict.passed, f"{framework} {preset}: {verdict.reason}"


@pytest.mark.parametrize("preset", SMALL_PRESETS)
def test_ports_agree_pairwise(preset: str) -> None:
    spec, _, _, ref = case(preset)
    for a, b in itertools.combinations(FRAMEWORKS, 2):
        verdict = check_pair(port_logits(a, preset), port_logits(b, preset), logit_atol(spec, ref))
        assert verdict.passed, f"{a} vs {b} on {preset}: {verdict.reason}"


@background.task("large-presets", "test_ports.py::test_large_preset")
def large_preset_logits(start: background.Start) -> dict[str, list[dict]]:
    """framework -> one worker report per large preset (logits and the port's parameter count)."""
    cases = [VerifyCase(*case(preset)[:3]) for preset in LARGE_PRESETS]
    workdir = Path(tempfile.mkdtemp(prefix="portbench-large-presets-"))
    return {fw: collect_logits(start(start_logits(fw, cases, workdir, "cpu")), 900) for fw in FRAMEWORKS}


@pytest.mark.parametrize("preset", LARGE_PRESETS)
def test_large_preset_matches_the_reference_in_every_port_and_pairwise(preset: str) -> None:
    spec, _, _, ref = case(preset)
    reports = {fw: r[LARGE_PRESETS.index(preset)] for fw, r in background.result("large-presets").items()}
    for fw, report in reports.items():
        assert not report.get("error"), f"{fw} {preset}: {report['error']}"
        verdict = check_logits(spec, report["logits"], ref, report["param_count"])
        assert verdict.passed, f"{fw} {preset}: {verdict.reason}"
    for a, b in itertools.combinations(FRAMEWORKS, 2):
        verdict = check_pair(reports[a]["logits"], reports[b]["logits"], logit_atol(spec, ref))
        assert verdict.passed, f"{a} vs {b} on {preset}: {verdict.reason}"


ROUND_TRIP_SPECS = {
    "quadrant": get_preset("quadrant"),
    "archive-keras": get_preset("archive-keras"),
    # no qkv bias (a separate output bias in Keras and Flax), sincos positions, pooled final norm
    "no-qkv-bias": get_preset("quadrant").replace(
        qkv_bias=False, pos_embed="sincos", pos_embed_class_row=False, final_norm="pooled", pooling="mean",
        head_hidden=(8,)),
    # RMSNorm (a scale alone) at every place a norm stands: patch norms, pre-norm, qk-norm, map pool
    "rms-norm": get_preset("siglip-tiny").replace(
        norm_type="rms_norm", patch_norm_in=True, patch_norm_out=True, norm_before_blocks=True,
        qk_norm=True, qk_norm_eps=1e-5, pool_norm_eps=1e-3),
    # DINOv3's attention: no key bias alone (the port's own q and v biases in torch and Keras)
    "key-bias-free": get_preset("quadrant").replace(bias_free=("attn.key",)),
    # no bias on the key, the attention output, a gated MLP's gate and fc2, or the classifier
    "bias-free": get_preset("dinov2-reg-tiny").replace(
        bias_free=("attn.key", "attn.out", "mlp.gate", "mlp.fc2", "head.out")),
    # AIMv2's blocks: no bias on any projection (no qkv bias, the output and both MLP linears)
    "aimv2-bias-free": get_preset("siglip-tiny").replace(
        qkv_bias=False, bias_free=("attn.out", "mlp.fc1", "mlp.fc2")),
    # grouped-query attention with a key bias absent (torch's own q/v biases of each part's width)
    "gqa-key-bias-free": get_preset("quadrant").replace(kv_heads=2, bias_free=("attn.key",)),
    # one key/value head (multi-query attention) beside a map pool, whose k and v keep every head
    "mqa-map-pool": get_preset("siglip-tiny").replace(kv_heads=1),
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", sorted(ROUND_TRIP_SPECS))
def test_canonical_round_trip_is_bit_exact(framework: str, name: str) -> None:
    spec = ROUND_TRIP_SPECS[name]
    tensors = init_weights(spec, 7)
    p = port(framework, spec)
    p.load(tensors)
    exported = p.export()
    assert list(exported) == list(tensors)
    for key, value in tensors.items():
        assert exported[key].dtype == np.float32 and np.array_equal(exported[key], value), key
    images = probe_batch(spec)
    assert max_abs_diff(p.logits(images), reference.forward(spec, tensors, images)) <= logit_atol(spec)


@pytest.mark.parametrize("source", FRAMEWORKS)
def test_weights_exported_from_one_port_run_in_another(source: str) -> None:
    """The source port's own framework initialisation (values no canonical file produced) is
    exported, loaded into each other port, and must give the source's logits (one fresh source
    port serves its three targets)."""
    spec = get_preset("archive-keras")
    fresh = ports.create_port(source, spec)  # framework-initialised, nothing loaded
    images = probe_batch(spec)
    exported, own = fresh.export(), fresh.logits(images)
    expected, tol = reference.forward(spec, exported, images), logit_atol(spec)
    for target in (f for f in FRAMEWORKS if f != source):
        receiver = port(target, spec)
        receiver.load(exported)
        assert max_abs_diff(receiver.logits(images), own) <= 2 * tol, target
        assert max_abs_diff(receiver.logits(images), expected) <= tol, target
        assert all(np.array_equal(receiver.export()[k], v) for k, v in exported.items()), target


@pytest.mark.parametrize("preset", ["quadrant", "siglip-tiny", "clip-tiny", "dinov2-reg-tiny"])
def test_two_flax_models_of_one_spec_have_one_graph(preset: str) -> None:
    """nnx.jit keys its compiled functions on the model's graph, whose static attributes compare by
    equality. A lambda or a partial made per model (a block without LayerScale, the GELU form) made
    every new model a new graph, so the training step compiled again for every seed: the training
    loop's Flax job took twice as long. Each GELU form, QuickGELU and LayerScale here."""
    from flax import nnx

    spec = get_preset(preset)
    # Two new models (ports_cache.port returns one), both alive: a freed lambda's address is reused.
    first, second = ports.create_port("flax", spec), ports.create_port("flax", spec)
    assert nnx.graphdef(first.model) == nnx.graphdef(second.model)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dropout_only_in_train_mode(framework: str) -> None:
    spec = get_preset("quadrant").replace(dropout_mlp=0.5, dropout_attn=0.5, dropout_embed=0.5)
    tensors = init_weights(spec, 0)
    p = port(framework, spec)
    p.load(tensors)
    images = probe_batch(spec)
    eval_logits = p.logits(images)
    assert max_abs_diff(eval_logits, reference.forward(spec, tensors, images)) <= logit_atol(spec)
    assert max_abs_diff(p.logits(images, train=True), eval_logits) > 1e-3
    assert np.array_equal(p.logits(images), eval_logits)  # back to eval: deterministic again


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_bad_inputs_are_one_line_errors(framework: str) -> None:
    spec, tensors, _, _ = case("quadrant")
    p = port(framework, spec)
    with pytest.raises(InputError, match=r"shape \(4, 8, 9, 1\), expected \(batch, 8, 8, 1\)"):
        p.prepare(np.zeros((4, 8, 9, 1), np.float32))
    with pytest.raises(InputError, match="dtype int64"):
        p.prepare(np.zeros((4, 8, 8, 1), np.int64))
    with pytest.raises(InputError, match="NaN or inf"):
        p.prepare(np.full((1, 8, 8, 1), np.nan, np.float32))
    broken = dict(tensors)
    broken["head.out.kernel"] = broken["head.out.kernel"].T.copy()
    with pytest.raises(WeightsError, match=r"'head\.out\.kernel' has shape"):
        p.load(broken)


def test_missing_framework_is_reported_not_raised_on_import(monkeypatch) -> None:
    entry = ports.PortEntry("phantom", "ports.phantom", ("no_such_framework_module",), "pip install phantom")
    monkeypatch.setitem(ports.PORTS, "phantom", entry)
    assert "not installed" in ports.installed()["phantom"]
    expected = r"'phantom' needs 'no_such_framework_module'.*pip install"
    with pytest.raises(FrameworkUnavailable, match=expected):
        ports.create_port("phantom", get_preset("quadrant"))
    with pytest.raises(FrameworkUnavailable, match="unknown framework 'mxnet'"):
        parse_frameworks("torch,mxnet")


def test_ports_package_does_not_shadow_torch() -> None:
    import sys

    import torch

    assert not torch.__file__.startswith(str(ports.__path__[0]))
    assert all(not p.rstrip("/").endswith("/ports") for p in sys.path)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_precision_is_pinned_to_fp32_and_tf32_only_when_asked(framework: str) -> None:
    module = ports.load_port_module(framework)
    try:
        relaxed = module.pin_precision(allow_tf32=True)
        assert any(v in (True, "high", "tensorfloat32") for v in relaxed.values()), relaxed
    finally:
        pinned = module.pin_precision()
    assert not any(v in (True, "high", "tensorfloat32") for v in pinned.values()), pinned
    assert any(v in (False, "highest") for v in pinned.values()), pinned


def test_dropped_remainder_with_a_single_patch_column() -> None:
    """Found by the property test: TF's oneDNN Conv2D returned values off by 2.3 for a valid,
    strided conv over a 3x3 image in 1x2 patches (one column to drop). Every port now crops the
    remainder before its conv; this pins the case."""
    spec = get_preset("quadrant").replace(
        image_height=3, image_width=3, patch_height=1, patch_width=2, dim=8, heads=1, head_dim=2,
        class_token=False, pos_embed="sincos", pos_embed_class_row=False, pooling="mean",
        qkv_bias=False, final_norm="none", mlp_dim=4, num_classes=2)
    tensors = init_weights(spec, 0)
    images = probe_batch(spec, 3)
    ref = reference.forward(spec, tensors, images)
    for framework in FRAMEWORKS:
        p = ports.create_port(framework, spec)
        p.load(tensors)
        assert max_abs_diff(p.logits(images), ref) <= logit_atol(spec), framework


# Settings no preset has, each pinned in every port on one tiny spec:
UNPRESET_SPECS = {
    # keras-hub's `gap` pooling averages the class and register tokens with the patches
    "mean-all": get_preset("dinov2-reg-tiny").replace(pooling="mean_all"),
    # rope-tiny pins DINOv3's RoPE layout (rotate_half pairs, centred coordinates); this pins timm's
    # default and EVA-02's: interleaved pairs, integer coordinates rescaled to a reference grid, on a
    # 4x3 grid with a 3x5 reference, so a port that swaps rows and columns, or pairs the wrong
    # dimensions, fails: the half layout moves these logits by 0.34, the reference grid swapped by 0.27
    "rope-interleaved": get_preset("rope-tiny").replace(
        image_width=12, rope="axial_interleaved", rope_theta=10_000.0, rope_coords="index",
        rope_ref_grid=(3, 5)),
    # pixtral-tiny pins Pixtral's alternating bands in Transformers' rotate_half pairs; this pins them
    # in Mistral's own interleaved pairs, on a 4x3 grid
    "rope-alternating-interleaved": get_preset("pixtral-tiny").replace(image_width=12,
                                                                       rope="axial_interleaved"),
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", sorted(UNPRESET_SPECS))
def test_a_setting_no_preset_has_matches_the_reference(name: str, framework: str) -> None:
    spec = UNPRESET_SPECS[name]
    tensors = init_weights(spec, 0)
    images = probe_batch(spec, 2)
    p = ports.create_port(framework, spec)
    p.load(tensors)
    verdict = check_logits(spec, p.logits(images), reference.forward(spec, tensors, images), p.param_count())
    assert verdict.passed, f"{framework} {name}: {verdict.reason}"
