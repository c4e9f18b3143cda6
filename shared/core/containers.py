"""The array files a user hands over (`.npy`, `.npz`, safetensors), read without trusting what
their headers declare.

A header states a shape and a dtype, so it states how many bytes follow; a file that lies (a
header claiming gigabytes in a file of a few bytes, a sparse file, an unknown dtype string) would
otherwise make NumPy or safetensors allocate what the header says, or fail with an internal
message. Here every declaration is checked against the bytes the file really holds and against
the memory available now (shared/core/budget.py), and the caller's own shape and dtype checks
run on the header, all before anything is allocated. Every file is opened through
`shared.core.files.open_user_file`, so a directory, FIFO or device is refused by name, and
nothing is ever unpickled. A big-endian array is read and converted to the machine's order.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from shared.core.files import open_user_file
from shared.core.memory import check_bytes_fit
from shared.errors import InputError, PortbenchError, first_line

Shape = tuple[int, ...]
# The caller's checks of a declared (shape, dtype), run before the data is read.
Expect = Callable[[Shape, np.dtype], None]
Error = type[PortbenchError]


# ---- .npy ---------------------------------------------------------------------------------
def read_npy(path: str | Path, where: str, error: Error = InputError,
             expect: Expect | None = None) -> np.ndarray:
    """A user's `.npy` array: `where` names it in every message ("input file 'x.npy'")."""
    with open_user_file(path, where, error) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            raise error(f"{where} is empty (0 bytes); expected a .npy array")
        return npy_from_stream(handle, size, where, error, expect)


def npy_from_stream(stream: IO[bytes], size: int, where: str, error: Error,
                    expect: Expect | None = None) -> np.ndarray:
    """The array of a `.npy` stream of `size` bytes: header, checks, then exactly its data."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = read_header(stream)
    except (ValueError, OSError, EOFError, SyntaxError, zipfile.BadZipFile, zlib.error) as exc:
        raise error(f"{where} is not a readable .npy array ({first_line(exc)[:160]})") from None
    if dtype.hasobject:
        raise error(f"{where} holds pickled objects, which portbench never loads")
    if any(d < 0 for d in shape):
        raise error(f"{where} is not a readable .npy array (its header declares shape {shape})")
    declared = math.prod(shape) * dtype.itemsize
    left = size - stream.tell()
    if declared != left:
        raise error(f"{where}: its header declares a {dtype} array of shape {shape} ({declared:,} bytes) "
                    f"but {left:,} bytes follow the header; the file is truncated or not an np.save file")
    if expect is not None:  # the caller's shape, dtype and budget, on what the file truly holds
        expect(shape, dtype)
    check_bytes_fit(declared, f"{where} declares", error)
    data = _read_exactly(stream, declared, where, error)
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


def _read_exactly(stream: IO[bytes], count: int, where: str, error: Error) -> bytearray:
    data = bytearray(count)
    view, done = memoryview(data), 0
    try:
        while done < count:
            got = stream.readinto(view[done:])  # type: ignore[attr-defined]
            if not got:
                raise error(f"{where} ends after {done:,} of its {count:,} bytes of data")
            done += got
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise error(f"{where} cannot be read: {first_line(exc)[:160]}") from None
    return data


# ---- .npz ---------------------------------------------------------------------------------
def read_npz(path: str | Path, where: str, error: Error = InputError) -> dict[str, np.ndarray]:
    """Every array of a user's `.npz` (member name without `.npy` -> array). What the archive
    unpacks to is refused first when the memory available cannot hold it."""
    with open_user_file(path, where, error) as handle:
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise error(f"{where} is not a readable .npz of plain arrays ({first_line(exc)[:160]})") from None
        with archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
            check_bytes_fit(sum(info.file_size for info in members), f"{where} unpacks to", error)
            out: dict[str, np.ndarray] = {}
            for info in members:
                name = info.filename.removesuffix(".npy")
                try:
                    with archive.open(info) as member:
                        out[name] = npy_from_stream(member, info.file_size, f"{where} member {name!r}", error)
                except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, zlib.error) as exc:
                    raise error(f"{where} member {name!r} cannot be read ({first_line(exc)[:160]})") from None
            return out


# ---- safetensors --------------------------------------------------------------------------
SAFETENSORS_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8,
                        "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}
MAX_SAFETENSORS_HEADER = 100 * 2**20  # the safetensors library's own bound on its JSON header


@dataclass(frozen=True)
class Declared:
    """One tensor as a safetensors header declares it."""

    dtype: str
    shape: Shape

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * SAFETENSORS_ITEMSIZE[self.dtype]


def safetensors_header(path: str | Path, where: str,
                       error: Error = InputError) -> tuple[dict[str, Declared], dict[str, str]]:
    """(tensor name -> what is declared, metadata) of a safetensors file, each tensor's dtype,
    shape and byte range checked against the others and the file's size; no data is read."""
    with open_user_file(path, where, error) as handle:
        size = os.fstat(handle.fileno()).st_size
        prefix = handle.read(8)
        length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if length < 0 or length > min(size - 8, MAX_SAFETENSORS_HEADER):
            raise error(f"{where} is not a readable safetensors file (it is {size:,} bytes; the header "
                        f"length it starts with is {'missing' if length < 0 else f'{length:,}'})")
        raw = handle.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise error(f"{where} is not a readable safetensors file (header: {first_line(exc)[:160]})") from None
    if not isinstance(header, dict):
        raise error(f"{where} is not a readable safetensors file (its header is not a JSON object)")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise error(f"{where} is not a readable safetensors file (__metadata__ is not an object of strings)")
    data_size = size - 8 - length
    declared = {name: _declared(name, entry, data_size, where, error) for name, entry in header.items()}
    end = max((entry["data_offsets"][1] for entry in header.values()), default=0)
    if end != data_size:  # as the safetensors library refuses it: bytes no tensor owns
        raise error(f"{where} holds {data_size:,} bytes of data, but its tensors end at byte {end:,}: "
                    "it is damaged, or not one safetensors file")
    return declared, metadata


def _declared(name: str, entry: Any, data_size: int, where: str, error: Error) -> Declared:
    at = f"{where}: tensor {name!r}"
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        raise error(f"{at} is not a safetensors entry (expected dtype, shape and data_offsets)")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in SAFETENSORS_ITEMSIZE:
        raise error(f"{at} has dtype {str(dtype)!r:.40}, not a safetensors dtype "
                    f"({', '.join(SAFETENSORS_ITEMSIZE)})")
    if not _naturals(shape) or not _naturals(offsets) or len(offsets) != 2 or offsets[0] > offsets[1]:
        raise error(f"{at} has shape {shape!s:.60} and data_offsets {offsets!s:.60}; expected lists "
                    "of non-negative integers, the offsets [begin, end]")
    declared = Declared(dtype, tuple(shape))
    if offsets[1] - offsets[0] != declared.nbytes or offsets[1] > data_size:
        raise error(f"{at} declares {dtype} {tuple(shape)} ({declared.nbytes:,} bytes) at bytes "
                    f"{offsets[0]:,}..{offsets[1]:,}, but the file holds {data_size:,} bytes of data: it is "
                    "truncated or damaged")
    return declared


def _naturals(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                           for v in value)


# ---- torch.save archives ------------------------------------------------------------------
def check_torch_archive(handle: IO[bytes], where: str, error: Error = InputError) -> None:
    """A `torch.save` file checked before torch reads it from `handle`: a zip whose members
    (a restricted pickle and raw storages) are stored uncompressed, as torch writes them, so no
    member can unpack beyond the file's own bytes, and those bytes fit the memory available.
    The pre-zip format (torch < 1.6) declares its storages' sizes inside the pickle, where
    nothing can check them before torch allocates: it is refused with how to re-save it."""
    size = os.fstat(handle.fileno()).st_size
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise error(f"{where} is not a torch.save zip archive (the format torch writes since 1.6); "
                    "re-save it with torch.save, or as .safetensors") from None
    with archive:
        packed = [info.filename for info in archive.infolist() if info.compress_type != zipfile.ZIP_STORED]
        if packed:
            raise error(f"{where}: member {packed[0]!r:.120} is compressed; torch.save stores every "
                        "member uncompressed, and a compressed one could unpack beyond the file")
    check_bytes_fit(size, f"{where} holds", error)
    handle.seek(0)
