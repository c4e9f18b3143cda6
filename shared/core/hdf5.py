"""An HDF5 file a user hands over (a keras-hub `.weights.h5`), read so that it reads only itself.

HDF5 can make a file read other files or invent data: a dataset's bytes may live in another
file (external storage, any path, a FIFO included), a virtual dataset maps other files' datasets
and reads a missing one as zeros, an external link opens another file, a soft link or a second
hard link can make a cycle, a dataset whose storage was never written (or a chunk that is
missing) reads as its fill value, and a filter the library does not know is loaded as a plug-in
from disk. So the whole file is walked once, before any data is read, through HDF5's low-level
calls, and only this is accepted:

- hard links only, each object reached by one of them (no alias, no cycle), groups at most
  `MAX_DEPTH` deep and `MAX_OBJECTS` in number, every name UTF-8;
- datasets laid out compact, contiguous or chunked inside this file: every byte of their
  storage within the file's size, contiguous storage exactly as large as the array, every chunk
  present, only the built-in lossless filters (`FILTERS`), and never more data than those
  filters can make of the bytes stored;
- numeric arrays (floating point or integers) of a fixed shape.

Anything else is one line naming the dataset, link or group. The arrays a caller picks are then
checked against the memory available now (`shared/core/memory.py`) and read through the file
handle `shared.core.files.open_user_file` opened, so HDF5 itself opens no path.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shared.core.files import open_user_file
from shared.core.memory import check_bytes_fit
from shared.errors import InputError, PortbenchError, first_line

Error = type[PortbenchError]
MAX_DEPTH = 32  # groups within groups; a Keras weights file nests about eight deep
MAX_OBJECTS = 100_000  # groups and datasets; a ViT-g weights file has a few thousand
MAX_CHUNKS = 1_000_000  # chunks over the whole file, each one checked against the file's size
MAX_ATTRIBUTE_BYTES = 64 * 1024  # a string attribute the caller asked for (a Keras layer name)
# Filters HDF5 and h5py compile in, each lossless; the most any of them expands stored bytes by is
# deflate's 1032:1, so a dataset that declares more than that of its stored bytes is refused.
FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32", 32000: "lzf"}
MAX_EXPANSION = 1032


@dataclass(frozen=True)
class Dataset:
    """One numeric dataset as the file declares it; its data is read only by `HDF5File.read`."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass
class Group:
    """A group: its subgroups and datasets by name, and the string attributes asked for."""

    path: str
    attrs: dict[str, str] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    datasets: dict[str, Dataset] = field(default_factory=dict)


class HDF5File:
    """A checked HDF5 file: `root` is its whole tree, `read` reads the datasets a caller picks."""

    def __init__(self, h5: Any, root: Group, where: str, error: Error) -> None:
        self._h5, self.root, self._where, self._error = h5, root, where, error

    def read(self, datasets: Iterable[Dataset]) -> list[np.ndarray]:
        """The picked datasets' arrays, refused first when together they cannot fit in memory."""
        picked = list(datasets)
        check_bytes_fit(sum(d.nbytes for d in picked), f"{self._where} declares", self._error)
        out = []
        for dataset in picked:
            try:
                out.append(np.asarray(self._h5[dataset.path][()]))
            except (OSError, ValueError, KeyError) as exc:
                raise self._error(f"{self._where}: dataset {dataset.path!r} cannot be read "
                                  f"({first_line(exc)[:160]})") from None
        return out


@contextmanager
def open_hdf5(path: str | Path, where: str, error: Error = InputError,
              attributes: tuple[str, ...] = ()) -> Iterator[HDF5File]:
    """`path` opened read-only and walked (see the module's text) before anything is read;
    `attributes`: the scalar string attributes each group's `attrs` carries."""
    import h5py

    with open_user_file(path, where, error) as handle:
        size = os.fstat(handle.fileno()).st_size
        try:
            h5 = h5py.File(handle, "r")
        except (OSError, ValueError) as exc:
            raise error(f"{where} is not a readable HDF5 file ({first_line(exc)[:160]})") from None
        with h5:
            walk = _Walk(size, where, error, attributes)
            try:
                root = walk.group(h5.id, "/", 0)
            except (OSError, ValueError, KeyError, TypeError) as exc:  # HDF5's own refusal of a broken file
                raise error(f"{where} is not a readable HDF5 file ({first_line(exc)[:160]})") from None
            yield HDF5File(h5, root, where, error)


class _Walk:
    """One pass over a file's links and objects; every refusal names what it found and where."""

    def __init__(self, size: int, where: str, error: Error, attributes: tuple[str, ...]) -> None:
        self.size, self.where, self.error, self.attributes = size, where, error, attributes
        self.objects = self.chunks = 0

    def refuse(self, what: str, why: str) -> PortbenchError:
        return self.error(f"{self.where}: {what} {why}; a checkpoint is read only from the file named")

    def group(self, gid: Any, path: str, depth: int) -> Group:
        from h5py import h5l, h5o

        if depth > MAX_DEPTH:
            raise self.refuse(f"group {path!r}", f"is nested more than {MAX_DEPTH} groups deep")
        group = Group(path, self._attrs(gid, path))
        for raw in gid:
            name = self._name(raw, path)
            child = f"{path.rstrip('/')}/{name}"
            kind = gid.links.get_info(raw).type
            if kind != h5l.TYPE_HARD:
                link = "a soft link" if kind == h5l.TYPE_SOFT else "an external link to another file"
                raise self.refuse(f"{child!r}", f"is {link}")
            self.objects += 1
            if self.objects > MAX_OBJECTS:
                raise self.refuse(f"group {path!r}", f"brings the file past {MAX_OBJECTS:,} objects")
            oid = h5o.open(gid, raw)
            info = h5o.get_info(oid)
            if info.rc != 1:  # a second hard link: an alias, or a cycle back to a parent
                raise self.refuse(f"{child!r}", f"is one object reached by {info.rc} links")
            if info.type == h5o.TYPE_GROUP:
                group.groups[name] = self.group(oid, child, depth + 1)
            elif info.type == h5o.TYPE_DATASET:
                group.datasets[name] = self.dataset(oid, child)
            else:
                raise self.refuse(f"{child!r}", "is neither a group nor a dataset")
        return group

    def _name(self, raw: bytes, path: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.refuse(f"a member of group {path!r}", f"has the name {raw!r:.80}, not UTF-8") from None

    def _attrs(self, oid: Any, path: str) -> dict[str, str]:
        from h5py import h5a

        out = {}
        for name in self.attributes:
            if not h5a.exists(oid, name.encode()):
                continue
            attr = h5a.open(oid, name.encode())
            one_string = attr.shape == () and attr.dtype.kind in "OSU"
            if not one_string or attr.get_storage_size() > MAX_ATTRIBUTE_BYTES:
                raise self.refuse(f"group {path!r} attribute {name!r}",
                                  f"is {attr.dtype} of shape {attr.shape}, not one string")
            value = np.empty((), dtype=attr.dtype)
            attr.read(value)
            text = value.item()
            try:
                out[name] = text.decode("utf-8") if isinstance(text, bytes) else str(text)
            except UnicodeDecodeError:
                raise self.refuse(f"group {path!r} attribute {name!r}", "is not UTF-8") from None
        return out

    def dataset(self, did: Any, path: str) -> Dataset:
        from h5py import h5d

        what = f"dataset {path!r}"
        dtype, shape = did.dtype, did.shape
        if dtype.kind not in "fiu" or dtype.fields is not None or dtype.subdtype is not None:
            raise self.refuse(what, f"has dtype {dtype}, not a numeric array")
        if shape is None:
            raise self.refuse(what, "has no shape (an empty dataspace)")
        declared = Dataset(path, tuple(int(d) for d in shape), dtype)
        plist = did.get_create_plist()
        layout = plist.get_layout()
        if layout == h5d.VIRTUAL:
            raise self.refuse(what, "is a virtual dataset, mapped from other files")
        if plist.get_external_count():
            raise self.refuse(what, "keeps its data in another file (HDF5 external storage)")
        stored = did.get_storage_size()
        if layout == h5d.CHUNKED:
            self._chunks(did, plist, declared, what)
        elif layout == h5d.CONTIGUOUS and declared.nbytes:
            offset = did.get_offset()
            if offset is None or stored != declared.nbytes:
                raise self.refuse(what, f"declares {declared.nbytes:,} bytes ({dtype} {declared.shape}) but "
                                  f"{stored:,} are stored; unstored data would read as fill values")
            if offset + stored > self.size:
                raise self.refuse(what, f"declares bytes {offset:,}..{offset + stored:,} in a file of "
                                  f"{self.size:,} bytes")
        elif layout == h5d.COMPACT and stored != declared.nbytes:
            raise self.refuse(what, f"declares {declared.nbytes:,} bytes but holds {stored:,}")
        elif layout not in (h5d.CONTIGUOUS, h5d.COMPACT, h5d.CHUNKED):
            raise self.refuse(what, f"has an HDF5 layout ({layout}) portbench does not read")
        return declared

    def _chunks(self, did: Any, plist: Any, declared: Dataset, what: str) -> None:
        for index in range(plist.get_nfilters()):
            code, _, _, name = plist.get_filter(index)
            if code not in FILTERS:
                raise self.refuse(what, f"uses the HDF5 filter {name!r:.40} ({code}); portbench reads only "
                                  f"{', '.join(FILTERS.values())}")
        chunk = plist.get_chunk()
        expected = math.prod(math.ceil(d / c) for d, c in zip(declared.shape, chunk, strict=True))
        count = did.get_num_chunks()
        if count != expected:
            raise self.refuse(what, f"stores {count:,} of its {expected:,} chunks; missing chunks would "
                              "read as fill values")
        self.chunks += count
        if self.chunks > MAX_CHUNKS:
            raise self.refuse(what, f"brings the file past {MAX_CHUNKS:,} chunks")
        stored = 0
        for index in range(count):
            info = did.get_chunk_info(index)
            if info.byte_offset is None or info.byte_offset + info.size > self.size:
                raise self.refuse(what, f"has chunk {index} at bytes {info.byte_offset}..+{info.size:,} in a "
                                  f"file of {self.size:,} bytes")
            stored += info.size
        if declared.nbytes > stored * MAX_EXPANSION:
            raise self.refuse(what, f"declares {declared.nbytes:,} bytes from {stored:,} stored, more than "
                              f"its filters can expand ({MAX_EXPANSION}:1)")
