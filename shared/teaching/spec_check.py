"""What a user's model says about itself, against `--spec`, before any logits are compared: the
bound tensors' sizes (width, depth, heads where the layout has them, head width, MLP width,
class token, position rows, qkv bias, head layers, classes, patch size and channels) and what its
layers' settings say (LayerNorm epsilon, GELU form, `batch_first`, dropout rates, norm placement
where a layer records it). Each contradiction is one line `field: your model X, spec Y`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.core.probes import close, is_spec_rate
from shared.core.spec import ModelSpec


@dataclass(frozen=True)
class Contradiction:
    field: str
    yours: Any
    spec: Any
    where: str = ""

    def line(self) -> str:
        at = f" ({self.where})" if self.where else ""
        return f"{self.field}: your model {self.yours}, spec {self.spec}{at}"


def from_layers(spec: ModelSpec, layers: list[dict[str, Any]]) -> list[Contradiction]:
    """Settings the layers record, against the spec (the first layer of each kind that disagrees)."""
    out: list[Contradiction] = []
    seen: set[str] = set()

    def add(c: Contradiction) -> None:
        if c.field not in seen:
            seen.add(c.field)
            out.append(c)

    blocks_mlp = spec.activation  # a head with hidden layers may use another form: not read here
    attention = [la for la in layers if la["kind"] == "attention"]
    if attention and len(attention) != spec.depth:
        add(Contradiction("depth", f"{len(attention)} attention layers", spec.depth))
    for layer in layers:
        kind, s, where = layer["kind"], layer["settings"], layer["path"] or "<root>"
        if kind == "layer_norm" and "eps" in s and not close(float(s["eps"]), spec.layer_norm_eps):
            add(Contradiction("layer_norm_eps", f"{s['eps']:g}", f"{spec.layer_norm_eps:g}", where))
        if kind == "gelu" and s.get("form") and s["form"] != blocks_mlp and spec.head_hidden == ():
            add(Contradiction("activation", s["form"], blocks_mlp, where))
        if kind == "attention":
            if s.get("batch_first") is False:
                add(Contradiction("batch_first", "MultiheadAttention batch_first=False (torch's default: "
                                  "a (B, T, D) input attends across the batch)", "batch-first tokens", where))
            if s.get("num_heads") is not None and int(s["num_heads"]) != spec.heads:
                add(Contradiction("heads", s["num_heads"], spec.heads, where))
            if s.get("head_dim") is not None and int(s["head_dim"]) != spec.head_dim:
                add(Contradiction("head_dim", s["head_dim"], spec.head_dim, where))
        if kind == "dropout" and "rate" in s and not is_spec_rate(float(s["rate"]), spec):
            add(Contradiction("dropout", f"p={s['rate']:g}", f"one of the spec's rates {_rates(spec)}",
                              where))
        if "norm_first" in s and bool(s["norm_first"]) != (spec.norm == "pre"):
            add(Contradiction("norm", "pre" if s["norm_first"] else "post", spec.norm, where))
    return out


def _rates(spec: ModelSpec) -> str:
    rates = {spec.dropout_embed, spec.dropout_attn, spec.dropout_mlp, spec.dropout_head}
    return "/".join(f"{r:g}" for r in sorted(rates))


def contradictions(spec: ModelSpec, report: dict[str, Any]) -> list[Contradiction]:
    """Everything the worker's `user` report shows that the spec contradicts."""
    return from_layers(spec, report.get("layers", []))
