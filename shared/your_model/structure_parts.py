"""The pieces binding by structure works with (`structure.py` orders them): a `Unit`
(one layer with the parameters it is the first to own), what a unit is (a LayerNorm's width, a
Linear's in and out features), the `Builder` that turns units into links in the framework's
layouts, and the one-line refusal for a layer that fits no canonical tensor (`MisfitError`), whose
hints `binding.bind` tries before it says them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.checkpoints import Term, layer_terms
from shared.core.mapping import Link
from shared.core.spec import ModelSpec
from shared.errors import WeightsError

KERNEL, BIAS = ("weight", "kernel", "scale", "gamma"), ("bias", "beta")
PARTS = ("query", "key", "value")
# an attention output projection as each library names it (output_proj: equinox's MultiheadAttention)
OUT_NAMES = ("out_proj", "output_proj", "attention_output", "out", "proj", "o_proj", "output")
Shape = tuple[int, ...]
# per family of parameter layouts (each ports/<fw>/user.py's `conventions` names its model's): (linear
# weight, conv weight (MLX's Conv2d is OHWI), packed qkv weight, one q/k/v weight, out weight, a Linear
# patch embedding's weight, Linears packed on the output axis (a gated MLP's first), conv bias)
FRAMEWORK_LAYOUTS = {
    "torch": ("linear", "conv", "heads_linear", "heads_linear", "heads_out_linear", "patch_linear",
              "stacked_linear", "same"),
    "keras": ("same", "same", "heads_dense", "heads_dense", "heads_out_dense", "patch_dense",
              "stacked_dense", "same"),
    "flax": ("same", "same", "heads_dense", "heads_dense", "heads_out_dense", "patch_dense",
             "stacked_dense", "same"),
    "mlx": ("linear", "conv_ohwi", "heads_linear", "heads_linear", "heads_out_linear", "patch_linear",
            "stacked_linear", "same"),
    # equinox (JAX): torch's layouts, its Conv2d bias (out, 1, 1)
    "equinox": ("linear", "conv", "heads_linear", "heads_linear", "heads_out_linear", "patch_linear",
                "stacked_linear", "channel_bias"),
}
KIND_NAMES = {"layer_norm": "LayerNorm", "linear": "Linear", "attention": "attention", "conv": "Conv",
              "other": "parameters", "embedding": "Embedding", "parameter": "parameter"}


@dataclass
class Unit:
    """One layer with the parameters it is the first to own, and its place in definition order."""

    path: str
    kind: str
    params: dict[str, Shape]  # native name -> shape
    order: int = 0

    @property
    def label(self) -> str:
        """`norm_pre (LayerNorm)`: how a refusal names the layer."""
        where = self.path or next(iter(self.params))
        return f"{where} ({KIND_NAMES.get(self.kind, self.kind)})"

    def width(self) -> int:
        """A LayerNorm's width (its scale's length); 0 for a unit without a 1-D parameter."""
        return next((s[0] for s in self.params.values() if len(s) == 1), 0)

    def io(self, torch_like: bool) -> tuple[int, int]:
        """(in, out) features of a linear unit from its kernel; (0, 0) without one."""
        kernel = next((s for s in self.params.values() if len(s) == 2), None)
        if kernel is None:
            return 0, 0
        return (kernel[1], kernel[0]) if torch_like else (kernel[0], kernel[1])

    def hinted(self, pattern: str) -> bool:
        """Whether the layer's path says what it is (`gate`, `dist`, ...)."""
        return re.search(pattern, self.path.lower()) is not None


def role(unit: Unit, name: str) -> list[str]:
    """The name's segments below the layer's path ('query/kernel' -> ['query', 'kernel'])."""
    rest = name[len(unit.path):] if unit.path and name.startswith(unit.path) else name
    return [s for s in re.split(r"[./]", rest) if s] or [name]


class Builder:
    """The links found so far, why each, and the framework's layouts."""

    def __init__(self, spec: ModelSpec, framework: str) -> None:
        if framework not in FRAMEWORK_LAYOUTS:
            raise WeightsError(f"no structural binding for framework {framework!r}")
        self.spec, self.links, self.why, self.fixed = spec, [], {}, set()
        (self.linear, self.conv, self.packed, self.one_head, self.out, self.patch,
         self.stacked, self.conv_bias) = FRAMEWORK_LAYOUTS[framework]
        self.torch_like = self.linear == "linear"

    def add(self, native: str, canonical: tuple[str, ...], layout: str, why: str) -> None:
        if self.fixed.issuperset(canonical):
            return  # a rename row already bound it; this native tensor stays unused (and is named)
        self.links.append(Link(native, canonical, layout))
        self.why[native] = why

    def dense(self, unit: Unit, prefix: str | tuple[str, ...], kernel_layout: str,
              bias_layout: str = "same") -> None:
        """A Linear / Dense / Conv: its kernel and bias, one canonical prefix or several packed."""
        prefixes = (prefix,) if isinstance(prefix, str) else prefix
        for name, shape in unit.params.items():
            last = role(unit, name)[-1]
            if last in KERNEL and len(shape) >= 2:
                self.add(name, tuple(f"{p}.kernel" for p in prefixes), kernel_layout, unit.label)
            elif last in BIAS or len(shape) == 1:
                self.add(name, tuple(f"{p}.bias" for p in prefixes), bias_layout, unit.label)
            else:
                raise WeightsError(f"your parameter {name!r} of {unit.label} is neither a kernel nor a bias")

    def norm(self, unit: Unit, prefix: str) -> None:
        for name, _ in unit.params.items():
            which = "bias" if role(unit, name)[-1] in BIAS else "scale"
            self.add(name, (f"{prefix}.{which}",), "same", unit.label)

    def attention(self, unit: Unit, prefix: str) -> None:
        for name, shape in unit.params.items():
            segs = role(unit, name)
            is_bias = segs[-1] in BIAS or segs[-1].endswith("_bias")
            part = next((p for p in PARTS if {p, f"{p[0]}_proj", f"{p}_proj"} & set(segs)), None)
            what = "bias" if is_bias else "kernel"
            if segs[-1].startswith("in_proj"):
                parts = tuple(f"{prefix}.{p}.{what}" for p in PARTS)
                self.add(name, parts, "heads_bias" if is_bias else self.packed, unit.label)
            elif part is not None:
                flat = len(shape) == (1 if is_bias else 2)
                lay = ("heads_bias" if is_bias else self.one_head) if flat else "same"
                self.add(name, (f"{prefix}.{part}.{what}",), lay, unit.label)
            elif any(o in segs for o in OUT_NAMES):
                lay = "same" if is_bias or len(shape) == 3 else self.out
                self.add(name, (f"{prefix}.out.{what}",), lay, unit.label)
            else:
                raise WeightsError(f"your parameter {name!r} of {unit.label} is none of "
                                   "query / key / value / in_proj / out")

    def token(self, name: str, shape: Shape, canonical: str, why: str = "free parameter by size") -> None:
        """A free parameter: as the canonical tensor, or with leading batch axes of 1 (a vector's
        one, vit-pytorch's (1, dim) class token, or two, timm's (1, 1, dim))."""
        rank = len(self.spec.derived.tensor_shapes[canonical])
        lay = "same" if len(shape) == rank else ("batch_token" if rank == 1 and len(shape) == 3 else "batch")
        self.add(name, (canonical,), lay, why)


# ---- a layer that fits nothing: what it is, and the spec field that would express it ----------------
# Libraries without a checkpoint plug-in name their layers too (OpenAI's CLIP and open_clip: ln_pre);
# those with one declare theirs in it (shared.checkpoints.layer_terms).
UNPLUGGED_TERMS = (("ln_pre", "CLIP's ln_pre", ""),)


def library_terms() -> tuple[Term, ...]:
    """(fragment of a layer's name, the library's term, the spec field when the place alone cannot
    say), every library's."""
    return (*layer_terms(), *UNPLUGGED_TERMS)


# A hint: (the field setting it names, `field=value` with what it means, the spec overrides it makes).
Hint = tuple[str, dict[str, Any]]


class MisfitError(WeightsError):
    """A layer that fits no canonical tensor: what it is, and the spec settings that might place it
    (`hints`) or, where none could, why (`otherwise`). Its text names every hint; `binding.bind`
    keeps only those that place the layer when tried (`checked`)."""

    def __init__(self, head: str, hints: list[Hint], otherwise: str, params: tuple[str, ...]) -> None:
        self.head, self.hints, self.otherwise, self.params = head, hints, otherwise, params
        super().__init__(self._text(hints))

    def _text(self, hints: list[Hint], tried: list[Hint] | None = None) -> str:
        if hints:
            return f"{self.head}; set {' or '.join(text for text, _ in hints)}"
        if tried:  # every field it could have been, tried: none places it
            named = ", ".join(text.split(" (")[0] for text, _ in tried)
            return f"{self.head}; no spec setting places it (tried {named}: the layer stays unplaced)"
        return f"{self.head}; {self.otherwise}"

    def checked(self, placed: Callable[[dict[str, Any]], set[str]]) -> WeightsError:
        """This refusal naming only the hints that place the layer: each tried with `placed` (the
        native names binding by structure places on the spec with the hint's overrides; none when
        it refuses), kept when every parameter of the layer is among them."""
        kept = [hint for hint in self.hints if set(self.params) <= placed(hint[1])]
        return WeightsError(self._text(kept, tried=self.hints))


def misfit(spec: ModelSpec, unit: Unit, place: str, torch_like: bool) -> MisfitError:
    """The layer that fits no canonical tensor of `spec`: what it is in its library's terms when
    its name says, and the spec settings that might express it, or that none does."""
    term, named = next(((t, f) for fragment, t, f in library_terms() if fragment in unit.path.lower()),
                       (None, ""))
    what, hints, otherwise = _guess(spec, unit, place, torch_like)
    if named and spec.final_norm == "none":
        field_name, value = named.split("=")
        hints = [(named, {field_name: value})]
    library = f" ({term})" if term else ""
    head = f"your model's layer {unit.label} fits no tensor of spec {spec.name!r}: {what}{library}"
    return MisfitError(head, hints, otherwise, tuple(unit.params))


CANNOT = "the spec cannot express it"


def _guess(spec: ModelSpec, unit: Unit, place: str, torch_like: bool) -> tuple[str, list[Hint], str]:
    """(what the layer is, the hints that might place it, the reason none is given otherwise)."""
    d, features = spec.dim, spec.derived.patch_features
    width = unit.width()
    if unit.kind == "layer_norm" and place == "patch":
        if width == features:
            return "a LayerNorm on each flattened patch, before the projection", \
                [("patch_norm_in=true", {"patch_norm_in": True})], ""
        return "a LayerNorm on each patch token, after the projection", \
            [("patch_norm_out=true", {"patch_norm_out": True})], ""
    if unit.kind == "layer_norm" and place == "before":
        return "a LayerNorm before the blocks", \
            [("norm_before_blocks=true", {"norm_before_blocks": True})], ""
    if unit.kind == "layer_norm" and place == "after":
        if spec.final_norm == "none":
            return "a LayerNorm after the blocks", [
                ("final_norm=tokens (on every token)", {"final_norm": "tokens"}),
                ("final_norm=pooled (on the pooled vector)", {"final_norm": "pooled"})], ""
        return "a second LayerNorm after the blocks", [], f"the spec has one final norm (final_norm=" \
                                                          f"{spec.final_norm}) and cannot express two"
    if unit.kind == "layer_norm" and place == "block":
        if width == spec.head_dim and not spec.qk_norm:
            return "a LayerNorm over each head's queries or keys", [("qk_norm=true", {"qk_norm": True})], ""
        return "a third LayerNorm in a block", [], f"{CANNOT} (a block has norm1 and norm2)"
    if unit.kind in ("other", "embedding", "parameter") and place == "block":
        what = f"a learned per-channel scale of {width or d} on a residual branch"
        if spec.layer_scale:
            return what, [], "the spec has two per block (ls1, ls2)"
        return what, [("layer_scale=true", {"layer_scale": True})], ""
    if unit.kind in ("other", "embedding", "parameter"):
        shapes = ", ".join(str(s) for s in unit.params.values())
        size = sum(math.prod(s) for s in unit.params.values())
        rows = size // d if d and size % d == 0 else 0
        hints = [(text, overrides) for text, overrides, on in (
            ("class_token=true", {"class_token": True}, spec.class_token),
            ("distill_token=true", {"distill_token": True}, spec.distill_token),
            (f"registers={rows}", {"registers": rows}, spec.registers or not rows),
            ("pos_embed=learned", {"pos_embed": "learned"}, spec.pos_embed == "learned")) if not on]
        return f"a learned tensor {shapes} outside the blocks", hints, \
            "no token or position table of the spec has its shape"
    if unit.kind == "linear" and place == "block":
        fan_in, out = unit.io(torch_like)
        if spec.mlp == "standard" and fan_in == d:
            return f"a third MLP Linear ({fan_in} -> {out})", \
                [("mlp=gated (SwiGLU: a gate Linear)", {"mlp": "gated"})], ""
        return f"a Linear ({fan_in} -> {out}) that no block tensor has", [], CANNOT
    if unit.kind in ("linear", "attention") and place == "after":
        out = unit.io(torch_like)[1]
        hidden = [(f"head_hidden=[{out}] (a hidden head layer)", {"head_hidden": (out,)})] if out else []
        if unit.kind == "attention" or (spec.pooling != "map" and spec.num_classes):
            return "an attention or Linear layer after the blocks", \
                [("pooling=map (an attention-pool head)", {"pooling": "map"}), *hidden], ""
        classes = [(f"num_classes={out} (a classifier)", {"num_classes": out})] if out else []
        return "a Linear after the blocks", [*classes, *hidden], ""
    return f"a {KIND_NAMES.get(unit.kind, unit.kind)} where the spec has none", [], CANNOT
