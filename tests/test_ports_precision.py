"""The precision ladder (shared/core/precision.py): every preset in every native port at bfloat16
and float16, pure and mixed, within the measured tolerance of the float64 reference and above the
rung's floor (a run at float32's error did not run at the rung); every named intermediate in the
dtype the pinned contract holds it in, read from the framework; and the one-line refusals."""

from __future__ import annotations

import pytest
from ladder_support import PRESET_KEYS, result
from ports_cache import case

import ports
from shared.core.equivalence import check_logits
from shared.core.precision import FLOAT32, LOW_RUNGS, Precision, expected_tap_dtype
from shared.core.presets import get_preset
from shared.core.tolerance import LOW_RUNG_MEASURED, logit_atol, rung_floor
from shared.errors import FrameworkUnavailable, SpecError
from shared.runtime.verify import Case, entry_for

FRAMEWORKS = ports.NATIVE


def offered(framework: str, precision: Precision) -> bool:
    """MLX has no mixed precision: its port refuses mixed rungs (tested below)."""
    return not (framework == "mlx" and precision.mode == "mixed")


def port_at(framework: str, spec, tensors, precision: Precision):
    port = ports.create_port(framework, spec, precision=precision)
    port.load(tensors)
    return port


@pytest.fixture(scope="module")
def ladder() -> tuple[list[tuple[str, Case]], dict[str, list[dict]]]:
    """Every preset (plus quadrant without positions) at every low rung, one worker per framework,
    run in the background since collection (tests/ladder_support.py). Each report carries the
    logits and, below float32, every named tensor's dtype as the framework ran it."""
    return result()


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("preset", PRESET_KEYS)
def test_every_low_rung_matches_the_reference_and_keeps_the_contract(
        ladder, preset: str, framework: str) -> None:
    """Within the rung's measured bound, above its floor (the rung really ran), every named
    tensor in the contract's dtype: `compare.py verify`'s own verdict (shared/runtime/verify.py)."""
    cases, reports = ladder
    for i, (key, item) in enumerate(cases):
        if key != preset:
            continue
        entry = entry_for(item, framework, reports[framework][i], item.reference)
        where = f"{framework} {preset} {item.precision.rung}"
        if not offered(framework, item.precision):
            assert entry.unavailable and "MLX has no mixed precision" in str(entry.error), where
            continue
        assert entry.passed, f"{where}: {entry.error}"
        if item.read_dtypes:
            assert entry.dtypes["block0.out"] == item.precision.param_dtype, where


def test_a_float32_run_fails_a_low_rung_check() -> None:
    """The proof-of-rung floor: float32 logits checked as bfloat16 are refused, not passed."""
    spec, tensors, images, ref = case("quadrant")
    logits = port_at("torch", spec, tensors, FLOAT32).logits(images)
    for rung in LOW_RUNGS:
        verdict = check_logits(spec, logits, ref, None, Precision.from_rung(rung))
        assert not verdict.passed and "did not compute at" in str(verdict.reason), rung
        assert rung_floor(spec, ref, Precision.from_rung(rung)) > 10 * logit_atol(spec, ref)


def test_bounds_are_measured_and_ordered() -> None:
    """Every low rung has measured (smallest, largest) gaps; bfloat16 (8 bits) is looser than
    float16 (11 bits), and each is far above float32's bound."""
    for rung in LOW_RUNGS:
        for size in ("small", "large"):
            low, high = LOW_RUNG_MEASURED[rung][size]
            assert 0 < low <= high, (rung, size)
    for mode in ("pure", "mixed"):
        bf16, fp16 = LOW_RUNG_MEASURED[f"bfloat16-{mode}"], LOW_RUNG_MEASURED[f"float16-{mode}"]
        assert bf16["small"][1] > fp16["small"][1] and bf16["large"][1] > fp16["large"][1]


def test_mixed_keeps_the_stream_in_float32_and_pure_does_not() -> None:
    mixed, pure = Precision("bfloat16", "mixed"), Precision("bfloat16", "pure")
    assert expected_tap_dtype("block3.out", mixed) == "float32"
    assert expected_tap_dtype("block3.mlp", mixed) == "bfloat16"
    assert expected_tap_dtype("block3.out", pure) == "bfloat16"
    assert expected_tap_dtype("logits", mixed) == "bfloat16"


# ---- refusals -----------------------------------------------------------------------------------
def test_mlx_refuses_mixed_precision_with_its_reason() -> None:
    with pytest.raises(FrameworkUnavailable, match="MLX has no mixed precision"):
        ports.create_port("mlx", get_preset("quadrant"), precision=Precision("bfloat16", "mixed"))


@pytest.mark.parametrize(("args", "message"), [
    (("float32", "mixed", False), "--precision mixed with --dtype float32"),
    (("bfloat16", "pure", True), "--allow-tf32 with --dtype bfloat16"),
    (("float8", "pure", False), "--dtype 'float8'"),
])
def test_contradictory_rungs_are_one_line_errors(args: tuple, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        Precision(*args)


def test_tf32_on_a_cpu_is_unavailable_not_float32_by_another_name() -> None:
    with pytest.raises(FrameworkUnavailable, match="TF32 is a CUDA tensor-core mode"):
        ports.create_port("torch", get_preset("quadrant"), device="cpu", precision=Precision(tf32=True))
