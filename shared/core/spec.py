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
  every token with the spec's heads, then the spec's norm and a residual fc1/fc2 MLP of width `mlp_dim`
  with the spec's activation (never gated, never qk-normed, as both libraries);
- with a distillation token the logits are the mean of the class head's and the distillation
  head's (timm's and Transformers' inference output); `num_classes = 0` means no head at all: the
  output is the pooled vector (a CLIP or SigLIP image tower's embedding);
- `batching = "naflex"` (shared/core/batching.py): the input is each image's patches at its own
  grid, padded to `max_patches` tokens (`derived.num_patches`); a key-padding mask keeps attention
  and pooling off the padding, and only the valid tokens are compared; `packed` (Pixtral's): each
  sequence of `max_patches` tokens holds `pack_images` images one after another, attention is
  block-diagonal (each image's tokens attend to that image's only), each image is pooled on its
  own, and the output has a row per image (sequence-major); a naflex or packed spec's learned table
  (`pos_grid_height` x `pos_grid_width`) is resized to each image's own grid by `pos_resample`
  (antialiased, as SigLIP2 and NaFlexVit do; corners aligned, as Qwen3-VL) and positions the
  patches only; RoPE with index coordinates rotates each patch by its row and column within its
  own image (Pixtral's); with
  `window_size` the blocks not in `full_attention_blocks` attend within each image's windows only
  (Qwen2.5-VL's), a mask over the image's own grid whatever order a port tiles it in;
- `sincos` positions are big_vision's fixed 2-D sine-cosine table (temperature 10000), for the
  patches only: the prefix tokens get no position (`pos_embed_class_row` is true with a learned
  table only, since a zero row and no row are one function);
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property, partial
from typing import Any, ClassVar, Literal, get_args

from shared.core.record import Record, fail
from shared.core.spec_overrides import followers

Remainder = Literal["drop", "pad"]
PosEmbed = Literal["learned", "sincos", "none"]
Activation = Literal["gelu", "gelu_tanh", "quick_gelu", "silu"]
Norm = Literal["pre", "post"]
FinalNorm = Literal["none", "tokens", "pooled"]
Pooling = Literal["cls", "mean", "mean_all", "flatten", "map"]
Mlp = Literal["standard", "gated"]
PosResample = Literal["none", "timm_bicubic", "timm_bicubic_antialias", "hf_bicubic", "dinov2_legacy",
                      "big_vision_zoom", "bilinear", "bilinear_antialias"]
REMAINDERS, POS_EMBEDS, ACTIVATIONS = get_args(Remainder), get_args(PosEmbed), get_args(Activation)
# The methods that resize a learned table to each image's grid of a naflex or packed batch: Transformers'
# Siglip2VisionModel (antialiased bilinear), timm's NaFlexVit (antialiased bicubic, its default) and
# Qwen3-VL's bilinear with corners aligned (its fast_pos_embed_interpolate samples linspace(0, n - 1,
# size): scipy's first-order zoom, big_vision's resample).
IMAGE_RESAMPLES = ("bilinear_antialias", "timm_bicubic_antialias", "big_vision_zoom")
NORMS, FINAL_NORMS, POOLINGS, MLPS = get_args(Norm), get_args(FinalNorm), get_args(Pooling), get_args(Mlp)
# 2-D rotary position embeddings (shared/core/rotary.py): the layout of each head's rotated pairs
# and the coordinates the angles are computed from.
Rope = Literal["none", "axial_half", "axial_interleaved"]
RopeCoords = Literal["index", "centered"]
# Which frequency bands each axis takes: `shared`, the same head_dim / 4 bands for rows and columns
# (timm, DINOv3, Qwen2.5-VL's vision rotary), or `alternating`, the 1-D RoPE's head_dim / 2 bands
# with the even ones on rows and the odd ones on columns (Pixtral).
RopeBands = Literal["shared", "alternating"]
# Which axis takes each head's first block of angles: `rows_first` (timm's default
# grid_indexing='ij', DINOv3, Pixtral, Qwen), or `cols_first` (timm's rope_grid_indexing='xy', the
# Perception Encoder's): the same tables with the two blocks swapped.
RopeAxes = Literal["rows_first", "cols_first"]
ROPES, ROPE_COORDS, ROPE_BANDS = get_args(Rope), get_args(RopeCoords), get_args(RopeBands)
# The order of each image's patch tokens in a naflex or packed batch (its patches and every token
# tensor): `raster`, row-major over the image's grid; `merge_block`, Qwen's processor's, the patches of
# each merge_size x merge_size merge unit together (row-major within it), the units row-major.
TokenOrder = Literal["raster", "merge_block"]
MAX_MERGE = 16  # a merge unit's side (Qwen's: 2)
MAX_FRAMES = 64  # the frames one patch spans (Qwen's: 2)
# How a batch's images reach the model (shared/core/batching.py): `fixed`, every image image_height x
# image_width, patchified at the spec's one grid; `naflex`, SigLIP2's NaFlex: each image already
# patchified at its own grid of rows x cols patches (rows * cols <= max_patches), its tokens padded to
# max_patches and a key-padding mask keeping attention and pooling off the padding; `packed`, Pixtral's:
# pack_images images at their own grids one after another in each sequence of max_patches tokens,
# attention block-diagonal, each image pooled on its own.
Batching = Literal["fixed", "naflex", "packed"]
BATCHINGS = get_args(Batching)
# The normalisation every norm of the model computes: LayerNorm, or RMSNorm (scale only, no mean
# subtracted: AIMv2, Pixtral, the Qwen2.5-VL encoder, InternViT with norm_type 'rms_norm').
NormType = Literal["layer_norm", "rms_norm"]
NORM_TYPES = get_args(NormType)
# The places a norm stands, each with its own epsilon (Derived.norm_eps): a tower may use one value in
# its blocks and another elsewhere. Each place but the blocks has a field `<place>_norm_eps`; null
# there means layer_norm_eps, today's one value for every norm.
NORM_PLACES = ("patch", "pre", "blocks", "qk", "final", "merger", "pool")
NORM_EPS_FIELDS = {place: f"{place}_norm_eps" for place in NORM_PLACES if place != "blocks"}
# The projections a spec may name in `bias_free` (each without its bias), in canonical order: the
# blocks' query, key, value and output projections, their MLP linears, and the classifier. AIMv2
# has no bias on any of the blocks' projections, Pixtral none at all, InternViT-300M none on q/k/v,
# DINOv3 none on the key alone. The patch projection's bias is `patch_bias`, the pool's `pool_qkv_bias`.
BIAS_FREE = ("attn.query", "attn.key", "attn.value", "attn.out", "mlp.gate", "mlp.fc1", "mlp.fc2", "head.out")
QKV_PARTS = ("attn.query", "attn.key", "attn.value")


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
        "norm_type", *NORM_EPS_FIELDS.values(), "bias_free", "kv_heads", "rope_bands",
        "batching", "max_patches", "pack_images", "window_size", "full_attention_blocks",
        "token_order", "merge_size", "merger_dim", "rope_axes", "temporal_patch_size",
        "deepstack_blocks",
    })

    # Input and patching.
    image_height: int = 224
    image_width: int = 224
    channels: int = 3
    patch_height: int = 16
    patch_width: int = 16
    # The frames one patch spans (Qwen's Conv3d: 2). An image is a still: every port and the reference
    # repeat it to fill the frames, as the libraries' processors do, so the kernel is (T, ph, pw, C, D).
    temporal_patch_size: int = 1
    remainder: Remainder = "drop"  # drop: valid unfold; pad: zero-pad bottom/right to whole patches
    patch_bias: bool = True  # the patch projection's bias (CLIP's has none)
    patch_norm_in: bool = False  # LayerNorm on each flattened patch before the projection (vit-pytorch)
    patch_norm_out: bool = False  # LayerNorm on each embedded patch token (vit-pytorch)
    batching: Batching = "fixed"  # naflex: per-image patch grids, padded, with a key-padding mask
    # naflex: the token length every image is padded to; packed: every sequence's, its images' patches
    # together (null with fixed). Each image's grid fits in the image's (image_height / patch_height
    # rows, image_width / patch_width columns).
    max_patches: int | None = None
    pack_images: int = 1  # packed: the images in each sequence (1 otherwise)
    token_order: TokenOrder = "raster"  # raster: each image's patches row-major; merge_block: Qwen's
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
    # Grouped-query attention: the blocks' keys and values with this many heads, each shared by
    # heads / kv_heads consecutive query heads (null: heads, plain multi-head attention).
    kv_heads: int | None = None
    # Window attention (Qwen2.5-VL's, a naflex or packed batch): each image's patches in tiles of
    # window_size x window_size patches from its top-left corner attend within their own tile (edge
    # tiles hold what is left); 0: none. full_attention_blocks: the blocks that attend over the whole
    # image all the same (Qwen2.5-VL's fullatt_block_indexes).
    window_size: int = 0
    full_attention_blocks: tuple[int, ...] = ()
    mlp_dim: int = 3072
    mlp: Mlp = "standard"  # standard: fc2(act(fc1 x)); gated: fc2(act(gate x) * fc1 x), SwiGLU with silu
    activation: Activation = "gelu"  # gelu: exact erf; gelu_tanh: tanh; quick_gelu: x*sigmoid(1.702x)
    norm: Norm = "pre"  # pre: x + f(LN(x)); post: LN(x + f(x))
    layer_norm_eps: float = 1e-6  # the blocks' norms, and every other norm without an epsilon of its own
    norm_type: NormType = "layer_norm"  # rms_norm: x / sqrt(mean(x^2) + eps) * scale, on every norm
    # Epsilons of the other norms, where a tower's differ from its blocks'; null: layer_norm_eps.
    patch_norm_eps: float | None = None  # patch_norm_in and patch_norm_out
    pre_norm_eps: float | None = None  # norm_before_blocks
    qk_norm_eps: float | None = None  # qk_norm's query and key norms
    final_norm_eps: float | None = None  # the final norm, on the tokens or the pooled vector
    merger_norm_eps: float | None = None  # the patch merger's norm
    pool_norm_eps: float | None = None  # the map pool's norm
    qkv_bias: bool = True  # q, k and v all with a bias (false: none has one)
    # Projections without a bias (BIAS_FREE's names, in its order): a query, key or value alone while
    # qkv_bias is true, the attention output, an MLP linear, the classifier (head.out).
    bias_free: tuple[str, ...] = ()
    qk_norm: bool = False  # LayerNorm over each head's queries and keys before the product (timm)
    layer_scale: bool = False  # a learned per-channel gamma on each residual branch (DINOv2, DeiT-III)
    # Rotary position embeddings on the blocks' queries and keys, patch tokens only (rotary.py).
    rope: Rope = "none"  # axial_half: timm rotate_half=True, DINOv3; axial_interleaved: timm default, EVA-02
    rope_theta: float = 10_000.0  # base of the frequencies (timm's temperature; DINOv3: 100)
    rope_coords: RopeCoords = "index"  # index: timm integer grid; centered: DINOv3 [-1, 1] centres, x 2 pi
    rope_ref_grid: tuple[int, ...] = ()  # timm's ref_feat_shape (rows, cols): index coords scaled to it
    rope_bands: RopeBands = "shared"  # shared: head_dim/4 bands on both axes; alternating: Pixtral's
    rope_axes: RopeAxes = "rows_first"  # the axis of each head's first angles; cols_first: timm's 'xy'
    # Patch merger (Qwen's, a naflex or packed batch): after the blocks and the final norm each token
    # is normed (the spec's norm, merger_norm_eps), each image's merge_size x merge_size neighbourhoods
    # concatenated in (row, col) order, then fc2(GELU(fc1 x)), widths dim * merge_size^2 and
    # merger_dim; the merged tokens are what is pooled. 1: no merger.
    merge_size: int = 1
    merger_dim: int = 0
    # Qwen3-VL's deepstack: after each listed block its tokens go through a merger of their own, the
    # norm after each unit's tokens are concatenated (width dim * merge_size^2), fc2(GELU(fc1 x)) to
    # merger_dim; each one's merged tokens are an extra output, `deepstack.J` for the J-th listed block,
    # compared like the logits. They feed nothing else.
    deepstack_blocks: tuple[int, ...] = ()
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

    def with_overrides(self, assignments: Iterable[str], flag: str = "--set") -> ModelSpec:
        """`Record.with_overrides`, with the fields that follow a changed one (spec_overrides.py)."""
        changes = self.parse_assignments(assignments, flag)
        changes |= {name: value for name, (value, _) in followers(self.to_dict(), changes).items()}
        return self.replace(**changes) if changes else self

    @property
    def spec_hash(self) -> str:
        """Stored in every weight file: the same over field order, formatting and the name."""
        return self.stored_hash(self.to_dict())

    @classmethod
    def stored_hash(cls, data: Mapping[str, Any]) -> str:
        """The spec hash of a spec as `to_dict` writes it, valid today or not: a weight file's stored
        spec written before a rule settled one of its fields (spec_overrides.settle) is checked
        against the hash it was written with. An added field at its default is left out."""
        defaults = _default_dict()
        at_default = {k for k in cls.ADDED_FIELDS if data.get(k, defaults[k]) == defaults[k]}
        return cls.dict_hash(data, omit=at_default)

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
    num_patches: int  # naflex, packed: max_patches, the length every sequence's patches are padded to
    prefix_tokens: int  # class + distillation + register tokens, before the patches
    seq_len: int  # prefix tokens + patches
    patch_features: int  # ph * pw * C, the length of one flattened patch
    attn_inner: int  # heads * head_dim: width of q (and of the map pool's k and v)
    kv_heads: int  # the blocks' key/value heads: spec.kv_heads, or heads
    kv_inner: int  # kv_heads * head_dim: width of the blocks' k and v
    norm_eps: dict[str, float]  # NORM_PLACES -> the epsilon of the norms there
    has_bias: dict[str, bool]  # BIAS_FREE's projections -> whether the blocks' (head's) has a bias
    pos_grid_rows: int  # the learned table's patch grid (the image's grid unless resampled)
    pos_grid_cols: int
    pos_rows_used: int  # rows of the stored table used: its prefix rows and whole source grid
    pos_rows_total: int
    pos_rows_unused: int
    merge_unit: int  # dim * merge_size^2: a merge unit's tokens side by side, the merger's input width
    merged_tokens: int  # num_patches // merge_size^2: the tokens out of the merger (num_patches without one)
    pooled_dim: int  # width of the vector entering the head
    outputs: int  # width of the model's output: num_classes, or pooled_dim without a classifier
    extra_outputs: tuple[str, ...]  # the taps that are outputs too (deepstack.J), compared like the logits
    tensor_shapes: dict[str, tuple[int, ...]]
    param_groups: dict[str, int]
    params: int

    @classmethod
    def of(cls, s: ModelSpec) -> Derived:
        rows, cols = patch_grid(s)
        used_h, used_w = rows * s.patch_height, cols * s.patch_width
        num_patches = rows * cols if s.max_patches is None else s.max_patches  # naflex, packed: padded length
        prefix = int(s.class_token) + int(s.distill_token) + s.registers
        seq_len = num_patches + prefix
        pos_grid_rows = rows if s.pos_grid_height is None else s.pos_grid_height
        pos_grid_cols = cols if s.pos_grid_width is None else s.pos_grid_width
        pos_used = 0
        if s.pos_embed != "none":
            pos_used = pos_grid_rows * pos_grid_cols + positioned_prefix(s)
        pos_total = s.pos_rows if s.pos_rows is not None else pos_used
        pooled = seq_len * s.dim if s.pooling == "flatten" else s.merger_dim if s.merge_size > 1 else s.dim
        merge_unit = s.dim * s.merge_size**2
        shapes = canonical_shapes(s, num_patches=num_patches, pos_total=pos_total, pooled=pooled,
                                  merge_unit=merge_unit)
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
            kv_heads=kv_heads(s),
            kv_inner=kv_heads(s) * s.head_dim,
            norm_eps=norm_eps(s),
            has_bias={name: name not in s.bias_free and (name not in QKV_PARTS or s.qkv_bias)
                      for name in BIAS_FREE},
            pos_grid_rows=pos_grid_rows,
            pos_grid_cols=pos_grid_cols,
            pos_rows_used=pos_used,
            pos_rows_total=pos_total,
            pos_rows_unused=pos_total - pos_used,
            merge_unit=merge_unit,
            merged_tokens=num_patches // s.merge_size**2,
            pooled_dim=pooled,
            outputs=s.num_classes or pooled,
            extra_outputs=tuple(f"deepstack.{j}" for j in range(len(s.deepstack_blocks))),
            tensor_shapes=shapes,
            param_groups=groups,
            params=sum(groups.values()),
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["tensor_shapes"] = {k: list(v) for k, v in self.tensor_shapes.items()}
        return out


@cache
def _default_dict() -> dict[str, Any]:
    """Every field's default as `to_dict` writes it (a list where the field holds a tuple)."""
    return ModelSpec().to_dict()


def tensor_fields_differ(a: ModelSpec, b: ModelSpec) -> list[str]:
    """Names of spec fields that differ between two specs (the name is ignored)."""
    da, db = a.to_dict(), b.to_dict()
    return [k for k in da if k != "name" and da[k] != db[k]]


# ---- what a valid spec is -----------------------------------------------------------------
# Bounds on every field and the combinations no library builds, each refused in one line that
# names the field, the value and what was expected. Its two value tests (`is_integer`,
# `is_number`) are `TrainSpec`'s too (train_spec.py).
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
    if not is_integer(s.temporal_patch_size) or not 1 <= s.temporal_patch_size <= MAX_FRAMES:
        _fail("temporal_patch_size", s.temporal_patch_size,
              f"an integer from 1 to {MAX_FRAMES} (the frames a patch spans; 1: an image's 2-D patch)")
    if s.temporal_patch_size > 1 and s.patch_norm_in:
        _fail("temporal_patch_size", s.temporal_patch_size,
              "1 with patch_norm_in (vit-pytorch's norm is over a 2-D patch; no library has both)")
    if not is_number(s.layer_norm_eps) or s.layer_norm_eps <= 0:
        _fail("layer_norm_eps", s.layer_norm_eps, "a finite number > 0")
    _validate_norm_eps(s)
    _validate_bias_free(s)
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
    if s.pool_qkv_bias is not True and s.pooling != "map":  # no effect there: it would change the hash alone
        _fail("pool_qkv_bias", s.pool_qkv_bias, f"true (its default) when pooling is {s.pooling!r}: only the "
              "map pool has query, key and value biases")
    _validate_tokens_and_heads(s)
    if s.kv_heads is not None and (not is_integer(s.kv_heads) or s.kv_heads < 1 or s.heads % s.kv_heads):
        _fail("kv_heads", s.kv_heads, f"a positive divisor of heads = {s.heads}, or null")
    _validate_rope(s)
    _validate_batching(s, rows, cols)
    _validate_windows(s)
    _validate_merger(s, rows, cols)
    if s.pos_embed_class_row and s.pos_embed != "learned":  # no row, or a zero one: one function, two hashes
        _fail("pos_embed_class_row", True, f"false when pos_embed is {s.pos_embed!r} (only a learned table "
              "has a row for the class token)")
    if s.pos_embed_class_row and not s.class_token:
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


def _validate_batching(s: ModelSpec, rows: int, cols: int) -> None:
    """`naflex`: a padded length every image's grid can fill; `packed`: pack_images images, each of
    one patch at least and its whole grid at most, in max_patches tokens; and only what reads tokens
    by position in the sequence refused (a table only as a learned one resized to each image, rotary
    coordinates only by index, no prefix tokens in a packed sequence)."""
    if s.batching not in BATCHINGS:
        _fail("batching", s.batching, f"one of {', '.join(BATCHINGS)}")
    if s.batching != "packed" and s.pack_images != 1:
        _fail("pack_images", s.pack_images, "1 unless batching is 'packed' (one image per sequence)")
    if s.batching == "packed" and (not is_integer(s.pack_images) or not 2 <= s.pack_images <= MAX_TOKENS):
        _fail("pack_images", s.pack_images, f"an integer from 2 to {MAX_TOKENS:,} when batching is 'packed' "
              "(one image a sequence is batching 'naflex')")
    if s.batching == "fixed":
        if s.max_patches is not None:
            _fail("max_patches", s.max_patches, "null when batching is 'fixed' (one grid, no padding)")
        return
    k = s.pack_images
    held = f"pack_images = {k} images of one patch to" if k > 1 else "up to"
    if not is_integer(s.max_patches) or not k <= s.max_patches <= k * rows * cols:
        _fail("max_patches", s.max_patches, f"an integer from {k} to {k * rows * cols} ({held} the {rows} x "
              f"{cols} patch grid of image_height x image_width) when batching is {s.batching!r}")
    refused: dict[str, tuple[Any, Any, str]] = {}
    # RoPE per image (Pixtral's, Qwen's): each patch by its row and column within its own image; the
    # coordinates that depend on the image's size (DINOv3's centred ones, EVA-02's rescaled) are not
    why = "coordinates that depend on each image's size are not built per image yet"
    if s.rope != "none":
        refused |= {"rope_coords": (s.rope_coords, "index", why), "rope_ref_grid": (s.rope_ref_grid, (), why)}
    if s.pos_embed == "learned":  # SigLIP2's, Qwen3-VL's: resized to each image's grid
        if s.pos_resample not in IMAGE_RESAMPLES:
            _fail("pos_resample", s.pos_resample, f"one of {', '.join(IMAGE_RESAMPLES)} when batching is "
                  f"{s.batching!r} with a learned table (the table is resized to each image's own grid)")
        if positioned_prefix(s):
            name = "pos_embed_register_rows" if s.pos_embed_register_rows else "pos_embed_class_row"
            _fail(name, True, f"false when batching is {s.batching!r} (the resized table positions the "
                  "patches only, as NaFlexVit, Siglip2VisionModel and Qwen3-VL do)")
    elif s.pos_embed != "none":
        _fail("pos_embed", s.pos_embed, f"'learned' (resized to each image's grid) or 'none' when batching "
              f"is {s.batching!r} (a table per image grid is built for a learned table only)")
    if s.batching == "packed":  # Pixtral's: no token of its own before an image's patches
        why = "prefix tokens per packed image are not built yet"
        refused |= {"class_token": (s.class_token, False, why),
                    "distill_token": (s.distill_token, False, why), "registers": (s.registers, 0, why)}
    for name, (value, wanted, why) in refused.items():
        if value != wanted:
            _fail(name, value, f"{wanted!r} when batching is {s.batching!r} ({why})")
    if s.pooling == "flatten":
        _fail("pooling", s.pooling, f"cls, mean, mean_all or map when batching is {s.batching!r} (flatten "
              "would read the padding)")


def _validate_windows(s: ModelSpec) -> None:
    """Window attention: a tile side in patches over a naflex or packed batch's images (each image's
    grid is its own; a fixed image is a naflex batch of one), no prefix token (no library windows
    one), and the full-attention blocks as block indices, each once, in order."""
    if not is_integer(s.window_size) or not 0 <= s.window_size <= MAX_TOKENS:
        _fail("window_size", s.window_size,
              f"an integer from 0 to {MAX_TOKENS:,} (patches per window side; 0: no windows)")
    blocks = s.full_attention_blocks
    if not isinstance(blocks, tuple) or any(not is_integer(i) or not 0 <= i < s.depth for i in blocks) \
            or list(blocks) != sorted(set(blocks)):
        _fail("full_attention_blocks", blocks,
              f"block indices from 0 to {s.depth - 1} (depth - 1), each once, in order")
    if not s.window_size:
        if blocks:
            _fail("full_attention_blocks", blocks,
                  "empty when window_size is 0 (every block attends over the whole image already)")
        return
    if s.batching == "fixed":
        _fail("window_size", s.window_size, "0 when batching is 'fixed' (windows tile each image's own grid "
              "of a naflex or packed batch; one fixed-size image is a naflex batch of one)")
    if s.class_token or s.distill_token or s.registers:
        _fail("window_size", s.window_size,
              "0 with class, distillation or register tokens (no library puts a prefix token in a window)")


def _validate_merger(s: ModelSpec, rows: int, cols: int) -> None:
    """Qwen's patch merger: a unit side over a naflex or packed batch whose padded length holds whole
    units, one an image at least, and whose patch grid holds one (each image's grid is checked with
    the batch: rows and cols multiples of the side), an output width, and only what reads its merged
    tokens as they are (their mean, no prefix token); the merge-block token order only with a merger."""
    m = s.merge_size
    if not is_integer(m) or not 1 <= m <= MAX_MERGE:
        _fail("merge_size", m,
              f"an integer from 1 to {MAX_MERGE} (a merge unit's side in patches; 1: no merger)")
    if not is_integer(s.merger_dim) or not 0 <= s.merger_dim <= FIELD_BOUNDS["dim"]:
        _fail("merger_dim", s.merger_dim, f"an integer from 0 to {FIELD_BOUNDS['dim']:,}")
    if m == 1:
        for name, wanted in (("merger_dim", 0), ("token_order", "raster"), ("deepstack_blocks", ())):
            if (value := getattr(s, name)) != wanted:
                _fail(name, value, f"{wanted!r} when merge_size is 1 (no patch merger)")
        return
    if not s.merger_dim:
        _fail("merger_dim", 0, f"a positive width when merge_size is {m} (the merger's output, Qwen's "
              "out_hidden_size)")
    if s.batching == "fixed":
        _fail("merge_size", m, "1 when batching is 'fixed' (the merger reads each image's own grid of a "
              "naflex or packed batch; one fixed-size image is a naflex batch of one)")
    if s.max_patches is not None and s.max_patches % (m * m):
        _fail("max_patches", s.max_patches, f"a multiple of merge_size^2 = {m * m} (the padding, too, forms "
              "whole merge units)")
    # The smallest image batching.probe_grids builds is one unit. Not `s.derived` (merged_tokens): it
    # builds every tensor shape, from fields checked only further down, on a spec not yet valid.
    if min(rows, cols) < m:
        _fail("merge_size", m, f"at most {min(rows, cols)}, the shorter side of the {rows} x {cols} patch "
              "grid of image_height x image_width (every image holds one merge unit at least)")
    if s.max_patches < s.pack_images * m * m:  # an int: batching 'fixed' is refused above
        _fail("max_patches", s.max_patches, f"at least pack_images * merge_size^2 = {s.pack_images * m * m} "
              f"(one merge unit for each of the {s.pack_images} images of a sequence)")
    if s.class_token or s.distill_token or s.registers:
        _fail("merge_size", m,
              "1 with class, distillation or register tokens (no library merges a prefix token)")
    if s.pooling != "mean":
        _fail("pooling", s.pooling, f"'mean' when merge_size is {m} (each image's merged tokens averaged)")
    _validate_deepstack(s)


def _validate_deepstack(s: ModelSpec) -> None:
    """Qwen3-VL's deepstack mergers: block indices, each once, in order, beside a patch merger."""
    blocks = s.deepstack_blocks
    if not isinstance(blocks, tuple) or any(not is_integer(i) or not 0 <= i < s.depth for i in blocks) \
            or list(blocks) != sorted(set(blocks)):
        _fail("deepstack_blocks", blocks,
              f"block indices from 0 to {s.depth - 1} (depth - 1), each once, in order")


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


def norm_places(s: ModelSpec) -> dict[str, bool]:
    """Each place but the blocks (NORM_EPS_FIELDS) -> whether a norm stands there."""
    return {"patch": s.patch_norm_in or s.patch_norm_out, "pre": s.norm_before_blocks, "qk": s.qk_norm,
            "final": s.final_norm != "none", "merger": s.merge_size > 1, "pool": s.pooling == "map"}


def _validate_norm_eps(s: ModelSpec) -> None:
    """Each place's own epsilon: a positive number, and only where a norm stands (null elsewhere, as
    the rotary fields without rope), so a value never sits in a spec without effect."""
    present = norm_places(s)
    for place, name in NORM_EPS_FIELDS.items():
        value = getattr(s, name)
        if value is None:
            continue
        if not is_number(value) or value <= 0:
            _fail(name, value, "a finite number > 0, or null (layer_norm_eps)")
        if not present[place]:
            _fail(name, value, f"null: the spec has no {place} norm")


def _validate_bias_free(s: ModelSpec) -> None:
    """Named projections without a bias: each one that exists, once, in BIAS_FREE's order, and one
    spelling per function (no q/k/v bias at all is qkv_bias false)."""
    names = s.bias_free
    if not isinstance(names, tuple) or any(n not in BIAS_FREE for n in names):
        _fail("bias_free", names, f"a list of projections from: {', '.join(BIAS_FREE)}")
    if list(names) != sorted(set(names), key=BIAS_FREE.index):
        _fail("bias_free", names, f"each name once, in the order {', '.join(BIAS_FREE)}")
    parts = [n for n in names if n in QKV_PARTS]
    if parts and not s.qkv_bias:
        _fail("bias_free", names, f"no {', '.join(parts)} when qkv_bias is false (q, k and v have no bias "
              "already)")
    if len(parts) == len(QKV_PARTS):
        _fail("bias_free", names, "at most two of attn.query, attn.key, attn.value (none of the three with a "
              "bias is qkv_bias false)")
    if "mlp.gate" in names and s.mlp != "gated":
        _fail("bias_free", names, "no mlp.gate unless mlp is 'gated' (a standard MLP has no gate)")
    if "head.out" in names and (not s.num_classes or s.distill_token):
        _fail("bias_free", names, "no head.out when num_classes is 0 (no classifier) or with distill_token "
              "(no library drops the bias of one of its two heads)")


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
        defaults = {"rope_theta": 10_000.0, "rope_coords": "index", "rope_ref_grid": (),
                    "rope_bands": "shared", "rope_axes": "rows_first"}
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


# ---- the canonical tensors ----------------------------------------------------------------
# Names and shapes in a fixed order, and which group each counts in: derived once here (through
# `ModelSpec.derived`), never in a port; every weight file, mapping table and parameter count
# starts from this list. Layouts are documented in weights.py.
def patch_grid(s: ModelSpec) -> tuple[int, int]:
    """(rows, cols) of patches: whole patches only under `drop`, the padded image's under `pad`."""
    if s.remainder == "drop":
        return s.image_height // s.patch_height, s.image_width // s.patch_width
    return math.ceil(s.image_height / s.patch_height), math.ceil(s.image_width / s.patch_width)


def norm_eps(s: ModelSpec) -> dict[str, float]:
    """Each place's norm epsilon: its own field where set, layer_norm_eps otherwise."""
    own = {place: getattr(s, name) for place, name in NORM_EPS_FIELDS.items()}
    return {place: s.layer_norm_eps if own.get(place) is None else own[place] for place in NORM_PLACES}


def projection_biases(s: ModelSpec, where: str) -> dict[str, bool]:
    """Whether each projection has a bias, by its BIAS_FREE name, in the blocks ('blocks') or the map
    pool ('pool': q, k and v by pool_qkv_bias, its output and MLP always, as big_vision and timm)."""
    if where == "pool":
        return {name: name not in QKV_PARTS or s.pool_qkv_bias for name in BIAS_FREE}
    return s.derived.has_bias


def positioned_prefix(s: ModelSpec) -> int:
    """Prefix tokens that get a row of the position table (the class and distillation tokens with
    `pos_embed_class_row`, the registers with `pos_embed_register_rows`)."""
    rows = int(s.class_token) + int(s.distill_token) if s.pos_embed_class_row else 0
    return rows + (s.registers if s.pos_embed_register_rows else 0)


def canonical_shapes(
    s: ModelSpec, *, num_patches: int, pos_total: int, pooled: int, merge_unit: int
) -> dict[str, tuple[int, ...]]:
    """Canonical tensor names and shapes, in a fixed order. Layouts (documented in weights.py):
    dense kernels (in, out); patch kernel (ph, pw, C, D) = HWIO; q/k/v kernels (D, H, hd) and
    biases (H, hd); attention output kernel (H, hd, D); LayerNorm `scale`/`bias` (D,), RMSNorm
    `scale` (D,)."""
    d = s.dim
    out: dict[str, tuple[int, ...]] = {}
    features = s.patch_height * s.patch_width * s.channels
    if s.patch_norm_in:
        out |= _norm(s, "patch_norm_in", features)
    frames = (s.temporal_patch_size,) if s.temporal_patch_size > 1 else ()  # Qwen's Conv3d: (T, ph, pw, C, D)
    out["patch_embed.kernel"] = (*frames, s.patch_height, s.patch_width, s.channels, d)
    if s.patch_bias:
        out["patch_embed.bias"] = (d,)
    if s.patch_norm_out:
        out |= _norm(s, "patch_norm_out", d)
    if s.class_token:
        out["cls_token"] = (d,)
    if s.distill_token:
        out["dist_token"] = (d,)
    if s.registers:
        out["reg_tokens"] = (s.registers, d)
    if s.pos_embed == "learned":
        out["pos_embed"] = (pos_total, d)
    if s.norm_before_blocks:
        out |= _norm(s, "norm_pre", d)
    for i in range(s.depth):
        p = f"blocks.{i}."
        out |= _norm(s, p + "norm1", d)
        out |= _attention(s, p + "attn.", s.qkv_bias, s.bias_free, kv_heads(s))
        if s.qk_norm:
            out |= _norm(s, p + "attn.q_norm", s.head_dim) | _norm(s, p + "attn.k_norm", s.head_dim)
        if s.layer_scale:
            out[p + "ls1.gamma"] = (d,)
        out |= _norm(s, p + "norm2", d)
        if s.mlp == "gated":
            out |= _linear(p + "mlp.gate", d, s.mlp_dim, "mlp.gate" not in s.bias_free)
        out |= _mlp(s, p + "mlp.", s.bias_free)
        if s.layer_scale:
            out[p + "ls2.gamma"] = (d,)
    if s.final_norm != "none":
        out |= _norm(s, "final_norm", pooled if s.final_norm == "pooled" else d)
    if s.merge_size > 1:  # Qwen's patch merger: a norm on each token, then fc1 and fc2 over merge units
        out |= _merger(s, "merger", d, merge_unit)
    for j in range(len(s.deepstack_blocks)):  # Qwen3-VL's: the norm on each unit's concatenated tokens
        out |= _merger(s, f"deepstack.{j}", merge_unit, merge_unit)
    if s.pooling == "map":  # after the final norm: big_vision and timm pool the normed tokens
        out["pool.probe"] = (d,)
        out |= _attention(s, "pool.attn.", s.pool_qkv_bias, (), s.heads)  # the pool's k/v: every head
        out |= _norm(s, "pool.norm", d) | _mlp(s, "pool.mlp.", ())
    width = pooled
    for j, hidden in enumerate(s.head_hidden):
        out[f"head.hidden.{j}.kernel"] = (width, hidden)
        out[f"head.hidden.{j}.bias"] = (hidden,)
        width = hidden
    if s.num_classes:
        out |= _linear("head.out", width, s.num_classes, "head.out" not in s.bias_free)
    if s.distill_token and s.num_classes:
        out["head_dist.out.kernel"] = (d, s.num_classes)
        out["head_dist.out.bias"] = (s.num_classes,)
    return out


def kv_heads(s: ModelSpec) -> int:
    """The blocks' key/value heads: kv_heads, or every head (null)."""
    return s.heads if s.kv_heads is None else s.kv_heads


def _norm(s: ModelSpec, prefix: str, width: int) -> dict[str, tuple[int, ...]]:
    """A norm's tensors: LayerNorm's scale and bias, RMSNorm's scale alone."""
    if s.norm_type == "rms_norm":
        return {prefix + ".scale": (width,)}
    return {prefix + ".scale": (width,), prefix + ".bias": (width,)}


def _merger(s: ModelSpec, name: str, norm_width: int, unit: int) -> dict[str, tuple[int, ...]]:
    """A patch merger's tensors: its norm (on each token, or on each unit's concatenated tokens),
    then fc1 and fc2 over merge units (`unit` wide)."""
    return (_norm(s, f"{name}.norm", norm_width) | _linear(f"{name}.fc1", unit, unit, True)
            | _linear(f"{name}.fc2", unit, s.merger_dim, True))


def _attention(s: ModelSpec, p: str, bias: bool, bias_free: tuple[str, ...],
               kv: int) -> dict[str, tuple[int, ...]]:
    """q, k, v (a bias each with `bias`, but those bias_free names; k and v with `kv` heads) and
    the output projection."""
    out: dict[str, tuple[int, ...]] = {}
    for proj in ("query", "key", "value"):
        heads = s.heads if proj == "query" else kv
        out[p + f"{proj}.kernel"] = (s.dim, heads, s.head_dim)
        if bias and f"attn.{proj}" not in bias_free:
            out[p + f"{proj}.bias"] = (heads, s.head_dim)
    out[p + "out.kernel"] = (s.heads, s.head_dim, s.dim)
    if "attn.out" not in bias_free:
        out[p + "out.bias"] = (s.dim,)
    return out


def _mlp(s: ModelSpec, p: str, bias_free: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    return (_linear(p + "fc1", s.dim, s.mlp_dim, "mlp.fc1" not in bias_free)
            | _linear(p + "fc2", s.mlp_dim, s.dim, "mlp.fc2" not in bias_free))


def _linear(name: str, width_in: int, width_out: int, bias: bool) -> dict[str, tuple[int, ...]]:
    """A dense layer's (in, out) kernel, and its bias unless the spec drops it."""
    return {name + ".kernel": (width_in, width_out)} | ({name + ".bias": (width_out,)} if bias else {})


def param_group(name: str) -> str:
    """The parameter group a canonical tensor counts in (`compare.py spec`, the parameter table)."""
    if name.startswith("blocks."):
        part = name.split(".")[2]
        groups = {"norm1": "blocks.norms", "norm2": "blocks.norms", "ls1": "blocks.layer_scale",
                  "ls2": "blocks.layer_scale"}
        return groups.get(part, f"blocks.{part}")
    return name.split(".")[0]
