"""The one comparison of a built model with a spec. Each framework's `ports/<fw>/user.py` reads a
model's layers (`layers()`: path, kind and the settings each layer object holds); this module says
which of those settings the spec contradicts: LayerNorm epsilon and variance formula, GELU form,
`batch_first`, heads, head width, attention bias and dropout (rate, mask sharing), dropout rates,
norm placement where a layer records it, and depth. Each contradiction is one text,
`field: your model X, spec Y (where)`, whichever tool reports it: `verify --model` /
`portbench.check` (the worker's `user` report), `compare.py audit` and
`shared.teaching.audit.audit_model`.

Not every contradiction can change a model's inference logits, and a model whose logits match is
never failed by one that cannot (`Contradiction.effect`): a dropout rate acts only in train mode (a
note), and the same function computed another way (Flax's fast variance) or a sequence-first
attention layer the model may transpose its tokens for (OpenAI CLIP's (L, N, D)) is judged by the
logits' gap alone, and named as the cause when there is one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.core.layer import Layer
from shared.core.probes import close, is_spec_rate, spec_rates
from shared.core.spec import ModelSpec

FUNCTION, ARITHMETIC, LAYOUT, TRAIN = "function", "arithmetic", "layout", "train"
EFFECTS = {  # effect -> what the line says of it (FUNCTION: nothing, the contradiction stands)
    FUNCTION: "",
    # equal in exact arithmetic (Flax's E[x^2] - E[x]^2 variance)
    ARITHMETIC: "the same function in exact arithmetic: the logits decide",
    # a layer's token layout, which the model's own forward may arrange for (CLIP's permute to (L, N, D))
    LAYOUT: "right only where the model permutes its tokens to (L, N, D) itself: the logits decide",
    # dropout: off in eval mode, where every verdict is taken
    TRAIN: "dropout acts only in train mode: a note, it cannot change the inference logits",
}


@dataclass(frozen=True)
class Contradiction:
    field: str  # the spec field (or layer setting) the model contradicts
    entry: str  # its divergence-catalogue entry (shared/teaching/divergences.py); "" when none
    yours: Any
    spec: Any
    where: str = ""  # the layer's path
    # What it can do to the inference logits (EFFECTS): FUNCTION fails a model by itself; any other
    # is reported, and fails a model only through the logits' gap, which it is then named beside.
    effect: str = FUNCTION

    @property
    def decisive(self) -> bool:
        """Whether it fails a model whose logits match."""
        return self.effect == FUNCTION

    def text(self) -> str:
        return f"{self.field}: your model {self.yours}, spec {self.spec}"

    def line(self) -> str:
        line = f"{self.text()} ({self.where})" if self.where else self.text()
        return f"{line}; {EFFECTS[self.effect]}" if self.effect != FUNCTION else line


def check_layers(spec: ModelSpec, layers: Sequence[Layer | Mapping[str, Any]]) -> list[Contradiction]:
    """Every contradiction of every layer, in layer order (depth last). `layers` are
    `shared.core.layer.Layer`s or their dicts (the worker's `user` report)."""
    out: list[Contradiction] = []
    attention = 0
    for layer in layers:
        kind, s, where = _unpack(layer)
        if kind == "layer_norm":
            out += _layer_norm(spec, s, where)
        elif kind == "gelu":
            out += _gelu(spec, s, where)
        elif kind == "attention":
            attention += 1
            out += _attention(spec, s, where)
        elif "num_heads" in s:  # a library's attention module (Transformers', timm's): its head shape
            out += _heads(spec, s, where)
        elif kind == "dropout" and "rate" in s and not is_spec_rate(float(s["rate"]), spec):
            rates = "/".join(f"{r:g}" for r in sorted(spec_rates(spec)))
            out.append(Contradiction("dropout", "dropout_flags", f"p={s['rate']:g}",
                                     f"one of the spec's rates {rates}", where, TRAIN))
        if "norm_first" in s and bool(s["norm_first"]) != (spec.norm == "pre"):
            out.append(Contradiction("norm", "norm_placement", "pre" if s["norm_first"] else "post",
                                     spec.norm, where))
    # The attention pool is one more attention layer; where only it is of a kind the readers know
    # (Transformers' SigLIP: its blocks use its own attention class), the count is 1.
    expected = {spec.depth, spec.depth + 1, 1} if spec.pooling == "map" else {spec.depth}
    if attention and attention not in expected:  # no attention layer of a known kind: it says nothing
        pool = " + the attention pool's" if spec.pooling == "map" else ""
        out.append(Contradiction("depth", "", f"{attention} attention layers", f"{spec.depth}{pool}"))
    return out


def from_layers(spec: ModelSpec, layers: Sequence[Layer | Mapping[str, Any]]) -> list[Contradiction]:
    """The first contradicting layer of each field: what `verify --model` prints."""
    out: dict[str, Contradiction] = {}
    for c in check_layers(spec, layers):
        out.setdefault(c.field, c)
    return list(out.values())


# ---- one kind of layer each ------------------------------------------------------------------------
def _unpack(layer: Layer | Mapping[str, Any]) -> tuple[str, Mapping[str, Any], str]:
    if isinstance(layer, Layer):
        return layer.kind, layer.settings, layer.path or "<root>"
    return layer["kind"], layer["settings"], layer["path"] or "<root>"


def _layer_norm(spec: ModelSpec, s: Mapping[str, Any], where: str) -> list[Contradiction]:
    out = []
    if "eps" in s and not close(float(s["eps"]), spec.layer_norm_eps):
        out.append(Contradiction("layer_norm_eps", "layer_norm_eps", f"{s['eps']:g}",
                                 f"{spec.layer_norm_eps:g}", where))
    if s.get("use_fast_variance"):
        out.append(Contradiction("layer_norm_variance", "layer_norm_variance",
                                 "use_fast_variance=True (Flax's default: E[x^2] - E[x]^2)",
                                 "two-pass variance", where, ARITHMETIC))
    return out


def _gelu(spec: ModelSpec, s: Mapping[str, Any], where: str) -> list[Contradiction]:
    # A head with hidden layers has its own form: a layer whose path names the head is held to it.
    in_head = bool(spec.head_hidden) and "head" in where.lower()
    field, wanted = ("head_activation", spec.head_activation) if in_head else ("activation", spec.activation)
    if spec.merge_size > 1 and "merger" in where.lower():  # Qwen's merger: exact GELU, whatever the blocks'
        wanted = "gelu"
    form = s.get("form")
    if not form or form == wanted:
        return []
    # a form that is neither GELU (MLX's approx='fast') is a naming divergence, not a flipped form
    entry = "gelu" if form in ("gelu", "gelu_tanh") else "gelu_names"
    return [Contradiction(field, entry, form, wanted, where)]


def _heads(spec: ModelSpec, s: Mapping[str, Any], where: str) -> list[Contradiction]:
    out = []
    if s.get("num_heads") is not None and int(s["num_heads"]) != spec.heads:
        out.append(Contradiction("heads", "head_width", s["num_heads"], spec.heads, where))
    if s.get("head_dim") is not None and int(s["head_dim"]) != spec.head_dim:
        out.append(Contradiction("head_dim", "head_width", s["head_dim"], spec.head_dim, where))
    return out


def _attention(spec: ModelSpec, s: Mapping[str, Any], where: str) -> list[Contradiction]:
    out = []
    if s.get("batch_first") is False:
        yours = "MultiheadAttention batch_first=False (torch's default: a (B, T, D) input attends across " \
                "the batch)"
        out.append(Contradiction("batch_first", "batch_first", yours, "batch-first tokens", where, LAYOUT))
    out += _heads(spec, s, where)
    if s.get("use_bias") is not None and bool(s["use_bias"]) != spec.qkv_bias:
        out.append(Contradiction("qkv_bias", "attention_bias", f"projection bias={s['use_bias']}",
                                 spec.qkv_bias, where))
    if "rate" in s and not close(float(s["rate"]), spec.dropout_attn):
        out.append(Contradiction("dropout_attn", "dropout_flags", f"p={s['rate']:g}",
                                 f"{spec.dropout_attn:g}", where, TRAIN))
    if s.get("broadcast_dropout") and float(s.get("rate", 0.0)) > 0:
        yours = "broadcast_dropout=True (Flax's default: one mask for every batch item and head)"
        out.append(Contradiction("broadcast_dropout", "dropout_flags", yours, "a mask per item and head",
                                 where, TRAIN))
    return out
