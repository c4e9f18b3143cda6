"""The layer table `compare.py spec` prints: every layer or branch, its output shape, its
parameters and what it does, all derived from the spec (never from a framework)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from shared.core.spec import ModelSpec

_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


@dataclass(frozen=True)
class LayerRow:
    layer: str
    shape: str
    params: int
    note: str


def _count(spec: ModelSpec, prefix: str) -> int:
    return sum(math.prod(s) for n, s in spec.derived.tensor_shapes.items() if n.startswith(prefix))


def _plural(n: int, word: str) -> str:
    return f"{_WORDS.get(n, n)} {word}{'' if n == 1 else 's'}"


def remainder_note(spec: ModelSpec) -> str:
    d = spec.derived
    if spec.remainder == "drop":
        lost = []
        if d.rows_dropped:
            lost.append(f"{_plural(d.rows_dropped, 'bottom row')}")
        if d.cols_dropped:
            lost.append(f"{_plural(d.cols_dropped, 'rightmost column')}")
        return f"{d.grid_rows} × {d.grid_cols} valid patches; " + (
            " and ".join(lost) + " discarded" if lost else "nothing discarded"
        )
    added = []
    if d.rows_padded:
        added.append(f"{_plural(d.rows_padded, 'zero row')} at the bottom")
    if d.cols_padded:
        added.append(f"{_plural(d.cols_padded, 'zero column')} on the right")
    return f"{d.grid_rows} × {d.grid_cols} patches; " + (
        " and ".join(added) + " added" if added else "nothing padded"
    )


ACTIVATIONS = {"gelu": "GELU (exact erf)", "gelu_tanh": "GELU (tanh)", "quick_gelu": "QuickGELU",
               "silu": "SiLU"}


def layer_table(spec: ModelSpec) -> list[LayerRow]:
    """One row per layer or branch, in the order the forward pass runs them; the rows' parameter
    counts add up to the spec's."""
    d, s = spec.derived, spec
    if s.batching == "fixed":
        rows = [LayerRow("input", f"B × {s.image_height} × {s.image_width} × {s.channels}", 0,
                         "NHWC float32 (torch's port permutes to NCHW in prepare)")]
        kind = f"{'Unfold without padding' if s.remainder == 'drop' else 'Zero-pad, then unfold'} | " \
               f"{remainder_note(s)}"
    else:  # the batch arrives patchified (shared/core/batching.py)
        rows = [LayerRow("input", f"B × {d.num_patches} × {d.patch_features}", 0,
                         f"a {s.batching} batch of float32 patches, each image's at its own grid of at most "
                         f"{d.grid_rows} × {d.grid_cols}, with each image's (rows, cols)")]
        kind = "Patches as given"
    norm = _norm_name(s)
    before = f"{norm} on each patch, then " if s.patch_norm_in else ""
    frames = s.temporal_patch_size
    rows.append(LayerRow(
        "patch_embed", f"B × {d.num_patches} × {s.dim}", _count(s, "patch_embed") + _count(s, "patch_norm"),
        f"{kind}; {before}Linear {d.patch_features * frames}→{s.dim}"
        f"{'' if s.patch_bias else ' without bias'} "
        f"on (ph, pw, C)-flattened {s.patch_height}×{s.patch_width} patches (= Conv, kernel = stride)"
        f"{f', each repeated to fill {frames} frames (a Conv3d on a still image)' if frames > 1 else ''}"
        f"{f'; {norm} on each token' if s.patch_norm_out else ''}",
    ))
    rows += _prefix_rows(s)
    if s.pos_embed != "none":
        owners = [name for name, on in (("class", s.class_token), ("distillation", s.distill_token),
                                        ("register", s.pos_embed_register_rows)) if on]
        owners = owners if s.pos_embed_class_row else owners[2:]
        where = f"with rows for the {' and '.join(owners)} tokens" if owners else "patches only"
        where = "with a class-token row" if owners == ["class"] else where
        unused = f", {d.pos_rows_unused} never used" if d.pos_rows_unused else ""
        note = (f"learned table of {d.pos_rows_total} rows, first {d.pos_rows_used} used{unused}; {where}"
                if s.pos_embed == "learned" else f"fixed 2-D sincos, {d.pos_rows_used} rows; {where}")
        if s.pos_resample != "none":
            note += (f"; its {d.pos_grid_rows} × {d.pos_grid_cols} grid resampled to {d.grid_rows} × "
                     f"{d.grid_cols} by {s.pos_resample}")
        rows.append(LayerRow("pos_embed", f"B × {d.seq_len} × {s.dim}", _count(s, "pos_embed"), note))
    if s.norm_before_blocks:
        rows.append(LayerRow("norm_pre", f"B × {d.seq_len} × {s.dim}", _count(s, "norm_pre"),
                             f"{norm} before the blocks (CLIP's ln_pre), eps {d.norm_eps['pre']:g}"))
    for i in range(s.depth):
        windowed = s.window_size and i not in s.full_attention_blocks  # Qwen2.5-VL's window blocks
        window = f"; within each image's {s.window_size} × {s.window_size}-patch windows" if windowed else ""
        rows.append(LayerRow(f"blocks.{i}", f"B × {d.seq_len} × {s.dim}", _count(s, f"blocks.{i}."),
                             _block_note(s) + window))
        if i in s.deepstack_blocks:  # Qwen3-VL's extra outputs, from this block's tokens
            name = f"deepstack.{s.deepstack_blocks.index(i)}"
            rows.append(LayerRow(name, f"B × {d.merged_tokens} × {s.merger_dim}",
                                 _count(s, name + "."), f"blocks.{i}'s tokens merged as the merger does, "
                                 f"{norm} on each unit's concatenated tokens: an extra output"))
    if s.final_norm == "tokens":
        rows.append(LayerRow("final_norm", f"B × {d.seq_len} × {s.dim}", _count(s, "final_norm"),
                             f"{norm} on every token, eps {d.norm_eps['final']:g}"))
    if s.merge_size > 1:
        m, unit = s.merge_size, d.merge_unit
        rows.append(LayerRow("merger", f"B × {d.merged_tokens} × {s.merger_dim}", _count(s, "merger."),
                             f"{norm} on each token (eps {d.norm_eps['merger']:g}), each image's {m} × {m} "
                             f"neighbourhoods side by side ({s.token_order} order in), then MLP "
                             f"{unit}→{unit}→{s.merger_dim} with GELU (exact): Qwen's patch merger"))
    merged = f"the {d.merged_tokens} merged tokens" if s.merge_size > 1 else ""
    pool = {
        "cls": "class token (token 0)",
        "mean": f"mean of {merged or f'the {d.num_patches} patch tokens'}",
        "mean_all": f"mean of all {d.seq_len} tokens, class token included (keras-hub's gap)",
        "flatten": f"flatten {d.seq_len}×{s.dim} = {d.pooled_dim}",
        "map": f"a learned probe attends over the {d.seq_len} tokens ({s.heads} heads), then "
               f"y + MLP {s.dim}→{s.mlp_dim}→{s.dim}(LN(y)) (big_vision's MAPHead)",
    }[s.pooling]
    rows.append(LayerRow(f"pool ({s.pooling})", f"B × {d.pooled_dim}", _count(s, "pool."), pool))
    if s.final_norm == "pooled":
        rows.append(LayerRow("final_norm", f"B × {d.pooled_dim}", _count(s, "final_norm"),
                             f"{norm} on the pooled vector (timm fc_norm), eps {d.norm_eps['final']:g}"))
    return rows + _head_rows(s)


def _prefix_rows(s: ModelSpec) -> list[LayerRow]:
    shape = f"B × {s.derived.seq_len} × {s.dim}"
    rows = []
    if s.class_token:
        rows.append(LayerRow("cls_token", shape, s.dim, "prepended as token 0"))
    if s.distill_token:
        rows.append(LayerRow("dist_token", shape, s.dim, "the distillation token, token 1"))
    if s.registers:
        rows.append(LayerRow("reg_tokens", shape, s.registers * s.dim,
                             f"{_plural(s.registers, 'register token')} before the patches"))
    return rows


def _norm_name(s: ModelSpec) -> str:
    return "RMSNorm" if s.norm_type == "rms_norm" else "LayerNorm"


def _block_note(s: ModelSpec) -> str:
    short = "RMS" if s.norm_type == "rms_norm" else "LN"
    own = [name for name in s.bias_free if not name.startswith("head.")]  # the blocks' projections
    norm = f"pre-norm: x + f({short}(x))" if s.norm == "pre" else f"post-norm: {short}(x + f(x))"
    mlp = (f"MLP {s.dim}→{s.mlp_dim}→{s.dim}" if s.mlp == "standard"
           else f"gated MLP {s.dim}→2×{s.mlp_dim}→{s.dim}")
    extras = [text for text, on in (("qk-norm", s.qk_norm), ("LayerScale on both branches", s.layer_scale),
                                    (f"k/v with {s.derived.kv_heads} heads (grouped-query)",
                                     s.derived.kv_heads != s.heads),
                                    (f"2-D RoPE on the patch queries and keys ({s.rope}, {s.rope_bands} "
                                     f"bands, theta {s.rope_theta:g}"
                                     f"{', columns first' if s.rope_axes == 'cols_first' else ''})",
                                     s.rope != "none"),
                                    (f"no bias on {', '.join(own)}", bool(own)))
              if on]
    return (f"{norm}; {s.heads} heads × {s.head_dim} = {s.derived.attn_inner} inner"
            f"{'' if s.qkv_bias else ' (no qkv bias)'}; {mlp} {ACTIVATIONS[s.activation]}; "
            f"{short} eps {s.layer_norm_eps:g}" + "".join(f"; {e}" for e in extras))


def _head_rows(s: ModelSpec) -> list[LayerRow]:
    rows, width = [], s.derived.pooled_dim
    for j, hidden in enumerate(s.head_hidden):
        note = f"Linear {width}→{hidden}, {ACTIVATIONS[s.head_activation]}, dropout {s.dropout_head:g}"
        rows.append(LayerRow(f"head.hidden.{j}", f"B × {hidden}", _count(s, f"head.hidden.{j}."), note))
        width = hidden
    if not s.num_classes:
        no_head = "no classifier: the pooled vector is the output (an embedding)"
        return [*rows, LayerRow("output", f"B × {width}", 0, no_head)]
    bias = " without bias" if "head.out" in s.bias_free else ""
    rows.append(LayerRow("head.out", f"B × {s.num_classes}", _count(s, "head.out"),
                         f"Linear {width}→{s.num_classes}{bias}: logits"))
    if s.distill_token:
        rows.append(LayerRow("head_dist", f"B × {s.num_classes}", _count(s, "head_dist"),
                             f"Linear {s.dim}→{s.num_classes} on token 1; logits = mean of both heads"))
    return rows

