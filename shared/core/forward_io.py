"""What goes into a user's forward and what comes out of it, framework-neutral (NumPy only):
canonical NHWC images in the layout the model takes (`--input-layout`) or a naflex batch as
Siglip2VisionModel takes one (`model_inputs`), the logits picked from
what it returns (`--output`, else the one (batch, classes) array among its outputs; a vision tower
that returns only its final tokens gives those, `tokens_of`), and captured intermediates in the
canonical token layout. A dict, a dataclass (a Transformers ModelOutput is both),
a named tuple or an object with a `logits` attribute gives its `logits` unless `--output` picks
another element. Every `ports/<fw>/user.py` converts its framework's
tensors to NumPy through `numpy_outputs` and uses these, so no two frameworks can read a user's
input or output differently."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from shared.errors import InputError, WeightsError

PATCHES = "patches"  # the layout of a naflex or packed batch's call: (patches, valid-patch mask, grids)


def model_inputs(images: np.ndarray, layout: str) -> tuple[np.ndarray, ...]:
    """The forward's arguments: canonical NHWC images in the model's layout (one argument); or a
    naflex batch (shared/core/batching.py) as Transformers' Siglip2VisionModel takes one, positionally:
    patches (B, max_patches, ph*pw*C) float32, which patches are real (B, max_patches) bool, and each
    image's (rows, cols) grid (B, 2) int64; a packed batch the same with each sequence's images'
    grids (B, images, 2), their patches one after another from the sequence's start."""
    if images.dtype.names is None:
        return (native_layout(images, layout),)
    grids = np.asarray(images["grid"], dtype=np.int64)
    patches = np.ascontiguousarray(images["patches"], dtype=np.float32)
    real = grids.prod(axis=-1) if grids.ndim == 2 else grids.prod(axis=-1).sum(axis=-1)  # per sequence
    valid = np.arange(patches.shape[1])[None] < real[:, None]
    return patches, valid, grids


def output_rows(images: np.ndarray) -> int:
    """The rows a model's output has for `images`: one per image, so a packed batch's sequences
    times the images each holds (the reference's too)."""
    if images.dtype.names is not None and np.ndim(images["grid"]) == 3:
        return int(np.shape(images["grid"])[0] * np.shape(images["grid"])[1])
    return len(images)


def native_layout(images: np.ndarray, layout: str) -> np.ndarray:
    """Canonical NHWC float32 images in the layout the model's forward takes."""
    x = np.asarray(images, dtype=np.float32)
    if layout == "NHWC":
        return x
    if layout == "NCHW":
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    if layout == "NHW":
        if x.shape[-1] != 1:
            raise InputError(f"input layout 'NHW' drops the channel axis, but the images have "
                             f"{x.shape[-1]} channels; expected 1")
        return np.ascontiguousarray(x[..., 0])
    raise InputError(f"input layout {layout!r} is not one of NHWC, NCHW, NHW")


def numpy_outputs(result: Any, to_numpy: Callable[[Any], np.ndarray]) -> Any:
    """A forward's result with every array in it (anything with a shape) as NumPy through the
    framework's `to_numpy`, dicts (a Transformers ModelOutput is one), lists and tuples walked, a
    dataclass, named tuple or object with a `logits` attribute read as the dict of its fields, and
    anything else (None, a number, a string) kept as it is for `pick_logits` to pass over."""
    named = result if isinstance(result, Mapping) else _fields(result)
    if named is not None:
        return {key: numpy_outputs(value, to_numpy) for key, value in named.items()}
    if isinstance(result, (list, tuple)):
        return [numpy_outputs(value, to_numpy) for value in result]
    return to_numpy(result) if hasattr(result, "shape") else result


def _fields(result: Any) -> dict[str, Any] | None:
    """A forward's named result as {name: value}: a dataclass's fields, a named tuple's, or the
    public attributes of an object with a `logits` attribute; None for anything else."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    if isinstance(result, tuple) and hasattr(result, "_fields"):
        return dict(zip(result._fields, result, strict=True))
    if hasattr(result, "logits") and not hasattr(result, "shape"):
        own = {k: v for k, v in getattr(result, "__dict__", {}).items() if not k.startswith("_")}
        return own if "logits" in own else {"logits": result.logits, **own}
    return None


def forward_logits(forward: Callable[..., Any], images: np.ndarray, layout: str, output: str | None,
                   to_input: Callable[[np.ndarray], Any],
                   to_numpy: Callable[[Any], np.ndarray]) -> np.ndarray:
    """`forward` on the model's inputs for `images` (`model_inputs`, each made the framework's own
    by `to_input`) -> its logits, a row per image (`pick_logits` over its results, each array read
    by `to_numpy`)."""
    result = forward(*[to_input(a) for a in model_inputs(images, layout)])
    return pick_logits(numpy_outputs(result, to_numpy), output, output_rows(images))


def pick_logits(result: Any, output: str | None, batch: int) -> np.ndarray:
    """The logits among a forward's NumPy results (`numpy_outputs`): the element `output` names (an
    index or key; "a.b" one level down), else a dict's `logits` (a dataclass's, ModelOutput's), or
    else the one (batch, classes) array among the outputs and one level into each: None, scalars,
    attention maps and other shapes are passed over. A model with none, a vision tower that returns
    only its final tokens (Transformers' Aimv2VisionModel, InternVLVisionModel, PixtralVisionModel:
    `last_hidden_state`, no pooled output), gives the one array of tokens among its outputs as
    (batch, tokens, dim) (`tokens_of`); the caller holds them to the spec's final tokens."""
    if output is None and isinstance(result, Mapping) and "logits" in result:
        output = "logits"
    items = _outputs(result)
    if items is None:
        if output is not None:
            raise InputError(f"--output {output!r} picks an element, but the model returns one array")
        items = [("", result)]
    if output is not None:
        named = dict(items) | dict(_outputs(result, depth=1) or [])
        if str(output) not in named:
            raise InputError(f"--output {output!r} is not among the model's outputs "
                             f"({', '.join(k for k, _ in items)})")
        chosen = named[str(output)]
        if not isinstance(chosen, np.ndarray):
            raise InputError(f"--output {output!r} is {_shown(chosen)}, expected the logits, an array of "
                             f"shape (batch={batch}, classes)")
    else:
        fits = [v for _, v in items if isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[0] == batch]
        towers = [] if fits else [t for _, v in items if (t := tokens_of(v, batch)) is not None]
        if len(fits) != 1 and len(towers) != 1:
            shapes = ", ".join(f"{k or 'output'} {_shown(v)}" for k, v in items)
            why = "no array" if not fits else f"{len(fits)} arrays"
            tokens = f" and {len(towers)} of tokens (batch={batch}, tokens, dim)" if len(towers) > 1 else ""
            named = isinstance(result, Mapping)
            raise InputError(f"the model returns {'no logits and ' if named else ''}{why} of shape "
                             f"(batch={batch}, classes){tokens} ({shapes}); pick the logits with --output "
                             f"{'KEY' if named else 'INDEX|KEY'}")
        chosen = fits[0] if fits else towers[0]
    if chosen.ndim == 3 and (tokens := tokens_of(chosen, batch)) is not None:
        return np.asarray(tokens, dtype=np.float32)
    if chosen.ndim != 2 or chosen.shape[0] != batch:
        raise InputError(f"the model's logits have shape {chosen.shape}, expected (batch={batch}, classes)")
    return np.asarray(chosen, dtype=np.float32)


def tokens_of(value: Any, batch: int) -> np.ndarray | None:
    """A forward's token states as (batch, tokens, dim), else None: a (batch, tokens, dim) array as it
    is, and a batch packed into one sequence, image after image, (1, batch * tokens, dim), split
    (PixtralVisionModel's `last_hidden_state`: its attention is block-diagonal over the images, so
    the split is each image's own tokens; a model that mixed them differs in value, not shape)."""
    if not isinstance(value, np.ndarray) or value.ndim != 3:
        return None
    if value.shape[0] == batch:
        return value
    if value.shape[0] == 1 and value.shape[1] % batch == 0:
        return value.reshape(batch, value.shape[1] // batch, value.shape[2])
    return None


def _outputs(result: Any, depth: int = 2) -> list[tuple[str, Any]] | None:
    """(name, value) of each element of a dict, list or tuple ("key" or "index"), with the
    elements of a nested one as "outer.inner" when `depth` is 2; None when `result` is neither."""
    if isinstance(result, Mapping):
        items = [(str(k), v) for k, v in result.items()]
    elif isinstance(result, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(result)]
    else:
        return None
    if depth == 1:
        return items
    out: list[tuple[str, Any]] = []
    for key, value in items:
        inner = _outputs(value, depth=1)
        out += [(key, value)] if inner is None else [(f"{key}.{k}", v) for k, v in inner]
    return out


def _shown(value: Any) -> str:
    """An output as a refusal lists it: an array's shape, else its type (None as None)."""
    if isinstance(value, np.ndarray):
        return str(value.shape)
    return "None" if value is None else type(value).__name__


def token_layout(value: Any, batch: int | None = None, channels_first: bool = False) -> np.ndarray:
    """A captured output as (B, N, D) tokens: of a tuple (attention with its scores) the first
    element; feature maps, (B, H, W, C) or with `channels_first` torch's (B, C, H, W), flattened to
    (B, H*W, C) row-major; a sequence-first (N, B, D) one (torch's MultiheadAttention without
    batch_first) transposed; vectors as they are."""
    value = value[0] if isinstance(value, (list, tuple)) else value
    array = np.asarray(value, dtype=np.float32)
    if array.ndim == 4 and channels_first:
        array = array.transpose(0, 2, 3, 1)
    if array.ndim == 4:
        return array.reshape(array.shape[0], -1, array.shape[-1])
    if batch is not None and array.ndim == 3 and array.shape[0] != batch and array.shape[1] == batch:
        return np.ascontiguousarray(array.transpose(1, 0, 2))
    return array


def check_assignment(shapes: dict[str, tuple[int, ...]], values: dict[str, np.ndarray], model: str,
                     what: str) -> None:
    """Before the first write into a user's model: every name exists and every shape fits, or a
    one-line WeightsError naming the first that does not (`what`: "variable", "parameter")."""
    for name, array in values.items():
        if name not in shapes:
            raise WeightsError(f"{model} has no {what} {name!r} ({len(shapes)} {what}s, the first "
                               f"{next(iter(shapes), None)!r})")
        if tuple(np.shape(array)) != tuple(shapes[name]):
            raise WeightsError(f"{what} {name!r} has shape {tuple(shapes[name])}, got an array of shape "
                               f"{tuple(np.shape(array))}")
