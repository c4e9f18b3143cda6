"""The native ports are parallel texts: the files in FILES define the same top-level classes and
functions, and each class the same methods, in the same order, in every port of `ports.NATIVE`
(torch, Keras, Flax, MLX, and any native port added later), so a diff between two ports shows only
the framework idiom. This module compares their outlines (names in order);
test_ports_parallel_text.py compares their docstrings and comments.

Read with `ast` (fast, no framework imported). Code bodies are not compared: a branch inside a
method (torch's narrow-head attention path in `Attention.forward`) is idiom, not structure.

`ports/onnx` is not a parallel text and is not compared: it is an extra backend (the torch port
exported to ONNX and run by ONNX Runtime), with its own export.py and no model of its own.

user.py (a user's own model where the port stands) is parallel in its public functions only: its
private helpers (a leading "_") are each framework's idiom (Keras' sub-model and call wrapping, nnx's
views and capture, MLX's recording subclass), and neither their names nor their text are compared.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ports import NATIVE, PORTS

ROOT = Path(__file__).resolve().parent.parent
FILES = ("model.py", "transfer.py", "port.py", "train.py", "defaults.py", "demos.py", "user.py")
# Files only one port has, each with its reason: every other file of a port is one of FILES.
OWN_FILES: dict[tuple[str, str], str] = {
    # Flax linen, the older of Flax's two APIs, holds a model as (module, variables): the reading
    # and running of a user's linen model (ports/flax/user.py hands those objects to them) has no
    # counterpart in the other frameworks, whose user models are one kind of object each.
    ("flax", "linen.py"): "a user's linen model: its variables, run and capture",
    ("flax", "linen_layers.py"): "a user's linen model: its layers, traced without computing",
    # equinox, JAX's other module library: immutable pytrees whose layers take one example each
    ("flax", "equinox_modules.py"): "a user's equinox model: its arrays, layers, run and capture",
}
PRIVATE_OWN = ("user.py",)  # files whose private helpers are each port's own: not compared
# Each framework's spelling of "run the layer": compared as one name.
CALL_METHODS = {"forward": "<call>", "call": "<call>", "__call__": "<call>"}

# Where today's ports legitimately differ: (framework, file) -> the names only that port has
# ("Class.method" for a method). Every entry must exist, so a difference that goes away has to
# leave this list too.
EXTRAS: dict[tuple[str, str], set[str]] = {
    # nnx keeps a constant array (the sincos table) as state only in a Variable subclass.
    ("flax", "model.py"): {"FixedTable"},
    # A naflex batch's per-image resize: torch loops F.interpolate over the images and JAX's
    # scale_and_translate takes a traced scale; Keras and MLX have no resize that takes a traced size,
    # so they build the antialiased weights themselves.
    ("keras", "model.py"): {"resize_weights"},
    ("mlx", "model.py"): {"resize_weights"},
    # Keras alone can run on Metal (its JAX/TF backends on Apple silicon).
    ("keras", "port.py"): {"_is_apple"},
    # Mixed precision: torch's is a context around each call (autocast); Keras' dtype policies and
    # Flax's compute dtype are fixed when the model is built, and MLX has none. Flax's pure rung
    # casts the loaded state (its set_value keeps the dtype of the value it is given).
    ("torch", "port.py"): {"Port.autocast"},
    ("flax", "port.py"): {"Port._cast"},
    # torch renames and transposes every tensor through its table's bound plan (from_native names
    # the source in its errors); Keras and Flax hold the canonical layouts as they are, so they bind
    # each canonical name to a variable.
    ("torch", "transfer.py"): {"plan", "from_native"},
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
    # MLX: plan / from_native as torch (MLX also renames and transposes); torch's
    # hand clip (MLX's divides by norm + 1e-6) and the Adam moments read out of MultiOptimizer's
    # state; its demonstrations (MHA bias default, GELU names, OHWI conv, clip epsilon, float64).
    ("mlx", "port.py"): {"gpu_backend"},  # one mx.gpu served by a CUDA or a Metal build
    ("mlx", "transfer.py"): {"plan", "from_native"},
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


def is_own(framework: str, file: str, name: str) -> bool:
    """True when `name` ("f", "Class" or "Class.method") is one port's own and not compared: listed
    in EXTRAS (itself or its class), or a private helper of a PRIVATE_OWN file."""
    extras = EXTRAS.get((framework, file), set())
    top = name.split(".")[0]
    return name in extras or top in extras or (file in PRIVATE_OWN and top.startswith("_"))


def without_extras(framework: str, file: str) -> list[tuple[str, list[str]]]:
    found = outline(port_dir(framework) / file)
    names = {name for name, _ in found} | {f"{name}.{m}" for name, methods in found for m in methods}
    stale = EXTRAS.get((framework, file), set()) - names
    assert not stale, f"ports/{framework}/{file}: allow-listed {sorted(stale)} no longer exist"
    return [(name, [m for m in methods if not is_own(framework, file, f"{name}.{m}")])
            for name, methods in found if not is_own(framework, file, name)]


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


def test_every_native_port_has_the_same_files() -> None:
    """The same files in each port; a file only one port has is named in OWN_FILES with its reason."""
    for fw in NATIVE:
        found = {p.name for p in port_dir(fw).glob("*.py")} - {"__init__.py"}
        own = {file for (framework, file) in OWN_FILES if framework == fw}
        assert found == set(FILES) | own, f"ports/{fw}: {sorted(found ^ (set(FILES) | own))}"


def test_allow_list_names_only_native_ports_and_compared_files() -> None:
    for fw, file in EXTRAS:
        assert fw in NATIVE and file in FILES, (fw, file)
