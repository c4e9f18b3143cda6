"""Each framework's default for every catalogue entry, read from the installed framework.

Nothing is typed in that the framework can tell us: defaults come from `inspect.signature`, from
a freshly built layer's attributes, or from parameter shapes. Frameworks are imported inside the
readers only (shared/ stays framework-neutral), and a missing framework is reported, not raised.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from shared.errors import FrameworkUnavailable

FRAMEWORKS = ("torch", "keras", "flax")
Reader = Callable[[], str]


def default_of(obj: Any, name: str) -> Any:
    """A keyword's default. flax.nnx classes hide their signature behind a metaclass
    (`(*args, **kwargs)`), so their `__init__` is read instead."""
    for target in (obj, getattr(obj, "__init__", None)):
        if target is None:
            continue
        try:
            params = inspect.signature(target).parameters
        except (TypeError, ValueError):
            continue
        if name in params and params[name].default is not inspect.Parameter.empty:
            return params[name].default
    raise LookupError(f"{getattr(obj, '__qualname__', obj)!r} has no default for {name!r}")


def _require(module: str, framework: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise FrameworkUnavailable(f"{framework} is not installed ({module!r} missing)")


def torch_modules() -> tuple[ModuleType, ModuleType]:
    _require("torch", "torch")
    import torch
    from torch import nn

    return torch, nn


def keras_module() -> ModuleType:
    _require("keras", "keras")
    if "tensorflow" not in sys.modules and importlib.util.find_spec("torch") is not None:
        # Measured here: once TensorFlow is loaded, a later import of triton (pulled in by
        # torch._dynamo, e.g. on the first optimizer step) segfaults the process; imported
        # first, both live together.
        import torch._dynamo  # noqa: F401
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras

    return keras


def flax_modules() -> tuple[ModuleType, ModuleType, ModuleType]:
    _require("flax", "flax")
    import jax
    import optax
    from flax import nnx

    return jax, nnx, optax


# ---- readers, one per (entry, framework) -------------------------------------------------------
def _torch_mha_head_width() -> str:
    _, nn = torch_modules()
    m = nn.MultiheadAttention(32, 4)
    params = sum(p.numel() for p in m.parameters())
    return f"MultiheadAttention(embed_dim=32, num_heads=4): head width {m.head_dim}, {params:,} params"


def _keras_mha_head_width() -> str:
    keras = keras_module()
    import numpy as np

    m = keras.layers.MultiHeadAttention(num_heads=4, key_dim=32)
    x = np.zeros((1, 3, 32), np.float32)
    m(x, x)
    shape = tuple(m._query_dense.kernel.shape)
    return f"MultiHeadAttention(num_heads=4, key_dim=32): head width {shape[-1]}, {m.count_params():,} params"


def _flax_mha_head_width() -> str:
    _, nnx, _ = flax_modules()
    m = nnx.MultiHeadAttention(num_heads=4, in_features=32, decode=False, rngs=nnx.Rngs(0))
    return f"nnx.MultiHeadAttention(num_heads=4, in_features=32): head width {m.head_dim}"


def _torch_padding() -> str:
    _, nn = torch_modules()
    return f"Conv2d padding={default_of(nn.Conv2d, 'padding')!r} (trailing pixels dropped)"


def _keras_padding() -> str:
    keras = keras_module()
    return (f"Conv2D padding={default_of(keras.layers.Conv2D, 'padding')!r}; "
            f"ops.image.extract_patches padding={default_of(keras.ops.image.extract_patches, 'padding')!r}")


def _flax_padding() -> str:
    _, nnx, _ = flax_modules()
    return f"nnx.Conv padding={default_of(nnx.Conv, 'padding')!r}"


def _torch_conv_layout() -> str:
    _, nn = torch_modules()
    w = nn.Conv2d(3, 8, kernel_size=(4, 2)).weight
    return f"Conv2d(3, 8, (4, 2)).weight {tuple(w.shape)} = OIHW, input NCHW"


def _keras_conv_layout() -> str:
    keras = keras_module()
    layer = keras.layers.Conv2D(8, (4, 2))
    layer.build((None, 8, 8, 3))
    return (f"Conv2D(8, (4, 2)).kernel {tuple(layer.kernel.shape)} = HWIO, "
            f"image_data_format {keras.config.image_data_format()!r}")


def _flax_conv_layout() -> str:
    _, nnx, _ = flax_modules()
    k = nnx.Conv(3, 8, (4, 2), rngs=nnx.Rngs(0)).kernel
    return f"nnx.Conv(3, 8, (4, 2)).kernel {tuple(k.shape)} = HWIO, input NHWC"


def _torch_patch_order() -> str:
    _, nn = torch_modules()
    import torch

    x = torch.arange(2 * 2 * 2, dtype=torch.float32).reshape(1, 2, 2, 2)  # NCHW, C=2, 2x2
    cols = nn.functional.unfold(x, kernel_size=2)[0, :, 0].tolist()
    order = "(C, ph, pw)" if cols == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] else str(cols)
    return f"F.unfold / Conv2d.weight.reshape(D, -1) flatten {order}"


def _keras_patch_order() -> str:
    keras = keras_module()
    import numpy as np

    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)  # NHWC, 2x2, C=2
    flat = np.asarray(keras.ops.image.extract_patches(x, 2))[0, 0, 0].tolist()
    order = "(ph, pw, C)" if flat == [float(i) for i in range(8)] else str(flat)
    return f"ops.image.extract_patches / Conv2D.kernel.reshape(-1, D) flatten {order}"


def _flax_patch_order() -> str:
    _, nnx, _ = flax_modules()
    k = nnx.Conv(3, 8, (4, 2), rngs=nnx.Rngs(0)).kernel
    return f"kernel {tuple(k.shape)}: reshape(-1, D) flattens (ph, pw, C)"


def _torch_eps() -> str:
    _, nn = torch_modules()
    return f"nn.LayerNorm eps={default_of(nn.LayerNorm, 'eps'):g}"


def _keras_eps() -> str:
    keras = keras_module()
    return (f"layers.LayerNormalization epsilon={default_of(keras.layers.LayerNormalization, 'epsilon'):g}"
            f"; ops.layer_normalization uses backend.epsilon()={keras.config.epsilon():g}")


def _flax_eps() -> str:
    _, nnx, _ = flax_modules()
    return f"nnx.LayerNorm epsilon={default_of(nnx.LayerNorm, 'epsilon'):g}"


def _torch_gelu() -> str:
    _, nn = torch_modules()
    return f"nn.GELU approximate={default_of(nn.GELU, 'approximate')!r} (exact)"


def _keras_gelu() -> str:
    keras = keras_module()
    ops = default_of(keras.ops.gelu, "approximate")
    act = default_of(keras.activations.gelu, "approximate")
    return f"keras.ops.gelu approximate={ops} ({'tanh' if ops else 'exact'}); " \
           f"activations.gelu approximate={act} ({'tanh' if act else 'exact'})"


def _flax_gelu() -> str:
    jax, nnx, _ = flax_modules()
    value = default_of(jax.nn.gelu, "approximate")
    same = "nnx.gelu is jax.nn.gelu" if nnx.gelu is jax.nn.gelu else "nnx.gelu differs"
    return f"jax.nn.gelu approximate={value} ({'tanh' if value else 'exact'}); {same}"


def _torch_norm_first() -> str:
    _, nn = torch_modules()
    first = default_of(nn.TransformerEncoderLayer, "norm_first")
    eps = default_of(nn.TransformerEncoderLayer, "layer_norm_eps")
    act = default_of(nn.TransformerEncoderLayer, "activation")
    act_name = getattr(act, "__name__", act)
    return f"TransformerEncoderLayer norm_first={first} ({'pre' if first else 'post'}-norm), " \
           f"activation={act_name}, layer_norm_eps={eps:g}"


def _keras_norm_first() -> str:
    keras_module()
    if importlib.util.find_spec("keras_hub") is None:
        return "no built-in encoder block (keras_hub's TransformerEncoder: not installed)"
    import keras_hub

    first = default_of(keras_hub.layers.TransformerEncoder, "normalize_first")
    return f"keras_hub TransformerEncoder normalize_first={first}"


def _flax_norm_first() -> str:
    flax_modules()
    return "no built-in encoder block: placement is whatever the model code writes"


def _torch_pooling() -> str:
    torch_modules()
    found = importlib.util.find_spec("timm")
    if found is None or not found.submodule_search_locations:
        return "no built-in pooling; torchvision's ViT reads the class token"
    # Read from timm's source, not by importing it: timm pulls in torchvision, whose import
    # crashes a process that already loaded TensorFlow (segfault, measured here).
    path = Path(next(iter(found.submodule_search_locations))) / "models" / "vision_transformer.py"
    value = _source_default(path, "VisionTransformer", "global_pool")
    return f"timm VisionTransformer global_pool={value!r} (read from {path.name})"


def _source_default(path: Path, class_name: str, keyword: str) -> object:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args.args + item.args.kwonlyargs
                    defaults = [None] * (len(item.args.args) - len(item.args.defaults))
                    defaults += list(item.args.defaults) + list(item.args.kw_defaults)
                    for arg, default in zip(args, defaults, strict=False):
                        if arg.arg == keyword and default is not None:
                            return ast.literal_eval(default)
    return "unknown"


def _keras_pooling() -> str:
    keras = keras_module()
    return f"GlobalAveragePooling1D data_format=" \
           f"{default_of(keras.layers.GlobalAveragePooling1D, 'data_format')!r}: averages every token"


def _flax_pooling() -> str:
    flax_modules()
    return "no built-in pooling layer (big_vision's ViT: pool_type='gap')"


def _torch_batch_first() -> str:
    _, nn = torch_modules()
    return f"nn.MultiheadAttention batch_first={default_of(nn.MultiheadAttention, 'batch_first')} " \
           "(input (T, B, E))"


def _keras_batch_first() -> str:
    keras_module()
    return "MultiHeadAttention takes (B, T, E); no option"


def _flax_batch_first() -> str:
    flax_modules()
    return "nnx.MultiHeadAttention takes (..., T, E): leading axes are batch"


def _torch_scale() -> str:
    torch, _ = torch_modules()
    # A builtin without a readable signature: measure which scale scale=None applies.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    for label, scale in (("1/sqrt(head width)", 8**-0.5), ("1/head width", 1 / 8), ("none", 1.0)):
        ref = torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1) @ v
        if torch.allclose(out, ref, atol=1e-12):
            return f"F.scaled_dot_product_attention(scale=None) applies {label} (measured)"
    return "F.scaled_dot_product_attention(scale=None): scale not recognised"


def _keras_scale() -> str:
    keras_module()
    return "MultiHeadAttention: 1/sqrt(key_dim)"


def _flax_scale() -> str:
    _, _nnx, _ = flax_modules()
    return "nnx.dot_product_attention: 1/sqrt(query.shape[-1]) (qkv_features / num_heads)"


def _torch_dense() -> str:
    _, nn = torch_modules()
    return f"nn.Linear(3, 5).weight {tuple(nn.Linear(3, 5).weight.shape)} = (out, in)"


def _keras_dense() -> str:
    keras = keras_module()
    layer = keras.layers.Dense(5)
    layer.build((None, 3))
    return f"Dense(5) on 3 features: kernel {tuple(layer.kernel.shape)} = (in, out)"


def _flax_dense() -> str:
    _, nnx, _ = flax_modules()
    return f"nnx.Linear(3, 5).kernel {tuple(nnx.Linear(3, 5, rngs=nnx.Rngs(0)).kernel.shape)} = (in, out)"


def _torch_adamw() -> str:
    torch, _ = torch_modules()
    a = torch.optim.AdamW
    return f"optim.AdamW eps={default_of(a, 'eps'):g} (added to sqrt(v_hat)), " \
           f"weight_decay={default_of(a, 'weight_decay'):g}"


def _keras_adamw() -> str:
    keras = keras_module()
    a = keras.optimizers.AdamW
    return f"optimizers.AdamW epsilon={default_of(a, 'epsilon'):g} (added to sqrt(v), 'epsilon hat'), " \
           f"weight_decay={default_of(a, 'weight_decay'):g}"


def _flax_adamw() -> str:
    _, _, optax = flax_modules()
    return f"optax.adamw eps={default_of(optax.adamw, 'eps'):g} (added to sqrt(v_hat)), " \
           f"weight_decay={default_of(optax.adamw, 'weight_decay'):g}, mask={default_of(optax.adamw, 'mask')}"


def _torch_decay() -> str:
    torch, _ = torch_modules()
    return f"optim.Adam weight_decay={default_of(torch.optim.Adam, 'weight_decay'):g} is L2 (added to " \
           "the gradient); optim.AdamW decouples it; both decay every tensor passed in"


def _keras_decay() -> str:
    keras = keras_module()
    has = hasattr(keras.optimizers.AdamW, "exclude_from_weight_decay")
    return "AdamW decays every variable" + (" unless exclude_from_weight_decay() is called" if has else "")


def _flax_decay() -> str:
    _, _, optax = flax_modules()
    return f"optax.adamw mask={default_of(optax.adamw, 'mask')}: decays every leaf"


def _torch_clip() -> str:
    torch, _ = torch_modules()
    norm_type = default_of(torch.nn.utils.clip_grad_norm_, "norm_type")
    return f"clip_grad_norm_(norm_type={norm_type}) is global; divides by (norm + 1e-6)"


def _keras_clip() -> str:
    keras = keras_module()
    o = keras.optimizers.SGD
    return f"clipnorm={default_of(o, 'clipnorm')} clips each variable separately; " \
           f"global_clipnorm={default_of(o, 'global_clipnorm')} clips the global norm"


def _flax_clip() -> str:
    _, _, optax = flax_modules()
    return "optax.clip_by_global_norm (global); optax.clip (per element)" if hasattr(
        optax, "clip_by_global_norm") else "no global clipping"


def _torch_ce() -> str:
    _, nn = torch_modules()
    return f"CrossEntropyLoss reduction={default_of(nn.CrossEntropyLoss, 'reduction')!r}, takes logits"


def _keras_ce() -> str:
    keras = keras_module()
    c = keras.losses.SparseCategoricalCrossentropy
    return f"SparseCategoricalCrossentropy from_logits={default_of(c, 'from_logits')}, " \
           f"reduction={default_of(c, 'reduction')!r}"


def _flax_ce() -> str:
    _, _, _optax = flax_modules()
    return "optax.softmax_cross_entropy_with_integer_labels returns one loss per example (no reduction)"


def _torch_dropout() -> str:
    _, nn = torch_modules()
    return f"a new nn.Module has training={nn.Module().training} (dropout on until .eval())"


def _keras_dropout() -> str:
    keras = keras_module()
    layer = keras.layers.Dropout(0.5)
    import numpy as np

    x = np.ones((1, 64), np.float32)
    changed = bool(np.any(np.asarray(layer(x)) != x))
    return f"Dropout(0.5)(x) without training=: {'active' if changed else 'inactive (inference)'}"


def _flax_dropout() -> str:
    _, nnx, _ = flax_modules()
    det = default_of(nnx.Dropout, "deterministic")
    bcast = default_of(nnx.MultiHeadAttention, "broadcast_dropout")
    return f"nnx.Dropout deterministic={det} ({'inactive' if det else 'active'} until .eval()); " \
           f"MultiHeadAttention broadcast_dropout={bcast} (one mask for all batch items and heads)"


def _torch_precision() -> str:
    torch, _ = torch_modules()
    return f"float32_matmul_precision={torch.get_float32_matmul_precision()!r} in this process " \
           "('medium' runs bf16 on AMX CPUs)"


def _keras_precision() -> str:
    keras = keras_module()
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset (on)")
    return f"dtype_policy={keras.config.dtype_policy().name!r}, TF_ENABLE_ONEDNN_OPTS={onednn}"


def _flax_precision() -> str:
    jax, _, _ = flax_modules()
    return f"jax_default_matmul_precision={jax.config.jax_default_matmul_precision} (no effect on CPU)"


def _torch_variance() -> str:
    torch_modules()
    return "nn.LayerNorm: two-pass variance"


def _keras_variance() -> str:
    keras_module()
    return "LayerNormalization: moments (two-pass)"


def _flax_variance() -> str:
    _, nnx, _ = flax_modules()
    return f"nnx.LayerNorm use_fast_variance={default_of(nnx.LayerNorm, 'use_fast_variance')} " \
           "(E[x^2] - E[x]^2)"


READERS: dict[str, dict[str, Reader]] = {
    "head_width": {"torch": _torch_mha_head_width, "keras": _keras_mha_head_width,
                   "flax": _flax_mha_head_width},
    "remainder": {"torch": _torch_padding, "keras": _keras_padding, "flax": _flax_padding},
    "patch_layout": {"torch": _torch_patch_order, "keras": _keras_patch_order, "flax": _flax_patch_order},
    "layer_norm_eps": {"torch": _torch_eps, "keras": _keras_eps, "flax": _flax_eps},
    "gelu": {"torch": _torch_gelu, "keras": _keras_gelu, "flax": _flax_gelu},
    "norm_placement": {"torch": _torch_norm_first, "keras": _keras_norm_first, "flax": _flax_norm_first},
    "pooling": {"torch": _torch_pooling, "keras": _keras_pooling, "flax": _flax_pooling},
    "batch_first": {"torch": _torch_batch_first, "keras": _keras_batch_first, "flax": _flax_batch_first},
    "attention_scale": {"torch": _torch_scale, "keras": _keras_scale, "flax": _flax_scale},
    "conv_kernel_layout": {"torch": _torch_conv_layout, "keras": _keras_conv_layout,
                           "flax": _flax_conv_layout},
    "dense_kernel_layout": {"torch": _torch_dense, "keras": _keras_dense, "flax": _flax_dense},
    "adamw_epsilon": {"torch": _torch_adamw, "keras": _keras_adamw, "flax": _flax_adamw},
    "weight_decay": {"torch": _torch_decay, "keras": _keras_decay, "flax": _flax_decay},
    "clipnorm": {"torch": _torch_clip, "keras": _keras_clip, "flax": _flax_clip},
    "cross_entropy": {"torch": _torch_ce, "keras": _keras_ce, "flax": _flax_ce},
    "dropout_flags": {"torch": _torch_dropout, "keras": _keras_dropout, "flax": _flax_dropout},
    "cpu_precision": {"torch": _torch_precision, "keras": _keras_precision, "flax": _flax_precision},
    "layer_norm_variance": {"torch": _torch_variance, "keras": _keras_variance, "flax": _flax_variance},
}


def read_default(entry: str, framework: str) -> str:
    """The installed framework's default for `entry`, or a line saying why it cannot be read."""
    reader = READERS.get(entry, {}).get(framework)
    if reader is None:
        return "n/a"
    try:
        return reader()
    except FrameworkUnavailable as exc:
        return f"not installed ({exc})"
    except (LookupError, AttributeError, TypeError) as exc:  # an API moved: say so, don't crash
        return f"unreadable in this version ({type(exc).__name__}: {exc})"


# Numeric defaults other modules rely on (shared.teaching.variants.EPSILON_SOURCES, the demonstrations):
# read here so a test can check the documented values against the installed frameworks.
def layer_norm_eps_defaults() -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        _, nn = torch_modules()
        out["torch"] = float(default_of(nn.LayerNorm, "eps"))
    except FrameworkUnavailable:
        pass
    try:
        keras = keras_module()
        out["keras"] = float(default_of(keras.layers.LayerNormalization, "epsilon"))
        out["keras.ops"] = float(keras.config.epsilon())
    except FrameworkUnavailable:
        pass
    try:
        _, nnx, _ = flax_modules()
        out["flax"] = float(default_of(nnx.LayerNorm, "epsilon"))
    except FrameworkUnavailable:
        pass
    return out


def gelu_tanh_defaults() -> dict[str, bool]:
    """framework API -> True when its default GELU is the tanh approximation."""
    out: dict[str, bool] = {}
    try:
        _, nn = torch_modules()
        out["torch.nn.GELU"] = default_of(nn.GELU, "approximate") == "tanh"
    except FrameworkUnavailable:
        pass
    try:
        keras = keras_module()
        out["keras.ops.gelu"] = bool(default_of(keras.ops.gelu, "approximate"))
        out["keras.activations.gelu"] = bool(default_of(keras.activations.gelu, "approximate"))
    except FrameworkUnavailable:
        pass
    try:
        jax, _, _ = flax_modules()
        out["jax.nn.gelu"] = bool(default_of(jax.nn.gelu, "approximate"))
    except FrameworkUnavailable:
        pass
    return out


def torch_adam_step(params: Any, grads: Any, lr: float, eps: float, weight_decay: float,
                    decoupled: bool = True) -> Any:
    """One step of torch's Adam (decoupled=False: L2) or AdamW from zero moments, on NumPy
    arrays, through torch.optim's functional implementation: the code the optimizer classes run.

    Why not `torch.optim.AdamW(...)`: constructing a torch optimizer imports torch._dynamo and
    triton, and importing triton after TensorFlow segfaults the process (measured here with torch
    2.14 / TF 2.21). The functional path imports neither, so it is safe in a process that
    already runs Keras."""
    import numpy as np

    torch, _ = torch_modules()
    from torch.optim.adam import adam
    from torch.optim.adamw import adamw

    p = torch.from_numpy(np.array(params, copy=True))
    g = torch.from_numpy(np.array(grads, copy=True))
    state = ([torch.zeros_like(p)], [torch.zeros_like(p)], [], [torch.tensor(0.0)])
    kwargs = {"foreach": False, "amsgrad": False, "beta1": 0.9, "beta2": 0.999, "lr": lr,
              "weight_decay": weight_decay, "eps": eps, "maximize": False}
    (adamw if decoupled else adam)([p], [g], *state, **kwargs)
    return p.numpy()
