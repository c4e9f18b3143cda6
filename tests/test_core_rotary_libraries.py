"""The rotary tables (shared/core/rotary.py) against the libraries' own vision rotaries, built from
the installed Transformers at small random sizes (nothing downloaded):

- Pixtral (`PixtralVisionRotaryEmbedding`, rotate_half pairs): `rope='axial_half'` with
  `rope_bands='alternating'`, integer (row, column) positions;
- Mistral's own Pixtral encoder (`precompute_freqs_cis_2d`, complex pairs 2i, 2i + 1; not
  installed here, so transcribed below): `rope='axial_interleaved'` with the same bands;
- Qwen2.5-VL's vision encoder (`Qwen2_5_VLVisionRotaryEmbedding`, `apply_rotary_pos_emb_vision`):
  `rope='axial_half'` with `rope_bands='shared'`, theta 1e4, positions row-major. Qwen2.5-VL lays
  its patches out block-major over its 2x2 spatial-merge blocks and permutes them into attention
  windows (`get_vision_position_ids`, `get_vision_window_index`); that order is not modelled: the
  positions here are the row-major grid, which is the same rotation of each patch.

Each compares the rotated queries (the library's apply function against the reference's `rotate`)
and the cosines, within 1e-5 (the libraries compute in float32).
"""

from __future__ import annotations

import numpy as np
import pytest

from shared.core.presets import get_preset
from shared.core.reference import rotate
from shared.core.rotary import rotary_tables
from shared.core.spec import ModelSpec

torch = pytest.importorskip("torch")
pixtral = pytest.importorskip("transformers.models.pixtral.modeling_pixtral")
qwen = pytest.importorskip("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
from transformers.models.pixtral.configuration_pixtral import PixtralVisionConfig  # noqa: E402
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig  # noqa: E402

ATOL = 1e-5
# (heads, head_dim, grid rows, grid cols, theta): small random configurations, non-square grids
CONFIGS = [(2, 8, 3, 5, 10_000.0), (4, 16, 4, 4, 10_000.0), (1, 32, 5, 2, 100.0), (2, 12, 2, 7, 1_000.0)]


def _spec(heads: int, head_dim: int, rows: int, cols: int, theta: float, rope: str, bands: str) -> ModelSpec:
    """A patch-only tower (no prefix token, no position table) on a rows x cols grid of 2x2 patches."""
    return get_preset("quadrant").replace(
        image_height=2 * rows, image_width=2 * cols, patch_height=2, patch_width=2, class_token=False,
        pos_embed="none", pos_embed_class_row=False, pooling="mean", dim=heads * head_dim, heads=heads,
        head_dim=head_dim, rope=rope, rope_bands=bands, rope_theta=theta)


def _row_major(rows: int, cols: int) -> torch.Tensor:
    """(rows * cols, 2) integer (row, column) positions, row-major (meshgrid 'ij')."""
    h, w = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    return torch.stack([h.flatten(), w.flatten()], dim=-1)


def _queries(heads: int, n: int, head_dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((2, heads, n, head_dim))


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_transformers_pixtral_is_axial_half_with_alternating_bands(config: tuple) -> None:
    heads, head_dim, rows, cols, theta = config
    rotary = pixtral.PixtralVisionRotaryEmbedding(PixtralVisionConfig(
        hidden_size=heads * head_dim, num_attention_heads=heads,
        rope_parameters={"rope_type": "axial", "rope_theta": theta}))
    x = torch.zeros(1, dtype=torch.float32)
    cos, sin = rotary(x, _row_major(rows, cols))  # (N, head_dim) each
    q = _queries(heads, rows * cols, head_dim)
    theirs, _ = pixtral.apply_rotary_pos_emb(torch.tensor(q), torch.tensor(q), cos.double(), sin.double(),
                                             unsqueeze_dim=0)
    tables = rotary_tables(_spec(heads, head_dim, rows, cols, theta, "axial_half", "alternating"))
    assert np.abs(tables.cos - cos.double().numpy()).max() <= ATOL
    assert np.abs(rotate(q, tables) - theirs.numpy()).max() <= ATOL
    shared = rotary_tables(_spec(heads, head_dim, rows, cols, theta, "axial_half", "shared"))
    assert np.abs(rotate(q, shared) - theirs.numpy()).max() > 1e-2  # the bands matter


def _mistral_rotate(q: np.ndarray, head_dim: int, rows: int, cols: int, theta: float) -> np.ndarray:
    """Mistral's Pixtral encoder, transcribed (mistral-inference's `precompute_freqs_cis_2d` and
    `apply_rotary_emb`): the 1-D bands, the even ones times the row, the odd ones times the column,
    concatenated, then each pair (2i, 2i + 1) multiplied as a complex number by e^(i angle_i)."""
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2) / head_dim)
    h, w = np.arange(rows), np.arange(cols)
    freqs_h = np.repeat(np.outer(h, freqs[::2])[:, None, :], cols, axis=1)
    freqs_w = np.repeat(np.outer(w, freqs[1::2])[None, :, :], rows, axis=0)
    angles = np.concatenate([freqs_h, freqs_w], axis=-1).reshape(rows * cols, head_dim // 2)
    pairs = q[..., 0::2] + 1j * q[..., 1::2]
    turned = pairs * np.exp(1j * angles)
    return np.stack([turned.real, turned.imag], axis=-1).reshape(q.shape)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_mistral_pixtral_is_axial_interleaved_with_alternating_bands(config: tuple) -> None:
    heads, head_dim, rows, cols, theta = config
    q = _queries(heads, rows * cols, head_dim, seed=1)
    tables = rotary_tables(_spec(heads, head_dim, rows, cols, theta, "axial_interleaved", "alternating"))
    assert np.abs(rotate(q, tables) - _mistral_rotate(q, head_dim, rows, cols, theta)).max() <= ATOL


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_qwen2_5_vl_vision_rotary_is_axial_half_with_shared_bands(config: tuple) -> None:
    """Qwen2.5-VL's vision rotary (theta 1e4 in its configs; other thetas here too) at row-major
    positions: its merge-block and window order is not modelled (the module docstring)."""
    heads, head_dim, rows, cols, theta = config
    assert Qwen2_5_VLVisionConfig().rope_parameters["rope_theta"] == 10_000.0
    rotary = qwen.Qwen2_5_VLVisionRotaryEmbedding(Qwen2_5_VLVisionConfig(
        hidden_size=heads * head_dim, num_heads=heads,
        rope_parameters={"rope_type": "axial", "rope_theta": theta}))
    cos, sin = rotary(torch.zeros(1), _row_major(rows, cols))  # (N, head_dim) each
    q = _queries(heads, rows * cols, head_dim, seed=2)
    tokens_first = torch.tensor(q).permute(0, 2, 1, 3)  # its q is (seq, heads, head_dim) per image
    theirs, _ = qwen.apply_rotary_pos_emb_vision(tokens_first, tokens_first, cos, sin)
    theirs = theirs.permute(0, 2, 1, 3).double().numpy()
    tables = rotary_tables(_spec(heads, head_dim, rows, cols, theta, "axial_half", "shared"))
    assert np.abs(tables.cos - cos.double().numpy()).max() <= ATOL
    assert np.abs(rotate(q, tables) - theirs).max() <= ATOL
