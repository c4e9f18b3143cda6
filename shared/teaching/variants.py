"""The catalogue's alternative settings as runnable cases: what a port that took a framework
default (or made a classic porting slip) computes, expressed as the NumPy reference run on a
changed (spec, canonical weights, images) triple.

Used three ways: the catalogue's demonstrations (pinned vs unpinned gap), `compare.py diagnose`
(which alternative, alone or in a pair, reproduces a user's logits) and the mutation tests.

Some alternatives are spec fields (epsilon, GELU form, norm placement, pooling, remainder);
others have no field because the spec fixes a convention (patch flatten order, kernel layouts,
which rows of a larger position table are used), so they are written as the equivalent change
to the canonical weights or to the images (`shared.teaching.transforms`). Each says which
catalogue entry it belongs to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

from shared.teaching import family_transforms as ft
from shared.teaching import position_transforms as pt
from shared.teaching import transforms as t
from shared.teaching.transforms import Case, Transform

__all__ = ["EPSILON_SOURCES", "Case", "Variant", "all_variants", "applicable", "applicable_pairs", "variant"]


@dataclass(frozen=True)
class Variant:
    key: str  # unique, as printed: "layer_norm_eps=0.001"
    entry: str  # the catalogue entry it belongs to (shared/teaching/divergences.py)
    group: str  # variants of one group exclude each other in pairs (same knob)
    cause: str  # what a port that computes this did, for `diagnose`'s report
    transform: Transform

    def apply(self, case: Case) -> Case | None:
        return self.transform(case)


# Documented framework defaults. The catalogue (`shared.teaching.framework_defaults`) reads the
# installed frameworks' values at run time; tests/test_teaching_catalogue.py checks they agree,
# so diagnose can stay fast (no framework import) without drifting from the frameworks.
EPSILON_SOURCES: tuple[tuple[float, str], ...] = (
    (1e-3, "Keras' LayerNormalization default epsilon"),
    (1e-5, "torch's and MLX's nn.LayerNorm default eps"),
    (1e-6, "Flax's nnx.LayerNorm default epsilon"),
    (1e-7, "keras.ops.layer_normalization's default (backend.epsilon())"),
    (1e-12, "the epsilon of BERT-style Hugging Face configs (layer_norm_eps=1e-12: Transformers' "
            "ViTConfig and DeiTConfig, where timm's ViT and DeiT use 1e-6)"),
)


def all_variants() -> list[Variant]:
    """Every alternative, in catalogue order. Which apply depends on the case."""
    out = [
        Variant(f"layer_norm_eps={value:g}", "layer_norm_eps", "layer_norm_eps",
                f"your port uses {source} ({value:g})", t.epsilon(value))
        for value, source in EPSILON_SOURCES
    ]
    out += [
        Variant("gelu form flipped (MLP)", "gelu", "activation",
                "your port's MLP uses the other GELU form (torch and keras.activations: exact; "
                "jax.nn.gelu, nnx.gelu and keras.ops.gelu: tanh by default)", t.gelu("mlp")),
        Variant("gelu form flipped (head)", "gelu", "head_activation",
                "your port's head uses the other GELU form", t.gelu("head")),
        Variant("gelu form flipped (MLP and head)", "gelu", "activation",
                "your port uses the other GELU form everywhere", t.gelu("all")),
        Variant("norm=pre", "norm_placement", "norm", "your port normalises before each "
                "sub-block (pre-norm) where the spec says post-norm", t.spec_field("norm", "pre")),
        Variant("norm=post", "norm_placement", "norm", "your port normalises after each "
                "residual sum (post-norm, torch's TransformerEncoderLayer default)",
                t.spec_field("norm", "post")),
        Variant("pooling=cls", "pooling", "pooling", "your port reads the class token",
                t.spec_field("pooling", "cls")),
        Variant("pooling=mean", "pooling", "pooling", "your port averages the patch tokens",
                t.spec_field("pooling", "mean")),
        Variant("pooling=mean_all", "pooling", "pooling", "your port averages every token, the "
                "class token included (keras-hub's ViT with pooling='gap')",
                t.spec_field("pooling", "mean_all")),
        Variant("final_norm=pooled", "pooling", "final_norm", "your port applies the final "
                "LayerNorm after pooling (timm's fc_norm)", t.spec_field("final_norm", "pooled")),
        Variant("final_norm=tokens", "pooling", "final_norm", "your port applies the final "
                "LayerNorm to every token before pooling", t.spec_field("final_norm", "tokens")),
        Variant("final_norm=none", "pooling", "final_norm", "your port has no final LayerNorm",
                t.drop_final_norm),
        Variant("remainder=pad", "remainder", "remainder", "your port zero-pads the image to "
                "whole patches (Keras/Flax padding='same')", t.spec_field("remainder", "pad")),
        Variant("remainder=drop", "remainder", "remainder", "your port drops the trailing "
                "pixels (a 'valid' conv, torch's unfold)", t.spec_field("remainder", "drop")),
        Variant("attention scaled by 1/sqrt(dim)", "attention_scale", "attention_scale",
                "your port's head width is dim, not dim/heads (the 'same integer' trap: Keras "
                "key_dim=dim, or a hand-written 1/sqrt(dim))",
                t.query_scaled(lambda s: math.sqrt(s.head_dim / s.dim))),
        Variant("attention not scaled", "attention_scale", "attention_scale",
                "your port omits the 1/sqrt(head width) scale", t.query_scaled(
                    lambda s: math.sqrt(s.head_dim))),
        Variant("heads merged into one", "head_width", "heads", "your port runs one head of "
                "width heads*head_dim (num_heads=1, or heads folded into key_dim)", t.heads_merged),
        Variant("patches flattened (C, ph, pw)", "patch_layout", "patch_order",
                "your port flattens patches channel-first (F.unfold order) against a (ph, pw, C) "
                "kernel", t.patch_flatten_chw),
        Variant("images reshaped to NCHW", "patch_layout", "image_layout",
                "your port reshapes NHWC images to NCHW instead of transposing them",
                t.images_reshaped_nchw),
        Variant("patch kernel reshaped to OIHW", "conv_kernel_layout", "patch_kernel",
                "your port loads the HWIO patch kernel into an OIHW Conv2d with reshape "
                "instead of transpose(3, 2, 0, 1)", t.conv_kernel_reshaped),
        Variant("dense kernels reshaped to (out, in)", "dense_kernel_layout", "dense_kernel",
                "your port loads (in, out) dense kernels into (out, in) weights with reshape "
                "instead of a transpose", t.dense_reshaped),
        Variant("position rows taken from the end", "pos_table_rows", "pos_rows",
                "your port reads the last rows of the larger position table, not the first",
                t.pos_last_rows),
        Variant("no position embedding", "pos_table_rows", "pos_embed",
                "your port never adds the position table", t.no_positions),
        Variant("attention biases dropped", "attention_bias", "attention_bias",
                "your port's attention has no biases (MLX nn.MultiHeadAttention's default "
                "bias=False)", t.attention_biases_zeroed),
    ]
    out += [  # the newer families (shared/teaching/family_demos.py)
        Variant("LayerScale gammas dropped", "layer_scale", "layer_scale", "your loader ignores "
                "the LayerScale gammas (timm ls1/ls2.gamma, Transformers layer_scale1/2.lambda1) "
                "and leaves them at one (the public MLX DINOv2 bug)", ft.layer_scale_dropped),
        Variant("pool q/k/v biases dropped", "pool_qkv_bias", "pool_qkv_bias", "your attention "
                "pool has no query/key/value biases (AlgoPerf's PyTorch MAP head; its JAX one has "
                "them)", ft.pool_qkv_biases_dropped),
        Variant("QuickGELU and exact GELU swapped", "quick_gelu", "activation", "your port runs "
                "exact GELU where the spec says QuickGELU x*sigmoid(1.702x) (OpenAI CLIP), or "
                "QuickGELU (MLX's gelu_fast_approx, approx='fast') where it says exact GELU",
                ft.quick_gelu_swapped),
        Variant("gated MLP halves swapped", "swiglu", "gated_halves", "your port reads the gate "
                "from the other half of the packed fc1 (timm's GluMlp default gate_last=True; "
                "SwiGLUPacked, DINOv2's w12 and Transformers' weights_in are gate first)",
                ft.gated_halves_swapped),
        Variant("registers averaged with the patches", "register_pooling", "register_pooling",
                "your mean pooling skips only the class token and averages the registers too",
                ft.registers_in_mean),
        Variant("register position rows dropped", "register_positions", "register_rows",
                "your port gives the registers no position (DINOv2, Transformers) and cuts their "
                "rows from a table that has them (timm without no_embed_class)",
                ft.register_rows_dropped),
        Variant("register position rows read as patch rows", "register_positions", "register_rows",
                "your port gives the registers no position and adds the table's first rows, so the "
                "patches receive the register rows", ft.register_rows_read_as_patches),
        Variant("class head alone", "distilled_heads", "distilled_heads", "your port reads the "
                "class head only, not the mean of the class and distillation heads (Transformers' "
                "DeiTForImageClassification)", ft.distilled_head_alone("class")),
        Variant("distillation head alone", "distilled_heads", "distilled_heads", "your port reads "
                "the distillation head only (DeiTForImageClassificationWithTeacher's "
                "distillation_logits)", ft.distilled_head_alone("distillation")),
    ]
    out += [  # positions at another resolution and 2-D RoPE (shared/teaching/position_demos.py)
        Variant("table resampled by bicubic, size-based", "pos_resample_antialias", "pos_resample",
                "your port resamples the position table with F.interpolate(bicubic, size=...) "
                "(Transformers' interpolate_pos_encoding, timm's resample_abs_pos_embed(antialias=False))",
                pt.resampled_by("hf_bicubic")),
        Variant("table resampled by big_vision's first-order zoom", "pos_resample", "pos_resample",
                "your port resamples the position table with scipy.ndimage.zoom(order=1) (big_vision's "
                "resample_posemb: corners on corners)", pt.resampled_by("big_vision_zoom")),
        Variant("table resampled bilinearly", "pos_resample", "pos_resample", "your port resamples "
                "the position table with a bilinear resize (F.interpolate(mode='bilinear'))",
                pt.resampled_by("bilinear")),
        Variant("table resampled by antialiased bicubic", "pos_resample_antialias", "pos_resample",
                "your port resamples the position table with timm's default, antialiased bicubic "
                "(resample_abs_pos_embed(antialias=True))", pt.resampled_by("timm_bicubic_antialias")),
        Variant("table resampled with DINOv2's +0.1 scale factor", "pos_resample_offset", "pos_resample",
                "your port resamples with DINOv2's original scale_factor=(out + 0.1) / in, not the size",
                pt.resampled_by("dinov2_legacy")),
        Variant("RoPE halves and interleaved pairs swapped", "rope_layout", "rope", "your port pairs "
                "each dimension with the other partner: i with i + head_dim / 2 (timm rotate_half, "
                "DINOv3) where the model pairs 2i with 2i + 1 (timm's default, EVA-02), or the reverse",
                pt.rope_layout_swapped),
        Variant("RoPE index and centred coordinates swapped", "rope_coords", "rope_coords", "your "
                "port rotates by integer patch indices (timm) where the model uses patch centres in "
                "[-1, 1] times 2 pi (DINOv3), or the reverse", pt.rope_coords_swapped),
    ]
    return out


def variant(key: str) -> Variant:
    for v in all_variants():
        if v.key == key:
            return v
    raise KeyError(key)


def applicable(case: Case) -> list[tuple[Variant, Case]]:
    out = []
    for v in all_variants():
        changed = v.apply(case)
        if changed is not None:
            out.append((v, changed))
    return out


def applicable_pairs(case: Case, singles: list[Variant]) -> list[tuple[tuple[Variant, Variant], Case]]:
    """Every pair of `singles` on different knobs, applied one after the other (the caller has
    dropped the alternatives that do not change this case's function)."""
    out = []
    for a, b in combinations(singles, 2):
        if a.group == b.group:
            continue
        first = a.apply(case)
        second = b.apply(first) if first is not None else None
        if second is not None:
            out.append(((a, b), second))
    return out
