"""Pieces every checkpoint library shares: turning what a checkpoint (and its config) says into a
`ModelSpec`, and refusing on export what a library cannot express.

A library's plug-in (shared/checkpoints/libraries/) supplies
`infer(raw, config, given) -> Inference` (what the tensors and config fix, the library's own
conventions, and what must be asked) and `table(fmt, spec)`: its names as a
`shared.core.mapping.Table`, from which both directions and the refusal of missing, unused and
misshapen tensors are derived, so each mapping is written once.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from shared.checkpoints.tensor_files import Raw
from shared.core.spec import NORM_EPS_FIELDS, ModelSpec
from shared.errors import SpecError, WeightsError


# ---- from checkpoint facts to a spec -----------------------------------------------------
@dataclass
class Inference:
    """What a checkpoint says about the spec.

    facts: fixed by the tensors or config (field -> (value, evidence)); a user value that
        disagrees is an error naming the evidence.
    conventions: the library's own settings, not stored in the checkpoint (timm's LayerNorm
        eps 1e-6, exact GELU); applied without asking, but an explicit user value wins.
    asks: fields nothing in the checkpoint determines (field -> hint); the user must give them.
    notes: one-line remarks for the user (how a field was inferred).
    """

    fmt: str
    facts: dict[str, tuple[Any, str]] = field(default_factory=dict)
    conventions: dict[str, tuple[Any, str]] = field(default_factory=dict)
    asks: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def fact(self, name: str, value: Any, evidence: str) -> None:
        self.facts[name] = (value, evidence)

    def convention(self, name: str, value: Any, why: str) -> None:
        self.conventions[name] = (value, why)

    def need(self, raw: Raw, name: str, why: str = "") -> np.ndarray:
        """A tensor inference reads: its absence is one line, before any mapping is tried."""
        if name not in raw:
            raise WeightsError(f"{self.fmt} checkpoint: tensor {name!r} is missing{why}")
        return raw[name]


def asks_another_grid(given: dict[str, Any], grid: tuple[int, int], patch: tuple[int, int]) -> bool:
    """Whether the user's `--set image_height=.. image_width=..` is an image of another patch grid
    than the checkpoint's table: the table is then kept and resampled (`resampled_table`)."""
    return {"image_height", "image_width"} <= set(given) and \
        (given["image_height"] // patch[0], given["image_width"] // patch[1]) != grid


def resampled_table(inf: Inference, grid: tuple[int, int], evidence: str, method: str, why: str) -> None:
    """The image asked for (`--set image_height=.. image_width=..`) has another patch grid than the
    checkpoint's table: the table is kept as it is, as the source grid, and resampled to the image's
    by the library's own default method (a convention: printed, and `--set pos_resample=..` wins)."""
    inf.fact("pos_grid_height", grid[0], evidence)
    inf.fact("pos_grid_width", grid[1], evidence)
    inf.convention("pos_resample", method, why)
    inf.notes.append(f"position table kept at its {grid[0]}x{grid[1]} grid ({evidence}), resampled to the "
                     "image's in every forward pass")


def naflex_table(inf: Inference, given: dict[str, Any], grid: tuple[int, int], patch: tuple[int, int],
                 evidence: str, method: str, why: str) -> None:
    """The user asked for a NaFlex batch (`--set batching=naflex`): the table is kept at its own grid
    and resized to each image's in the forward by the library's method (a convention: `--set
    pos_resample=..` wins); each image may take any grid of at most `max_patches` patches (the table's
    own count unless given), so the bounds on its rows and columns are that many patches."""
    inf.fact("pos_grid_height", grid[0], evidence)
    inf.fact("pos_grid_width", grid[1], evidence)
    inf.convention("pos_resample", method, why)
    budget = given.get("max_patches", grid[0] * grid[1])
    inf.convention("max_patches", budget, f"the table's own {grid[0]}x{grid[1]} patches")
    for name, side in (("image_height", patch[0]), ("image_width", patch[1])):
        inf.facts.pop(name, None)  # the table's image: one grid of the batch's many
        inf.convention(name, budget * side, f"any grid of at most max_patches = {budget} patches")
    inf.notes.append(f"position table kept at its {grid[0]}x{grid[1]} grid ({evidence}), resized to each "
                     f"image's grid by {method} in every forward pass")


def parse_given(base: ModelSpec | None, assignments: list[str] | None) -> dict[str, Any]:
    """The fields the user stated: every field of `--spec` (if given), then `--set` values,
    typed as the spec types them."""
    given: dict[str, Any] = asdict(base) if base is not None else {}
    given.update(ModelSpec.parse_assignments(assignments or []))
    return given


def resolve_spec(inference: Inference, given: dict[str, Any], name: str) -> ModelSpec:
    """facts + conventions + the user's fields -> a validated spec, or a one-line error."""
    missing = [f for f in inference.asks if f not in given]
    if missing:
        f = missing[0]
        raise SpecError(f"{inference.fmt} checkpoint does not record spec field {f!r}: pass "
                        f"--set {f}=VALUE ({inference.asks[f]})")
    values: dict[str, Any] = {k: v for k, (v, _) in inference.conventions.items()}
    values.update(given)
    for f, (value, evidence) in inference.facts.items():
        if f in given and not _same(given[f], value):
            raise SpecError(f"spec field {f}={given[f]!r} contradicts the {inference.fmt} "
                            f"checkpoint: {evidence} gives {f}={value!r}")
        values[f] = value
    values.setdefault("name", name)
    return ModelSpec.from_dict(values)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and float(a) == float(b)
    return a == b


def width_per_head(fmt: str, width: int, width_source: str, heads: Any, heads_source: str) -> int:
    """torch-style attention: head width = width / heads, which must divide exactly."""
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise SpecError(f"{heads_source} = {heads!r}: expected a positive integer head count")
    if width % heads:
        raise SpecError(f"{heads_source} = {heads} does not divide the width {width} of "
                        f"{width_source} ({fmt} uses head width = width / heads)")
    return width // heads


def square_grid(tokens: int) -> int | None:
    """The side of a square grid of `tokens` (None: not a square, or no tokens at all)."""
    if tokens < 1:
        return None
    side = round(tokens**0.5)
    return side if side * side == tokens else None


# ---- exporting ---------------------------------------------------------------------------
def require(condition: bool, target: str, field_name: str, value: Any, expected: str) -> None:
    """An exporter's refusal: the spec sets something the target library cannot express."""
    if not condition:
        raise SpecError(f"cannot export to {target}: spec field {field_name}={value!r}; {target} "
                        f"needs {expected}")


def require_plain_blocks(target: str, s: ModelSpec, rope: bool = False, bias_free: bool = False,
                         rms_norm: bool = False, own_eps: tuple[str, ...] = (),
                         alternating: bool = False, cols_first: bool = False) -> None:
    """What every library here builds: every position row used, at the image's own grid, pre-norm
    blocks with head width = width / heads, no hidden head layers, and patches cut by a valid conv;
    no rotary embeddings unless the target builds them (`rope`; Pixtral's alternating bands where it
    builds those: `alternating`, Transformers' Pixtral; the columns' angles first where it can put
    them there: `cols_first`, timm's rope_grid_indexing='xy'), every projection with its bias
    unless the target can leave one out (`bias_free`: Transformers' DINOv3, timm's proj_bias), only
    LayerNorms unless it builds RMSNorm (`rms_norm`: timm, Transformers' AIMv2 and InternVL), and
    one epsilon for every norm but those places (NORM_PLACES) whose norm it builds with its own
    (`own_eps`: timm's embed_norm_layer)."""
    d = s.derived
    require(rope or s.rope == "none", target, "rope", s.rope, "none (no rotary position embeddings)")
    require(alternating or s.rope_bands == "shared", target, "rope_bands", s.rope_bands, "shared (the same "
            "head_dim / 4 frequency bands on both axes; Pixtral's alternating ones: Transformers' Pixtral)")
    require(cols_first or s.rope_axes == "rows_first", target, "rope_axes", s.rope_axes, "rows_first (each "
            "head's first angles from the rows; the columns first: timm's Eva, rope_grid_indexing='xy')")
    require(d.pos_rows_unused == 0, target, "pos_rows", s.pos_rows, "exactly the rows it uses")
    require(s.pos_resample == "none", target, "pos_resample", s.pos_resample,
            "none (a table at the image's own grid; exporting a resampled one is not built yet)")
    require(s.norm == "pre", target, "norm", s.norm, "pre")
    require(not s.head_hidden, target, "head_hidden", s.head_hidden, "no hidden head layers")
    require(d.attn_inner == s.dim, target, "head_dim", s.head_dim, f"dim / heads = {s.dim / s.heads:g}")
    require(s.remainder == "drop" or (d.rows_padded, d.cols_padded) == (0, 0), target, "remainder",
            s.remainder, "drop (a valid conv) unless the patches tile the image")
    require(rms_norm or s.norm_type == "layer_norm", target, "norm_type", s.norm_type,
            "layer_norm (no RMSNorm)")
    require(bias_free or not s.bias_free, target, "bias_free", s.bias_free,
            "none (each projection it builds has its bias)")
    require(d.kv_heads == s.heads, target, "kv_heads", s.kv_heads,
            f"null or heads = {s.heads} (no grouped-query attention)")
    for place, field_name in NORM_EPS_FIELDS.items():  # one epsilon for every norm but `own_eps`'
        value = getattr(s, field_name)
        but = f" but the {', '.join(own_eps)} norm" if own_eps else ""
        require(place in own_eps or value is None or value == s.layer_norm_eps, target, field_name, value,
                f"null or layer_norm_eps ({s.layer_norm_eps:g}): one epsilon for every norm{but}")


# Spec fields a ViT of the 2020 design has at their default: a library without the feature
# needs each of them there.
LATER_FEATURES = ("patch_norm_in", "patch_norm_out", "distill_token", "registers", "norm_before_blocks",
                  "qk_norm", "layer_scale")


def require_defaults(target: str, s: ModelSpec) -> None:
    """An exporter's refusal of every later feature (the target library builds none of them)."""
    for name in LATER_FEATURES:
        require(not getattr(s, name), target, name, getattr(s, name), "none (it has no such feature)")
    require(s.mlp == "standard", target, "mlp", s.mlp, "standard (no gated MLP)")
    require(s.patch_bias, target, "patch_bias", s.patch_bias, "true (its patch projection has a bias)")


def require_class_token_readout(target: str, s: ModelSpec) -> None:
    """torchvision's and Hugging Face's ViT: the class token is read out after a final norm on
    the tokens, and the learned position table has its row."""
    require(s.class_token and s.pooling == "cls", target, "pooling", s.pooling, "a class token, pooled")
    require(s.pos_embed == "learned" and s.pos_embed_class_row, target, "pos_embed", s.pos_embed,
            "a learned table with a class row")
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens")


def swiglu_width(width: int) -> int:
    """Dinov2SwiGLUFFN's hidden width (keras-hub's DINOV2SwiGLUFFN's too): two thirds of the
    configured `width`, rounded up to a multiple of 8."""
    return (int(width * 2 / 3) + 7) // 8 * 8


def spelled(names: dict[str, str]) -> dict[str, str]:
    """A plug-in's reading table (the library's name -> the spec's value) turned round for
    writing: each spec value spelled as the first library name that reads as it, so a library's
    names are one table, read in both directions."""
    written: dict[str, str] = {}
    for name, value in names.items():
        written.setdefault(value, name)
    return written
