"""The native ports' docstrings and `#` comments read the same in every port: each file in FILES
(test_ports_parallel.py, which compares their outlines) is compared with the first port's,
definition by definition and in order, the way Transformers' "Copied from ... with A->B" check
compares a copied block with its source: after IDIOM has written each framework's spelling of one
thing the same way. So a stale comment in one port fails.

A definition whose text truly differs (it explains its own framework's API) is listed in
FRAMEWORK_NOTES with why; names in EXTRAS, and user.py's private helpers, are one port's own and
are not compared. Read with `ast` and `tokenize` (fast, no framework imported).
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize

import pytest

from ports import NATIVE
from tests.test_ports_parallel import CALL_METHODS, FILES, is_own, port_dir

# (spellings, what they are): each framework's word for one thing, compared as one word
IDIOM: tuple[tuple[str, str], ...] = (
    (r"nn\.Module|keras\.layers\.Layer|layers\.Layer|nnx\.Module|mlx\.nn\.Module", "<module class>"),
    (r"torch\.nn|keras\.layers|flax\.nnx|mlx\.nn", "<layers package>"),
    (r"PyTorch|Keras 3|Keras|Flax \(<layers package>\)|Flax|MLX|torch", "<framework>"),
    (r"\bforward\b|\bcall\b|__call__", "<call>"),
    (r"\bConv2d\b|\bConv2D\b|\bConv\b", "<conv>"),
    (r"\bLinear\b|\bDense\b", "<dense>"),
    (r"\bNCHW\b|\bNHWC\b", "<layout>"),
    (r"\(B, D, rows, cols\)|\(B, rows, cols, D\)", "<layout shape>"),
    (r"\(B, 1, N, hd\)|\(B, N, 1, hd\)", "<rotary rows shape>"),  # q/k as (B, H, N, hd) or (B, N, H, hd)
    (r"\(B, C, H, W\)|\(B, H, W, C\)", "<image shape>"),
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
    ("model.py", "norm_layer"): "Flax alone has a fast-variance default to switch off",
    ("model.py", "PatchEmbed.__init__"): "each library's padding argument order; Keras' oneDNN conv bug; "
                                         "nnx.Conv's SAME default; MLX's OHWI kernel",
    ("model.py", "Rotary.__init__"): "which axis holds the tokens in each library's q and k (torch's and "
                                     "MLX's (B, H, N, hd), Keras' and nnx's (B, N, H, hd)), how MLX keeps a "
                                     "constant out of its parameters, and nnx's rotation at normalize_qk's "
                                     "place holding the qk-norm",
    ("model.py", "Attention.__doc__"): "how each library's attention module takes the head width and biases",
    ("model.py", "Attention.<call>"): "when each port leaves its fused kernel besides taps and the mode: MLX "
                                      "for attention dropout; nnx sets a batch's rotary rows on its "
                                      "normalize_qk hook for the call, which calls it with q or k alone",
    ("model.py", "Attention.explicit"): "the explicit path is torch's and MLX's own code, Keras' and Flax's "
                                        "module option that returns or sows the probabilities",
    ("model.py", "Head.__init__"): "how nnx and MLX hold a list of submodules",
    ("model.py", "VisionTransformer.__init__"): "how MLX keeps a constant out of its parameters; the policy "
                                                "Keras' head takes without a classifier",
    ("model.py", "VisionTransformer.positions"): "MLX's set_dtype casts parameters only",
    ("model.py", "image_positions"): "how each library resizes to a size known only at run time: torch "
                                     "loops F.interpolate over the images (its grid channels-last, where "
                                     "its one-column resize is right), JAX scales by a traced factor, "
                                     "Keras and MLX weigh by their own filters",
    ("model.py", "image_positions.__doc__"): "the table that names each method's operation (RESAMPLE_OPS "
                                             "in torch and Flax, IMAGE_RESIZE_KERNELS in Keras and MLX)",
    ("model.py", "resample_positions"): "each library's resize layout (torch's (1, D, rows, cols), MLX's "
                                        "batched channels-last), how MLX's Upsample sizes its output from a "
                                        "factor, and where a library's resize or map_coordinates answers "
                                        "float32 for a narrower table (Keras on TF, JAX, MLX)",
    ("model.py", "PatchEmbed.<call>"): "each library's conv kernel layout read as a matmul's (torch's OIHW "
                                       "permuted, Keras' and Flax's HWIO, MLX's OHWI as it is) and the "
                                       "dtype Keras' and nnx's conv would compute in",
    ("model.py", "Attention.__init__"): "Keras' MultiHeadAttention is built by hand: the port calls its "
                                        "parts (for qk-norm), never its call",
    ("model.py", "Attention.project"): "torch splits one packed Linear into heads; Keras' and MLX's "
                                       "per-projection layers; nnx's attention module projects itself",
    ("model.py", "Attention.project.__doc__"): "torch splits its packed qkv Linear's rows for the pool's "
                                               "probe; the others have one projection each (Keras' return "
                                               "(B, N, H, hd)); nnx.MultiHeadAttention takes query and "
                                               "key/value inputs and projects them",
    ("model.py", "Merger.__init__"): "Keras builds a layer at its first call, which a deepstack merger "
                                     "(called for taps only) never has before its weights are loaded",
    ("model.py", "AttentionPool.<call>"): "Keras' ops.add keeps two bfloat16 branches' sum in bfloat16",
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
    # defaults.py: each reader reads its own framework's API; these say how, where it is not plain
    ("defaults.py", "<module>"): "Keras alone loads TensorFlow, so it sets the import order a process "
                                 "running every framework needs; MLX names the forms its nn.GELU accepts",
    ("defaults.py", "patch_layout"): "torch and Keras flatten a measured patch in their input layouts; "
                                     "Flax and MLX read a kernel's shape",
    ("defaults.py", "pooling"): "where each framework's model-zoo ViT readout is read: timm's source, "
                                "the big_vision and mlx-examples repositories",
    ("defaults.py", "batch_first"): "torch has a batch_first argument to read; the others are measured",
    ("defaults.py", "attention_scale"): "how each scale is found: measured on torch's and Flax's "
                                        "builtin, Keras' attribute, MLX's source",
    ("defaults.py", "cpu_precision"): "MLX's TF32 switch is set in its C++ backends only",
    ("defaults.py", "float64_devices"): "torch's MPS has no float64; JAX warns as it truncates",
    # demos.py: the framework's API run as a demonstration
    ("demos.py", "<module>"): "Keras' demonstrations import defaults.py first, for its import order",
    ("demos.py", "adam_step.__doc__"): "how each optimizer library takes an L2 step: torch's functional "
                                       "path (its classes import triton), Keras' and MLX's decay added "
                                       "by hand, optax's chain; MLX's bias-correction default",
    # user.py: how each framework names, compiles and records a user's model
    ("user.py", "<module>.__doc__"): "each framework's native names; torch's device check, nnx's eval "
                                     "view, MLX's one memory",
    ("user.py", "<module>"): "MLX's table of the forms its nn.GELU names compute",
    ("user.py", "layers"): "what each attention module holds inside (torch's out_proj, the others' "
                           "projections); nnx's activation functions held as attributes",
    ("user.py", "compiled"): "the compiler setting each port shares with its Port: Keras' XLA off on "
                             "CPU, Flax's jit of the split pair, MLX's state as inputs",
    ("user.py", "capture"): "how each framework records a layer's output: Keras' sub-model or call "
                            "wrapping, nnx.capture, MLX's recording subclass (torch's hooks say it)",
}



def normalised(text: str) -> str:
    for spellings, word in IDIOM:
        text = re.sub(spellings, word, text)
    return " ".join(text.split())


def parallel_text(source: str) -> dict[str, list[str]]:
    """Definition -> its normalised docstring ("X.__doc__") or `#` comment blocks ("X"; a block is
    consecutive comment lines, joined before it is normalised, so rewrapping it is no difference),
    in source order; methods as "Class.method", the layer-call method under CALL_METHODS' one name."""
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
    blocks: dict[str, list[str]] = {}  # owner -> its comment blocks, as written
    previous = (0, "")  # (line, owner) of the last standalone comment line
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        comment = token.string.lstrip("#").strip()
        if token.type != tokenize.COMMENT or PRAGMA.match(comment):
            continue
        line = token.start[0]
        inside = [(start, name) for start, end, name in spans if start <= line <= end]
        owner = max(inside)[1] if inside else "<module>"  # the innermost definition
        standalone = token.line.strip().startswith("#")
        owned = blocks.setdefault(owner, [])
        if standalone and previous == (line - 1, owner) and owned:  # the block's next line
            owned[-1] = f"{owned[-1]} {comment}"
        else:
            owned.append(comment)
        previous = (line, owner) if standalone else (0, "")
    text.update({owner: [normalised(block) for block in owned] for owner, owned in blocks.items()})
    return text


def compared(text: dict[str, list[str]], framework: str, file: str) -> dict[str, list[str]]:
    """`text` without the definitions that are one port's own (`is_own`)."""
    return {key: lines for key, lines in text.items()
            if not is_own(framework, file, key.removesuffix(".__doc__"))}


def text_differences(file: str, sources: dict[str, str]) -> list[str]:
    """One line per definition whose docstring or comments differ from the first port's, for
    `sources`: framework -> that port's `file` as text."""
    first, *others = sources
    notes = {name for f, name in FRAMEWORK_NOTES if f == file}
    out = []
    expected = compared(parallel_text(sources[first]), first, file)
    for fw in others:
        got = compared(parallel_text(sources[fw]), fw, file)
        for key in sorted(set(expected) | set(got)):
            if key in notes or expected.get(key) == got.get(key):
                continue
            diff = difflib.unified_diff(expected.get(key, []), got.get(key, []), lineterm="", n=0)
            changed = " | ".join(line for line in list(diff)[2:] if not line.startswith("@@"))
            out.append(f"ports/{fw}/{file} {key}: {changed}")
    return out


def port_sources(file: str) -> dict[str, str]:
    return {fw: (port_dir(fw) / file).read_text() for fw in NATIVE}


@pytest.mark.parametrize("file", FILES)
def test_every_native_port_has_the_same_docstrings_and_comments(file: str) -> None:
    found = text_differences(file, port_sources(file))
    assert not found, "stale or unlisted text (fix it, or list it in FRAMEWORK_NOTES with why):\n" + \
        "\n".join(found)


def test_every_framework_note_still_differs() -> None:
    for file, name in FRAMEWORK_NOTES:
        assert file in FILES, (file, name)
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


def test_rewrapping_a_comment_is_no_difference() -> None:
    one_line = "def f():\n    # every parameter of the call, in order\n    pass\n"
    two_lines = "def f():\n    # every parameter\n    # of the call, in order\n    pass\n"
    assert parallel_text(one_line) == parallel_text(two_lines) == {
        "f": ["every <parameter> of the <call>, in order"]}


def test_user_py_compares_its_interface_not_its_private_helpers() -> None:
    sources = port_sources("user.py")
    assert text_differences("user.py", sources) == []
    helper = "without gradients -> the logits"  # keras' _logits docstring: a private helper, its own
    sources["keras"] = sources["keras"].replace(helper, "without gradients -> the scores", 1)
    assert helper in port_sources("user.py")["keras"] and text_differences("user.py", sources) == []
    [before] = parallel_text(sources["keras"])["run"]
    sources["keras"] = sources["keras"].replace("-> eval-mode,", "-> train-mode,", 1)
    after = before.replace("-> eval-mode,", "-> train-mode,")
    assert after != before
    assert text_differences("user.py", sources) == [f"ports/keras/user.py run: -{before} | +{after}"]
