"""A user's own PyTorch (`torch.nn`) model where portbench's port stands: read and write its
parameters, run it on canonical inputs, capture its intermediates and read its settings. Runs in the
worker process only (the user's file is imported there, never in the parent).

Names are state_dict names ("blocks.0.attn.in_proj_weight"). A model whose parameters sit on a
device this machine lacks is refused in one line; inputs go to the device its parameters are on.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from shared.core.forward_io import (
    check_assignment,
    model_inputs,
    numpy_outputs,
    output_rows,
    pick_logits,
    token_layout,
)
from shared.core.layer import Layer
from shared.core.probes import activation_form
from shared.errors import InputError, WeightsError

# The attributes an attention module of Transformers or timm computes its heads from, (count, width):
# timm's Attention and Transformers' CLIP / SigLIP say num_heads and head_dim, Transformers' ViT,
# DeiT and DINOv2 num_attention_heads and attention_head_size in 4.x, num_attention_heads and
# head_dim in 5.x (their forwards reshape by them).
HEAD_ATTRIBUTES = (("num_heads", "head_dim"), ("num_attention_heads", "attention_head_size"),
                   ("num_attention_heads", "head_dim"))
# Parameterless modules probed for the activation they compute (Transformers' GELUActivation and
# QuickGELUActivation, timm's QuickGELU and GELUTanh, nn.SiLU): only classes named as activations
# are called, since calling an arbitrary module of the user's could do anything.
ACTIVATION_CLASS = re.compile(r"gelu|silu|swish|activation", re.IGNORECASE)


def owns(obj: Any) -> bool:
    # True when obj is a model of this framework
    return isinstance(obj, nn.Module)


def parameters(model: Any) -> dict[str, np.ndarray]:
    # every parameter (and every buffer that changes the function) by its native name (the module
    # docstring's "Names"), float32 NumPy copies, in definition order
    _check_device(model)
    _check_shared(model)
    return {name: value.detach().cpu().numpy().astype(np.float32, copy=True)
            for name, value in model.state_dict().items() if value.is_floating_point()}


def assign(model: Any, values: dict[str, np.ndarray]) -> None:
    # write native-named arrays into the model; unknown names and misshapen arrays are one-line WeightsErrors
    state = model.state_dict()
    check_assignment({n: v.shape for n, v in state.items()}, values,  # every check before a write
                     f"torch model {type(model).__name__}", "parameter")
    with torch.no_grad():
        for name, array in values.items():
            state[name].copy_(torch.from_numpy(np.asarray(array, np.float32)))


def layers(model: Any) -> list[Layer]:
    # the model's layers in definition order, each a shared.core.layer.Layer(path, kind, params,
    # settings): kind one of "linear", "conv", "layer_norm", "attention", "gelu", "dropout",
    # "embedding", "other"; params the native parameter names it owns; settings what the module says
    # (eps, approximate, batch_first, num_heads, head_dim, use_bias, rate, ...), read from the object
    out = []
    for path, module in model.named_modules():
        kind, settings = _describe(module)
        # A module of a known kind owns every parameter under it (MultiheadAttention's out_proj); a
        # container owns only the parameters it holds itself.
        recurse = kind != "other"
        names = [n for n, _ in module.named_parameters(recurse=recurse)]
        names += [n for n, b in module.named_buffers(recurse=recurse) if b.is_floating_point()]
        prefix = f"{path}." if path else ""
        out.append(Layer(path, kind, tuple(prefix + n for n in names), settings))
    return out


def run(model: Any, images: np.ndarray, layout: str, output: str | None) -> np.ndarray:
    # canonical NHWC float32 images -> the model's own layout ("NHWC", "NCHW", "NHW") -> eval-mode,
    # no-grad forward -> the logits array (batch, classes); output picks the element of a tuple,
    # list or dict (an index or key); None means "the one array of shape (batch, classes)", else a
    # tower's final tokens (batch, tokens, dim) when it returns only those (forward_io.pick_logits)
    return _logits(model, model, images, layout, output, count=model not in _RUN_ONCE)


def compiled(model: Any, layout: str, output: str | None) -> Callable[[np.ndarray], np.ndarray]:
    # the same under the framework's compiler
    forward = torch.compile(model)
    return lambda images: _logits(model, forward, images, layout, output)


def capture(model: Any, images: np.ndarray, layout: str, paths: list[str]) -> dict[str, np.ndarray]:
    # outputs of the layers at `paths`, eval mode, as NumPy arrays in the canonical token layout
    # (B, N, D)
    modules = dict(model.named_modules())
    missing = [p for p in paths if p not in modules]
    if missing:
        raise InputError(f"torch model {type(model).__name__} has no module {missing[0]!r}")
    found: dict[str, Any] = {}

    def hook(path: str) -> Callable[..., None]:
        def record(module: nn.Module, args: Any, result: Any) -> None:
            value = result[0] if isinstance(result, tuple) else result
            if path not in found:  # a copy: the forward may add to it in place (timm's NaFlexEmbeds)
                found[path] = value.detach().clone() if isinstance(value, torch.Tensor) else value
        return record

    handles = [modules[p].register_forward_hook(hook(p)) for p in paths]
    try:
        _logits(model, model, images, layout, None, check=False)
    finally:
        for handle in handles:
            handle.remove()
    return {p: token_layout(numpy_outputs(found[p], _numpy), len(images), channels_first=True)
            for p in paths if p in found}


def inference_mode(model: Any) -> str | None:
    # what running in inference mode took beyond the framework's own switch (a mode keyword
    # passed to the forward), in words for the run's notes; None when the framework's own switch
    # (torch's and MLX's eval(), Keras' training=False) did it all
    return None


def conventions(model: Any) -> tuple[str, str]:
    # (the image layout its forward takes by its library's convention, the family of parameter
    # layouts it keeps: a key of shared/your_model/structure_parts.py's FRAMEWORK_LAYOUTS)
    return ("NCHW", "torch")


# ---- the walk ---------------------------------------------------------------------------------
def _describe(module: nn.Module) -> tuple[str, dict[str, Any]]:
    if isinstance(module, nn.MultiheadAttention):
        return "attention", {"num_heads": module.num_heads, "head_dim": module.head_dim,
                             "batch_first": module.batch_first, "rate": float(module.dropout),
                             "use_bias": module.in_proj_bias is not None}
    if isinstance(module, nn.LayerNorm):
        return "layer_norm", {"eps": float(module.eps), "affine": module.elementwise_affine}
    if isinstance(module, (nn.Conv2d, nn.Conv3d)):  # Conv3d: a patch over frames (Qwen's)
        return "conv", {"kernel_size": tuple(module.kernel_size), "strides": tuple(module.stride),
                        "use_bias": module.bias is not None}
    if isinstance(module, nn.Linear):
        return "linear", {"in_features": module.in_features, "out_features": module.out_features,
                          "use_bias": module.bias is not None}
    if isinstance(module, nn.GELU):
        return "gelu", {"approximate": module.approximate != "none",
                        "form": "gelu" if module.approximate == "none" else "gelu_tanh"}
    form = _activation_form(module)
    if form is not None:
        return "gelu", {"approximate": form == "gelu_tanh", "form": form}
    if isinstance(module, nn.Dropout):
        return "dropout", {"rate": float(module.p)}
    if isinstance(module, nn.Embedding):
        return "embedding", {"num_embeddings": module.num_embeddings}
    if isinstance(module, nn.TransformerEncoderLayer):
        return "other", {"norm_first": module.norm_first}
    for count, width in HEAD_ATTRIBUTES:  # a library's attention module: a container of its Linears
        heads, head_dim = getattr(module, count, None), getattr(module, width, None)
        if isinstance(heads, int) and isinstance(head_dim, int) and not isinstance(heads, bool):
            return "other", {"num_heads": heads, "head_dim": head_dim}
    return "other", {}


def _activation_form(module: nn.Module) -> str | None:
    """The spec activation a parameterless module named as one computes, by probing it."""
    if not ACTIVATION_CLASS.search(type(module).__name__) or next(module.children(), None) is not None \
            or next(module.parameters(), None) is not None or next(module.buffers(), None) is not None:
        return None

    def call(x: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return module(torch.from_numpy(x))

    return activation_form(call)


# ---- weights applied once ------------------------------------------------------------------------
# Each of a spec's tensors is applied once per forward, and a binding writes each canonical tensor
# into its own native one: weights a model holds at two places, or applies twice, would take two
# canonical tensors into one (the second write replacing the first), so they are refused by name.
@dataclass
class _Calls:
    counts: dict[str, int]  # path of a module holding parameters -> its calls in one forward
    handles: list[Any]


# Counted on a model's first run only: the hooks would cost every timed forward.
_RUN_ONCE: weakref.WeakSet[nn.Module] = weakref.WeakSet()


def _holds_parameters(module: nn.Module) -> bool:
    return next(module.parameters(), None) is not None


def _check_shared(model: nn.Module) -> None:
    # a module held at two paths (a ModuleList with one block twice), else one parameter at two names
    places: dict[int, list[str]] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        if _holds_parameters(module):
            places.setdefault(id(module), []).append(path)
    shared = sorted((paths for paths in places.values() if len(paths) > 1), key=lambda p: p[0].count("."))
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    tied = [found for found in names.values() if len(found) > 1]
    if shared or tied:
        what, paths = ("module", shared[0]) if shared else ("parameter", tied[0])
        also = ", ".join(repr(p) for p in paths[1:])
        raise WeightsError(f"your torch model holds {what} {paths[0]!r} at {len(paths)} paths (also "
                           f"{also}): one set of weights, where each of a spec's layers has its own, so it "
                           "cannot be bound to the spec; hold it once, or give each place its own "
                           f"{what} (copy.deepcopy)")


def _count_calls(model: nn.Module) -> _Calls:
    calls = _Calls({}, [])
    for path, module in model.named_modules():
        if path and _holds_parameters(module):
            calls.counts[path] = 0

            def count(module: nn.Module, args: Any, result: Any, path: str = path) -> None:
                calls.counts[path] += 1
            calls.handles.append(module.register_forward_hook(count))
    return calls


def _check_applied_once(counts: dict[str, int]) -> None:
    twice = sorted((path for path, n in counts.items() if n > 1), key=lambda p: p.count("."))
    if twice:
        path, n = twice[0], counts[twice[0]]
        raise WeightsError(f"your torch model's forward applied module {path!r} {n} times: its weights "
                           "are shared between the applications, where each of a spec's layers has its own, "
                           "so it cannot be bound to the spec; give each application its own module "
                           "(copy.deepcopy)")


# ---- running ------------------------------------------------------------------------------------
def _check_device(model: nn.Module) -> torch.device:
    devices = {p.device for p in model.parameters()} or {torch.device("cpu")}
    device = next(iter(devices))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError("your torch model's parameters are on CUDA and this machine has no CUDA device")
    if len(devices) > 1:
        raise InputError(f"your torch model's parameters are on {len(devices)} devices; expected one")
    return device


def _logits(model: nn.Module, forward: Callable[[Any], Any], images: np.ndarray, layout: str,
            output: str | None, check: bool = True, count: bool = False) -> np.ndarray:
    device = _check_device(model)
    model.eval()
    inputs = [torch.from_numpy(a).to(device) for a in model_inputs(images, layout)]
    calls = _count_calls(model) if count else None
    try:
        with torch.no_grad():
            result = forward(*inputs)
    finally:
        for handle in calls.handles if calls else ():
            handle.remove()
    if calls is not None:
        _check_applied_once(calls.counts)
        _RUN_ONCE.add(model)
    return pick_logits(numpy_outputs(result, _numpy), output, output_rows(images)) if check else np.zeros(0)


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    """One of a forward's tensors as a float32 NumPy array."""
    return tensor.detach().cpu().numpy().astype(np.float32)
