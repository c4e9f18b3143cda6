"""Lessons: the four ports' own source (torch, Keras, Flax, MLX), side by side, for each place the
frameworks differ, with the catalogue's measured gap and pin.

The code shown is extracted from ports/<fw>/*.py when the command runs
(`shared.teaching.port_source`), so a lesson cannot drift from the ports.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from shared.teaching.framework_defaults import FRAMEWORKS
from shared.teaching.port_source import Excerpt, Select


@dataclass(frozen=True)
class Lesson:
    name: str
    entry: str  # shared/teaching/divergences.py key: the gap and the pin come from there
    point: str  # what to look at in the code
    selects: tuple[Select, ...]


LESSONS: tuple[Lesson, ...] = (
    Lesson("layer_norm_eps", "layer_norm_eps", "each port passes the spec's epsilon; none keeps its own",
           (Select(unit="layer_norm"),)),
    Lesson("layer_norm_variance", "layer_norm_variance", "Flax alone needs use_fast_variance=False",
           (Select(unit="layer_norm"),)),
    Lesson("gelu", "gelu", "the GELU form is passed explicitly in every port",
           (Select(unit="activation"),)),
    Lesson("head_width", "head_width", "torch/Flax/MLX take the total width, Keras the per-head width",
           (Select(unit="Attention.__init__"),)),
    Lesson("attention_scale", "attention_scale", "the scale is 1/sqrt(head width) in every port",
           (Select(unit="Attention.call", contains=("scale",)),
            Select(unit="Attention.explicit", contains=("scale",))),),
    Lesson("batch_first", "batch_first", "why torch does not use nn.MultiheadAttention",
           (Select(unit="Attention", docstring=True),)),
    Lesson("remainder", "remainder", "padding is explicit; the conv itself is 'valid'",
           (Select(unit="PatchEmbed.__init__"),)),
    Lesson("patch_layout", "patch_layout", "torch alone converts NHWC to NCHW",
           (Select(unit="Port.prepare"),)),
    Lesson("conv_kernel_layout", "conv_kernel_layout", "HWIO is copied as is, or transposed for torch",
           (Select(file="transfer.py", contains=("patch_embed.kernel", "patch_embed.proj")),)),
    Lesson("dense_kernel_layout", "dense_kernel_layout", "(in, out) kernels; torch transposes",
           (Select(file="transfer.py", contains=("mlp.{fc}", "mlp.{name}", "fc1", "fc2")),)),
    Lesson("norm_placement", "norm_placement", "pre- and post-norm are both written out",
           (Select(unit="Block.call"),)),
    Lesson("pooling", "pooling", "readout and final norm follow the spec",
           (Select(fields=("pooling", "final_norm"), file="model.py"),)),
    Lesson("pos_table_rows", "pos_table_rows", "only the first pos_rows_used rows are added",
           (Select(unit="VisionTransformer.positions"),)),
    Lesson("dropout_flags", "dropout_flags", "dropout runs only when train=True",
           (Select(unit="Port.forward"),)),
    Lesson("cpu_precision", "cpu_precision", "each port pins full float32 matmuls",
           (Select(unit="pin_precision"),)),
    Lesson("cross_entropy", "cross_entropy", "mean CE from logits in every port",
           (Select(unit="Port.loss_and_gradients", contains=("cross_entropy", "from_logits", "mean",
                                                             "CrossEntropy", "optax.")),)),
    Lesson("attention_bias", "attention_bias", "every port passes the spec's qkv_bias; MLX's default is none",
           (Select(unit="Attention.__init__"),)),
    Lesson("gelu_names", "gelu_names", "four spellings of the same two forms; MLX's 'fast' is neither",
           (Select(unit="activation"),)),
    # the newer families' parts
    Lesson("layer_scale", "layer_scale", "the gammas are parameters every port maps and loads",
           (Select(unit="LayerScale"), Select(file="transfer.py", contains=("ls1", "ls{", ".gamma")))),
    Lesson("pool_qkv_bias", "pool_qkv_bias", "the pool's attention takes the spec's pool_qkv_bias",
           (Select(unit="AttentionPool.__init__"),)),
    Lesson("quick_gelu", "quick_gelu", "QuickGELU is written out, x * sigmoid(1.702 x), in every port",
           (Select(unit="QuickGELU"),)),
    Lesson("swiglu", "swiglu", "the gate is its own layer, and the activated one",
           (Select(unit="Mlp.call"),)),
    Lesson("register_pooling", "register_pooling", "mean pooling skips every prefix token",
           (Select(unit="VisionTransformer.call", contains=("prefix_tokens",)),)),
    Lesson("register_positions", "register_positions", "zero rows for the prefix tokens the table skips",
           (Select(unit="VisionTransformer.positions"),)),
    Lesson("distilled_heads", "distilled_heads", "the logits are the mean of both heads",
           (Select(unit="VisionTransformer.call", contains=("head_dist",)),)),
    # positions at another resolution and 2-D RoPE (issue 23): the tables come from shared/core
    Lesson("pos_resample", "pos_resample", "the rows added are the table's, resampled as the spec names",
           (Select(unit="VisionTransformer.positions"),)),
    Lesson("rope_layout", "rope_layout", "one formula, x * cos + x[partner] * sin: the partner is the layout",
           (Select(unit="Rotary"),)),
    Lesson("rope_prefix", "rope_prefix", "the prefix rows of the table are cos 1, sin 0",
           (Select(unit="Rotary", docstring=True),)),
)


@dataclass
class LessonView:
    lesson: Lesson
    code: dict[str, list[Excerpt]]
    title: str
    pin: str
    gap: float | None = None
    measurements: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"name": self.lesson.name, "entry": self.lesson.entry, "title": self.title,
                "point": self.lesson.point, "pin": self.pin, "gap": self.gap,
                "measurements": self.measurements,
                "code": {fw: [e.to_dict() for e in ex] for fw, ex in self.code.items()}}


def lesson(name: str) -> Lesson:
    for item in LESSONS:
        if item.name == name:
            return item
    raise KeyError(name)


def build_view(item: Lesson, measure: bool = True) -> LessonView:
    from shared.teaching.divergences import entry

    catalogue = entry(item.entry)
    code = {fw: [e for s in item.selects for e in s.extract(fw)] for fw in FRAMEWORKS}
    view = LessonView(item, code, catalogue.title, catalogue.pin)
    if measure:
        demo = catalogue.run_demo()
        view.gap, view.measurements = demo.gap, demo.lines
    return view


def side_by_side(code: dict[str, list[Excerpt]], width: int = 180) -> list[str]:
    """One column per framework; long lines wrap inside their column."""
    column = max(30, (width - 2 * 3) // len(code))
    blocks: dict[str, list[str]] = {}
    for fw, excerpts in code.items():
        lines: list[str] = [f"{fw}"]
        for ex in excerpts:
            lines.append(f"# ports/{fw}/{ex.file}:{ex.start} {ex.qualname}")
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
