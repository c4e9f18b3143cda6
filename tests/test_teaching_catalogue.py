"""The catalogue: every divergence the issue lists is an entry; every demonstration runs and
measures the gap the entry claims; defaults are read from the installed frameworks and the
documented values the fast paths use still match them."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from shared.teaching.divergences import CATALOGUE, RMS_EPSILON_SOURCES, entry
from shared.teaching.framework_defaults import FRAMEWORKS, layer_norm_eps_defaults, rms_norm_eps_defaults
from shared.teaching.variants import EPSILON_SOURCES, all_variants
from tests import background
from tests.adversarial import Outcome

ROOT = Path(__file__).resolve().parent.parent

ISSUE_ENTRIES = {  # issue 5, "What to build" 1
    "head_width", "remainder", "patch_layout", "layer_norm_eps", "gelu", "norm_placement", "pooling",
    "pos_table_rows", "batch_first", "attention_scale", "conv_kernel_layout", "dense_kernel_layout",
    "adamw_epsilon", "weight_decay", "clipnorm", "cross_entropy", "dropout_flags", "cpu_precision",
}
ISSUE_23_ENTRIES = {  # issue 23, "What to build" 4
    "pos_resample", "pos_resample_antialias", "pos_resample_offset", "rope_layout", "rope_coords",
    "rope_prefix",
}
ISSUE_25_ENTRIES = {  # issue 25, "What to build" 12 (HF's 1e-12 eps is a variant of layer_norm_eps)
    "layer_scale", "pool_qkv_bias", "quick_gelu", "swiglu", "register_pooling", "register_positions",
    "distilled_heads",
}
# issue 36, the towers' blocks: RMSNorm, bias per projection, GQA, and the 2026 towers' 2-D rotary
# layouts (item 5): conventions of the model code; and RMSNorm's epsilon, whose default each framework has
ISSUE_36_ENTRIES = {"norm_type", "absent_key_bias", "kv_head_order",
                    "rope_bands", "rope_axes", "rope_1d", "rope_half_reused"}
ISSUE_36_DEFAULTS = {"rms_norm_eps"}
# issue 37, item 9: the mask dropped (NaFlex's and packed); each image's positions resized by another
# method; the window mask built wrong (windows ignored, or the full-attention blocks windowed too);
# raster vs merge-block order
ISSUE_37_ENTRIES = {"attention_mask", "naflex_resize", "window_attention", "token_order"}

# Smallest gap each demonstration must show (well below what it measures: `compare.py divergences`
# prints the magnitudes): a demo reporting less has stopped demonstrating its divergence.
MIN_GAP = {
    "layer_norm_eps": 1e-3, "gelu": 1e-4, "adamw_epsilon": 1e-4, "weight_decay": 1e-3,
    "cpu_precision": 1e-3, "remainder": 1e-2, "pos_table_rows": 1e-2,
    # MLX's: 'fast' GELU 2e-2 from exact; no bias correction 2.2e-3 after one step; float64 on
    # MLX's CPU 6.9e-7 from the float64 reference (its convolution keeps float32 precision)
    "gelu_names": 1e-2, "adam_bias_correction": 1e-3, "float64_devices": 1e-7,
    # bfloat16-mixed logits vs float64 on quadrant without position table or class token: 1.3e-2
    # (Keras' global policy), 8.0e-3 (pinned), measured 2026-12-01; 1e-3 is below both and above
    # float32's 1e-6: a run under it did not compute in bfloat16
    "mixed_precision_stream": 1e-3,
    # QuickGELU run as exact GELU on clip-tiny: 0.014 (the two functions are 0.020 apart on [-4, 4])
    "quick_gelu": 1e-2,
    # a 4x4 table at its init scale resampled to 6x5 and 3x3 (dinov2-reg-tiny, one block): measured
    # 9.5e-3 (pairs of conventions), 6.8e-3 (antialias), 4.3e-3 (the +0.1 offset); RoPE's move 0.5-0.7
    "pos_resample": 3e-3, "pos_resample_antialias": 2e-3, "pos_resample_offset": 1e-3,
    # internvit-tiny (RMSNorm, eps 1e-6) with MLX's 1e-5: 1.4e-4; with torch's machine epsilon 1.4e-5
    "rms_norm_eps": 1e-4,
    # one axis's table on both halves, on pixtral-tiny (4x4 patches, theta 1e4): measured 0.037
    "rope_half_reused": 1e-2,
    # each image's positions resized by bicubic, on siglip2-naflex-tiny's canonical weights (a table at
    # its initial scale, 0.02): measured 4.1e-3
    "naflex_resize": 1e-3,
}


def test_every_issue_entry_is_catalogued() -> None:
    issues = ISSUE_ENTRIES | ISSUE_23_ENTRIES | ISSUE_25_ENTRIES | ISSUE_36_ENTRIES | ISSUE_36_DEFAULTS | \
        ISSUE_37_ENTRIES
    assert {e.key for e in CATALOGUE} >= issues
    assert "layer_norm_eps=1e-12" in entry("layer_norm_eps").variants
    assert "patch_norm_eps=0.001" in entry("layer_norm_eps").variants  # Keras' default in a patch norm


@pytest.mark.parametrize("item", CATALOGUE, ids=[e.key for e in CATALOGUE])
def test_demonstration_measures_a_gap(item) -> None:
    demo = item.run_demo()
    assert demo.gap is not None and demo.gap >= MIN_GAP.get(item.key, 0.1), (demo.gap, demo.lines)
    assert demo.lines and demo.ran_with


# Entries that are a convention of the model code, with no framework API (and so no default).
NO_FRAMEWORK_DEFAULT = {"pos_table_rows", *ISSUE_23_ENTRIES, *ISSUE_25_ENTRIES, *ISSUE_36_ENTRIES,
                        *ISSUE_37_ENTRIES}


@pytest.mark.parametrize("item", CATALOGUE, ids=[e.key for e in CATALOGUE])
def test_defaults_are_read_from_every_installed_framework(item) -> None:
    defaults = item.defaults()
    assert set(defaults) == set(FRAMEWORKS)
    for fw, text in defaults.items():
        if item.key in NO_FRAMEWORK_DEFAULT:
            assert text == "n/a"
        else:
            assert not text.startswith(("unreadable", "n/a", "not installed")), (fw, text)


def test_documented_epsilons_match_the_installed_frameworks() -> None:
    """diagnose uses documented epsilons (no framework import); they must be the real ones."""
    read = layer_norm_eps_defaults()
    documented = {value for value, _ in EPSILON_SOURCES}
    assert read == {"torch": 1e-5, "keras": 1e-3, "keras.ops": 1e-7, "flax": 1e-6, "mlx": 1e-5}
    assert set(read.values()) <= documented


def test_documented_rms_epsilons_match_the_installed_frameworks() -> None:
    """The RMSNorm alternatives diagnose tries are the installed frameworks' defaults."""
    read = rms_norm_eps_defaults()
    assert read == {"torch": np.finfo(np.float32).eps, "keras": 1e-6, "keras.ops": 1e-7, "flax": 1e-6,
                    "mlx": 1e-5}
    assert set(read.values()) <= {value for value, _ in RMS_EPSILON_SOURCES}


def test_variants_and_entries_refer_to_each_other() -> None:
    """Each variant is listed by its own entry (the rung table reads the entries' lists, diagnose
    the variants' entry); an entry may list another's variant that shows its divergence too
    (head_width's 1/sqrt(dim) scale). pooling=mean_all was once left out of the rung table so."""
    keys = {v.key for v in all_variants()}
    for item in CATALOGUE:
        assert set(item.variants) <= keys, item.key
    for v in all_variants():
        assert v.key in entry(v.entry).variants, (v.key, v.entry)


@background.task("divergences-cli", "test_teaching_catalogue.py::test_cli_lists_and_writes_json")
def divergences_cli(start: background.Start) -> tuple[Path, Outcome, Outcome, Outcome]:
    """The three compare.py runs below, each a process of its own, in the background."""
    out = Path(tempfile.mkdtemp(prefix="portbench-divergences-")) / "cat.json"
    return (out, background.compare_py(start, "divergences", "pos_table_rows", "--json", out),
            background.compare_py(start, "divergences", "--list"),
            background.compare_py(start, "divergences", "nope"))


def test_cli_lists_and_writes_json() -> None:
    """Through compare.py, on the one entry that imports no framework (a subprocess importing
    every framework costs ~20 s; the defaults themselves are tested in-process above)."""
    out, proc, listed, bad = background.result("divergences-cli")
    assert proc.code == 0, proc.stderr
    assert "pinned by: ModelSpec.pos_rows" in proc.stdout and "measured gap: 0.0563" in proc.stdout
    payload = json.loads(out.read_text())
    assert payload[0]["key"] == "pos_table_rows" and payload[0]["gap"] > 1e-2
    assert listed.stdout.count("\n") == len(CATALOGUE)
    assert bad.code == 2 and "divergence 'nope' is unknown" in bad.stderr


def test_every_port_reads_every_entry_in_catalogue_order() -> None:
    """ports/<fw>/defaults.py has one reader per entry with a framework default, named by its key
    and in catalogue order (read with ast: no framework import)."""
    import ast

    from ports import NATIVE

    wanted = [e.key for e in CATALOGUE if e.framework_default]
    for fw in NATIVE:
        tree = ast.parse((ROOT / "ports" / fw / "defaults.py").read_text())
        defined = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert [name for name in defined if name in wanted] == wanted, fw
    assert {e.key for e in CATALOGUE if not e.framework_default} == NO_FRAMEWORK_DEFAULT


@pytest.mark.parametrize("framework", ["torch", "keras", "flax", "mlx"])
def test_adam_step_matches_its_formula(framework: str) -> None:
    """Each port's one-step Adam (the demonstrations' and the mutation tests'), decoupled and L2,
    against the NumPy formula for its epsilon placement."""
    from shared.teaching.framework_defaults import demos_module
    from shared.teaching.training_demos import adam_numpy

    rng = np.random.default_rng(0)
    p = rng.standard_normal(32).astype(np.float32)
    g = (1e-2 * rng.standard_normal(32)).astype(np.float32)
    lr, eps, wd = 1e-3, 1e-8, 0.05
    eps_hat = framework == "keras"
    step = demos_module(framework).adam_step
    decoupled = adam_numpy(p * (1 - lr * wd), g, lr, eps, eps_hat)
    l2 = adam_numpy(p, g + wd * p, lr, eps, eps_hat)
    assert np.max(np.abs(step(p, g, lr, eps, wd, decoupled=True) - decoupled)) < 1e-6
    assert np.max(np.abs(step(p, g, lr, eps, wd, decoupled=False) - l2)) < 1e-6
    assert np.max(np.abs(decoupled - l2)) > 1e-5  # the two semantics are told apart


def test_mixed_precision_stream_dtypes() -> None:
    """On a spec with no float32 term to promote the stream (no position table, no class token),
    the Keras model built under the global mixed_bfloat16 policy computes every stream tap (block0.out
    included) in bfloat16; the pinned port at bfloat16-mixed in float32. The global policy is restored."""
    from shared.core.precision import COMPUTE_TAPS
    from shared.teaching.framework_defaults import read_default
    from shared.teaching.precision_demos import stream_runs, stream_spec

    measured = stream_runs(stream_spec("quadrant"))
    assert measured is not None
    native, pinned = measured[0].values()
    stream = [tap for tap in pinned.dtypes if tap.rsplit(".", 1)[-1] not in COMPUTE_TAPS]
    assert "block0.out" in stream and "pooled" in stream
    assert {tap: native.dtypes[tap] for tap in stream} == dict.fromkeys(stream, "bfloat16")
    assert {tap: pinned.dtypes[tap] for tap in stream} == dict.fromkeys(stream, "float32")
    assert read_default("mixed_precision_stream", "keras").startswith("global dtype policy 'float32'")


def test_weight_written_variants_compute_what_they_name() -> None:
    """Two variants are written as an equivalent change of weights (the reference has no readout
    switch for them); each equals the readout it names, computed directly from the taps."""
    from shared.core.presets import get_preset
    from shared.core.reference import forward
    from shared.teaching.demo import demo_case
    from shared.teaching.variants import variant

    spec = get_preset("dinov2-reg-tiny").replace(pooling="mean")
    case, taps = demo_case(spec), {}
    forward(spec, case.weights, case.images, taps)
    averaged = taps["final_norm"][:, 1:].mean(axis=1)  # registers and patches, not the class token
    direct = averaged @ case.weights["head.out.kernel"].astype(np.float64) + case.weights["head.out.bias"]
    mutated = variant("registers averaged with the patches").apply(case)
    # the flatten kernel is K / 18 stored in float32: relative rounding 6e-8 of |logit| < 4
    assert np.max(np.abs(forward(mutated.spec, mutated.weights, mutated.images) - direct)) < 1e-7

    spec = get_preset("deit-distilled-tiny")
    case, taps = demo_case(spec), {}
    forward(spec, case.weights, case.images, taps)
    tokens = taps["final_norm"]
    for key, token, head in (("class head alone", 0, "head.out."),
                             ("distillation head alone", 1, "head_dist.out.")):
        mutated = variant(key).apply(case)
        kernel, bias = case.weights[head + "kernel"].astype(np.float64), case.weights[head + "bias"]
        alone = tokens[:, token] @ kernel + bias
        # doubling a float32 weight is exact: only float64 summation order differs
        assert np.max(np.abs(forward(mutated.spec, mutated.weights, mutated.images) - alone)) < 1e-12, key


def test_swiglu_half_order_and_width_are_the_libraries() -> None:
    """timm's SwiGLUPacked (gate first) computes the spec's gated MLP from a packed [gate; fc1]
    kernel; timm's GluMlp default (gate_last=True) computes the 'halves swapped' variant. The
    width rule the demonstration prints is the one in the installed Transformers' source."""
    import importlib.util
    from pathlib import Path

    import torch
    from timm.layers.mlp import GluMlp, SwiGLUPacked

    from shared.core.presets import get_preset
    from shared.core.reference import mlp
    from shared.teaching.demo import demo_case
    from shared.teaching.family_demos import swiglu_hidden
    from shared.teaching.variants import variant

    spec = get_preset("dinov2-reg-tiny")
    case = demo_case(spec)
    swapped = variant("gated MLP halves swapped").apply(case)
    x = np.random.default_rng(0).standard_normal((3, spec.dim))
    p = "blocks.0.mlp."
    for module, weights in ((SwiGLUPacked(spec.dim, 2 * spec.mlp_dim), case.weights),
                            (GluMlp(spec.dim, 2 * spec.mlp_dim, act_layer=torch.nn.SiLU), swapped.weights)):
        w = case.weights  # packed as the checkpoints pack it: gate first
        with torch.no_grad():
            packed = np.concatenate([w[p + "gate.kernel"], w[p + "fc1.kernel"]], axis=1)
            module.fc1.weight.copy_(torch.from_numpy(packed.T))
            module.fc1.bias.copy_(torch.from_numpy(np.concatenate([w[p + "gate.bias"], w[p + "fc1.bias"]])))
            module.fc2.weight.copy_(torch.from_numpy(w[p + "fc2.kernel"].T))
            module.fc2.bias.copy_(torch.from_numpy(w[p + "fc2.bias"]))
            out = module(torch.from_numpy(x.astype(np.float32))).numpy()
        # float32 torch vs float64 reference on O(1) values: measured 3.6e-7 and 3.3e-7
        assert np.max(np.abs(out - mlp(spec, weights, p, x))) < 2e-6, module.gate_last
    source = Path(importlib.util.find_spec("transformers").origin).parent / "models/dinov2/modeling_dinov2.py"
    assert "hidden_features = (int(hidden_features * 2 / 3) + 7) // 8 * 8" in source.read_text()
    # DINOv2 ViT-g/14 (1536): both rules give 4096; at 1024 they part (Transformers' weights_in: 2 x 2736)
    assert [swiglu_hidden(d, 4, a) for d in (1536, 1024) for a in (True, False)] == [4096, 4096, 2736, 2730]
