"""What a built model's layers compute, read as spec fields (`proposal.py`): the settings each
framework's `ports/<fw>/user.py` `layers()` reads from the layer objects, as the spec check reads
them (`spec_check.py`).

The layers are what the forward computes with, a configuration only what the model was built
from (and a Transformers `config` can be edited after the build): where the two disagree on a
field the layers compute, the layers' value is taken and a note names both
(`overruled_by_layers`)."""

from __future__ import annotations

import re
from typing import Any

from shared.checkpoints.live import Fact
from shared.core.probes import close
from shared.core.spec import ACTIVATIONS, NORM_EPS_FIELDS

INDEX = re.compile(r"(^|[./_])\d+(?=[./]|$)")  # a container's index in a layer's path: blocks.3.attn

Statement = tuple[Any, str]  # (value, the layer's path)

# The fields a layer computes with, as (the layers that state it, what each says): a configuration
# that says otherwise is overruled by them.
COMPUTED = {
    "layer_norm_eps": ("LayerNorm", "has eps {:g}"),
    "activation": ("activation layer", "computes {}"),
    "heads": ("attention layer", "has {} heads"),
    "head_dim": ("attention layer", "has heads of width {}"),
}


def layer_statements(layers: list[Any]) -> dict[str, list[Statement]]:
    """Every layer's statement of each field in `COMPUTED`, in layer order: LayerNorms' eps, the
    activation forms outside the head (a layer, or a dense layer's activation), the heads and head
    width of every layer that states them (attention layers, and a library's attention modules)."""
    out: dict[str, list[Statement]] = {name: [] for name in COMPUTED}
    for layer in layers:
        kind, s, where = layer.kind, layer.settings, layer.path or "<root>"
        if kind == "layer_norm" and "eps" in s:
            out["layer_norm_eps"].append((float(s["eps"]), where))
        form = s.get("form") if kind == "gelu" else s.get("activation") if kind == "linear" else None
        if form in ACTIVATIONS and "head" not in where.lower():
            out["activation"].append((form, where))
        for name, key in (("heads", "num_heads"), ("head_dim", "head_dim")):
            if s.get(key) is not None:
                out[name].append((int(s[key]), where))
    return out


def layer_facts(layers: list[Any]) -> dict[str, Fact]:
    """What the layers' own settings say: the first statement of each field in `COMPUTED`, the
    norm kind and, where every LayerNorm has one epsilon, no epsilon of a place's own, the first
    attention layer's bias, the norm placement, and the number of attention layers as the depth."""
    out: dict[str, Fact] = {}
    sources = {"layer_norm_eps": "eps of LayerNorm {}", "activation": "GELU form of {}",
               "heads": "num_heads of attention {}", "head_dim": "head_dim of attention {}"}
    for name, found in layer_statements(layers).items():
        if found:
            value, where = found[0]
            out[name] = (value, sources[name].format(where))
    eps = {value for value, _ in layer_statements(layers)["layer_norm_eps"]}
    if eps:  # LayerNorms, all of one epsilon: no norm kind or place of its own
        out["norm_type"] = ("layer_norm", "every norm layer read is a LayerNorm")
        if len(eps) == 1:
            one = f"every LayerNorm has eps {next(iter(eps)):g}"
            out |= {name: (None, one) for name in NORM_EPS_FIELDS.values()}
    attention: dict[str, int] = {}  # attention layers by their path with its indices as *
    for layer in layers:
        s, where = layer.settings, layer.path or "<root>"
        if layer.kind == "attention":
            alike = INDEX.sub(r"\1*", layer.path)
            attention[alike] = attention.get(alike, 0) + 1
            if s.get("use_bias") is not None:
                out.setdefault("qkv_bias", (bool(s["use_bias"]), f"use_bias of attention {where}"))
        if "norm_first" in s:
            out.setdefault("norm", ("pre" if s["norm_first"] else "post", f"norm_first of {where}"))
    if attention:
        # the blocks' attention layers are alike in their indexed container; one outside it (an
        # attention pool's) is not a block. Without an indexed container, every one is a block.
        alike, count = max(attention.items(), key=lambda item: item[1])
        total = sum(attention.values())
        out["depth"] = (count, f"{count} attention layers {alike}" + (f" (and {total - count} outside them)"
                                                                     if total > count else "")) \
            if count > 1 else (total, f"{total} attention layers")
        if not any(layer.settings.get("num_kv_heads") for layer in layers if layer.kind == "attention"):
            out["kv_heads"] = (None, "no attention layer read groups its keys and values")
    projections = [layer for layer in layers if layer.kind in ("linear", "attention")]
    if projections and all(any(p.endswith("bias") for p in layer.params) for layer in projections):
        out["bias_free"] = ((), "every linear and attention layer read has a bias")
    return out


def overruled_by_layers(found: dict[str, Fact], layers: list[Any]) -> list[str]:
    """Each field in `COMPUTED` that `found` (read from a configuration) states otherwise than the
    layers compute with: replaced in `found` by the layers' value, one note each naming both."""
    notes, read = [], layer_facts(layers)
    for name, statements in layer_statements(layers).items():
        if not statements or name not in found:
            continue
        value, where = statements[0]
        stated, source = found[name]
        if _same(stated, value):
            continue
        layer, says = COMPUTED[name]
        agree = sum(_same(v, value) for v, _ in statements)
        who = f"every {layer} ({agree})" if agree == len(statements) else \
            f"{layer} {where} ({agree} of your {len(statements)})"
        shown = f"{stated:g}" if isinstance(stated, float) else f"{stated}"
        notes.append(f"{source} says {name}={shown}, but {who} {says.format(value)}; the layers are taken")
        found[name] = read[name]
    return notes


def config_as_computed(config: dict[str, Any] | None, keys: dict[str, str],
                       layers: list[Any]) -> dict[str, Any] | None:
    """`config` with each key that states a field in `COMPUTED` (`keys`: field -> key) set to what
    the layers compute, for the checkpoint format's `infer` (whose checks, heads dividing the
    width, would otherwise refuse the configuration's claim instead of reading the model)."""
    if config is None:
        return None
    statements = layer_statements(layers)
    return {**config, **{key: statements[name][0][0] for name, key in keys.items() if statements.get(name)}}


def variance_notes(layers: list[Any]) -> list[str]:
    """linen's and nnx's LayerNorm default, `use_fast_variance=True`, computes E[x^2] - E[x]^2; the
    spec has no field for it (its variance is the two-pass one): said with the first such layer."""
    fast = [layer.path or "<root>" for layer in layers
            if layer.kind == "layer_norm" and layer.settings.get("use_fast_variance")]
    if not fast:
        return []
    return [f"layer_norm_variance: use_fast_variance=True of LayerNorm {fast[0]} ({len(fast)} of your "
            "LayerNorms) computes E[x^2] - E[x]^2, which no spec field states (the reference's variance "
            "is two-pass): the spec check names it and verify's tolerance judges it"]


def _same(a: Any, b: Any) -> bool:
    return close(a, b) if isinstance(a, float) and isinstance(b, float) else bool(a == b)
