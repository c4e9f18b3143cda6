"""What the catalogue's demonstrations for the model families people port now (DINOv2 with
registers, DeiT-III, SigLIP, CLIP) say beside the template's pinned-vs-unpinned gap (each entry's
`Reference`): where the trace first sees a dropped LayerScale, what the attention pool's key bias
alone does, QuickGELU in MLX, the SwiGLU width rules and the register counts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shared.core.activations import activation
from shared.core.reference import forward
from shared.core.spec import ModelSpec
from shared.core.weights import first_shape_mismatch
from shared.teaching.demo import Demo, demo_case, first_seen, framework, gap
from shared.teaching.transforms import Case, Variant


def trace_without_gammas(demo: Demo, case: Case, variants: Sequence[Variant]) -> None:
    """Where the trace of the reference first sees gammas of one."""
    dropped = variants[0].apply(case)
    if dropped is None:  # a preset without LayerScale: the template has said so
        return
    demo.lines.append(f"trace of the reference run with gammas of one: first divergence at "
                      f"{first_seen(case, dropped)} (block 0's attention branch, after ls1)")


def key_bias_alone(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """The pool's key bias alone: the softmax removes it."""
    spec = case.spec
    pinned = forward(spec, case.weights, case.images)
    key_bias = {**case.weights, "pool.attn.key.bias": np.zeros_like(case.weights["pool.attn.key.bias"])}
    moved = gap(forward(spec, key_bias, case.images), pinned)
    demo.lines.append(f"the key bias alone moves them by {moved:.3g}: "
                      "q . b_k is one constant per query, which the softmax removes; the query and "
                      f"value biases carry the gap (output width {spec.derived.outputs}: the embedding)")


def quick_gelu_values(demo: Demo, _case: Case, _variants: Sequence[Variant]) -> None:
    """The two functions on [-4, 4], and MLX's approx='fast', which is QuickGELU."""
    x = np.linspace(-4, 4, 81)
    quick = activation(x, "quick_gelu")
    exact = activation(x, "gelu")
    demo.lines.append(f"x in [-4, 4]: x*sigmoid(1.702x) vs exact GELU {gap(quick, exact):.3g} "
                      "(the reference's formulas)")
    mlx = framework("mlx")
    if mlx is None:
        return
    demo.ran_with.append("mlx")
    demo.lines.append(f"mlx nn.GELU(approx='fast') (gelu_fast_approx: x * mx.sigmoid(1.702 * x)) vs "
                      f"QuickGELU: {gap(mlx.gelu_values(x)['fast'], quick):.3g} (float32): the same function")


def swiglu_hidden(dim: int, mlp_ratio: float, align: bool) -> int:
    """The SwiGLU hidden width from a model width and MLP ratio: two thirds of the plain MLP's,
    rounded up to a multiple of 8 (`align`: Transformers' Dinov2SwiGLUFFN, DINOv2's own) or
    truncated (a port that skips the rounding)."""
    hidden = int(int(dim * mlp_ratio) * 2 / 3)
    return (hidden + 7) // 8 * 8 if align else hidden


def _gated_sizes(name: str, dim: int, depth: int, heads: int, mlp_dim: int) -> ModelSpec:
    return ModelSpec(name=name, image_height=518, image_width=518, patch_height=14, patch_width=14,
                     dim=dim, depth=depth, heads=heads, head_dim=64, mlp="gated", activation="silu",
                     mlp_dim=mlp_dim, layer_scale=True, num_classes=0)


def swiglu_widths(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """Both width rules at DINOv2's sizes, and a port built with the other rule refused by shape."""
    spec = case.spec
    for label, dim, depth, heads in (("DINOv2 ViT-g/14", 1536, 40, 24), ("a SwiGLU ViT-L/14", 1024, 24, 16)):
        widths = {rule: swiglu_hidden(dim, 4, align) for rule, align in (("(int(h*2/3)+7)//8*8", True),
                                                                          ("int(h*2/3)", False))}
        counts = [f"{rule} = {w} ({_gated_sizes(label, dim, depth, heads, w).derived.params:,} params)"
                  for rule, w in widths.items()]
        same = len(set(widths.values())) == 1
        demo.lines.append(f"{label} (width {dim}, mlp ratio 4, h = {4 * dim}): " + ", ".join(counts)
                          + (": the rules agree here" if same else ""))
    aligned, plain = swiglu_hidden(spec.dim, 4, True), swiglu_hidden(spec.dim, 4, False)
    checkpoint = spec.replace(mlp_dim=aligned)
    refused = first_shape_mismatch(spec.replace(mlp_dim=plain), demo_case(checkpoint).weights)
    demo.lines.append(f"width {spec.dim}, ratio 4: {aligned} vs {plain}; a port built with the other rule "
                      f"is refused by shape, not silently wrong: {refused}")


def registers_counted(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """How many tokens each convention averages, said first."""
    spec = case.spec
    d = spec.derived
    demo.lines.insert(0, f"{d.num_patches} patches, {spec.registers} registers: the spec averages the "
                         f"{d.num_patches} patches (timm x[:, num_prefix_tokens:], Transformers' "
                         "Dinov2WithRegisters 1 + num_register_tokens:); a port that skips only the class "
                         f"token averages {d.num_patches + spec.registers}")


def register_rows_counted(demo: Demo, case: Case, _variants: Sequence[Variant]) -> None:
    """The table's rows with register rows and without, said first."""
    spec = case.spec
    rows_without = spec.replace(pos_embed_register_rows=False).derived.pos_rows_used
    demo.lines.insert(0, f"a table of {spec.derived.pos_rows_used} rows with register rows, "
                         f"{rows_without} without (DINOv2 and Transformers insert the registers after "
                         "the positions are added)")
