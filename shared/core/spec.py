"""`ModelSpec`: every setting that changes the function a ViT-style patch classifier computes.

Two ports compute the same function only when all of these are pinned. Frameworks disagree on
most of them by default (`shared/teaching/divergences.py` catalogues each disagreement):
remainder pixels, what "heads=4, dim=32" means for the head width, LayerNorm epsilon, GELU form,
norm placement, pooling, patch flatten order and tensor layout. The spec states them all, and
everything derived from them (token grid, sequence length, canonical tensor shapes, parameter
count) is computed here once, never re-derived inside a port.

Conventions fixed by this module (not fields, because no port may choose otherwise):
- inputs are NHWC float32; patches are flattened in (patch_row, patch_col, channel) order and
  tokens are numbered row-major over the patch grid;
- `pad` zero-pads at the bottom and right only; `drop` discards trailing rows/columns;
- the sequence is [class token, distillation token, register tokens, patches], each part present
  only when the spec has it (timm's and Transformers' order);
- positions: with `pos_embed_class_row` the table's first rows are the class and distillation
  tokens' and it is added after they are prepended; without it, it covers the patches only and is
  added before. Register tokens get a row only with `pos_embed_register_rows` (timm without
  `no_embed_class`); DINOv2 and Transformers insert them after the positions are added;
- `mean` pooling averages the patch tokens only (class, distillation and register tokens are
  excluded, as timm); `mean_all` averages every token, class token included (keras-hub's
  `gap` pooling of its ViT);
- `flatten` pooling concatenates every token (class token included) in sequence order;
- `map` pooling is big_vision's MAPHead (timm's `global_pool='map'`): a learned probe attends over
  every token with the spec's heads, then LayerNorm and a residual fc1/fc2 MLP of width `mlp_dim`
  with the spec's activation (never gated, never qk-normed, as both libraries);
- with a distillation token the logits are the mean of the class head's and the distillation
  head's (timm's and Transformers' inference output); `num_classes = 0` means no head at all: the
  output is the pooled vector (a CLIP or SigLIP image tower's embedding);
- `sincos` positions are big_vision's fixed 2-D sine-cosine table (temperature 10000), with a zero
  row for the class token when `pos_embed_class_row` is true;
- a learned table may hold another patch grid than the image's (`pos_grid_height` x
  `pos_grid_width`, a checkpoint trained at another resolution): the canonical weights keep that
  source table as the checkpoint has it, and `pos_resample` names the library convention that
  resamples its patch rows to the image's grid on every forward (shared/core/resample.py); the
  prefix rows (class, distillation, registers) are kept aside unresampled, as every library does.

Fields that came after the first weight-file format (ADDED_FIELDS) enter the hash only when they
differ from their default, so a spec that does not use them keeps the hash its files were saved
with.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Literal, get_args

from shared.core.record import Record
from shared.core.spec_validation import validate_spec
from shared.core.tensor_shapes import canonical_shapes, param_group, patch_grid, positioned_prefix

Remainder = Literal["drop", "pad"]
PosEmbed = Literal["learned", "sincos", "none"]
Activation = Literal["gelu", "gelu_tanh", "quick_gelu", "silu"]
Norm = Literal["pre", "post"]
FinalNorm = Literal["none", "tokens", "pooled"]
Pooling = Literal["cls", "mean", "mean_all", "flatten", "map"]
Mlp = Literal["standard", "gated"]
PosResample = Literal["none", "timm_bicubic", "timm_bicubic_antialias", "hf_bicubic", "dinov2_legacy",
                      "big_vision_zoom", "bilinear"]
REMAINDERS, POS_EMBEDS, ACTIVATIONS = get_args(Remainder), get_args(PosEmbed), get_args(Activation)
NORMS, FINAL_NORMS, POOLINGS, MLPS = get_args(Norm), get_args(FinalNorm), get_args(Pooling), get_args(Mlp)
# 2-D rotary position embeddings (shared/core/rotary.py): the layout of each head's rotated pairs
# and the coordinates the angles are computed from.
Rope = Literal["none", "axial_half", "axial_interleaved"]
RopeCoords = Literal["index", "centered"]
ROPES, ROPE_COORDS = get_args(Rope), get_args(RopeCoords)


@dataclass(frozen=True)
class ModelSpec(Record):
    """The framework-neutral definition of one model. Defaults are ViT-B/16-like; presets state
    every field explicitly. Serialisation, `--set` overrides and the hash come from `Record`."""

    KIND: ClassVar[str] = "spec"
    ADDED_FIELDS: ClassVar[frozenset[str]] = frozenset({
        "patch_bias", "patch_norm_in", "patch_norm_out", "distill_token", "registers",
        "pos_embed_register_rows",
        "norm_before_blocks", "mlp", "qk_norm", "layer_scale", "pool_qkv_bias",
        "pos_grid_height", "pos_grid_width", "pos_resample",
        "rope", "rope_theta", "rope_coords", "rope_ref_grid",
    })

    # Input and patching.
    image_height: int = 224
    image_width: int = 224
    channels: int = 3
    patch_height: int = 16
    patch_width: int = 16
    remainder: Remainder = "drop"  # drop: valid unfold; pad: zero-pad bottom/right to whole patches
    patch_bias: bool = True  # the patch projection's bias (CLIP's has none)
    patch_norm_in: bool = False  # LayerNorm on each flattened patch before the projection (vit-pytorch)
    patch_norm_out: bool = False  # LayerNorm on each embedded patch token (vit-pytorch)
    # Tokens and positions.
    dim: int = 768
    class_token: bool = True
    distill_token: bool = False  # DeiT distilled: token 1, with its own head (head_dist)
    registers: int = 0  # learned register tokens after the class (and distillation) token
    pos_embed: PosEmbed = "learned"
    pos_embed_class_row: bool = True  # timm/torchvision: table has a class row; big_vision: not
    pos_embed_register_rows: bool = False  # DINOv2 and Transformers: registers get no position
    pos_rows: int | None = None  # explicit table size; only the first rows are used
    pos_grid_height: int | None = None  # the learned table's patch grid; null: the image's own grid
    pos_grid_width: int | None = None
    pos_resample: PosResample = "none"  # how that grid is resampled to the image's (resample.py)
    norm_before_blocks: bool = False  # LayerNorm on the sequence before block 0 (CLIP's ln_pre)
    # Encoder.
    depth: int = 12
    heads: int = 12
    head_dim: int = 64  # its own field: torch derives dim/heads, Keras' key_dim is per head
    mlp_dim: int = 3072
    mlp: Mlp = "standard"  # standard: fc2(act(fc1 x)); gated: fc2(act(gate x) * fc1 x), SwiGLU with silu
    activation: Activation = "gelu"  # gelu: exact erf; gelu_tanh: tanh; quick_gelu: x*sigmoid(1.702x)
    norm: Norm = "pre"  # pre: x + f(LN(x)); post: LN(x + f(x))
    layer_norm_eps: float = 1e-6
    qkv_bias: bool = True
    qk_norm: bool = False  # LayerNorm over each head's queries and keys before the product (timm)
    layer_scale: bool = False  # a learned per-channel gamma on each residual branch (DINOv2, DeiT-III)
    # Rotary position embeddings on the blocks' queries and keys, patch tokens only (rotary.py).
    rope: Rope = "none"  # axial_half: timm rotate_half=True, DINOv3; axial_interleaved: timm default, EVA-02
    rope_theta: float = 10_000.0  # base of the frequencies (timm's temperature; DINOv3: 100)
    rope_coords: RopeCoords = "index"  # index: timm integer grid; centered: DINOv3 [-1, 1] centres, x 2 pi
    rope_ref_grid: tuple[int, ...] = ()  # timm's ref_feat_shape (rows, cols): index coords scaled to it
    # Readout.
    final_norm: FinalNorm = "tokens"  # none | tokens (LN on every token) | pooled (timm's fc_norm)
    pooling: Pooling = "cls"
    pool_qkv_bias: bool = True  # the map pool's query/key/value biases (big_vision: on)
    head_hidden: tuple[int, ...] = ()
    head_activation: Activation = "gelu"
    num_classes: int = 1000
    # Dropout rates (active only in train mode).
    dropout_embed: float = 0.0
    dropout_attn: float = 0.0
    dropout_mlp: float = 0.0
    dropout_head: float = 0.0
    # Free text; not part of the function, so not part of the hash.
    name: str = field(default="custom", compare=False)

    def validate(self) -> None:
        validate_spec(self)

    @property
    def spec_hash(self) -> str:
        """Stored in every weight file: the same over field order, formatting and the name."""
        defaults = {f.name: f.default for f in dataclasses.fields(self) if f.name in self.ADDED_FIELDS}
        return self.stable_hash(omit={k for k, v in defaults.items() if getattr(self, k) == v})

    # ---- derived quantities (the one source of truth for every port) ----------------------
    @cached_property
    def derived(self) -> Derived:
        return Derived.of(self)


@dataclass(frozen=True)
class Derived:
    """Quantities computed once from a spec. Ports read these; they never recompute them."""

    grid_rows: int
    grid_cols: int
    rows_dropped: int  # image rows discarded by `drop` (0 for `pad`)
    cols_dropped: int
    rows_padded: int  # zero rows added by `pad` (0 for `drop`)
    cols_padded: int
    padded_height: int  # image size the patch layer actually sees
    padded_width: int
    num_patches: int
    prefix_tokens: int  # class + distillation + register tokens, before the patches
    seq_len: int  # prefix tokens + patches
    patch_features: int  # ph * pw * C, the length of one flattened patch
    attn_inner: int  # heads * head_dim: width of q, k, v
    pos_grid_rows: int  # the learned table's patch grid (the image's grid unless resampled)
    pos_grid_cols: int
    pos_rows_used: int  # rows of the stored table used: its prefix rows and whole source grid
    pos_rows_total: int
    pos_rows_unused: int
    pooled_dim: int  # width of the vector entering the head
    outputs: int  # width of the model's output: num_classes, or pooled_dim without a classifier
    tensor_shapes: dict[str, tuple[int, ...]]
    param_groups: dict[str, int]
    params: int

    @classmethod
    def of(cls, s: ModelSpec) -> Derived:
        rows, cols = patch_grid(s)
        used_h, used_w = rows * s.patch_height, cols * s.patch_width
        num_patches = rows * cols
        prefix = int(s.class_token) + int(s.distill_token) + s.registers
        seq_len = num_patches + prefix
        pos_grid_rows = rows if s.pos_grid_height is None else s.pos_grid_height
        pos_grid_cols = cols if s.pos_grid_width is None else s.pos_grid_width
        pos_used = 0
        if s.pos_embed != "none":
            pos_used = pos_grid_rows * pos_grid_cols + positioned_prefix(s)
        pos_total = s.pos_rows if s.pos_rows is not None else pos_used
        pooled = seq_len * s.dim if s.pooling == "flatten" else s.dim
        shapes = canonical_shapes(s, num_patches=num_patches, pos_total=pos_total, pooled=pooled)
        groups: dict[str, int] = {}
        for name, shape in shapes.items():
            group = param_group(name)
            groups[group] = groups.get(group, 0) + math.prod(shape)
        return cls(
            grid_rows=rows,
            grid_cols=cols,
            rows_dropped=max(0, s.image_height - used_h),
            cols_dropped=max(0, s.image_width - used_w),
            rows_padded=max(0, used_h - s.image_height),
            cols_padded=max(0, used_w - s.image_width),
            padded_height=max(used_h, 0) if s.remainder == "pad" else s.image_height,
            padded_width=max(used_w, 0) if s.remainder == "pad" else s.image_width,
            num_patches=num_patches,
            prefix_tokens=prefix,
            seq_len=seq_len,
            patch_features=s.patch_height * s.patch_width * s.channels,
            attn_inner=s.heads * s.head_dim,
            pos_grid_rows=pos_grid_rows,
            pos_grid_cols=pos_grid_cols,
            pos_rows_used=pos_used,
            pos_rows_total=pos_total,
            pos_rows_unused=pos_total - pos_used,
            pooled_dim=pooled,
            outputs=s.num_classes or pooled,
            tensor_shapes=shapes,
            param_groups=groups,
            params=sum(groups.values()),
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["tensor_shapes"] = {k: list(v) for k, v in self.tensor_shapes.items()}
        return out


def tensor_fields_differ(a: ModelSpec, b: ModelSpec) -> list[str]:
    """Names of spec fields that differ between two specs (the name is ignored)."""
    da, db = a.to_dict(), b.to_dict()
    return [k for k in da if k != "name" and da[k] != db[k]]
