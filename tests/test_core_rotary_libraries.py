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
  positions here are the row-major grid, which is the same rotation of each patch. Its whole tower,
  windows included, is tests/test_batching_libraries.py's.

Each compares the rotated queries (the library's apply function against the reference's `rotate`)
and the cosines, within 1e-5 (the libraries compute in float32).
"""

from __future__ import annotations

import numpy as np
import pytest

from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.reference import forward, rotate
from shared.core.rotary import rotary_tables
from shared.core.spec import ModelSpec
from shared.core.weights import init_weights

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


def _pixtral_model(spec: ModelSpec) -> torch.nn.Module:
    """Transformers' PixtralVisionModel at `spec`'s sizes (silu: Pixtral-12B's hidden_act)."""
    config = PixtralVisionConfig(
        hidden_size=spec.dim, intermediate_size=spec.mlp_dim, num_hidden_layers=spec.depth,
        num_attention_heads=spec.heads, num_channels=spec.channels, image_size=spec.image_height,
        patch_size=spec.patch_height, hidden_act="silu",
        rope_parameters={"rope_type": "axial", "rope_theta": spec.rope_theta})
    return pixtral.PixtralVisionModel(config).eval()


def test_pixtral_tiny_counts_as_transformers_pixtral_vision_model_plus_its_head() -> None:
    """The preset's parameters are PixtralVisionModel's at the same sizes (22,176) plus the head this
    project adds (a Linear 32 -> 10 without bias, 320): 22,496."""
    spec = get_preset("pixtral-tiny")
    theirs = sum(p.numel() for p in _pixtral_model(spec).parameters())
    head = spec.dim * spec.num_classes
    assert (theirs, head, spec.derived.params) == (22_176, 320, 22_496)


def test_pixtral_tiny_computes_transformers_pixtral_vision_model() -> None:
    """The reference's tokens before pooling against PixtralVisionModel's last_hidden_state, with
    the canonical weights mapped onto its names (kernels transposed to torch's (out, in))."""
    spec = get_preset("pixtral-tiny")
    model = _pixtral_model(spec)
    w = init_weights(spec, 0)
    d = spec.dim
    state = {"patch_conv.weight": w["patch_embed.kernel"].transpose(3, 2, 0, 1),
             "ln_pre.weight": w["norm_pre.scale"]}
    for i in range(spec.depth):
        c, p = f"blocks.{i}.", f"transformer.layers.{i}."
        state |= {p + "attention_norm.weight": w[c + "norm1.scale"],
                  p + "ffn_norm.weight": w[c + "norm2.scale"]}
        for ours, theirs in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj")):
            state[p + f"attention.{theirs}.weight"] = w[c + f"attn.{ours}.kernel"].reshape(d, -1).T
        state[p + "attention.o_proj.weight"] = w[c + "attn.out.kernel"].reshape(-1, d).T
        for ours, theirs in (("gate", "gate_proj"), ("fc1", "up_proj"), ("fc2", "down_proj")):
            state[p + f"feed_forward.{theirs}.weight"] = w[c + f"mlp.{ours}.kernel"].T
    model.load_state_dict({k: torch.tensor(np.ascontiguousarray(v)) for k, v in state.items()}, strict=True)
    images = probe_batch(spec, 2)
    with torch.no_grad():
        theirs = np.stack([model(torch.tensor(im.transpose(2, 0, 1))[None]).last_hidden_state[0].numpy()
                           for im in images])
    for bands, agrees in (("alternating", True), ("shared", False)):  # the bands matter here too
        taps: dict[str, np.ndarray] = {}
        forward(spec.replace(rope_bands=bands), w, images, taps)
        assert (np.abs(taps[f"block{spec.depth - 1}.out"] - theirs).max() <= ATOL) == agrees, bands
