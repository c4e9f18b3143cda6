"""The canonical weight tree and file: one layout every port converts to and from.

Canonical names and shapes come from `ModelSpec.derived.tensor_shapes`. Layouts, fixed here once:

| tensor                          | shape          | layout / meaning                                     |
|---------------------------------|----------------|------------------------------------------------------|
| patch_embed.kernel              | (ph, pw, C, D) | HWIO. Reshaped to (ph*pw*C, D) it is the kernel of a |
|                                 |                | Linear on patches flattened in (ph, pw, C) order;    |
|                                 |                | transposed (3, 2, 0, 1) it is torch's OIHW Conv2d.   |
|                                 | (T,ph,pw,C,D)  | temporal_patch_size T > 1: Qwen's Conv3d, a still    |
|                                 |                | image repeated T times; (T*ph*pw*C, D) flattened.    |
| patch_embed.bias                | (D,)           |                                                      |
| cls_token                       | (D,)           | token 0 of the sequence                              |
| pos_embed                       | (rows, D)      | rows >= tokens that receive a position; first used   |
| blocks.i.norm{1,2}.scale / bias | (D,)           | LayerNorm gamma / beta; RMSNorm: the scale alone     |
| blocks.i.attn.{query,key,value}.kernel | (D, H, hd) | per-head projections (Keras, Flax and big_vision) |
| blocks.i.attn.{query,key,value}.bias   | (H, hd)    | with qkv_bias, each but those in bias_free        |
| blocks.i.attn.out.kernel        | (H, hd, D)     | concatenated heads -> width D                        |
| blocks.i.attn.out.bias          | (D,)           |                                                      |
| blocks.i.mlp.fc{1,2}.kernel     | (in, out)      | dense kernels are (in, out), as Keras and Flax       |
| final_norm.scale / bias         | (D,) or pooled | LayerNorm on tokens, or on the pooled vector          |
| head.hidden.j.kernel / bias     | (in, out)      | hidden head layers, then head.out                    |

All tensors are float32 in the file. The file is safetensors (never a pickle) whose metadata holds
the format name and version, the full spec JSON and its hash, so the file alone says what it is.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from shared.core.budget import check_fits
from shared.core.containers import safetensors_header
from shared.core.documents import decode_json
from shared.core.files import write_output
from shared.core.spec import ModelSpec, tensor_fields_differ
from shared.core.spec_overrides import settle
from shared.errors import WeightsError, first_line

FORMAT_NAME = "portbench-canonical"
FORMAT_VERSION = "1"

Tensors = dict[str, np.ndarray]


# ---- initialisation ----------------------------------------------------------------------
def init_weights(spec: ModelSpec, seed: int = 0) -> Tensors:
    """Seeded NumPy initialisation. Every tensor gets its own stream, keyed by (seed, name), so a
    tensor's values do not depend on which other tensors a spec has. Biases, norms, positions and
    the class token are non-zero on purpose: a zero tensor would hide a mapping error."""
    check_fits(spec, 1, "its weights and one image through the reference")
    out: Tensors = {}
    for name, shape in spec.derived.tensor_shapes.items():
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        if name.endswith(".kernel"):
            fan_in = _fan_in(name, shape)
            values = rng.standard_normal(shape) / math.sqrt(fan_in)
        elif name.endswith(".scale"):
            values = 1.0 + 0.1 * rng.standard_normal(shape)
        else:  # biases, class token, position table
            values = 0.1 * rng.standard_normal(shape)
        out[name] = values.astype(np.float32)
    return out


def _fan_in(name: str, shape: tuple[int, ...]) -> int:
    if name == "patch_embed.kernel":  # every axis but the output's: (ph, pw, C) or (T, ph, pw, C)
        return math.prod(shape[:-1])
    if name.endswith("attn.out.kernel"):
        return shape[0] * shape[1]
    return shape[0]


# ---- checking ----------------------------------------------------------------------------
# A checkpoint saved at a lower rung cannot give float32 back: the rounding already happened.
LOWER_PRECISION = ("a lower precision than the float32 canonical weights every rung starts from "
                   "(the ports round to --dtype themselves); save or convert the float32 weights")


def check_tensors(spec: ModelSpec, tensors: Tensors, source: str = "weights") -> None:
    """Names, shapes, dtype and finiteness against the spec; the first problem is the error."""
    expected = spec.derived.tensor_shapes
    missing = [n for n in expected if n not in tensors]
    if missing:
        raise WeightsError(
            f"{source}: tensor {missing[0]!r} is missing (spec {spec.name!r} expects "
            f"{len(expected)} tensors; {len(missing)} missing)"
        )
    extra = [n for n in tensors if n not in expected]
    if extra:
        raise WeightsError(
            f"{source}: tensor {extra[0]!r} is not part of spec {spec.name!r} "
            f"({len(extra)} unexpected tensors)"
        )
    for name, shape in expected.items():
        array = tensors[name]
        if tuple(array.shape) != shape:
            raise WeightsError(
                f"{source}: tensor {name!r} has shape {tuple(array.shape)}, spec {spec.name!r} "
                f"expects {shape}"
            )
        if array.dtype.kind == "f" and array.dtype.itemsize < 4:
            raise WeightsError(f"{source}: tensor {name!r} is stored as {array.dtype}, {LOWER_PRECISION}")
        if array.dtype != np.float32:
            raise WeightsError(f"{source}: tensor {name!r} has dtype {array.dtype}, expected float32")
        if not np.all(np.isfinite(array)):
            bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
            raise WeightsError(f"{source}: tensor {name!r} has {bad} non-finite values (NaN or inf)")


def first_shape_mismatch(spec: ModelSpec, tensors: Tensors) -> str | None:
    """The first canonical tensor of `spec` that `tensors` lacks or has in another shape."""
    for name, shape in spec.derived.tensor_shapes.items():
        if name not in tensors:
            return f"tensor {name!r} is missing"
        if tuple(tensors[name].shape) != shape:
            return f"tensor {name!r} has shape {tuple(tensors[name].shape)}, expected {shape}"
    for name in tensors:
        if name not in spec.derived.tensor_shapes:
            return f"tensor {name!r} is not part of the spec"
    return None


# ---- the file ----------------------------------------------------------------------------
def save_weights(path: str | Path, spec: ModelSpec, tensors: Tensors, *,
                 extra_metadata: dict[str, str] | None = None, force: bool = True,
                 shown_as: Path | None = None) -> None:
    """Check, then write the canonical file atomically with the spec in its metadata; with
    `force=False` only if nothing is at `path` (checked and published in one step). `shown_as`:
    the name a message gives the file when `path` is in a staging folder (files.write_output)."""
    from safetensors.numpy import save

    check_tensors(spec, tensors, source=f"weights for {str(path)!r}")
    metadata = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "spec": json.dumps(spec.to_dict(), sort_keys=True),
        "spec_hash": spec.spec_hash,
        **(extra_metadata or {}),
    }
    ordered = {name: np.ascontiguousarray(tensors[name]) for name in spec.derived.tensor_shapes}
    write_output(path, save(ordered, metadata=metadata), force=force, shown_as=shown_as)


@dataclass
class LoadedWeights:
    spec: ModelSpec  # the spec the caller runs (the file's own when none was given)
    tensors: Tensors
    file_spec: ModelSpec
    differing_fields: list[str] = field(default_factory=list)  # spec fields changed vs the file
    metadata: dict[str, str] = field(default_factory=dict)

    def note(self) -> str | None:
        """One line for the user when the weights run under a different (compatible) spec, or when
        the file's stored spec was written before a rule that settled one of its fields."""
        lines = [f"note: the file's stored spec: {line}" for line in settled_notes(self.metadata)]
        if self.differing_fields:
            changes = ", ".join(
                f"{f}={getattr(self.spec, f)!r} (file: {getattr(self.file_spec, f)!r})"
                for f in self.differing_fields
            )
            lines.append(f"note: running the file's weights with changed settings: {changes}")
        return "\n".join(lines) or None


def read_weight_file(path: str | Path,
                     spec: ModelSpec | None = None) -> tuple[ModelSpec, Tensors, dict[str, str]]:
    """Read a canonical file without unpickling anything; every failure is one line. The header
    is checked first (shared/core/containers.py: a directory or FIFO, an unknown dtype, sizes
    the file does not hold), then the metadata and stored spec, then the declared tensors against
    `spec` (default: the stored one) and the memory available: only then is data read."""
    from safetensors import SafetensorError, safe_open

    where = f"weights file {str(path)!r}"
    declared, metadata = safetensors_header(path, where, WeightsError)
    if any(d.dtype == "BF16" for d in declared.values()):  # NumPy has no bfloat16 to hand it over as
        raise WeightsError(f"{where} stores bfloat16 tensors, {LOWER_PRECISION}")
    file_spec = _stored_spec(where, metadata)
    target = spec or file_spec
    placeholders = {n: np.broadcast_to(np.False_, d.shape) for n, d in declared.items()}  # no bytes
    mismatch = first_shape_mismatch(target, placeholders)
    if mismatch:
        raise WeightsError(f"{where} (spec {file_spec.name!r}) does not fit spec {target.name!r}: {mismatch}")
    check_fits(target, 1, f"the weights of {where} and one image through the reference")
    try:
        with safe_open(str(path), framework="numpy") as handle:
            tensors = {name: handle.get_tensor(name) for name in declared}
    except (SafetensorError, OSError, ValueError, RuntimeError, TypeError) as exc:
        raise WeightsError(f"{where} is not a readable safetensors file ({first_line(exc)})") from None
    return file_spec, tensors, metadata


def _stored_spec(where: str, metadata: dict[str, str]) -> ModelSpec:
    if metadata.get("format") != FORMAT_NAME:
        raise WeightsError(
            f"{where}: metadata 'format' is {metadata.get('format')!r}, "
            f"expected {FORMAT_NAME!r} (convert other checkpoints with `compare.py convert`)"
        )
    if metadata.get("format_version") != FORMAT_VERSION:
        raise WeightsError(
            f"{where}: format_version {metadata.get('format_version')!r}, "
            f"this version of portbench reads {FORMAT_VERSION!r}"
        )
    try:
        stored = decode_json(metadata.get("spec", ""), "the stored spec")  # a key given twice is refused
        file_spec = ModelSpec.from_dict(settle(stored)[0])  # a file written before a rule still reads
        written_hash = ModelSpec.stored_hash(stored)  # the hash it was written with
    except Exception as exc:  # a SpecError, or garbage in the metadata
        raise WeightsError(f"{where}: stored spec is invalid ({exc})") from None
    if metadata.get("spec_hash") != written_hash:
        raise WeightsError(
            f"{where}: spec_hash {metadata.get('spec_hash')!r} does not match "
            f"its stored spec ({written_hash!r}); the metadata was edited or corrupted"
        )
    return file_spec


def settled_notes(metadata: dict[str, str]) -> list[str]:
    """What reading a file's stored spec settled (spec_overrides.settle), one line each."""
    return settle(decode_json(metadata.get("spec", "{}"), "the stored spec"))[1]  # read by _stored_spec first


def load_weights(path: str | Path, spec: ModelSpec | None = None) -> LoadedWeights:
    """Load a canonical file for `spec` (default: the spec stored in the file).

    A file fits any spec whose canonical tensor names and shapes it matches; fields that leave
    the tensors unchanged (epsilon, GELU form, norm placement, ...) may differ and are reported
    in `differing_fields`. A tensor that does not fit is refused by name."""
    file_spec, tensors, metadata = read_weight_file(path, spec)
    target = spec or file_spec
    check_tensors(target, tensors, source=f"weights file {str(path)!r}")
    tensors = {name: tensors[name] for name in target.derived.tensor_shapes}  # canonical order
    differing = tensor_fields_differ(target, file_spec) if spec is not None else []
    return LoadedWeights(target, tensors, file_spec, differing, metadata)


# ---- layout transforms: the named layouts of shared/core/mapping.py apply them -----------
def dense_to_out_in(kernel: np.ndarray) -> np.ndarray:
    """(in, out) -> torch Linear weight (out, in)."""
    return np.ascontiguousarray(kernel.T)


def dense_from_out_in(weight: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(weight.T)


def conv_hwio_to_oihw(kernel: np.ndarray) -> np.ndarray:
    """(ph, pw, C, D) -> torch Conv2d weight (D, C, ph, pw); (T, ph, pw, C, D) -> Conv3d's
    (D, C, T, ph, pw). A reshape here would be wrong."""
    return np.ascontiguousarray(np.moveaxis(kernel, (-1, -2), (0, 1)))


def conv_oihw_to_hwio(weight: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(weight, (0, 1), (-1, -2)))


def patch_linear_to_oihw(weight: np.ndarray, patch_height: int, patch_width: int) -> np.ndarray:
    """A Linear (D, ph*pw*C) on patches flattened (ph, pw, C) (SigLIP2's, timm's NaFlexVit) -> the
    torch Conv2d weight (D, C, ph, pw) that computes the same on the image."""
    kernel = dense_from_out_in(weight).reshape(patch_height, patch_width, -1, weight.shape[0])  # HWIO
    return conv_hwio_to_oihw(kernel)


def table_to_square_grid(table: np.ndarray) -> np.ndarray:
    """A (rows, D) position table -> (1, side, side, D) (timm's NaFlexVit); rows that form no square
    are refused: the grid is not in the table."""
    side = math.isqrt(table.shape[0])
    if side * side != table.shape[0]:
        raise WeightsError(f"a position table of {table.shape[0]} rows is no square grid: a (1, rows, "
                           "cols, D) table binds here only when square")
    return table.reshape(1, side, side, -1)


def conv_hwio_to_ohwi(kernel: np.ndarray) -> np.ndarray:
    """(ph, pw, C, D) -> MLX Conv2d weight (D, ph, pw, C), for NHWC input; (T, ph, pw, C, D) ->
    Conv3d's (D, T, ph, pw, C). A reshape would be wrong."""
    return np.ascontiguousarray(np.moveaxis(kernel, -1, 0))


def conv_ohwi_to_hwio(weight: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(weight, 0, -1))


def qkv_pack(*kernels: np.ndarray) -> np.ndarray:
    """n (D, H, hd) kernels -> one packed (n*H*hd, D) Linear weight, in the order given, heads
    head-major inside each block: q, k, v is torch's in_proj_weight / timm's qkv layout, one
    kernel alone a Hugging Face query Linear."""
    return np.ascontiguousarray(np.concatenate([x.reshape(x.shape[0], -1).T for x in kernels]))


def qkv_unpack(packed: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """The inverse of qkv_pack, each part at its own (D, H, hd) shape: a grouped-query attention's
    k and v have fewer heads than its q."""
    ends = np.cumsum([h * hd for _, h, hd in shapes])[:-1]
    return [np.ascontiguousarray(part.T.reshape(shape))
            for part, shape in zip(np.split(packed, ends), shapes, strict=True)]


def qkv_bias_pack(*biases: np.ndarray) -> np.ndarray:
    """n (H, hd) biases -> one (n*H*hd,) bias."""
    return np.concatenate([x.reshape(-1) for x in biases])


def qkv_bias_unpack(packed: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """The inverse of qkv_bias_pack, each part at its own (H, hd) shape."""
    ends = np.cumsum([math.prod(shape) for shape in shapes])[:-1]
    return [part.reshape(shape).copy() for part, shape in zip(np.split(packed, ends), shapes, strict=True)]


def attn_out_to_out_in(kernel: np.ndarray) -> np.ndarray:
    """(H, hd, D) -> torch Linear weight (D, H*hd)."""
    return np.ascontiguousarray(kernel.reshape(-1, kernel.shape[-1]).T)


def attn_out_from_out_in(weight: np.ndarray, heads: int, head_dim: int) -> np.ndarray:
    return np.ascontiguousarray(weight.T.reshape(heads, head_dim, -1))
