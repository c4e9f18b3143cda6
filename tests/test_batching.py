"""Issue 37's first slice: a NaFlex batch (each image at its own patch grid, padded to max_patches,
with a key-padding mask) through the float64 reference and the four ports, judged on the tokens
that count. Tiny: naflex-tiny (32,170 parameters), four images of 3x4, 4x1, 3x1 and 1x1 patches."""

from __future__ import annotations

import numpy as np
import pytest

import ports
from shared.core import reference
from shared.core.batching import patch_mask, valid_rows
from shared.core.equivalence import check_logits, compare_tensor
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.tolerance import logit_atol
from shared.core.weights import init_weights
from shared.errors import InputError
from shared.teaching.first_divergence import compare_taps, report_lines
from tests.ports_cache import port

SPEC = get_preset("naflex-tiny")
# The same tower with a class token and a register (prefix keys always valid) and masked mean pooling.
MEAN = SPEC.replace(name="naflex-mean", class_token=True, registers=1, pooling="mean")


def padded_with_noise(spec, batch: np.ndarray) -> np.ndarray:
    """The batch with large random values where its padding was zeros: no valid output may move."""
    noisy = batch.copy()
    pad = ~patch_mask(batch["grid"], spec.max_patches)
    noisy["patches"][pad] = 50 * np.random.default_rng(7).standard_normal(noisy["patches"][pad].shape)
    return noisy


def test_probe_batch_mixes_grids_and_is_checked() -> None:
    batch = probe_batch(SPEC, 4)
    assert batch["grid"].tolist() == [[3, 4], [4, 1], [3, 1], [1, 1]]
    assert patch_mask(batch["grid"], 12).sum(axis=1).tolist() == [12, 4, 3, 1]
    assert not batch["patches"][~patch_mask(batch["grid"], 12)].any()  # zeros in the padding
    bad = batch.copy()
    bad["grid"][1] = (4, 4)  # 16 patches > max_patches 12
    with pytest.raises(InputError, match=r"image 1 has grid 4 x 4, expected .* <= max_patches = 12"):
        reference.forward(SPEC, init_weights(SPEC, 0), bad)
    with pytest.raises(InputError, match="a naflex batch is a 1-D structured array"):
        reference.forward(SPEC, init_weights(SPEC, 0), np.zeros((4, 32, 32, 3), np.float32))


@pytest.mark.parametrize("spec", [SPEC, MEAN], ids=["map", "mean"])
def test_reference_on_a_padded_image_is_that_image_alone(spec) -> None:
    """Independent of any port: each image's logits in the padded, masked batch equal the fixed-size
    forward of that image alone at its own grid (no padding at all), to float64 rounding."""
    weights, batch = init_weights(spec, 0), probe_batch(spec, 4)
    logits = reference.forward(spec, weights, batch)
    ph, pw, c = spec.patch_height, spec.patch_width, spec.channels
    for i, (rows, cols) in enumerate(batch["grid"].tolist()):
        alone = spec.replace(batching="fixed", max_patches=None, image_height=rows * ph,
                             image_width=cols * pw)
        patches = batch["patches"][i, : rows * cols].reshape(rows, cols, ph, pw, c)
        image = patches.transpose(0, 2, 1, 3, 4).reshape(1, rows * ph, cols * pw, c)
        assert np.abs(reference.forward(alone, weights, image)[0] - logits[i]).max() < 1e-12


@pytest.mark.parametrize("framework", ports.NATIVE)
@pytest.mark.parametrize("spec", [SPEC, MEAN], ids=["map", "mean"])
def test_padding_moves_no_valid_output_and_an_ignored_mask_fails(framework: str, spec, monkeypatch) -> None:
    weights, batch = init_weights(spec, 0), probe_batch(spec, 4)
    noisy = padded_with_noise(spec, batch)
    ref = reference.forward(spec, weights, batch)
    assert np.array_equal(reference.forward(spec, weights, noisy), ref)  # exact: -inf keys weigh 0
    p = port(framework, spec)
    p.load(weights)
    for images in (batch, noisy):
        verdict = check_logits(spec, p.logits(images), ref, p.param_count())
        assert verdict.passed, f"{framework}: {verdict.reason}"
    # The valid tokens of every token tap agree with the reference's on the zero-padded batch; what
    # sits in the padded rows differs, and the verdict does not read it.
    ref_taps, got = {}, p.intermediates(noisy)
    reference.forward(spec, weights, batch, ref_taps)
    tolerance = logit_atol(spec) * 10
    for name in ("patch_embed", "block1.out", "final_norm"):
        valid = valid_rows(spec, batch, ref_taps[name])
        assert compare_tensor(got[name], ref_taps[name], tolerance, name, valid).passed, name
        assert not compare_tensor(got[name], ref_taps[name], tolerance, name).passed, name
    # Mutation: the port handed an all-True mask (padding attended and pooled) fails by a wide margin.
    module = ports.load_port_module(framework)
    monkeypatch.setattr(module, "token_mask", lambda s, b: np.ones((len(b), s.derived.seq_len), bool))
    mutated = check_logits(spec, p.logits(noisy), ref, p.param_count())
    assert not mutated.passed and mutated.max_abs_diff > 100 * mutated.tolerance, mutated.max_abs_diff


def test_a_fault_in_one_image_is_named_by_trace_and_verdict() -> None:
    """A planted gap in image 2's valid tokens (and its logits): the trace's first divergent tap and
    the verdict both name image 2; the same gap in image 2's padding is no divergence at all."""
    weights, batch = init_weights(SPEC, 0), probe_batch(SPEC, 4)
    ref = {}
    reference.forward(SPEC, weights, batch, ref)
    planted = {name: np.array(t, dtype=np.float32) for name, t in ref.items()}
    planted["block1.out"][2, 0] += 1.0  # image 2 (3 x 1 grid): token 0 is valid
    trace = compare_taps(SPEC, ref, planted, "planted", images=batch)
    assert trace.first_divergence.name == "block1.out"
    assert "worst at image 2" in report_lines([trace])[0]
    padding = {name: np.array(t, dtype=np.float32) for name, t in ref.items()}
    padding["block1.out"][2, 5] += 1.0  # token 5 of a 3-patch image is padding
    assert compare_taps(SPEC, ref, padding, "padding", images=batch).first_divergence is None
    logits = ref["logits"].copy()
    logits[2, 3] += 1.0
    assert "(worst at image 2)" in check_logits(SPEC, logits, ref["logits"]).reason
