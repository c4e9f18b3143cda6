"""Defaults audit: every place a model relies on a framework default where the catalogue says the
frameworks disagree, instead of a value from the spec.

Two checks, usable on this project's ports and on a user's own model:

- **source** (`audit_source`): walk a Python file's AST for calls to the catalogue's constructors
  and functions (nn.LayerNorm, layers.LayerNormalization, nnx.LayerNorm, GELU forms,
  nn.MultiheadAttention, optimizers, losses, ...) and name each call that omits the keyword that
  pins a divergent default. Nothing is imported or executed.
- **built model** (`audit_model`): read the layers of a built torch nn.Module, Keras model,
  flax.nnx or mlx.nn module with that framework's `ports/<fw>/user.py` `layers()` (the reader
  `verify --model` uses) and compare what each layer actually holds (epsilon, GELU form measured
  by probing the activation, batch_first, head width, fast variance, attention bias, dropout mask
  sharing, rates) with the spec in `shared/your_model/spec_check.py`, the one comparison. `audit_ports`
  builds every port for two probe specs whose values differ from every framework default, so a
  default that happens to equal the spec's value cannot hide.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared import REPO_ROOT
from shared.core.probes import Finding
from shared.core.spec import ModelSpec
from shared.errors import InputError
from shared.teaching.framework_defaults import defaults_module
from shared.your_model.framework import user_port
from shared.your_model.spec_check import check_layers


# ---- source audit ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CallRule:
    suffixes: tuple[str, ...]  # dotted-name endings that identify the callable
    keywords: tuple[str, ...]  # each must be passed explicitly ("a|b": either spelling)
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
    CallRule(("nn.RMSNorm", "torch.nn.RMSNorm"), ("eps",), "rms_norm_eps",
             "torch's default eps=None is the dtype's machine epsilon (1.2e-7 in float32); MLX's is 1e-5"),
    CallRule(("nnx.RMSNorm", "linen.RMSNorm", "RMSNormalization"), ("epsilon",), "rms_norm_eps",
             "Flax's and Keras' default epsilon is 1e-6"),
    CallRule(("ops.rms_normalization",), ("epsilon",), "rms_norm_eps",
             "keras.ops.rms_normalization defaults to backend.epsilon() = 1e-7"),
    CallRule(("nn.GELU", "F.gelu", "functional.gelu"), ("approximate|approx",), "gelu",
             "torch's and MLX's default is exact; say which form the spec wants"),
    CallRule(("ops.gelu",), ("approximate",), "gelu", "keras.ops.gelu defaults to the tanh approximation"),
    CallRule(("activations.gelu",), ("approximate",), "gelu", "keras.activations.gelu defaults to exact"),
    CallRule(("jax.nn.gelu", "nnx.gelu", "nn.gelu"), ("approximate",), "gelu",
             "jax.nn.gelu / nnx.gelu default to the tanh approximation"),
    CallRule(("nn.MultiheadAttention",), ("batch_first",), "batch_first",
             "torch's default batch_first=False expects (T, B, E)"),
    CallRule(("nn.TransformerEncoderLayer",), ("norm_first", "activation", "layer_norm_eps", "batch_first",
                                               "dropout"), "norm_placement",
             "defaults: post-norm, ReLU, eps 1e-5, batch_first=False, dropout 0.1"),
    CallRule(("nn.MultiHeadAttention",), ("bias",), "attention_bias",
             "MLX's default bias=False: no q/k/v/output biases"),
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
    """Calls in `text` that leave a divergent framework default in place; a file that is not
    Python is refused in one line (it is the input that is wrong, not a default it uses)."""
    try:
        tree = ast.parse(text, filename=filename)
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the text
        where = f"line {exc.lineno}: " if getattr(exc, "lineno", None) else ""
        why = getattr(exc, "msg", exc)
        raise InputError(f"--source {filename}: not Python source ({where}{why})") from None
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
            missing = [k for k in rule.keywords if not set(k.split("|")) & passed]
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
    """A user's source file, read as every user file is (a directory or FIFO is named, not read)."""
    from shared.core.files import read_text

    return audit_source(read_text(path, f"source file {str(path)!r}"), str(path))


# ---- built-model audit ----------------------------------------------------------------------
def audit_model(model: Any, spec: ModelSpec, label: str = "model") -> list[Finding]:
    """Compare a built torch nn.Module, Keras model or layer, flax.nnx or mlx.nn module with `spec`:
    its framework's structural reader (`layers()` of ports/<fw>/user.py) and the one comparison
    (shared/your_model/spec_check.py), every contradicting layer."""
    try:  # the model exists, so its framework is imported already
        _, reader = user_port(model, None)
    except InputError:
        raise InputError(f"audit_model: a {type(model).__module__}.{type(model).__name__} is not a torch "
                         "nn.Module, Keras layer or model, nnx.Module or mlx.nn.Module") from None
    return [Finding(f"{label}:{c.where}" if c.where else label, c.entry or c.field, c.text())
            for c in check_layers(spec, reader.layers(model))]


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


# defaults.py and demos.py build layers with their defaults on purpose (they read and show them):
# not the port's model.
NOT_PORT_SOURCE = ("__init__.py", "defaults.py", "demos.py")


def port_source_files(framework: str) -> list[Path]:
    root = REPO_ROOT / "ports" / framework
    return sorted(p for p in root.glob("*.py") if p.name not in NOT_PORT_SOURCE)


def audit_ports(frameworks: list[str], base: ModelSpec) -> tuple[list[Finding], list[str]]:
    """(findings, what was checked) for the named ports: source, then built layers."""
    from ports import create_port

    findings: list[Finding] = []
    checked: list[str] = []
    for fw in frameworks:
        for path in port_source_files(fw):
            findings += audit_file(path)
        checked.append(f"{fw}: source of {', '.join(p.name for p in port_source_files(fw))}")
        defaults_module(fw)  # before the port: it prepares the process (Keras)
        for spec in probe_specs(base):
            port = create_port(fw, spec)
            findings += audit_model(port.model, spec, f"{fw}[{spec.name}]")
            checked.append(f"{fw}: layers built for {spec.name} (eps {spec.layer_norm_eps:g}, MLP "
                           f"{spec.activation}, head {spec.head_activation})")
    return findings, checked
