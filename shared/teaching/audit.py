"""Defaults audit: every place a model relies on a framework default where the catalogue says the
frameworks disagree, instead of a value from the spec.

Two checks, usable on this project's ports and on a user's own model:

- **source** (`audit_source`): walk a Python file's AST for calls to the catalogue's constructors
  and functions (nn.LayerNorm, layers.LayerNormalization, nnx.LayerNorm, GELU forms,
  nn.MultiheadAttention, optimizers, losses, ...) and name each call that omits the keyword that
  pins a divergent default. Nothing is imported or executed.
- **built model** (`audit_model`): walk the layers of a built torch nn.Module, Keras model or
  flax.nnx module and compare what each layer actually holds (epsilon, GELU form measured by
  probing the activation, batch_first, head width, fast variance, dropout mask sharing, rates)
  with what the spec requires. `audit_ports` builds every port for two probe specs whose values
  differ from every framework default, so a default that happens to equal the spec's value
  cannot hide.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared import REPO_ROOT
from shared.core.spec import ModelSpec


@dataclass(frozen=True)
class Finding:
    where: str  # file:line, or framework:layer path
    entry: str  # catalogue entry (shared/teaching/divergences.py)
    message: str

    def line(self) -> str:
        return f"{self.where}: [{self.entry}] {self.message}"


# ---- source audit ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CallRule:
    suffixes: tuple[str, ...]  # dotted-name endings that identify the callable
    keywords: tuple[str, ...]  # each must be passed explicitly
    entry: str
    why: str


CALL_RULES: tuple[CallRule, ...] = (
    CallRule(("nn.LayerNorm", "torch.nn.LayerNorm"), ("eps",), "layer_norm_eps",
             "torch's default eps is 1e-5"),
    CallRule(("nnx.LayerNorm", "linen.LayerNorm"), ("epsilon",), "layer_norm_eps",
             "Flax's default epsilon is 1e-6"),
    CallRule(("nnx.LayerNorm",), ("use_fast_variance",), "layer_norm_variance",
             "Flax's default use_fast_variance=True computes E[x^2]-E[x]^2"),
    CallRule(("LayerNormalization",), ("epsilon",), "layer_norm_eps", "Keras' default epsilon is 1e-3"),
    CallRule(("ops.layer_normalization",), ("epsilon",), "layer_norm_eps",
             "keras.ops.layer_normalization defaults to backend.epsilon() = 1e-7"),
    CallRule(("nn.GELU", "F.gelu", "functional.gelu"), ("approximate",), "gelu",
             "torch's default is exact; say which form the spec wants"),
    CallRule(("ops.gelu",), ("approximate",), "gelu", "keras.ops.gelu defaults to the tanh approximation"),
    CallRule(("activations.gelu",), ("approximate",), "gelu", "keras.activations.gelu defaults to exact"),
    CallRule(("jax.nn.gelu", "nnx.gelu", "nn.gelu"), ("approximate",), "gelu",
             "jax.nn.gelu / nnx.gelu default to the tanh approximation"),
    CallRule(("nn.MultiheadAttention",), ("batch_first",), "batch_first",
             "torch's default batch_first=False expects (T, B, E)"),
    CallRule(("nn.TransformerEncoderLayer",), ("norm_first", "activation", "layer_norm_eps", "batch_first",
                                               "dropout"), "norm_placement",
             "defaults: post-norm, ReLU, eps 1e-5, batch_first=False, dropout 0.1"),
    CallRule(("nnx.MultiHeadAttention",), ("broadcast_dropout",), "dropout_flags",
             "Flax shares one attention-dropout mask across batch and heads by default"),
    CallRule(("nnx.Conv", "linen.Conv"), ("padding",), "remainder", "Flax's Conv pads ('SAME') by default"),
    CallRule(("optim.AdamW",), ("eps", "weight_decay"), "adamw_epsilon", "torch defaults: eps 1e-8, wd 1e-2"),
    CallRule(("optimizers.AdamW",), ("epsilon", "weight_decay"), "adamw_epsilon",
             "Keras defaults: epsilon 1e-7 (epsilon hat), wd 4e-3"),
    CallRule(("optax.adamw",), ("eps", "weight_decay"), "adamw_epsilon", "optax defaults: eps 1e-8, wd 1e-4"),
    CallRule(("SparseCategoricalCrossentropy", "CategoricalCrossentropy"), ("from_logits",), "cross_entropy",
             "Keras expects probabilities by default (from_logits=False)"),
)
GELU_REFERENCES = ("jax.nn.gelu", "nnx.gelu", "ops.gelu", "activations.gelu", "F.gelu")


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _matches(name: str, suffixes: tuple[str, ...]) -> bool:
    return any(name == s or name.endswith("." + s) for s in suffixes)


def audit_source(text: str, filename: str = "<source>") -> list[Finding]:
    """Calls in `text` that leave a divergent framework default in place."""
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as exc:
        return [Finding(f"{filename}:{exc.lineno}", "source", f"cannot be parsed: {exc.msg}")]
    findings: list[Finding] = []
    called: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        called.add(id(node.func))
        passed = {k.arg for k in node.keywords if k.arg}
        splat = any(k.arg is None for k in node.keywords)  # **kwargs: cannot tell
        for rule in CALL_RULES:
            if splat or not _matches(name, rule.suffixes):
                continue
            missing = [k for k in rule.keywords if k not in passed]
            if missing:
                findings.append(Finding(f"{filename}:{node.lineno}", rule.entry,
                                        f"{name}(...) without {', '.join(missing)}: {rule.why}"))
        if name.endswith("partial") and node.args:
            target = dotted(node.args[0])
            if _matches(target, GELU_REFERENCES):
                called.add(id(node.args[0]))
                if "approximate" not in passed:
                    findings.append(Finding(f"{filename}:{node.lineno}", "gelu",
                                            f"partial({target}) without approximate: the default "
                                            "form is used"))
        if name.endswith("Activation") and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == "gelu":
            findings.append(Finding(f"{filename}:{node.lineno}", "gelu",
                                    "Activation('gelu') relies on Keras' default form (exact)"))
    for node in ast.walk(tree):  # a GELU passed as a value: whoever calls it uses the default form
        loaded = isinstance(getattr(node, "ctx", None), ast.Load)
        if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in called and loaded \
                and _matches(dotted(node), GELU_REFERENCES):
            findings.append(Finding(f"{filename}:{node.lineno}", "gelu",
                                    f"{dotted(node)} passed as a value: called with its default form"))
    return sorted(set(findings), key=lambda f: (int(f.where.rsplit(":", 1)[1]), f.entry))


def audit_file(path: str | Path) -> list[Finding]:
    path = Path(path)
    return audit_source(path.read_text(), str(path))


# ---- built-model audit ----------------------------------------------------------------------
def _gelu_form(fn: Any) -> str | None:
    """'gelu' or 'gelu_tanh' by probing a callable at x = 1.5 (the forms differ by 2e-4 there)."""
    import numpy as np

    x = np.array([1.5], dtype=np.float32)
    try:
        y = float(np.asarray(_to_numpy(fn(_framework_array(fn, x)))).reshape(-1)[0])
    except Exception:
        return None
    exact = 0.5 * 1.5 * (1 + math.erf(1.5 / math.sqrt(2)))
    tanh = 0.5 * 1.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1.5 + 0.044715 * 1.5**3)))
    if abs(y - exact) < 2e-5:
        return "gelu"
    if abs(y - tanh) < 2e-5:
        return "gelu_tanh"
    return None


def _framework_array(fn: Any, x: Any) -> Any:
    module = type(fn).__module__
    if module.startswith("torch"):
        import torch

        return torch.from_numpy(x)
    return x


def _to_numpy(y: Any) -> Any:
    if hasattr(y, "detach"):
        return y.detach().numpy()
    return y


def _rates(spec: ModelSpec) -> set[float]:
    return {spec.dropout_embed, spec.dropout_attn, spec.dropout_mlp, spec.dropout_head}


def _expected_form(path: str, spec: ModelSpec) -> str:
    return spec.head_activation if "head" in path.lower() else spec.activation


def _close(a: float, b: float) -> bool:
    return math.isclose(float(a), float(b), rel_tol=1e-6)


def audit_model(model: Any, spec: ModelSpec, label: str = "model") -> list[Finding]:
    """Compare a built torch nn.Module, Keras model/layer or flax.nnx module with `spec`."""
    module = type(model).__module__
    kinds = [c.__module__ for c in type(model).__mro__]
    if any(k.startswith("torch.") for k in kinds):
        return _audit_torch(model, spec, label)
    if any(k.startswith("keras") for k in kinds):
        return _audit_keras(model, spec, label)
    if any(k.startswith("flax.") for k in kinds):
        return _audit_flax(model, spec, label)
    raise TypeError(f"audit_model: {module}.{type(model).__name__} is not a torch, Keras or nnx model")


def _audit_torch(model: Any, spec: ModelSpec, label: str) -> list[Finding]:
    from torch import nn

    out: list[Finding] = []
    for path, m in model.named_modules():
        where = f"{label}:{path or '<root>'}"
        if isinstance(m, nn.LayerNorm) and not _close(m.eps, spec.layer_norm_eps):
            out.append(Finding(where, "layer_norm_eps",
                               f"LayerNorm eps={m.eps:g}, spec {spec.layer_norm_eps:g}"))
        if isinstance(m, nn.GELU):
            form = "gelu" if m.approximate == "none" else "gelu_tanh"
            if form != _expected_form(path, spec):
                out.append(Finding(where, "gelu", f"GELU approximate={m.approximate!r}, spec "
                                   f"{_expected_form(path, spec)}"))
        if isinstance(m, nn.MultiheadAttention):
            if not m.batch_first:
                out.append(Finding(where, "batch_first", "MultiheadAttention batch_first=False (torch's "
                                   "default): a (B, T, E) input attends across the batch"))
            if m.head_dim != spec.head_dim:
                out.append(Finding(where, "head_width", f"head width {m.head_dim} (embed_dim/num_heads), "
                                   f"spec head_dim {spec.head_dim}"))
        if isinstance(m, nn.TransformerEncoderLayer) and m.norm_first != (spec.norm == "pre"):
            out.append(Finding(where, "norm_placement", f"norm_first={m.norm_first}, spec norm={spec.norm}"))
        if isinstance(m, nn.Dropout) and not any(_close(m.p, r) for r in _rates(spec)):
            out.append(Finding(where, "dropout_flags", f"Dropout p={m.p:g} is none of the spec's rates"))
    return out


def _audit_keras(model: Any, spec: ModelSpec, label: str) -> list[Finding]:
    import keras

    out: list[Finding] = []
    for path, layer in _keras_named_layers(model, keras.layers.Layer):
        where = f"{label}:{path or '<root>'}"
        is_norm = isinstance(layer, keras.layers.LayerNormalization)
        if is_norm and not _close(layer.epsilon, spec.layer_norm_eps):
            out.append(Finding(where, "layer_norm_eps",
                               f"LayerNormalization epsilon={layer.epsilon:g}, spec {spec.layer_norm_eps:g}"))
        if isinstance(layer, keras.layers.Activation):
            form = _gelu_form(layer)
            expected = _expected_form(where, spec)
            if form is not None and form != expected:
                out.append(Finding(where, "gelu", f"activation computes {form}, spec {expected}"))
        if isinstance(layer, keras.layers.MultiHeadAttention):
            if layer._key_dim != spec.head_dim:
                out.append(Finding(where, "head_width", f"key_dim={layer._key_dim} (per head), spec head_dim "
                                   f"{spec.head_dim}"))
            if not _close(layer._dropout, spec.dropout_attn):
                out.append(Finding(where, "dropout_flags", f"attention dropout {layer._dropout:g}, spec "
                                   f"{spec.dropout_attn:g}"))
        if isinstance(layer, keras.layers.Dropout) and not any(_close(layer.rate, r) for r in _rates(spec)):
            out.append(Finding(where, "dropout_flags",
                               f"Dropout rate={layer.rate:g} is none of the spec's rates"))
    return out


def _keras_named_layers(root: Any, layer_type: type, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, layer) for every sub-layer, named by the attribute that holds it (an unbuilt layer
    has no `path` yet), else by its Keras name (Sequential): so an activation can be told
    apart by where it sits."""
    out, seen = [(prefix, root)], {id(root)}

    def names_of(obj: Any) -> dict[int, str]:
        names: dict[int, str] = {}
        for attr, value in vars(obj).items():
            if attr.startswith("_"):
                continue
            if isinstance(value, (list, tuple)):
                names.update({id(v): f"{attr}.{i}" for i, v in enumerate(value)})
            else:
                names[id(value)] = attr
        return names

    def visit(obj: Any, path: str) -> None:
        names = names_of(obj)
        for child in obj._flatten_layers(include_self=False, recursive=False):
            if not isinstance(child, layer_type) or id(child) in seen:
                continue
            seen.add(id(child))
            name = names.get(id(child), child.name)
            child_path = f"{path}.{name}" if path else name
            out.append((child_path, child))
            visit(child, child_path)

    visit(root, prefix)
    return out


def _audit_flax(model: Any, spec: ModelSpec, label: str) -> list[Finding]:
    from flax import nnx

    out: list[Finding] = []
    for path, node in nnx.iter_graph(model):
        where = f"{label}:{'.'.join(str(p) for p in path) or '<root>'}"
        if isinstance(node, nnx.LayerNorm):
            if not _close(node.epsilon, spec.layer_norm_eps):
                out.append(Finding(where, "layer_norm_eps", f"LayerNorm epsilon={node.epsilon:g}, spec "
                                   f"{spec.layer_norm_eps:g}"))
            if node.use_fast_variance:
                out.append(Finding(where, "layer_norm_variance", "use_fast_variance=True (Flax's default)"))
        if isinstance(node, nnx.MultiHeadAttention):
            if node.head_dim != spec.head_dim:
                out.append(Finding(where, "head_width", f"head width {node.head_dim}, spec {spec.head_dim}"))
            if node.broadcast_dropout and node.dropout_rate:
                out.append(Finding(where, "dropout_flags", "broadcast_dropout=True: one mask for every "
                                   "batch item and head"))
        if isinstance(node, nnx.Dropout) and not any(_close(node.rate, r) for r in _rates(spec)):
            out.append(Finding(where, "dropout_flags",
                               f"Dropout rate={node.rate:g} is none of the spec's rates"))
        if isinstance(node, nnx.Module):
            for attr, value in vars(node).items():
                if callable(value) and not isinstance(value, nnx.Module) and attr.startswith("act"):
                    form = _gelu_form(value)
                    expected = _expected_form(where, spec)
                    if form is not None and form != expected:
                        out.append(Finding(f"{where}.{attr}", "gelu", f"activation computes {form}, "
                                           f"spec {expected}"))
    return out


# ---- the project's ports ------------------------------------------------------------------
def probe_specs(base: ModelSpec) -> list[ModelSpec]:
    """Two variants of `base` whose settings differ from every framework default, each GELU form
    appearing once in the MLP and once in the head, and distinct non-zero dropout rates: a layer
    that kept a default shows up in at least one of them."""
    common = {"dropout_embed": 0.11, "dropout_attn": 0.12, "dropout_mlp": 0.13, "dropout_head": 0.14,
              "head_hidden": base.head_hidden or (16,)}
    return [
        base.replace(name=f"{base.name}-probe-a", layer_norm_eps=3.3e-4, activation="gelu_tanh",
                     head_activation="gelu", **common),
        base.replace(name=f"{base.name}-probe-b", layer_norm_eps=7.7e-5, activation="gelu",
                     head_activation="gelu_tanh", **common),
    ]


def port_source_files(framework: str) -> list[Path]:
    root = REPO_ROOT / "ports" / framework
    return sorted(p for p in root.glob("*.py") if p.name != "__init__.py")


def audit_ports(frameworks: list[str], base: ModelSpec) -> tuple[list[Finding], list[str]]:
    """(findings, what was checked) for the named ports: source, then built layers."""
    from ports import create_port

    findings: list[Finding] = []
    checked: list[str] = []
    for fw in frameworks:
        for path in port_source_files(fw):
            findings += audit_file(path)
        checked.append(f"{fw}: source of {', '.join(p.name for p in port_source_files(fw))}")
        if fw == "keras":
            from shared.teaching.framework_defaults import keras_module

            keras_module()  # torch's triton hooks before TensorFlow (see framework_defaults)
        for spec in probe_specs(base):
            port = create_port(fw, spec)
            findings += audit_model(port.model, spec, f"{fw}[{spec.name}]")
            checked.append(f"{fw}: layers built for {spec.name} (eps {spec.layer_norm_eps:g}, MLP "
                           f"{spec.activation}, head {spec.head_activation})")
    return findings, checked
