"""The precision ladder (shared/core/precision.py): each preset that differs in a code path
(tests/ladder_support.py says which and why) in every native port at bfloat16 and float16, pure
and mixed, within the rung's bound of the float64 reference and above its floor
(a run at float32's error did not run at the rung), both multiples of the case's emulated rounding
gap (shared/core/rounding.py); every named intermediate in the dtype the pinned contract holds it
in, read from the framework; and the one-line refusals.

The bounds must hold on any CPU: run this file once as it is and once with the AVX2-limited path,
`ONEDNN_MAX_CPU_ISA=AVX2 TF_ENABLE_ONEDNN_OPTS=0 XLA_FLAGS=--xla_cpu_max_isa=AVX2` (the workers
inherit the environment; docs/tolerances.md)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ports
from shared.core.equivalence import check_logits
from shared.core.precision import FLOAT32, LOW_RUNGS, Precision, expected_tap_dtype
from shared.core.presets import get_preset
from shared.core.rounding import emulated_forward, emulated_gap
from shared.core.tolerance import (
    MEASURED_RATIOS,
    PATHS,
    bound_multiple,
    floor_multiple,
    logit_atol,
    rung_floor,
)
from shared.errors import FrameworkUnavailable, SpecError
from shared.runtime.verify import VerifyCase, verdict_for
from tests.ladder_support import PRESET_KEYS, result
from tests.ports_cache import case

FRAMEWORKS = ports.NATIVE


def offered(framework: str, precision: Precision) -> bool:
    """MLX has no mixed precision: its port refuses mixed rungs (tested below)."""
    return not (framework == "mlx" and precision.mode == "mixed")


def port_at(framework: str, spec, tensors, precision: Precision):
    port = ports.create_port(framework, spec, precision=precision)
    port.load(tensors)
    return port


@pytest.fixture(scope="module")
def ladder() -> tuple[list[tuple[str, VerifyCase]], dict[str, list[dict]]]:
    """The ladder's presets (plus quadrant without positions) at every low rung, one worker per
    framework, run in the background since collection (tests/ladder_support.py). Each report carries the
    logits and, below float32, every named tensor's dtype as the framework ran it."""
    return result()


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("preset", PRESET_KEYS)
def test_every_low_rung_matches_the_reference_and_keeps_the_contract(
        ladder, preset: str, framework: str) -> None:
    """Within the rung's bound, above its floor (the rung really ran), every named tensor in the
    contract's dtype: `compare.py verify`'s own verdict (shared/runtime/verify.py)."""
    cases, reports = ladder
    for i, (key, item) in enumerate(cases):
        if key != preset:
            continue
        verdict = verdict_for(item, framework, reports[framework][i], item.reference)
        where = f"{framework} {preset} {item.precision.rung}"
        if not offered(framework, item.precision):
            assert verdict.unavailable and "MLX has no mixed precision" in str(verdict.reason), where
            continue
        assert verdict.passed, f"{where}: {verdict.reason} (bound: {verdict.bound})"
        if item.read_dtypes:
            assert verdict.dtypes["block0.out"] == item.precision.param_dtype, where


def test_a_float32_run_fails_a_low_rung_check() -> None:
    """The proof-of-rung floor: float32 logits checked as bfloat16 are refused, not passed."""
    spec, tensors, images, ref = case("quadrant")
    logits = port_at("torch", spec, tensors, FLOAT32).logits(images)
    for rung in LOW_RUNGS:
        precision = Precision.from_rung(rung)
        emulated = emulated_gap(spec, tensors, images, precision, ref)
        verdict = check_logits(spec, logits, ref, None, precision, emulated)
        assert not verdict.passed and f"did not compute at {rung}" in str(verdict.reason), rung
        assert rung_floor(spec, ref, precision, emulated) > 10 * logit_atol(spec, ref)


def test_a_low_rung_bound_needs_the_emulated_gap() -> None:
    """No silent fallback to a fixed number: a caller that forgot the case's emulated gap is told."""
    spec, _, _, ref = case("quadrant")
    with pytest.raises(ValueError, match="emulated rounding gap"):
        logit_atol(spec, ref, Precision("bfloat16", "mixed"))


def test_bounds_are_measured_on_both_paths_and_ordered() -> None:
    """Every low rung has measured (smallest, largest) ratios on both arithmetic paths; the floor
    multiple is under the smallest ratio and the bound multiple over the largest (so every
    measured port passes with margin); on one case bfloat16's emulated gap (8 bits) is larger than
    float16's (11 bits), and each is far above float32's bound."""
    spec, tensors, images, ref = case("archive-torch")
    for rung in LOW_RUNGS:
        assert set(MEASURED_RATIOS[rung]) == set(PATHS), rung
        ratios = MEASURED_RATIOS[rung].values()
        assert all(0 < low <= high for low, high in ratios), rung
        smallest, largest = min(low for low, _ in ratios), max(high for _, high in ratios)
        assert floor_multiple(rung) < smallest <= largest < bound_multiple(rung), rung
    for mode in ("pure", "mixed"):
        bf16, fp16 = (emulated_gap(spec, tensors, images, Precision(dtype, mode), ref)
                      for dtype in ("bfloat16", "float16"))
        assert bf16 > 4 * fp16 > 100 * logit_atol(spec, ref), (mode, bf16, fp16)


def test_the_emulated_reference_rounds_at_the_contracts_cast_points() -> None:
    """The rung-emulating reference's tensors hold exactly the values of the dtype the contract
    holds them in (compute ops' outputs in the compute dtype, the stream in the parameter dtype),
    and at float32's rungs nothing is emulated."""
    spec, tensors, images, _ = case("quadrant")
    numpy_dtype = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}
    for rung in LOW_RUNGS:
        precision, taps = Precision.from_rung(rung), {}
        emulated_forward(spec, tensors, images, precision, taps)
        for name, value in taps.items():
            wanted = numpy_dtype[expected_tap_dtype(name, precision, spec)]
            rounded = value.astype(wanted).astype(np.float64)
            np.testing.assert_array_equal(rounded, value, err_msg=f"{rung} {name}")
        if precision.mode == "mixed":  # a float32 stream, not the compute dtype by accident
            stream, low = taps["block0.out"], numpy_dtype[precision.compute_dtype]
            assert not np.array_equal(stream.astype(low).astype(np.float64), stream), rung
    assert emulated_gap(spec, tensors, images, FLOAT32) is None


def test_mixed_keeps_the_stream_in_float32_and_pure_does_not() -> None:
    mixed, pure = Precision("bfloat16", "mixed"), Precision("bfloat16", "pure")
    spec = get_preset("quadrant")
    assert expected_tap_dtype("block3.out", mixed, spec) == "float32"
    assert expected_tap_dtype("block3.mlp", mixed, spec) == "bfloat16"
    assert expected_tap_dtype("block3.out", pure, spec) == "bfloat16"
    assert expected_tap_dtype("logits", mixed, spec) == "bfloat16"
    # a LayerScale'd branch and a tower's pooled output are held in the stream
    assert expected_tap_dtype("block0.attn", mixed, get_preset("dinov2-reg-tiny")) == "float32"
    assert expected_tap_dtype("logits", mixed, get_preset("siglip-tiny")) == "float32"
    assert expected_tap_dtype("pool.attn_probs", mixed, get_preset("siglip-tiny")) == "bfloat16"


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
