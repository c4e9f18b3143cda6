"""The initial weights a recipe names (shared/training/init_schemes.py: canonical, the frameworks'
own defaults, ViT's truncated normal, kernel gain and position-table std) checked against their
stated distributions, and the quadrant generator's noise and contrast settings
(shared/training/data.py) that the plateau experiment's sweep varies."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shared.core.presets import get_preset
from shared.core.train_spec import TrainSpec, get_recipe
from shared.core.weights import init_weights
from shared.errors import InputError, SpecError
from shared.training.data import QUADRANT_NOISE, load_dataset, quadrant_images, quadrant_name
from shared.training.init_schemes import TRUNCATED_STD, initial_weights, kernel_fans

WIDE = get_preset("quadrant").replace(name="wide", dim=256, heads=8, head_dim=32, mlp_dim=1024)


def test_canonical_scheme_is_init_weights() -> None:
    spec = get_preset("quadrant-narrow")
    got, expected = initial_weights(spec, 3), init_weights(spec, 3)
    assert all(np.array_equal(got[n], expected[n]) for n in expected)


def test_vit_truncated_normal_has_the_right_std_and_bound() -> None:
    w = initial_weights(WIDE, 0, "vit")
    for name in ("blocks.0.mlp.fc1.kernel", "pos_embed"):
        values = w[name].astype(np.float64)
        assert np.abs(values).max() <= 2 * 0.02 + 1e-7, name
        if values.size > 100_000:
            assert abs(values.std() - 0.02 * TRUNCATED_STD) < 0.02 * 0.01, name
    assert not w["cls_token"].any() and not w["blocks.0.mlp.fc1.bias"].any()
    assert np.all(w["blocks.0.norm1.scale"] == 1.0)


@pytest.mark.parametrize("scheme", ["torch", "keras", "flax"])
def test_framework_default_schemes(scheme: str) -> None:
    w = initial_weights(WIDE, 0, scheme)
    name = "blocks.0.mlp.fc1.kernel"  # (256, 1024)
    fan_in, fan_out = kernel_fans(name, WIDE.derived.tensor_shapes[name])
    assert (fan_in, fan_out) == (256, 1024)
    values = w[name].astype(np.float64)
    bound = {"torch": 1 / math.sqrt(fan_in), "keras": math.sqrt(6 / (fan_in + fan_out)),
             "flax": 2 / math.sqrt(fan_in) / TRUNCATED_STD}[scheme]
    std = bound / math.sqrt(3) if scheme != "flax" else 1 / math.sqrt(fan_in)
    assert np.abs(values).max() <= bound * (1 + 1e-6) and np.abs(values).max() > 0.95 * bound
    assert abs(values.std() - std) < 0.01 * std
    bias = w["blocks.0.mlp.fc1.bias"]
    if scheme == "torch":
        assert np.abs(bias).max() <= 1 / math.sqrt(fan_in) and bias.any()
    else:
        assert not bias.any()
    assert not w["pos_embed"].any() and not w["cls_token"].any()
    assert np.all(w["final_norm.scale"] == 1.0) and not w["final_norm.bias"].any()


def test_attention_and_patch_fans() -> None:
    shapes = WIDE.derived.tensor_shapes
    assert kernel_fans("blocks.0.attn.query.kernel", shapes["blocks.0.attn.query.kernel"]) == (256, 256)
    assert kernel_fans("blocks.0.attn.out.kernel", shapes["blocks.0.attn.out.kernel"]) == (256, 256)
    assert kernel_fans("patch_embed.kernel", shapes["patch_embed.kernel"]) == (16, 16 * 256)


def test_knobs_and_recipe_validation() -> None:
    spec = get_preset("quadrant-narrow")
    base, scaled = initial_weights(spec, 0, "keras"), initial_weights(spec, 0, "keras", kernel_gain=2.0)
    np.testing.assert_allclose(scaled["head.out.kernel"], 2 * base["head.out.kernel"], rtol=1e-6)
    assert np.array_equal(scaled["head.out.bias"], base["head.out.bias"])
    pos = initial_weights(spec, 0, "torch", pos_std=1.0)["pos_embed"]
    assert pos.std() > 0.5
    with pytest.raises(SpecError, match="'init' = 'xavier': expected one of canonical"):
        TrainSpec(init="xavier")
    with pytest.raises(SpecError, match="'init_kernel_gain' = 0"):
        get_recipe("quick").replace(init_kernel_gain=0)
    assert TrainSpec.from_toml(get_recipe("quick").replace(init_pos_std=0.5).to_toml()).init_pos_std == 0.5


# ---- the quadrant generator's settings ------------------------------------------------------
def test_quadrant_noise_and_contrast() -> None:
    default = quadrant_images(64, 0)
    same = quadrant_images(64, 0, noise=QUADRANT_NOISE, contrast=1.0)
    assert np.array_equal(default.images, same.images)
    flat = quadrant_images(64, 0, noise=0.0, contrast=0.3)
    np.testing.assert_array_equal(np.unique(flat.images), np.array([0.0, 0.3], dtype=np.float32))
    spec = get_preset("quadrant-narrow")
    data = load_dataset(quadrant_name(noise=0.5), spec, 0.2, 0)
    assert data.name == "quadrant:noise=0.5,contrast=1"
    assert abs(float(data.train.images.std()) - 0.66) < 0.05  # sqrt(0.5^2 + 1/4 * 3/4)
    with pytest.raises(InputError, match="option 'blur=1' is not noise=N or contrast=C"):
        load_dataset("quadrant:blur=1", spec, 0.2, 0)
    for bad in ("-1", "1e308"):  # 1e308 overflowed into NaN images, named as the input's fault
        with pytest.raises(InputError, match=f"noise = '{bad}', expected a number from 0 to 1000"):
            load_dataset(f"quadrant:noise={bad}", spec, 0.2, 0)
