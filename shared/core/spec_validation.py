"""What a valid `ModelSpec` is: bounds on every field and the combinations no library builds,
each refused in one line that names the field, the value and what was expected. Its two value
tests (`is_integer`, `is_number`) are `TrainSpec`'s too (train_spec.py)."""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Any

from shared.core.record import fail
from shared.core.tensor_shapes import patch_grid, positioned_prefix

if TYPE_CHECKING:
    from shared.core.spec import ModelSpec

_fail = partial(fail, "spec")  # ModelSpec.KIND


# Upper bounds far beyond any published ViT (ViT-22B: width 6144, depth 48, 48 heads, MLP 24576),
# so that an absurd value is refused here, at once, instead of hanging whatever derives from it.
# Whether a spec within them fits this machine is shared/core/budget.py's question.
FIELD_BOUNDS = {"image_height": 1 << 16, "image_width": 1 << 16, "channels": 1 << 12,
                "patch_height": 1 << 12, "patch_width": 1 << 12, "dim": 1 << 16, "depth": 1 << 10,
                "heads": 1 << 10, "head_dim": 1 << 13, "mlp_dim": 1 << 20}
# Fields where 0 means "none": no register tokens, no classifier head (the pooled vector is the output).
COUNT_BOUNDS = {"registers": 1 << 10, "num_classes": 1 << 20}
# The rows a position table may declare (a checkpoint's source grid, its row count). The image's
# own token count has no bound of its own: the image and patch bounds keep it a small integer, and
# whether its attention fits is budget.py's estimate, which names what it would take.
MAX_TOKENS = 1 << 20
MAX_HEAD_LAYERS = 16


def is_integer(value: Any) -> bool:
    """An int that is not a bool (Python counts True as 1; a record never does)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite int or float that is not a bool."""
    return is_integer(value) or (isinstance(value, float) and math.isfinite(value))


def validate_spec(s: ModelSpec) -> None:
    """Refuse, in one line naming the field, a spec no library builds or this machine cannot hold."""
    for name, bound in FIELD_BOUNDS.items():
        value = getattr(s, name)
        if not is_integer(value) or not 1 <= value <= bound:
            _fail(name, value, f"a positive integer of at most {bound:,}")
    for name, bound in COUNT_BOUNDS.items():
        value = getattr(s, name)
        if not is_integer(value) or not 0 <= value <= bound:
            _fail(name, value, f"an integer from 0 to {bound:,}")
    if s.patch_height > s.image_height:
        _fail("patch_height", s.patch_height, f"at most image_height = {s.image_height}")
    if s.patch_width > s.image_width:
        _fail("patch_width", s.patch_width, f"at most image_width = {s.image_width}")
    if not is_number(s.layer_norm_eps) or s.layer_norm_eps <= 0:
        _fail("layer_norm_eps", s.layer_norm_eps, "a finite number > 0")
    for name in ("dropout_embed", "dropout_attn", "dropout_mlp", "dropout_head"):
        rate = getattr(s, name)
        if not is_number(rate) or not 0 <= rate < 1:
            _fail(name, rate, "a rate in [0, 1)")
    if not isinstance(s.head_hidden, tuple) or any(not is_integer(w) or w < 1 for w in s.head_hidden):
        _fail("head_hidden", s.head_hidden, "a list of positive integers")
    if len(s.head_hidden) > MAX_HEAD_LAYERS or any(w > FIELD_BOUNDS["mlp_dim"] for w in s.head_hidden):
        _fail("head_hidden", s.head_hidden, f"at most {MAX_HEAD_LAYERS} widths of at most "
              f"{FIELD_BOUNDS['mlp_dim']:,}")
    rows, cols = patch_grid(s)
    if s.pooling == "cls" and not s.class_token:
        _fail("pooling", s.pooling, "mean, mean_all, flatten or map when class_token is false "
              "(no class token)")
    _validate_tokens_and_heads(s)
    _validate_rope(s)
    if s.pos_embed_class_row and not s.class_token and s.pos_embed != "none":
        _fail("pos_embed_class_row", True, "false when class_token is false (no class row)")
    if s.pos_embed == "sincos" and s.dim % 4:
        _fail("dim", s.dim, "a multiple of 4 for sincos position embeddings")
    if s.pos_rows is not None:
        if s.pos_embed != "learned":
            _fail("pos_rows", s.pos_rows, f"null when pos_embed is {s.pos_embed!r}")
        if not is_integer(s.pos_rows) or s.pos_rows > 4 * MAX_TOKENS:
            _fail("pos_rows", s.pos_rows, f"an integer of at most {4 * MAX_TOKENS:,}, or null")
        needed = rows * cols + positioned_prefix(s)
        if s.pos_rows < needed:
            _fail("pos_rows", s.pos_rows, f"at least the {needed} rows the token sequence needs")
    _validate_resampling(s, rows, cols)


def _validate_tokens_and_heads(s: ModelSpec) -> None:
    """The combinations no library builds, refused rather than given a meaning of our own."""
    if s.distill_token:
        if not s.class_token:
            _fail("distill_token", True,
                  "false when class_token is false (DeiT puts it after the class token)")
        if s.pooling != "cls" or s.head_hidden or not s.num_classes:
            _fail("distill_token", True, "false unless pooling is cls, head_hidden is empty and num_classes "
                  "> 0 (the two heads read tokens 0 and 1)")
    if s.pos_embed_register_rows and (not s.registers or s.pos_embed != "learned"):
        _fail("pos_embed_register_rows", True, "false unless registers > 0 and pos_embed is learned")
    if s.pos_embed_register_rows and s.class_token and not s.pos_embed_class_row:
        _fail("pos_embed_register_rows", True, "false when the class token has no row (pos_embed_class_row "
              "false): no library positions the registers and not the class token")
    if not s.num_classes and s.head_hidden:
        _fail("head_hidden", s.head_hidden, "empty when num_classes is 0 (no head)")


def _validate_resampling(s: ModelSpec, rows: int, cols: int) -> None:
    """A learned table at another patch grid than the image's, and the method that resamples it."""
    for name, own in (("pos_grid_height", rows), ("pos_grid_width", cols)):
        value = getattr(s, name)
        if value is None:
            continue
        if s.pos_embed != "learned":
            _fail(name, value, f"null when pos_embed is {s.pos_embed!r} (only a learned table has a grid "
                  "of its own)")
        if not is_integer(value) or not 1 <= value <= MAX_TOKENS:
            _fail(name, value, f"a positive integer of at most {MAX_TOKENS:,}, or null (the image's grid)")
        if s.pos_resample == "none" and value != own:
            _fail(name, value, f"{own} (the image's patch grid) when pos_resample is 'none'; name the "
                  "method that resamples a table of another grid")
    source = (s.pos_grid_height or rows, s.pos_grid_width or cols)
    if (s.pos_grid_height or s.pos_grid_width) and source[0] * source[1] > MAX_TOKENS:  # a declared grid
        name = "pos_grid_width" if s.pos_grid_width is not None else "pos_grid_height"
        _fail(name, getattr(s, name), f"a table grid of at most {MAX_TOKENS:,} patches")
    if s.pos_resample == "none":
        return
    if s.pos_embed != "learned":
        _fail("pos_resample", s.pos_resample, f"'none' when pos_embed is {s.pos_embed!r} (only a learned "
              "table is resampled)")
    if s.pos_rows is not None:
        _fail("pos_rows", s.pos_rows, "null when pos_resample is set (a resampled table uses every row of "
              "its grid)")


def _validate_rope(s: ModelSpec) -> None:
    """2-D axial RoPE (shared/core/rotary.py): a quarter of each head per axis and per sin/cos half."""
    if not is_number(s.rope_theta) or s.rope_theta <= 0:
        _fail("rope_theta", s.rope_theta, "a finite number > 0")
    ref = s.rope_ref_grid
    if not isinstance(ref, tuple) or (ref and (len(ref) != 2 or any(
        not is_integer(n) or not 1 <= n <= MAX_TOKENS for n in ref
    ))):
        _fail("rope_ref_grid", ref, f"empty or two positive integers (rows, cols) of at most {MAX_TOKENS:,}")
    if s.rope == "none":
        defaults = {"rope_theta": 10_000.0, "rope_coords": "index", "rope_ref_grid": ()}
        for name, default in defaults.items():
            if getattr(s, name) != default:
                _fail(name, getattr(s, name), f"{default!r} when rope is 'none' (no rotary embeddings)")
        return
    if s.head_dim % 4:
        _fail("head_dim", s.head_dim, f"a multiple of 4 for 2-D axial RoPE (rope = {s.rope!r}): a quarter "
              "of each head per axis and per sin/cos half")
    if ref and s.rope_coords != "index":
        _fail("rope_ref_grid", ref, "empty with rope_coords 'centered' (timm's ref_feat_shape rescales "
              "integer grid positions only)")

