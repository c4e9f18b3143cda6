"""The native ports are parallel texts: model.py, transfer.py, port.py, train.py and defaults.py
define the same top-level classes and functions, and each class the same methods, in the same
order, in every port of `ports.NATIVE` (torch, Keras, Flax, and any native port added later), so
a diff between two ports shows only the framework idiom.

Read with `ast` and `tokenize` (fast, no framework imported). Code bodies are not compared: a
branch inside a method (torch's narrow-head attention path in `Attention.forward`) is idiom, not
structure. Their text is: the docstrings and `#` comments of model.py, transfer.py, port.py and
train.py must read the same in every port, modulo the IDIOM table, except where FRAMEWORK_NOTES
says why a definition's text is its framework's own; so a stale comment in one port fails.

`ports/onnx` is not a parallel text and is not compared: it is an extra backend (the torch port
exported to ONNX and run by ONNX Runtime), with its own export.py and no model of its own.

user.py (a user's own model where the port stands) arrives one framework at a time: every native
port that has it defines the same public functions in the same order; its private helpers are
each framework's idiom (Keras' sub-model and call wrapping, nnx's views and interception).
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
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
    # MLX: plan / to_native / from_native as torch (MLX also renames and transposes); torch's
    # hand clip (MLX's divides by norm + 1e-6) and the Adam moments read out of MultiOptimizer's
    # state; its demonstrations (MHA bias default, GELU names, OHWI conv, clip epsilon, float64).
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


# ---- parallel text: docstrings and comments -----------------------------------------------------
# Each native port's docstrings and `#` comments are compared with the first port's, definition by
# definition and in order, the way Transformers' "Copied from ... with A->B" check compares a
# copied block with its source: after IDIOM has written each framework's spelling of one thing the
# same way. A definition whose text truly differs (it explains its own framework's API) is listed
# in FRAMEWORK_NOTES with why; names in EXTRAS are one port's own and are not compared.
TEXT_FILES = ("model.py", "transfer.py", "port.py", "train.py")  # defaults.py joins once it is split
# (spellings, what they are): each framework's word for one thing, compared as one word
IDIOM: tuple[tuple[str, str], ...] = (
    (r"nn\.Module|keras\.layers\.Layer|layers\.Layer|nnx\.Module|mlx\.nn\.Module", "<module class>"),
    (r"torch\.nn|keras\.layers|flax\.nnx|mlx\.nn", "<layers package>"),
    (r"PyTorch|Keras 3|Keras|Flax \(flax\.nnx\)|Flax|MLX|torch", "<framework>"),
    (r"\bforward\b|\bcall\b|__call__", "<call>"),
    (r"\bConv2d\b|\bConv2D\b|\bConv\b", "<conv>"),
    (r"\bLinear\b|\bDense\b", "<dense>"),
    (r"\bNCHW\b|\bNHWC\b", "<layout>"),
    (r"\(B, D, rows, cols\)|\(B, rows, cols, D\)", "<layout shape>"),
    (r"\bin train mode\b|\bin training\b", "in <train mode>"),
    (r"\bparameter\b|\bweight\b", "<parameter>"),
)
PRAGMA = re.compile(r"^(noqa|type:|pragma)\b")
# (file, definition) -> why its text differs between ports. "X.__doc__" is X's docstring, "X" its
# comments; "<module>" is the module's own. Every entry must still differ somewhere.
FRAMEWORK_NOTES: dict[tuple[str, str], str] = {
    # model.py: how each library's layers must be called to compute the spec's function
    ("model.py", "<module>"): "torch's narrow-head constant; Keras' dtype policies (and ops.add) and "
                              "Flax's compute dtype, explained once for the whole file",
    ("model.py", "activation"): "where each library's GELU default is exact and where tanh",
    ("model.py", "layer_norm"): "Flax alone has a fast-variance default to switch off",
    ("model.py", "PatchEmbed.__init__"): "each library's padding argument order; Keras' oneDNN conv bug; "
                                         "nnx.Conv's SAME default; MLX's OHWI kernel",
    ("model.py", "Attention.__doc__"): "how each library's attention module takes the head width and biases",
    ("model.py", "Attention.<call>"): "when each port leaves its fused kernel besides taps and the mode: MLX "
                                      "for attention dropout",
    ("model.py", "Attention.explicit"): "the explicit path is torch's and MLX's own code, Keras' and Flax's "
                                        "module option that returns or sows the probabilities",
    ("model.py", "Head.__init__"): "how nnx and MLX hold a list of submodules",
    ("model.py", "VisionTransformer.__init__"): "how MLX keeps a constant out of its parameters",
    ("model.py", "VisionTransformer.positions"): "MLX's set_dtype casts parameters only",
    # port.py: each framework's runtime (devices, threads, precision switches, compilers)
    ("port.py", "<module>.__doc__"): "Keras runs on the active backend; Flax on JAX",
    ("port.py", "pin_precision"): "each framework's own TF32 / matmul-precision switch",
    ("port.py", "set_threads"): "which thread switches hold in each framework",
    ("port.py", "available_devices"): "MLX's one GPU device class over CUDA or Metal builds",
    ("port.py", "allocator_peak"): "MLX counts CPU allocations too",
    ("port.py", "gemm_call"): "how each framework waits for one product",
    ("port.py", "run_modes"): "the ways each framework offers to run the same function (attention paths, "
                              "Keras' compilers) and the default each measured once",
    ("port.py", "Port.__init__"): "each framework's mixed precision and device placement",
    ("port.py", "Port.load"): "how a pure rung casts the loaded state (Flax, MLX)",
    ("port.py", "Port.prepare.__doc__"): "each framework's native layout and array type",
    ("port.py", "Port.<call>"): "nnx.Dropout is active by default",
    ("port.py", "Port.set_mode"): "Keras' mode is its compiler, the others' their attention path",
    ("port.py", "Port.compiled_forward"): "Keras' mode decides XLA",
    ("port.py", "Port.compiled_forward.__doc__"): "each framework's compiler",
    ("port.py", "Port.sync"): "how TensorFlow and MLX synchronise",
    ("port.py", "Port.loss_and_gradients"): "each library's cross-entropy default (logits, reduction)",
    # transfer.py: each framework's parameter layout
    ("transfer.py", "<module>.__doc__"): "each framework's stored layouts",
    ("transfer.py", "table.__doc__"): "torch's table is timm's; the others name attribute or tree paths",
    ("transfer.py", "table"): "torch packs qkv with one bias; the others add an output bias of their own",
    ("transfer.py", "load_canonical"): "torch copies into live parameters",
    ("transfer.py", "export_canonical"): "torch's .numpy() is a view",
    ("transfer.py", "export_gradients.__doc__"): "how each framework hands back gradients",
    # train.py: each optimizer library's defaults and compilation
    ("train.py", "<module>.__doc__"): "how each framework compiles (or not) its optimizer step",
    ("train.py", "<module>"): "the optimizer defaults each library pins differently",
    ("train.py", "canonical_sources.__doc__"): "each framework's native parameter key",
    ("train.py", "native_groups.__doc__"): "how each optimizer library excludes parameters from decay",
    ("train.py", "Trainer"): "eager, tf.function or nnx.jit",
    ("train.py", "Trainer.__init__"): "each AdamW's defaults and Keras' loss-scaling wrapper",
    ("train.py", "Trainer.reseed.__doc__"): "Keras keeps one seed generator per dropout layer",
    ("train.py", "Trainer.step"): "where each framework's step body lives (Keras' and Flax's in a compiled "
                                  "function)",
    ("train.py", "Trainer.loss_scale"): "why Flax and MLX never scale",
    ("train.py", "Trainer.set_learning_rate"): "Keras' lr variable; Flax's committed scalar",
    ("train.py", "Trainer.export_state"): "Keras keeps no public moment map",
    ("train.py", "Trainer.load_state"): "Flax's uncommitted arrays",
}


def normalised(text: str) -> str:
    for spellings, word in IDIOM:
        text = re.sub(spellings, word, text)
    return " ".join(text.split())


def parallel_text(source: str) -> dict[str, list[str]]:
    """Definition -> its normalised docstring ("X.__doc__") or `#` comment blocks ("X"; a block is
    consecutive comment lines), in source order; methods as "Class.method", the layer-call method
    under CALL_METHODS' one name."""
    tree = ast.parse(source)
    spans: list[tuple[int, int, str]] = []
    text: dict[str, list[str]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + (CALL_METHODS.get(node.name, node.name) if prefix else node.name)
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                spans.append((start, node.end_lineno or start, name))
                doc = ast.get_docstring(node, clean=True)
                if doc:
                    text[f"{name}.__doc__"] = [normalised(doc)]
                if isinstance(node, ast.ClassDef):
                    visit(node.body, f"{name}.")

    module_doc = ast.get_docstring(tree, clean=True)
    if module_doc:
        text["<module>.__doc__"] = [normalised(module_doc)]
    visit(tree.body, "")
    previous = (0, "")  # (line, owner) of the last standalone comment line
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        comment = token.string.lstrip("#").strip()
        if token.type != tokenize.COMMENT or PRAGMA.match(comment):
            continue
        line = token.start[0]
        inside = [(start, name) for start, end, name in spans if start <= line <= end]
        owner = max(inside)[1] if inside else "<module>"  # the innermost definition
        standalone = token.line.strip().startswith("#")
        blocks = text.setdefault(owner, [])
        if standalone and previous == (line - 1, owner) and blocks:  # a block's next line: rewrapping
            blocks[-1] = normalised(f"{blocks[-1]} {comment}")     # it is no difference
        else:
            blocks.append(normalised(comment))
        previous = (line, owner) if standalone else (0, "")
    return text


def compared(text: dict[str, list[str]], extras: set[str]) -> dict[str, list[str]]:
    """`text` without one port's own definitions (`extras`: its EXTRAS)."""
    def own(key: str) -> bool:
        name = key.removesuffix(".__doc__")
        return name in extras or name.split(".")[0] in extras
    return {key: lines for key, lines in text.items() if not own(key)}


def text_differences(file: str, sources: dict[str, str]) -> list[str]:
    """One line per definition whose docstring or comments differ from the first port's, for
    `sources`: framework -> that port's `file` as text."""
    first, *others = sources
    notes = {name for f, name in FRAMEWORK_NOTES if f == file}
    out = []
    expected = compared(parallel_text(sources[first]), EXTRAS.get((first, file), set()))
    for fw in others:
        got = compared(parallel_text(sources[fw]), EXTRAS.get((fw, file), set()))
        for key in sorted(set(expected) | set(got)):
            if key in notes or expected.get(key) == got.get(key):
                continue
            diff = difflib.unified_diff(expected.get(key, []), got.get(key, []), lineterm="", n=0)
            changed = " | ".join(line for line in list(diff)[2:] if not line.startswith("@@"))
            out.append(f"ports/{fw}/{file} {key}: {changed}")
    return out


def port_sources(file: str) -> dict[str, str]:
    return {fw: (port_dir(fw) / file).read_text() for fw in NATIVE}


@pytest.mark.parametrize("file", TEXT_FILES)
def test_every_native_port_has_the_same_docstrings_and_comments(file: str) -> None:
    found = text_differences(file, port_sources(file))
    assert not found, "stale or unlisted text (fix it, or list it in FRAMEWORK_NOTES with why):\n" + \
        "\n".join(found)


def test_every_framework_note_still_differs() -> None:
    for file, name in FRAMEWORK_NOTES:
        assert file in TEXT_FILES, (file, name)
        texts = [parallel_text(source).get(name) for source in port_sources(file).values()]
        assert any(texts), f"{file}: FRAMEWORK_NOTES names {name!r}, which no port has"
        assert any(t != texts[0] for t in texts[1:]), \
            f"{file}: {name!r} reads the same in every port now; remove it from FRAMEWORK_NOTES"


def test_a_stale_comment_in_one_port_fails_the_check() -> None:
    sources = port_sources("model.py")
    comment = "# post: LN(x + f(x))"
    assert comment in sources["keras"] and text_differences("model.py", sources) == []
    sources["keras"] = sources["keras"].replace(comment, "# post: LN(x + f(x)), as the three ports do", 1)
    assert text_differences("model.py", sources) == [
        "ports/keras/model.py Block.<call>: -post: LN(x + f(x)) | +post: LN(x + f(x)), as the three ports do"]
