"""Lessons and the Rosetta table: the three ports' own source, side by side, for each place the
frameworks differ and for each spec field.

Nothing here is copied text: the code shown is extracted from ports/<fw>/*.py with `ast` when
the command runs (a class, a function, a method, or the lines that read a spec field), so a
lesson cannot drift from the ports. The ports are parallel texts (same file, class and function
names), which is what lets one selector find the same place in all three.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from dataclasses import dataclass, field
from functools import cache

from shared import REPO_ROOT
from shared.core.spec import Derived, ModelSpec
from shared.teaching.framework_defaults import FRAMEWORKS

ROOT = REPO_ROOT
PORT_FILES = ("model.py", "transfer.py", "port.py")
CALL_METHODS = ("forward", "call", "__call__")  # torch / Keras / Flax spelling of "run the layer"


@dataclass(frozen=True)
class Unit:
    """A function, class or method of one port file."""

    framework: str
    file: str
    qualname: str  # "layer_norm", "Attention", "Attention.forward"
    start: int
    end: int
    lines: tuple[str, ...]  # the source lines start..end


@dataclass(frozen=True)
class Excerpt:
    framework: str
    file: str
    qualname: str
    start: int
    lines: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"file": f"ports/{self.framework}/{self.file}", "unit": self.qualname,
                "start_line": self.start, "lines": list(self.lines)}


@cache
def port_units(framework: str) -> tuple[Unit, ...]:
    units: list[Unit] = []
    for name in PORT_FILES:
        path = ROOT / "ports" / framework / name
        if not path.is_file():
            continue
        text = path.read_text()
        source = text.splitlines()
        tree = ast.parse(text)

        def add(node: ast.AST, qualname: str, file: str = name, src: list[str] = source) -> None:
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            units.append(Unit(framework, file, qualname, start, node.end_lineno or node.lineno,
                              tuple(src[start - 1:node.end_lineno])))

        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                add(node, node.name)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        add(item, f"{node.name}.{item.name}")
    return tuple(units)


def find_unit(framework: str, qualname: str) -> Unit | None:
    """`Class.call` matches the framework's own spelling (forward / call / __call__)."""
    names = [qualname]
    if qualname.endswith(".call"):
        cls = qualname.rsplit(".", 1)[0]
        names = [f"{cls}.{m}" for m in CALL_METHODS]
    for unit in port_units(framework):
        if unit.qualname in names:
            return unit
    return None


def _excerpt(unit: Unit, keep: list[int] | None = None) -> Excerpt:
    if keep is None:
        return Excerpt(unit.framework, unit.file, unit.qualname, unit.start, unit.lines)
    lines = tuple(unit.lines[i - unit.start] for i in keep)
    return Excerpt(unit.framework, unit.file, unit.qualname, keep[0], lines)


def _innermost(framework: str, file: str, line: int) -> Unit | None:
    inside = [u for u in port_units(framework) if u.file == file and u.start <= line <= u.end]
    return min(inside, key=lambda u: u.end - u.start, default=None)


# ---- selectors ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Select:
    """Which code a lesson shows: a unit by name, optionally only its lines containing one of
    `contains` (plain text), and/or lines in `file` reading one of the spec `fields`."""

    unit: str | None = None
    contains: tuple[str, ...] = ()
    file: str | None = None
    fields: tuple[str, ...] = ()
    docstring: bool = False  # only the unit's docstring

    def extract(self, framework: str) -> list[Excerpt]:
        if self.docstring and self.unit:
            unit = find_unit(framework, self.unit)
            return [] if unit is None else [_docstring_excerpt(unit)]
        if self.fields:
            return field_excerpts(framework, self.fields, only_file=self.file)
        if self.unit is None:
            if self.file is None or not self.contains:
                return []
            return _text_excerpts(framework, self.file, self.contains)
        unit = find_unit(framework, self.unit)
        if unit is None:
            return []
        if not self.contains:
            return [_excerpt(unit)]
        keep = [unit.start + i for i, line in enumerate(unit.lines) if any(c in line for c in self.contains)]
        return [_excerpt(unit, keep)] if keep else []


def _docstring_excerpt(unit: Unit) -> Excerpt:
    tree = ast.parse(textwrap.dedent("\n".join(unit.lines)))
    node = tree.body[0]
    first = node.body[0] if node.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
        return Excerpt(unit.framework, unit.file, unit.qualname, unit.start, unit.lines[:1])
    start, end = first.lineno - 1, first.end_lineno or first.lineno
    return Excerpt(unit.framework, unit.file, unit.qualname, unit.start + start, unit.lines[start:end])


def _text_excerpts(framework: str, file: str, needles: tuple[str, ...]) -> list[Excerpt]:
    path = ROOT / "ports" / framework / file
    out: dict[str, list[int]] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if any(n in line for n in needles):
            unit = _innermost(framework, file, number)
            out.setdefault(unit.qualname if unit else "<module>", []).append(number)
    result = []
    for qualname, numbers in out.items():
        unit = next(u for u in port_units(framework) if u.qualname == qualname and u.file == file)
        result.append(_excerpt(unit, numbers))
    return result


# ---- spec fields in the ports' source ---------------------------------------------------------
SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(ModelSpec) if f.name != "name")
DERIVED_FIELDS = tuple(f.name for f in dataclasses.fields(Derived))
SPEC_BASES = ("spec", "s", "self.spec", "model.spec")


def _base_text(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - ast.unparse handles every expression node
        return ""


@cache
def _reads(framework: str, file: str) -> tuple[tuple[int, str], ...]:
    """(line, name) for every read of a spec field (spec.x, s.x, self.spec.x) or a derived
    quantity (d.x, spec.derived.x) in one port file."""
    path = ROOT / "ports" / framework / file
    if not path.is_file():
        return ()
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        base = _base_text(node.value)
        if node.attr in SPEC_FIELDS and (base in SPEC_BASES or base.endswith(".spec")):
            out.append((node.lineno, node.attr))
        elif node.attr in DERIVED_FIELDS and (base == "d" or base.endswith("derived")):
            out.append((node.lineno, "derived." + node.attr))
    return tuple(sorted(set(out)))


def field_excerpts(framework: str, names: tuple[str, ...], only_file: str | None = None) -> list[Excerpt]:
    """The lines of each port file that read any of `names` (spec fields or `derived.x`),
    grouped by the innermost function or class around them."""
    out: list[Excerpt] = []
    for file in PORT_FILES:
        if only_file and file != only_file:
            continue
        hits = sorted({line for line, name in _reads(framework, file) if name in names})
        grouped: dict[tuple[str, int], list[int]] = {}
        for line in hits:
            unit = _innermost(framework, file, line)
            key = (unit.qualname, unit.start) if unit else ("<module>", 0)
            grouped.setdefault(key, []).append(line)
        source = (ROOT / "ports" / framework / file).read_text().splitlines()
        for (qualname, _), lines in grouped.items():
            out.append(Excerpt(framework, file, qualname, lines[0], tuple(source[i - 1] for i in lines)))
    return out


def derived_dependencies() -> dict[str, tuple[str, ...]]:
    """spec field -> derived quantities that change when it changes, found by perturbing each
    field of several presets (not typed in: shared/core/spec.py stays the one source)."""
    from shared.core.presets import PRESETS

    deps: dict[str, set[str]] = {name: set() for name in SPEC_FIELDS}
    for preset in PRESETS.values():
        base = preset.spec
        before = base.derived.to_dict()
        for name in SPEC_FIELDS:
            for value in _alternatives(base, name):
                try:
                    after = base.replace(**{name: value}).derived.to_dict()
                except Exception:  # an invalid combination for this preset: try the next
                    continue
                deps[name] |= {k for k in before if k not in ("tensor_shapes", "param_groups", "params")
                               and before[k] != after[k]}
    return {name: tuple(sorted(found)) for name, found in deps.items()}


def _alternatives(spec: ModelSpec, name: str) -> list[object]:
    value = getattr(spec, name)
    from shared.core import spec as spec_module

    choices = {"remainder": spec_module.REMAINDERS, "pos_embed": spec_module.POS_EMBEDS,
               "activation": spec_module.ACTIVATIONS, "head_activation": spec_module.ACTIVATIONS,
               "norm": spec_module.NORMS, "final_norm": spec_module.FINAL_NORMS,
               "pooling": spec_module.POOLINGS}
    if name in choices:
        return [c for c in choices[name] if c != value]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value * 2, value - 1]
    if isinstance(value, float):
        return [value * 2]
    if name == "head_hidden":
        return [(*value, 8), ()]
    if value is None:
        return [spec.derived.pos_rows_used + 3]
    return []


# ---- lessons ------------------------------------------------------------------------------
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
    Lesson("gelu", "gelu", "the GELU form is passed explicitly in all three",
           (Select(unit="activation"),)),
    Lesson("head_width", "head_width", "torch/Flax take the total width, Keras the per-head width",
           (Select(unit="Attention.__init__"),)),
    Lesson("attention_scale", "attention_scale", "the scale is 1/sqrt(head width) in every port",
           (Select(unit="Attention.call", contains=("scale",)),)),
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
    """Three columns, one per framework; long lines wrap inside their column."""
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


# ---- the Rosetta table -------------------------------------------------------------------
def rosetta_markdown() -> str:
    """docs/rosetta.md: every spec field -> the torch, Keras and Flax code that implements it."""
    deps = derived_dependencies()
    out = [
        "# Rosetta: spec fields in the three ports",
        "",
        "Generated by `python compare.py rosetta --write` from the ports' source (the lines that read",
        "each `ModelSpec` field, or a `spec.derived` quantity computed from it). Do not edit by hand:",
        "`tests/test_teaching_lessons.py` fails when this file no longer matches the ports.",
        "",
    ]
    for name in SPEC_FIELDS:
        via = deps.get(name, ())
        wanted = (name, *(f"derived.{d}" for d in via))
        out.append(f"## `{name}`")
        out.append("")
        if via:
            out.append(f"Read directly or through `derived.{'`, `derived.'.join(via)}`.")
            out.append("")
        for fw in FRAMEWORKS:
            excerpts = field_excerpts(fw, wanted)
            out.append(f"**{fw}**")
            out.append("")
            if not excerpts:
                out.append("_not read by this port (no code depends on it)_")
                out.append("")
                continue
            out.append("```python")
            for ex in excerpts:
                out.append(f"# {ex.file} · {ex.qualname}")
                out += [line.strip() for line in ex.lines]
            out.append("```")
            out.append("")
    return "\n".join(out).rstrip() + "\n"
