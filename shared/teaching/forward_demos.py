"""The catalogue's forward-pass demonstrations beyond the template: what an entry's `Reference`
adds beside the pinned-vs-unpinned gap (a count, a framework's own API: torch's Conv2d and Linear,
MLX's attention), and the demonstrations that are not the template at all, because the divergence
lives in a framework API (batch_first, GELU names) or in every framework's default (epsilon)
(`ports/<fw>/demos.py` makes the framework calls)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from shared.core.activations import activation
from shared.core.presets import get_preset
from shared.core.reference import attention, forward
from shared.core.spec import ModelSpec
from shared.core.weights import conv_hwio_to_oihw
from shared.teaching.demo import Demo, demo_case, framework, gap, quadrant
from shared.teaching.first_divergence import reference_taps
from shared.teaching.framework_defaults import layer_norm_eps_defaults, rms_norm_eps_defaults
from shared.teaching.transforms import Case, Variant

# The frameworks' documented LayerNorm epsilons, used where a framework is not installed.
DOCUMENTED_EPS = {"torch": 1e-5, "keras": 1e-3, "flax": 1e-6, "mlx": 1e-5}
# And their RMSNorm epsilons (torch's: eps=None, the machine epsilon of float32).
DOCUMENTED_RMS_EPS = {"torch": 1.1920928955078125e-07, "keras": 1e-6, "flax": 1e-6, "mlx": 1e-5}


def _eps_moved(spec: ModelSpec, eps: float) -> float:
    """How far the logits of `spec`'s demonstration case move when it runs with LayerNorm `eps`."""
    case = demo_case(spec)
    return gap(forward(spec.replace(layer_norm_eps=eps), case.weights, case.images),
               forward(spec, case.weights, case.images))


def demo_eps() -> Demo:
    spec = quadrant()
    demo = _defaults_demo(spec, DOCUMENTED_EPS, layer_norm_eps_defaults())
    moved = _eps_moved(get_preset("archive-torch"), 1e-6)
    demo.lines.append(f"spec 'archive-torch' with eps 1e-6 instead of 1e-5: {moved:.3g}, below the 5e-6 "
                      "tolerance: on some models only the spec, not the tolerance, catches it")
    deit = get_preset("deit-distilled-tiny")  # timm's DeiT epsilon, 1e-6
    demo.lines.append(f"spec 'deit-distilled-tiny' (timm's eps {deit.layer_norm_eps:g}) with Transformers' "
                      f"DeiTConfig/ViTConfig 1e-12: {_eps_moved(deit, 1e-12):.3g} (the converter carries "
                      "the source's value)")
    return demo


def demo_rms_eps() -> Demo:
    spec = get_preset("internvit-tiny")  # RMSNorm everywhere, eps 1e-6 in its blocks
    demo = _defaults_demo(spec, DOCUMENTED_RMS_EPS, rms_norm_eps_defaults())
    pixtral = spec.replace(layer_norm_eps=1e-5)
    demo.lines.append(f"spec 'internvit-tiny' with Pixtral's block epsilon 1e-5 run with its PixtralRMSNorm "
                      f"class default 1e-6: {_eps_moved(pixtral, 1e-6):.3g}")
    return demo


def _defaults_demo(spec: ModelSpec, documented: dict[str, float], read: dict[str, float]) -> Demo:
    """How far `spec`'s logits move with each framework's default epsilon in its blocks: read from
    the installed frameworks, the documented value where one is missing."""
    demo = Demo(None, ran_with=["reference"])
    for fw, eps in {**documented, **read}.items():
        source = "read" if fw in read else "documented (framework not installed)"
        if math.isclose(eps, spec.layer_norm_eps):
            demo.lines.append(f"{fw} default {eps:g} ({source}) equals the spec's "
                              f"{spec.layer_norm_eps:g}: gap 0")
            continue
        moved = _eps_moved(spec, eps)
        demo.gap = max(demo.gap or 0.0, moved)
        demo.lines.append(f"spec {spec.name!r} (eps {spec.layer_norm_eps:g}) run with {fw}'s default "
                          f"{eps:g} ({source}): logits move by {moved:.3g}")
    return demo


def key_dim_params(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """The same integer taken as Keras' key_dim: another model, with other parameter counts."""
    spec = case.spec
    wide = spec.replace(head_dim=spec.dim)
    demo.lines.append(
        f"taking the integer {spec.dim} as Keras' key_dim builds a different model: attention "
        f"params {spec.derived.param_groups['blocks.attn']:,} -> {wide.derived.param_groups['blocks.attn']:,}"
    )


def remainder_tokens(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """The token counts of both remainders, said first."""
    spec = case.spec
    drop, pad = spec.derived, spec.replace(remainder="pad").derived
    demo.lines.insert(0, f"{spec.image_height}x{spec.image_width} image, {spec.patch_height}x"
                         f"{spec.patch_width} patches: drop -> {drop.num_patches} tokens "
                         f"({drop.cols_dropped} columns discarded), pad -> {pad.num_patches} tokens")


def first_rows_alone(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """The table's first rows alone compute the same function: the extra rows are dead weight."""
    spec = case.spec
    repaired = get_preset("archive-final-repaired")
    trimmed = dict(case.weights)
    trimmed["pos_embed"] = case.weights["pos_embed"][: repaired.derived.pos_rows_total]
    moved = gap(forward(repaired, trimmed, case.images), forward(spec, case.weights, case.images))
    demo.lines.append(f"the first {repaired.derived.pos_rows_total} of {spec.derived.pos_rows_total} rows "
                      f"alone (archive-final-repaired): gap {moved:.3g}: the "
                      f"{spec.derived.pos_rows_unused} extra rows are dead weight")


def _block0_attention_io(case: Case) -> tuple[np.ndarray, np.ndarray]:
    taps = reference_taps(case.spec, case.weights, case.images)
    return taps["block0.norm1"], taps["block0.attn"]


def demo_batch_first() -> Demo:
    spec = quadrant()
    case = demo_case(spec)
    h, expected = _block0_attention_io(case)
    w = {k: v.astype(np.float64) for k, v in case.weights.items()}
    # (B, T, E) read as (T, B, E): attention runs across the batch at each token position
    swapped = attention(spec, w, "blocks.0.attn.", h.transpose(1, 0, 2)).transpose(1, 0, 2)
    demo = Demo(gap(swapped, expected), ran_with=["reference"])
    demo.lines.append(f"block 0 attention, (B, T, E) read as (T, B, E) (reference): {demo.gap:.3g}")
    torch = framework("torch")
    if torch is None:
        return demo
    torch_out = torch.multihead_attention(spec, case.weights, h, batch_first=True)
    default_out = torch.multihead_attention(spec, case.weights, h, batch_first=None)
    demo.ran_with.append("torch")
    demo.lines.append(f"torch nn.MultiheadAttention(batch_first=True) vs reference: "
                      f"{gap(torch_out, expected):.3g}")
    moved = gap(default_out, expected)
    demo.gap = max(demo.gap, moved)
    demo.lines.append(f"torch nn.MultiheadAttention() with its default batch_first: {moved:.3g}, no error")
    return demo


def conv_in_frameworks(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """The patch kernel reshaped instead of transposed in torch's Conv2d (OIHW) and MLX's (OHWI)."""
    torch = framework("torch")
    if torch is None:
        return
    spec = case.spec
    expected = reference_taps(spec, case.weights, case.images)["patch_embed"]
    k, b = case.weights["patch_embed.kernel"], case.weights["patch_embed.bias"]
    good = gap(torch.conv_patch_embed(spec, conv_hwio_to_oihw(k), b, case.images), expected)
    reshaped = k.reshape(spec.dim, spec.channels, *k.shape[:2])
    bad = gap(torch.conv_patch_embed(spec, reshaped, b, case.images), expected)
    demo.ran_with.append("torch")
    demo.gap = max(demo.gap or 0.0, bad)
    demo.lines.append(f"torch Conv2d patch embedding: HWIO->OIHW by transpose {good:.3g}, by reshape "
                      f"{bad:.3g} (same shape, no error)")
    mlx = framework("mlx")
    if mlx is not None:  # MLX: (O, H, W, I), on NHWC images
        good = gap(mlx.conv_patch_embed(spec, k.transpose(3, 0, 1, 2), b, case.images), expected)
        bad = gap(mlx.conv_patch_embed(spec, k.reshape(spec.dim, *k.shape[:3]), b, case.images), expected)
        demo.ran_with.append("mlx")
        demo.gap = max(demo.gap, bad)
        demo.lines.append(f"mlx nn.Conv2d patch embedding (float32): HWIO->OHWI by transpose {good:.3g}, "
                          f"by reshape {bad:.3g}")


def linear_in_torch(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """A dense kernel loaded into torch's nn.Linear by transpose and by reshape."""
    torch = framework("torch")
    if torch is None:
        return
    k, b = case.weights["blocks.0.mlp.fc1.kernel"], case.weights["blocks.0.mlp.fc1.bias"]
    x = np.random.default_rng(0).standard_normal((4, k.shape[0]))
    expected = x @ k + b
    good = gap(torch.linear(k.T, b, x), expected)
    bad = gap(torch.linear(k.reshape(k.shape[1], k.shape[0]), b, x), expected)
    demo.ran_with.append("torch")
    demo.gap = max(demo.gap or 0.0, bad)
    demo.lines.append(f"torch nn.Linear{tuple(k.shape)[::-1]}: weight = k.T {good:.3g}, "
                      f"weight = k.reshape(out, in) {bad:.3g}")


def mlx_attention_bias(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """Block 0's attention in MLX's nn.MultiHeadAttention, with biases and at its default, none."""
    mlx = framework("mlx")
    if mlx is None:
        return
    spec = case.spec
    h, expected = _block0_attention_io(case)
    pinned = gap(mlx.attention_block(spec, case.weights, h, bias=True), expected)
    default = gap(mlx.attention_block(spec, case.weights, h, bias=None), expected)
    demo.ran_with.append("mlx")
    demo.gap = max(demo.gap or 0.0, default)
    demo.lines.append(f"block 0 attention in mlx nn.MultiHeadAttention vs reference: bias=True "
                      f"{pinned:.3g}, MLX's default bias=False {default:.3g} (the biases are dropped)")


def demo_gelu_names() -> Demo:
    x = np.linspace(-4, 4, 81)
    forms = {"exact": activation(x, "gelu"), "tanh": activation(x, "gelu_tanh"),
             "sigmoid(1.702x)": activation(x, "quick_gelu")}  # the reference's formulas
    demo = Demo(gap(forms["sigmoid(1.702x)"], forms["exact"]), ran_with=["numpy"])
    demo.lines.append(f"x in [-4, 4]: x*sigmoid(1.702x) vs exact GELU {demo.gap:.3g}; tanh form vs "
                      f"exact {gap(forms['tanh'], forms['exact']):.3g} (numpy formulas)")
    mlx = framework("mlx")
    if mlx is None:
        return demo
    names = {"none": "exact", "precise": "tanh", "tanh": "tanh", "fast": "sigmoid(1.702x)"}
    measured = mlx.gelu_values(x)
    demo.ran_with.append("mlx")
    demo.lines += [f"mlx nn.GELU(approx={name!r}) matches the {form} form to "
                   f"{gap(measured[name], forms[form]):.3g}, exact to "
                   f"{gap(measured[name], forms['exact']):.3g}" for name, form in names.items()]
    demo.gap = max(demo.gap, gap(measured["fast"], forms["exact"]))
    return demo
