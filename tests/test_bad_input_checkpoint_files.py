"""A checkpoint reads only itself. A keras-hub preset (shared/core/hdf5.py): an `.weights.h5` whose datasets
keep their bytes in another file (HDF5 external storage, absolute or relative), map other files
(a virtual dataset), were never written, lack chunks, use a filter outside the lossless built-ins,
or whose links are soft, external, aliased or cyclic, nested too deep or named in bytes that are
not UTF-8, is refused by `convert --from keras_hub` in one line naming the dataset, link or group,
exit 2, before any data is read, nothing written. The preset is portbench's own export of a tiny
spec, edited with h5py: what a hostile preset would be. A torch file
(shared/core/containers.py `check_torch_archive`): a compressed member, or the pre-zip format
whose storage sizes nothing can check before torch allocates, is refused before torch reads it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from shared.checkpoints import export_checkpoint, import_checkpoint
from shared.core.presets import get_preset
from shared.core.weights import init_weights
from tests.adversarial import refused, run_cli

SPEC = get_preset("quadrant").replace(class_token=True, pooling="cls", pos_embed_class_row=True)
SECRET = b"portbench-secret-" * 16  # 272 bytes: what a file outside the preset holds
WEIGHTS = "preset/model.weights.h5"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    export_checkpoint("keras_hub", SPEC, init_weights(SPEC), tmp_path / "preset")
    (tmp_path / "secret.bin").write_bytes(SECRET)
    return tmp_path


def first_dataset(h5: Any) -> str:
    """The path of the first variable dataset the file holds (a `vars/N` under some layer)."""
    found: list[str] = []
    h5.visit(lambda name: found.append(name) if isinstance(h5[name], h5py.Dataset) else None)
    return sorted(found)[0]


def replace_dataset(h5: Any, make: Callable[[Any, str, Any], None]) -> str:
    """Delete the first variable dataset and let `make(h5, path, old)` write its replacement."""
    path = first_dataset(h5)
    old = h5[path][()]
    del h5[path]
    make(h5, path, old)
    return "/" + path


def external(target: str) -> Callable[[Any, str, Any], None]:
    def make(h5: Any, path: str, old: Any) -> None:
        h5.create_dataset(path, shape=old.shape, dtype=old.dtype, external=[(target, 0, old.nbytes)])
    return make


def virtual(h5: Any, path: str, old: Any) -> None:
    layout = h5py.VirtualLayout(shape=old.shape, dtype=old.dtype)
    layout[...] = h5py.VirtualSource("missing.h5", "data", shape=old.shape)
    h5.create_virtual_dataset(path, layout)


def unwritten(h5: Any, path: str, old: Any) -> None:  # 6.4 GB declared, nothing stored
    h5.create_dataset(path, shape=(40_000, 40_000), dtype="f4")


def missing_chunks(h5: Any, path: str, old: Any) -> None:
    data = h5.create_dataset(path, shape=(64, *old.shape), dtype=old.dtype, chunks=(1, *old.shape))
    data[0] = old  # one chunk of 64 stored; the others would read as the fill value


def scaleoffset(h5: Any, path: str, old: Any) -> None:  # lossy packing: not a filter portbench reads
    h5.create_dataset(path, data=old, scaleoffset=2)


def soft_link(h5: Any, path: str, old: Any) -> None:
    h5["elsewhere"] = old
    h5[path] = h5py.SoftLink("/elsewhere")


def external_link(h5: Any, path: str, old: Any) -> None:
    h5[path] = h5py.ExternalLink("../secret.h5", "/data")


def alias(h5: Any, path: str, old: Any) -> None:
    h5["elsewhere"] = old
    h5[path] = h5["elsewhere"]  # a second hard link to one dataset


CASES = {
    "external storage, absolute path": (None, "keeps its data in another file (HDF5 external storage)"),
    "external storage, relative path": (None, "keeps its data in another file (HDF5 external storage)"),
    "virtual dataset": (virtual, "is a virtual dataset, mapped from other files"),
    "declared, never written": (unwritten, "declares 6,400,000,000 bytes (float32 (40000, 40000)) but 0 are"),
    "missing chunks": (missing_chunks, "stores 1 of its 64 chunks"),
    "lossy filter": (scaleoffset, "uses the HDF5 filter"),
    "soft link": (soft_link, "is a soft link"),
    "external link": (external_link, "is an external link to another file"),
    "aliased dataset": (alias, "is one object reached by 2 links"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_dataset_that_reads_beyond_the_file_is_refused_before_reading(folder: Path, case: str) -> None:
    make, message = CASES[case]
    if make is None:
        make = external(str(folder / "secret.bin") if "absolute" in case else "../secret.bin")
    with h5py.File(folder / WEIGHTS, "a") as h5:
        path = replace_dataset(h5, make)
    line = refused(folder, "convert", "--from", "keras_hub", "--in", "preset", "--out", "out.safetensors",
                   expect=message)
    assert "keras_hub weights" in line and "model.weights.h5" in line
    if case not in ("soft link", "external link", "aliased dataset"):
        assert repr(path) in line, line  # the dataset is named by its path in the file


def test_a_link_cycle_deep_groups_and_non_utf8_names_are_named(folder: Path) -> None:
    with h5py.File(folder / WEIGHTS, "a") as h5:
        h5["layers"]["loop"] = h5["layers"]  # a hard link back to its parent: a cycle
    refused(folder, "convert", "--from", "keras_hub", "--in", "preset", "--out", "o.safetensors",
            expect="'/layers' is one object reached by 2 links")
    with h5py.File(folder / WEIGHTS, "a") as h5:
        del h5["layers/loop"]
        h5.create_group("/".join(["deep"] * 40))
    refused(folder, "convert", "--from", "keras_hub", "--in", "preset", "--out", "o.safetensors",
            expect="is nested more than 32 groups deep")
    with h5py.File(folder / WEIGHTS, "a") as h5:
        del h5["deep"]
        h5py.h5g.create(h5.id, b"caf\xe9")  # a Latin-1 name
    refused(folder, "convert", "--from", "keras_hub", "--in", "preset", "--out", "o.safetensors",
            expect="has the name b'caf\\xe9', not UTF-8")


def test_external_storage_on_a_fifo_is_refused_without_opening_it(folder: Path) -> None:
    """Were the FIFO opened, the reader would wait for a writer forever: the command runs in a
    process of its own with a limit, and must answer in one line long before it."""
    os.mkfifo(folder / "pipe")
    with h5py.File(folder / WEIGHTS, "a") as h5:
        replace_dataset(h5, external(str(folder / "pipe")))
    done = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "compare.py"), "convert", "--from",
                           "keras_hub", "--in", "preset", "--out", "o.safetensors"],
                          cwd=folder, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 2, done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("error:")] == [
        line for line in done.stderr.splitlines() if line.strip()], done.stderr
    assert "keeps its data in another file" in done.stderr
    assert not (folder / "o.safetensors").exists()


def test_chunked_and_compressed_storage_inside_the_file_reads_the_same_tensors(folder: Path) -> None:
    """What the reader accepts is not only Keras' contiguous layout: the same preset with every
    dataset re-written chunked and gzip-compressed converts to identical tensors."""
    before = import_checkpoint("keras_hub", folder / "preset").tensors
    with h5py.File(folder / WEIGHTS, "a") as h5:
        names: list[str] = []
        h5.visit(lambda name: names.append(name) if isinstance(h5[name], h5py.Dataset) else None)
        for name in names:
            data = h5[name][()]
            del h5[name]
            h5.create_dataset(name, data=data, chunks=data.shape or None, compression="gzip", shuffle=True)
    after = import_checkpoint("keras_hub", folder / "preset").tensors
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(before[name], after[name], err_msg=name)


def test_a_torch_file_is_checked_before_torch_reads_it(tmp_path: Path) -> None:
    """torch.save's own archive converts; the same archive with its members deflated, and the
    pre-zip format, are refused in one line naming the file, nothing written."""
    import torch

    from shared.checkpoints import export_tensors

    spec = get_preset("quadrant")
    raw = {k: torch.from_numpy(v) for k, v in export_tensors("timm", spec, init_weights(spec)).items()}
    torch.save(raw, tmp_path / "plain.pth")
    with zipfile.ZipFile(tmp_path / "plain.pth") as plain, \
            zipfile.ZipFile(tmp_path / "deflated.pth", "w", zipfile.ZIP_DEFLATED) as packed:
        for info in plain.infolist():
            packed.writestr(info.filename, plain.read(info))
    torch.save(raw, tmp_path / "legacy.pth", _use_new_zipfile_serialization=False)
    args = ["--spec", "quadrant", "--out", "out.safetensors"]
    refused(tmp_path, "convert", "--from", "timm", "--in", "deflated.pth", *args,
            expect="checkpoint 'deflated.pth': member 'plain/data.pkl' is compressed")
    refused(tmp_path, "convert", "--from", "timm", "--in", "legacy.pth", *args,
            expect="checkpoint 'legacy.pth' is not a torch.save zip archive")
    assert run_cli("convert", "--from", "timm", "--in", "plain.pth", *args, cwd=tmp_path).code == 0
