"""`compare.py diagnose`: recovers planted mismatches (from real ports where the port can express
them), says "unexplained" for random logits, and refuses bad input in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ports import create_port
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.reference import forward
from shared.core.weights import init_weights, save_weights
from shared.errors import InputError, SpecError
from shared.teaching.gap_explanation import Diagnosis, diagnose
from shared.teaching.variants import Case, variant

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def quadrant() -> Case:
    spec = get_preset("quadrant")
    return Case(spec, init_weights(spec, 0), probe_batch(spec))


def _torch_logits(case: Case) -> np.ndarray:
    port = create_port("torch", case.spec)
    port.load(case.weights)
    return port.logits(case.images)


def test_recovers_keras_default_epsilon_from_a_real_port(quadrant: Case) -> None:
    keras_eps = quadrant.spec.replace(layer_norm_eps=1e-3)
    user = _torch_logits(Case(keras_eps, quadrant.weights, quadrant.images))
    result = diagnose(quadrant.spec, quadrant.weights, quadrant.images, user)
    assert result.verdict == "explained"
    assert result.explained[0].label == "layer_norm_eps=0.001"
    assert "Keras" in result.lines()[0] and result.baseline_gap > 1e-3


def test_recovers_tanh_gelu(quadrant: Case) -> None:
    tanh = quadrant.spec.replace(activation="gelu_tanh")
    user = _torch_logits(Case(tanh, quadrant.weights, quadrant.images))
    result = diagnose(quadrant.spec, quadrant.weights, quadrant.images, user)
    assert [c.label for c in result.explained] == ["gelu form flipped (MLP)"]


def test_diagnoses_a_packed_batch() -> None:
    """A packed batch's logits have a row per image (12 for 4 sequences of 3): diagnose reads them so,
    skips the image-layout slip a patch batch cannot make (it crashed there before), and names a
    planted epsilon; 4 rows are refused in one line that counts the packed images."""
    spec = get_preset("packed-tiny")
    case = Case(spec, init_weights(spec, 0), probe_batch(spec))
    user = _torch_logits(Case(spec.replace(layer_norm_eps=1e-3), case.weights, case.images))
    result = diagnose(spec, case.weights, case.images, user)
    assert result.verdict == "explained" and result.explained[0].label == "layer_norm_eps=0.001"
    with pytest.raises(InputError, match=r"expected \(12, 10\) \(batch 4 x 3 packed images x 10 outputs"):
        diagnose(spec, case.weights, case.images, user[:4])


def test_diagnoses_a_qwen_tower_whose_patches_were_read_row_major() -> None:
    """qwen2.5-vl-tiny (a packed batch, a two-frame patch projection) run by a port that reads each
    image's patches row-major instead of in merge-block order: diagnose names the token order, every
    alternative running on its (T, ph, pw, C, D) kernel (two crashed on a 3-D kernel before)."""
    spec = get_preset("qwen2.5-vl-tiny")
    case = Case(spec, init_weights(spec, 0), probe_batch(spec))
    user = _torch_logits(Case(spec.replace(token_order="raster"), case.weights, case.images))
    result = diagnose(spec, case.weights, case.images, user)
    assert result.verdict == "explained" and result.explained[0].label == "patches read in the other order"


@pytest.mark.parametrize("key", ["heads merged into one", "attention scaled by 1/sqrt(dim)"])
def test_recovers_head_width_mismatch(quadrant: Case, key: str) -> None:
    """How a head-width mismatch shows with canonical weights: one head of width dim (num_heads=1
    / key_dim folded), or a 1/sqrt(dim) scale. The torch port runs the mismatched model."""
    mutated = variant(key).apply(quadrant)
    assert mutated is not None
    result = diagnose(quadrant.spec, quadrant.weights, quadrant.images, _torch_logits(mutated))
    assert result.explained and result.explained[0].label == key
    assert result.explained[0].entries[0] in ("head_width", "attention_scale")


FAMILY_SLIPS = [  # (preset, spec changes, variant): the newer families' catalogue entries
    ("dinov2-reg-tiny", {}, "LayerScale gammas dropped"),
    ("dinov2-reg-tiny", {}, "gated MLP halves swapped"),
    ("dinov2-reg-tiny", {"pooling": "mean"}, "registers averaged with the patches"),
    ("dinov2-reg-tiny", {"pos_embed_register_rows": True}, "register position rows read as patch rows"),
    ("siglip-tiny", {}, "pool q/k/v biases dropped"),  # no classifier: the 32-wide embedding
    ("clip-tiny", {}, "QuickGELU and exact GELU swapped"),
    ("deit-distilled-tiny", {}, "class head alone"),
]


@pytest.mark.parametrize(("preset", "changes", "key"), FAMILY_SLIPS, ids=[c[2] for c in FAMILY_SLIPS])
def test_recovers_the_newer_families_slips_from_a_real_port(preset: str, changes: dict, key: str) -> None:
    """The torch port runs the slip (its spec and weights); diagnose names it first, on specs
    whose SiLU, QuickGELU and qk-norm the older alternatives must step over."""
    spec = get_preset(preset).replace(**changes)
    case = Case(spec, init_weights(spec, 0), probe_batch(spec))
    mutated = variant(key).apply(case)
    assert mutated is not None
    result = diagnose(spec, case.weights, case.images, _torch_logits(mutated), pairs=False)
    assert result.explained and result.explained[0].label == key, result.lines()


def test_recovers_a_pair(quadrant: Case) -> None:
    spec = quadrant.spec.replace(layer_norm_eps=1e-6, activation="gelu_tanh")  # Flax's two defaults
    user = forward(spec, quadrant.weights, quadrant.images).astype(np.float32)
    result = diagnose(quadrant.spec, quadrant.weights, quadrant.images, user)
    labels = {c.label for c in result.explained}
    assert any("layer_norm_eps=1e-06" in lab and "gelu form flipped (MLP)" in lab for lab in labels), labels
    assert result.tried_pairs > 0


def test_matching_logits_need_no_explanation(quadrant: Case) -> None:
    result = diagnose(quadrant.spec, quadrant.weights, quadrant.images, _torch_logits(quadrant))
    assert result.verdict == "match" and result.tried_single == 0


def test_random_logits_are_unexplained(quadrant: Case) -> None:
    user = np.random.default_rng(3).standard_normal((4, quadrant.spec.num_classes)).astype(np.float32)
    result = diagnose(quadrant.spec, quadrant.weights, quadrant.images, user)
    assert result.verdict == "unexplained" and not result.explained
    assert result.lines()[0].startswith("unexplained: gap")


def test_a_tolerance_as_large_as_the_logits_is_refused(quadrant: Case) -> None:
    """At the logits' own scale every logit of the right size "matched": --tolerance 1e308 called
    random logits a match."""
    user = np.random.default_rng(3).standard_normal((4, quadrant.spec.num_classes)).astype(np.float32)
    with pytest.raises(SpecError, match=r"--tolerance 1e\+308: expected below 2.37, the reference logits"):
        diagnose(quadrant.spec, quadrant.weights, quadrant.images, user, tolerance=1e308)
    assert diagnose(quadrant.spec, quadrant.weights, quadrant.images, user, tolerance=0.5).verdict != "match"


@pytest.mark.parametrize(("logits", "fragment"), [
    (np.zeros((3, 4), np.float32), "shape (3, 4), expected (4, 4)"),
    (np.full((4, 4), np.nan, np.float32), "16 non-finite values"),
    (np.zeros((4, 4), np.int64), "expected a float array"),
])
def test_bad_logits_are_one_line_errors(quadrant: Case, logits: np.ndarray, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        diagnose(quadrant.spec, quadrant.weights, quadrant.images, logits)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "compare.py", "diagnose", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_cli_explains_and_refuses(tmp_path: Path, quadrant: Case) -> None:
    weights = tmp_path / "q.safetensors"
    save_weights(weights, quadrant.spec, quadrant.weights)
    planted = tmp_path / "eps.npy"
    np.save(planted, forward(quadrant.spec.replace(layer_norm_eps=1e-3), quadrant.weights,
                             quadrant.images).astype(np.float32))
    ok = _cli("--spec", "quadrant", "--weights", str(weights), "--logits", str(planted),
              "--json", str(tmp_path / "d.json"))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("gap 0.02 falls to") and "layer_norm_eps=0.001" in ok.stdout
    written = json.loads((tmp_path / "d.json").read_text())
    assert written["verdict"] == "explained" and Diagnosis.from_dict(written).to_dict() == written

    nan = tmp_path / "nan.npy"
    np.save(nan, np.full((4, 4), np.nan, np.float32))
    bad = _cli("--spec", "quadrant", "--weights", str(weights), "--logits", str(nan))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "non-finite" in bad.stderr

    mismatch = _cli("--spec", "archive-torch", "--weights", str(weights), "--logits", str(planted))
    assert mismatch.returncode == 2 and mismatch.stderr.count("\n") == 1
    assert "does not fit spec 'archive-torch'" in mismatch.stderr

    random = tmp_path / "random.npy"
    np.save(random, np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32))
    unexplained = _cli("--spec", "quadrant", "--weights", str(weights), "--logits", str(random), "--no-pairs")
    assert unexplained.returncode == 1 and unexplained.stdout.startswith("unexplained")


def test_cli_names_the_same_integer_trap_in_weights(tmp_path: Path, quadrant: Case) -> None:
    """Weights built with Keras' key_dim = dim (heads of width 32, not 8) cannot be the canonical
    weights of the spec: the one-line refusal says which trap produced them."""
    wide = quadrant.spec.replace(head_dim=quadrant.spec.dim)
    weights = tmp_path / "wide.safetensors"
    save_weights(weights, wide, init_weights(wide, 0))
    logits = tmp_path / "l.npy"
    np.save(logits, np.zeros((4, 4), np.float32))
    proc = _cli("--spec", "quadrant", "--weights", str(weights), "--logits", str(logits))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "head width 32 = dim: Keras' key_dim was given the model width" in proc.stderr
