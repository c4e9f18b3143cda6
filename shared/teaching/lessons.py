"""Lessons: the four ports' own source (torch, Keras, Flax, MLX), side by side, for each place the
frameworks differ, with the catalogue's measured gap and pin; where the libraries people port
from disagree (issue 23's positions), each library's own code beside them.

The code shown is extracted when the command runs, from ports/<fw>/*.py
(`shared.teaching.port_source`) and from the installed libraries' files
(`shared.teaching.library_source`), so a lesson cannot drift from either.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shared.teaching.framework_defaults import FRAMEWORKS
from shared.teaching.library_source import LibraryExcerpt, LibrarySelect, library_label
from shared.teaching.port_source import Excerpt, Select


@dataclass(frozen=True)
class Lesson:
    name: str  # its catalogue entry (shared/teaching/divergences.py): the gap and the pin come from there
    point: str  # what to look at in the code
    selects: tuple[Select, ...]
    library: tuple[LibrarySelect, ...] = ()  # the libraries' own code, in the order shown


# The libraries' functions the issue-23 lessons show (shared/teaching/library_source.py reads them).
TIMM_RESAMPLE = LibrarySelect("timm", "timm.layers.pos_embed", "resample_abs_pos_embed")
HF_VIT_RESAMPLE = LibrarySelect("transformers", "transformers.models.vit.modeling_vit",
                                "ViTEmbeddings.interpolate_pos_encoding")
HF_DINOV2_RESAMPLE = LibrarySelect("transformers", "transformers.models.dinov2.modeling_dinov2",
                                   "Dinov2Embeddings.interpolate_pos_encoding")
BIG_VISION_RESAMPLE = LibrarySelect("big_vision", "big_vision.models.vit", "resample_posemb",
                                    calls="scipy.ndimage.zoom(..., order=1)")
DINOV2_RESAMPLE = LibrarySelect("dinov2", "dinov2.models.vision_transformer",
                                "DinoVisionTransformer.interpolate_pos_encoding",
                                calls="F.interpolate with scale_factor (out + 0.1) / in")
TIMM_SINCOS = "timm.layers.pos_embed_sincos"
HF_DINOV3 = "transformers.models.dinov3_vit.modeling_dinov3_vit"
TIMM_ROTATE = tuple(LibrarySelect("timm", TIMM_SINCOS, unit)
                    for unit in ("rot", "rope_rotate_half", "apply_rot_embed", "apply_rot_embed_cat"))
HF_DINOV3_ROTATE = (LibrarySelect("transformers", HF_DINOV3, "rotate_half"),
                    LibrarySelect("transformers", HF_DINOV3, "apply_rotary_pos_emb"))


LESSONS: tuple[Lesson, ...] = (
    Lesson("layer_norm_eps", "each port passes the spec's epsilon; none keeps its own",
           (Select(unit="layer_norm"),)),
    Lesson("layer_norm_variance", "Flax alone needs use_fast_variance=False",
           (Select(unit="layer_norm"),)),
    Lesson("gelu", "the GELU form is passed explicitly in every port",
           (Select(unit="activation"),)),
    Lesson("head_width", "torch/Flax/MLX take the total width, Keras the per-head width",
           (Select(unit="Attention.__init__"),)),
    Lesson("attention_scale", "the scale is 1/sqrt(head width) in every port",
           (Select(unit="Attention.call", contains=("scale",)),
            Select(unit="Attention.explicit", contains=("scale",))),),
    Lesson("batch_first", "why torch does not use nn.MultiheadAttention",
           (Select(unit="Attention", docstring=True),)),
    Lesson("remainder", "padding is explicit; the conv itself is 'valid'",
           (Select(unit="PatchEmbed.__init__"),)),
    Lesson("patch_layout", "torch alone converts NHWC to NCHW",
           (Select(unit="Port.prepare"),)),
    Lesson("conv_kernel_layout", "HWIO is copied as is, or transposed for torch",
           (Select(file="transfer.py", contains=("patch_embed.kernel", "patch_embed.proj")),)),
    Lesson("dense_kernel_layout", "(in, out) kernels; torch transposes",
           (Select(file="transfer.py", contains=("mlp.{fc}", "mlp.{name}", "fc1", "fc2")),)),
    Lesson("norm_placement", "pre- and post-norm are both written out",
           (Select(unit="Block.call"),)),
    Lesson("pooling", "readout and final norm follow the spec",
           (Select(fields=("pooling", "final_norm"), file="model.py"),)),
    Lesson("pos_table_rows", "only the first pos_rows_used rows are added",
           (Select(unit="VisionTransformer.positions"),)),
    Lesson("dropout_flags", "dropout runs only when train=True",
           (Select(unit="Port.forward"),)),
    Lesson("cpu_precision", "each port pins full float32 matmuls",
           (Select(unit="pin_precision"),)),
    Lesson("cross_entropy", "mean CE from logits in every port",
           (Select(unit="Port.loss_and_gradients", contains=("cross_entropy", "from_logits", "mean",
                                                             "CrossEntropy", "optax.")),)),
    Lesson("attention_bias", "every port passes the spec's qkv_bias; MLX's default is none",
           (Select(unit="Attention.__init__"),)),
    Lesson("gelu_names", "four spellings of the same two forms; MLX's 'fast' is neither",
           (Select(unit="activation"),)),
    # the newer families' parts
    Lesson("layer_scale", "the gammas are parameters every port maps and loads",
           (Select(unit="LayerScale"), Select(file="transfer.py", contains=("ls1", "ls{", ".gamma")))),
    Lesson("pool_qkv_bias", "the pool's attention takes the spec's pool_qkv_bias",
           (Select(unit="AttentionPool.__init__"),)),
    Lesson("quick_gelu", "QuickGELU is written out, x * sigmoid(1.702 x), in every port",
           (Select(unit="QuickGELU"),)),
    Lesson("swiglu", "the gate is its own layer, and the activated one",
           (Select(unit="Mlp.call"),)),
    Lesson("register_pooling", "mean pooling skips every prefix token",
           (Select(unit="VisionTransformer.call", contains=("prefix_tokens",)),)),
    Lesson("register_positions", "zero rows for the prefix tokens the table skips",
           (Select(unit="VisionTransformer.positions"),)),
    Lesson("distilled_heads", "the logits are the mean of both heads",
           (Select(unit="VisionTransformer.call", contains=("head_dist",)),)),
    # positions at another resolution and 2-D RoPE (issue 23): the tables come from shared/core
    Lesson("pos_resample", "the rows added are the table's, resampled as the spec names",
           (Select(unit="VisionTransformer.positions"),),
           (TIMM_RESAMPLE, HF_VIT_RESAMPLE, BIG_VISION_RESAMPLE)),
    Lesson("pos_resample_antialias",
           "timm passes antialias=True by default, Transformers none: each port names it per method",
           (Select(unit="resample_positions"),), (TIMM_RESAMPLE, HF_VIT_RESAMPLE)),
    Lesson("pos_resample_offset",
           "Transformers' Dinov2 passes the size; DINOv2's own code a scale factor with +0.1",
           (Select(unit="resample_positions"),), (HF_DINOV2_RESAMPLE, DINOV2_RESAMPLE, TIMM_RESAMPLE)),
    Lesson("rope_layout", "one formula, x * cos + x[partner] * sin: the partner is the layout",
           (Select(unit="Rotary"),), (*TIMM_ROTATE, *HF_DINOV3_ROTATE)),
    Lesson("rope_coords", "the ports take their angles from shared/core/rotary.py; timm "
           "rotates by patch indices, DINOv3 by centres in [-1, 1]",
           (Select(unit="Rotary.__init__"),),
           (LibrarySelect("timm", TIMM_SINCOS, "_build_grid"),
            LibrarySelect("timm", TIMM_SINCOS, "RotaryEmbeddingCat.get_embed"),
            LibrarySelect("transformers", HF_DINOV3, "get_patches_center_coordinates"),
            LibrarySelect("transformers", HF_DINOV3, "DINOv3ViTRopePositionEmbedding.forward"))),
    Lesson("rope_prefix", "the prefix rows of the table are cos 1, sin 0",
           (Select(unit="Rotary", docstring=True),),
           (LibrarySelect("timm", "timm.models.eva", "EvaAttention.forward"),
            LibrarySelect("timm", TIMM_SINCOS, "apply_rot_embed_cat"),
            LibrarySelect("transformers", HF_DINOV3, "apply_rotary_pos_emb"))),
)


@dataclass
class LessonView:
    lesson: Lesson
    code: dict[str, list[Excerpt]]
    library_code: dict[str, list[LibraryExcerpt]]  # by library, in the lesson's order
    title: str
    pin: str
    gap: float | None = None
    measurements: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"name": self.lesson.name, "entry": self.lesson.name, "title": self.title,
                "point": self.lesson.point, "pin": self.pin, "gap": self.gap,
                "measurements": self.measurements,
                "code": {fw: [e.to_dict() for e in ex] for fw, ex in self.code.items()},
                "library_code": {lib: [e.to_dict() for e in ex] for lib, ex in self.library_code.items()}}


def lesson(name: str) -> Lesson:
    for item in LESSONS:
        if item.name == name:
            return item
    raise KeyError(name)


def build_view(item: Lesson, measure: bool = True) -> LessonView:
    from shared.teaching.divergences import entry

    catalogue = entry(item.name)
    code = {fw: [e for s in item.selects for e in s.extract(fw)] for fw in FRAMEWORKS}
    library_code: dict[str, list[LibraryExcerpt]] = {}
    for select in item.library:
        library_code.setdefault(select.library, []).append(select.extract())
    view = LessonView(item, code, library_code, catalogue.title, catalogue.pin)
    if measure:
        demo = catalogue.run_demo()
        view.gap, view.measurements = demo.gap, demo.lines
    return view


def library_columns(view: LessonView) -> dict[str, list[LibraryExcerpt]]:
    """The libraries' excerpts keyed by their column heading: name and installed version."""
    return {library_label(lib, ex[0].version): ex for lib, ex in view.library_code.items()}


def side_by_side(code: Mapping[str, Sequence[Excerpt | LibraryExcerpt]], width: int = 180) -> list[str]:
    """One column per framework (or library); long lines wrap inside their column."""
    column = max(30, (width - 2 * 3) // len(code))
    blocks: dict[str, list[str]] = {}
    for fw, excerpts in code.items():
        lines: list[str] = [f"{fw}"]
        for ex in excerpts:
            lines += textwrap.wrap(f"# {ex.heading}", column, subsequent_indent="#   ")
            body = textwrap.dedent("\n".join(ex.lines)).splitlines()
            for text in body:
                lines += textwrap.wrap(text, column, subsequent_indent="    ", drop_whitespace=False) or [""]
        if not excerpts:
            lines.append("(nothing found: the ports are no longer parallel here)")
        blocks[fw] = lines
    rows = max(len(b) for b in blocks.values())
    out = []
    for i in range(rows):
        cells = [(blocks[fw][i] if i < len(blocks[fw]) else "").ljust(column)[:column] for fw in blocks]
        out.append(" | ".join(cells).rstrip())
    return out
