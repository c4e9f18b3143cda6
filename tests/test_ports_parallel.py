"""The native ports are parallel texts: model.py, transfer.py, port.py, train.py and defaults.py
define the same top-level classes and functions, and each class the same methods, in the same
order, in every port of `ports.NATIVE` (torch, Keras, Flax, and any native port added later), so
a diff between two ports shows only the framework idiom.

Read with `ast` (fast, no framework imported). Bodies are not compared: a branch inside a method
(torch's narrow-head attention path in `Attention.forward`) is idiom, not structure.

`ports/onnx` is not a parallel text and is not compared: it is an extra backend (the torch port
exported to ONNX and run by ONNX Runtime), with its own export.py and no model of its own.

user.py (a user's own model where the port stands) arrives one framework at a time: every native
port that has it defines the same public functions in the same order; its private helpers are
each framework's idiom (Keras' sub-model and call wrapping, nnx's views and interception).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ports import NATIVE, PORTS

ROOT = Path(__file__).resolve().parent.parent
FILES = ("model.py", "transfer.py", "port.py", "train.py", "defaults.py", "demos.py")
USER_FILE = "user.py"  # compared among the ports that have it, public names only
# Each framework's spelling of "run the layer": compared as one name.
CALL_METHODS = {"forward": "<call>", "call": "<call>", "__call__": "<call>"}

# Where today's ports legitimately differ: (framework, file) -> the names only that port has
# ("Class.method" for a method). Every entry must exist, so a difference that goes away has to
# leave this list too.
EXTRAS: dict[tuple[str, str], set[str]] = {
    # nnx keeps a constant array (the sincos table) as state only in a Variable subclass.
    ("flax", "model.py"): {"FixedTable"},
    # Keras alone can run on Metal (its JAX/TF backends on Apple silicon).
    ("keras", "port.py"): {"_is_apple"},
    # Mixed precision: torch's is a context around each call (autocast); Keras' dtype policies and
    # Flax's compute dtype are fixed when the model is built, and MLX has none. Flax's pure rung
    # casts the loaded state (its set_value keeps the dtype of the value it is given).
    ("torch", "port.py"): {"Port.autocast"},
    ("flax", "port.py"): {"Port._cast"},
    # torch renames and transposes every tensor through its table's bound plan (to_native /
    # from_native); Keras and Flax hold the canonical layouts as they are, so they bind each
    # canonical name to a variable.
    ("torch", "transfer.py"): {"plan", "to_native", "from_native"},
    ("keras", "transfer.py"): {"bindings"},
    ("flax", "transfer.py"): {"bindings"},
    # The pinned training recipe in each optimizer library's own terms: torch clips by hand,
    # Keras through an optimizer option, optax through a mask and a jitted, chained transform.
    ("torch", "train.py"): {"clip_global_norm", "_numpy"},
    ("keras", "train.py"): {"clip_options", "Trainer.updates"},
    ("flax", "train.py"): {"decay_mask", "transform", "train_step", "Trainer._commit", "Trainer.updates",
                           "Trainer._adam_state", "_plain", "_lookup"},
    # Demonstrations of a divergence that lives in one framework's API (shared/teaching/*_demos.py):
    # torch's nn.MultiheadAttention, OIHW / (out, in) weights, train-mode default and matmul
    # precision; Keras' clipnorm and from_logits; Flax's fast variance.
    ("torch", "demos.py"): {"multihead_attention", "conv_patch_embed", "linear", "dropout_logits",
                            "precision_logits"},
    # Keras' one global dtype policy (mixed_precision_stream): torch autocast and Flax's per-layer
    # dtype have no global switch to build a model under, and MLX has no mixed precision.
    ("keras", "demos.py"): {"clipped_sgd_updates", "sparse_cross_entropy", "global_policy_port"},
    ("flax", "demos.py"): {"layer_norm"},
    # MLX: the explicit softmax(q k^T) v path for taps and attention dropout, which
    # nn.MultiHeadAttention lacks; plan / to_native / from_native as torch (MLX also renames
    # and transposes); torch's hand clip (MLX's divides by
    # norm + 1e-6) and the Adam moments read out of MultiOptimizer's state; its demonstrations
    # (MHA bias default, GELU names, OHWI conv, clip epsilon, float64).
    ("mlx", "model.py"): {"Attention.explicit"},
    ("mlx", "port.py"): {"gpu_backend"},  # one mx.gpu served by a CUDA or a Metal build
    ("mlx", "transfer.py"): {"plan", "to_native", "from_native"},
    ("mlx", "train.py"): {"clip_global_norm", "Trainer._moments", "_mean_cross_entropy"},
    ("mlx", "demos.py"): {"clip_grad_norm", "conv_patch_embed", "attention_block", "gelu_values",
                          "float64_logits"},
}


def port_dir(framework: str) -> Path:
    return ROOT / Path(*PORTS[framework].module.split("."))


def outline(path: Path) -> list[tuple[str, list[str]]]:
    """(name, method names) for each top-level class and function, in source order."""
    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, []))
        elif isinstance(node, ast.ClassDef):
            methods = [CALL_METHODS.get(m.name, m.name) for m in node.body
                       if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            out.append((node.name, methods))
    return out


def without_extras(framework: str, file: str) -> list[tuple[str, list[str]]]:
    extras = EXTRAS.get((framework, file), set())
    found = outline(port_dir(framework) / file)
    names = {name for name, _ in found} | {f"{name}.{m}" for name, methods in found for m in methods}
    stale = extras - names
    assert not stale, f"ports/{framework}/{file}: allow-listed {sorted(stale)} no longer exist"
    return [(name, [m for m in methods if f"{name}.{m}" not in extras])
            for name, methods in found if name not in extras]


def test_native_registry_lists_the_parallel_ports() -> None:
    assert NATIVE == ("torch", "keras", "flax", "mlx")
    assert "onnx" in PORTS and "onnx" not in NATIVE  # an extra backend, not a parallel text
    natives = {PORTS[fw].module for fw in NATIVE}
    assert len(natives) == len(NATIVE)  # one package per native port


@pytest.mark.parametrize("file", FILES)
def test_every_native_port_has_the_same_outline(file: str) -> None:
    first = NATIVE[0]
    for fw in NATIVE:
        assert (port_dir(fw) / file).is_file(), f"ports/{fw}/{file} is missing"
    expected = without_extras(first, file)
    assert expected, f"ports/{first}/{file} defines nothing"
    for fw in NATIVE[1:]:
        got = without_extras(fw, file)
        assert [n for n, _ in got] == [n for n, _ in expected], \
            f"ports/{fw}/{file}: top-level names differ from ports/{first}/{file}"
        for (name, methods), (_, wanted) in zip(got, expected, strict=True):
            assert methods == wanted, f"ports/{fw}/{file}: {name}'s methods differ from ports/{first}"


def leading_comments(path: Path) -> dict[str, list[str]]:
    """Each top-level function's comment lines between its signature and its first statement."""
    lines = path.read_text().splitlines()
    return {node.name: [line.strip() for line in lines[node.lineno:node.body[0].lineno - 1]
                        if line.strip().startswith("#")]
            for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}


def test_every_user_py_has_the_same_public_outline() -> None:
    having = [fw for fw in NATIVE if (port_dir(fw) / USER_FILE).is_file()]
    assert having, f"no native port has {USER_FILE}"
    public = {fw: [(name, methods) for name, methods in outline(port_dir(fw) / USER_FILE)
                   if not name.startswith("_")] for fw in having}
    comments = {fw: {name: text for name, text in leading_comments(port_dir(fw) / USER_FILE).items()
                     if not name.startswith("_")} for fw in having}
    expected = public[having[0]]
    assert expected, f"ports/{having[0]}/{USER_FILE} defines nothing public"
    for fw in having[1:]:
        assert public[fw] == expected, \
            f"ports/{fw}/{USER_FILE}: public functions differ from ports/{having[0]}/{USER_FILE}"
        for name, text in comments[having[0]].items():  # the interface's own one-line comments
            assert text and comments[fw][name] == text, \
                f"ports/{fw}/{USER_FILE}: {name}'s comment differs from ports/{having[0]}/{USER_FILE}"


def test_allow_list_names_only_native_ports_and_compared_files() -> None:
    for fw, file in EXTRAS:
        assert fw in NATIVE and file in FILES, (fw, file)
