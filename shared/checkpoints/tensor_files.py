"""A checkpoint's files: tensors read without unpickling (safetensors, a torch zip of plain
tensors, an `.npz`), as float32 NumPy arrays, its JSON config, and tensors written back in the
file type a library reads. Every failure is one line naming the file."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from shared.core.containers import check_torch_archive, read_npz, safetensors_header
from shared.core.documents import decode_json
from shared.core.files import open_user_file, read_text
from shared.core.memory import check_bytes_fit
from shared.core.paths import check_suffix
from shared.errors import SpecError, WeightsError, first_line

Raw = dict[str, np.ndarray]  # a library's tensors by its own names


# ---- reading -----------------------------------------------------------------------------
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def read_tensors(path: str | Path) -> Raw:
    """A state dict / parameter tree as float32 NumPy arrays, from safetensors, a torch file
    (loaded with weights_only=True: plain tensors only, never arbitrary objects) or an `.npz`
    (allow_pickle=False). Every failure is one line naming the file."""
    path = Path(path)
    open_user_file(path, f"checkpoint {str(path)!r}", WeightsError).close()  # a FIFO, a directory: named
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        raw = _read_safetensors(path)
    elif suffix in TORCH_SUFFIXES:
        raw = _read_torch(path)
    elif suffix == ".npz":
        raw = read_npz(path, f"checkpoint {str(path)!r}", WeightsError)
    else:
        raise WeightsError(
            f"checkpoint {str(path)!r}: unknown file type {suffix!r}; expected .safetensors, "
            f"{', '.join(TORCH_SUFFIXES)} or .npz"
        )
    return {name: _as_float32(path, name, value) for name, value in raw.items()}


def _read_safetensors(path: Path) -> Raw:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    where = f"checkpoint {str(path)!r}"
    declared, _ = safetensors_header(path, where, WeightsError)  # sizes and dtypes, before any data
    check_bytes_fit(sum(d.nbytes for d in declared.values()), f"{where} declares", WeightsError)
    try:
        return dict(load_file(str(path)))
    except (SafetensorError, OSError, ValueError, TypeError) as exc:
        raise WeightsError(f"checkpoint {str(path)!r} is not a readable safetensors file "
                           f"({first_line(exc)})") from None


def _read_torch(path: Path) -> Raw:
    import pickle

    import torch

    where = f"checkpoint {str(path)!r}"
    try:
        with open_user_file(path, where, WeightsError) as handle:  # what was checked is what torch reads
            check_torch_archive(handle, where, WeightsError)
            obj = torch.load(handle, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        raise WeightsError(
            f"checkpoint {str(path)!r} is not a plain state dict: torch.load(weights_only=True) "
            f"refused it ({first_line(exc)[:160]}); portbench never unpickles arbitrary objects"
        ) from None
    except (RuntimeError, OSError, EOFError, ValueError) as exc:
        raise WeightsError(f"checkpoint {str(path)!r} is not a readable torch file "
                           f"({first_line(exc)[:160]})") from None
    return _state_dict_of(path, obj)


def _state_dict_of(path: Path, obj: Any) -> Raw:
    import torch

    if isinstance(obj, dict) and set(obj) & {"state_dict", "model"} and not all(
        isinstance(v, torch.Tensor) for v in obj.values()
    ):  # a training checkpoint {"model": state_dict, "epoch": ...}: use its state dict
        key = "state_dict" if "state_dict" in obj else "model"
        obj = obj[key]
    if not isinstance(obj, dict):
        raise WeightsError(f"checkpoint {str(path)!r} holds a {type(obj).__name__}, expected a "
                           "state dict (a mapping of names to tensors)")
    out: Raw = {}
    for name, value in obj.items():
        if not isinstance(name, str):  # torch.save keeps any key; every reader matches names
            raise WeightsError(f"checkpoint {str(path)!r}: entry {name!r} has a key of type "
                               f"{type(name).__name__}, expected a tensor name (a string)")
        if not isinstance(value, torch.Tensor):
            raise WeightsError(f"checkpoint {str(path)!r}: entry {name!r} is a "
                               f"{type(value).__name__}, expected a tensor (not a plain state dict)")
        if not value.is_floating_point():
            raise WeightsError(f"checkpoint {str(path)!r}: tensor {name!r} has dtype {value.dtype}, "
                               "expected a floating-point tensor")
        out[name] = value.detach().to(torch.float32).contiguous().numpy()
    return out


def _as_float32(path: Path, name: str, value: np.ndarray) -> np.ndarray:
    if value.dtype.kind != "f":
        raise WeightsError(f"checkpoint {str(path)!r}: tensor {name!r} has dtype {value.dtype}, "
                           "expected floating point")
    if not np.all(np.isfinite(value)):
        raise WeightsError(f"checkpoint {str(path)!r}: tensor {name!r} has non-finite values")
    return np.ascontiguousarray(value, dtype=np.float32)


def read_config(path: str | Path | None) -> dict[str, Any] | None:
    """A checkpoint's JSON config, decoded as every spec file is (one line naming the file)."""
    if path is None:
        return None
    where = f"config {str(path)!r}"
    return decode_json(read_text(path, where, SpecError), where)


# ---- writing -----------------------------------------------------------------------------
def check_written_type(fmt: str, out: str | Path, suffixes: tuple[str, ...]) -> None:
    """Refuse, before a plug-in encodes anything, an `--out` whose file type its library does not
    load (`suffixes`: the plug-in's own list): `encode_tensors` writes any type it names, and a timm
    state dict in an `.npz` is a file timm reads as big_vision's tree, i.e. one it cannot load."""
    check_suffix("--out", out, suffixes, f"a {fmt} checkpoint: the file types its library loads")


def encode_tensors(path: str | Path, raw: Raw, metadata: dict[str, str] | None = None) -> bytes:
    """Bytes of a state dict in the file type `path` names: safetensors, a torch file of plain
    tensors (what the library's own `load_state_dict` reads) or an `.npz` tree."""
    suffix = Path(path).suffix.lower()
    ordered = {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in raw.items()}
    if suffix == ".safetensors":
        from safetensors.numpy import save

        return save(ordered, metadata=metadata)
    if suffix in TORCH_SUFFIXES:
        import torch

        buffer = io.BytesIO()
        torch.save({name: torch.from_numpy(value) for name, value in ordered.items()}, buffer)
        return buffer.getvalue()
    if suffix == ".npz":
        buffer = io.BytesIO()
        np.savez(buffer, **ordered)
        return buffer.getvalue()
    raise WeightsError(f"output {str(path)!r}: unknown file type {suffix!r}; expected .safetensors, "
                       f"{', '.join(TORCH_SUFFIXES)} or .npz")
