"""Declared sizes that are lies: an `.npy` header or an `.npz` member claiming gigabytes, a sparse
file whose header is true but whose size no machine here holds, a safetensors header with an
unknown dtype or offsets past the file's end. Each is refused in one line before anything is
allocated (shared/core/containers.py); a valid big-endian float32 array is read, converted."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from shared.core.presets import get_preset
from shared.core.weights import init_weights, save_weights
from tests.adversarial import run_cli
from tests.refusals import refused_promptly

WEIGHTS = ("logits", "--framework", "reference", "--out", "y.npy", "--weights")
LOGITS = ("logits", "--spec", "quadrant", "--framework", "reference", "--out", "y.npy", "--input")
QUADRANT = get_preset("quadrant")
IMAGE = (QUADRANT.image_height, QUADRANT.image_width, QUADRANT.channels)


def npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def sparse(folder: Path, name: str, head: bytes, size: int) -> str:
    """`head`, then a hole up to `size` bytes: a file that large on a few blocks. It lies beside
    the folder the command runs in (whose every file the refusal hashes: reading gigabytes of
    hole would take longer than the test); its own size and time are checked unchanged."""
    path = folder.parent / f"{folder.name}-sparse" / name
    path.parent.mkdir()
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return str(path)


def refused_beside(folder: Path, big: str, *argv: str, expect: str) -> None:
    before = Path(big).stat()
    refused_promptly(folder, *argv, expect=expect)
    after = Path(big).stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


@pytest.mark.parametrize("content, expect", [
    (npy_header((10**9, *IMAGE)) + b"\0" * 64,
     "its header declares a float32 array of shape (1000000000, 8, 8, 1)"),
    (npy_header((2, *IMAGE)) + b"\0" * 100, "(512 bytes) but 100 bytes follow the header"),
    (npy_header((2, *IMAGE)) + b"\0" * 600, "(512 bytes) but 600 bytes follow the header"),
    (npy_header((2, 3, *IMAGE)) + b"\0" * 1536,
     "images have shape (2, 3, 8, 8, 1), expected (batch, 8, 8, 1)"),
    (npy_header((2, *IMAGE), "<f8") + b"\0" * 1024, "dtype float64, expected float32"),
    (npy_header((2, *IMAGE), ">f8") + b"\0" * 1024, "dtype float64, expected float32"),
    (npy_header((2, *IMAGE), "<i4") + b"\0" * 512, "dtype int32, expected float32"),
])
def test_an_input_header_that_lies_is_refused_before_reading(tmp_path: Path, content: bytes,
                                                             expect: str) -> None:
    (tmp_path / "x.npy").write_bytes(content)
    refused_promptly(tmp_path, *LOGITS, "x.npy", expect=expect)


def test_a_sparse_input_of_sixteen_gib_is_refused_by_the_memory_budget(tmp_path: Path) -> None:
    head = npy_header((2**26, *IMAGE))
    big = sparse(tmp_path, "x.npy", head, len(head) + 2**26 * 256)
    refused_beside(tmp_path, big, *LOGITS, big, expect="at batch 67108864")


def test_sparse_logits_of_sixty_four_gib_are_refused_before_reading(tmp_path: Path) -> None:
    head = npy_header((2**32, 4))
    big = sparse(tmp_path, "l.npy", head, len(head) + 2**36)
    refused_beside(tmp_path, big, "diagnose", "--spec", "quadrant", "--logits", big,
                   expect="l.npy' declares 64 GiB, more than the")


def test_a_big_endian_float32_input_gives_the_native_inputs_logits(tmp_path: Path) -> None:
    images = np.random.default_rng(3).standard_normal((2, *IMAGE)).astype(np.float32)
    np.save(tmp_path / "native.npy", images)
    np.save(tmp_path / "big.npy", images.astype(">f4"))
    np.save(tmp_path / "fortran.npy", np.asfortranarray(images))
    for name in ("native", "big", "fortran"):
        outcome = run_cli(*LOGITS[:-2], f"{name}-logits.npy", "--input", f"{name}.npy", cwd=tmp_path)
        assert outcome.code == 0, outcome.stderr
    native = np.load(tmp_path / "native-logits.npy")
    assert np.array_equal(np.load(tmp_path / "big-logits.npy"), native)  # the same bits in, the same out
    assert np.array_equal(np.load(tmp_path / "fortran-logits.npy"), native)


def npz(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@pytest.mark.parametrize("command", ["convert", "train"])
def test_an_npz_member_claiming_gigabytes_is_refused(tmp_path: Path, command: str) -> None:
    npz(tmp_path / "c.npz", {"x_train.npy": npy_header((10**6, 10**4)) + b"\0" * 16})
    argv = (("convert", "--from", "big_vision", "--in", "c.npz", "--out", "w.safetensors")
            if command == "convert" else ("train", "--spec", "mnist-vit-small", "--data", "mnist:c.npz"))
    refused_promptly(tmp_path, *argv, expect="member 'x_train': its header declares a float32 array of "
                                             "shape (1000000, 10000) (40,000,000,000 bytes) but 16 bytes")


def canonical_header(tmp_path: Path) -> tuple[dict, bytes]:
    """A real quadrant weight file's header (as a dict) and data bytes."""
    save_weights(tmp_path / "real.safetensors", QUADRANT, init_weights(QUADRANT, 0))
    blob = (tmp_path / "real.safetensors").read_bytes()
    (tmp_path / "real.safetensors").unlink()
    length = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + length]), blob[8 + length:]


def safetensors_head(header: dict) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw


@pytest.mark.parametrize("extra, expect", [
    ({"dtype": "F99", "shape": [2], "data_offsets": [0, 8]},
     "tensor 'x' has dtype 'F99', not a safetensors dtype"),
    ({"dtype": "F32", "shape": [10**9], "data_offsets": [0, 4 * 10**9]},
     "tensor 'x' declares F32 (1000000000,) (4,000,000,000 bytes) at bytes 0..4,000,000,000"),
    ({"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}, "declares F32 (4,) (16 bytes) at bytes 0..8"),
    ({"dtype": "F32", "shape": [-4], "data_offsets": [0, 8]}, "expected lists of non-negative integers"),
    ({"dtype": "F32", "shape": [2]}, "is not a safetensors entry"),
])
def test_a_weight_header_that_lies_is_refused(tmp_path: Path, extra: dict, expect: str) -> None:
    header, data = canonical_header(tmp_path)
    header["x"] = extra
    (tmp_path / "w.safetensors").write_bytes(safetensors_head(header) + data)
    refused_promptly(tmp_path, *WEIGHTS, "w.safetensors", expect=expect)


def test_a_sparse_three_gib_weight_file_is_refused_before_its_data_is_read(tmp_path: Path) -> None:
    header, data = canonical_header(tmp_path)
    end = len(data)
    header["x"] = {"dtype": "F32", "shape": [3 * 2**28], "data_offsets": [end, end + 3 * 2**30]}
    head = safetensors_head(header)
    big = sparse(tmp_path, "w.safetensors", head + data, len(head) + end + 3 * 2**30)
    refused_beside(tmp_path, big, *WEIGHTS, big,
                   expect="does not fit spec 'quadrant': tensor 'x' is not part of the spec")


def test_a_sparse_terabyte_checkpoint_is_refused_by_the_memory_budget(tmp_path: Path) -> None:
    head = safetensors_head({"w": {"dtype": "F32", "shape": [2**38], "data_offsets": [0, 2**40]}})
    big = sparse(tmp_path, "big.safetensors", head, len(head) + 2**40)
    refused_beside(tmp_path, big, "convert", "--from", "timm", "--in", big, "--out", "w.safetensors",
                   expect="big.safetensors' declares 1.02e+03 GiB, more than the")


@pytest.mark.parametrize("head", [struct.pack("<Q", 2**60) + b"{}", b"\x05\x00",
                                  b"\x02" + b"\x00" * 7 + b"[]"])
def test_a_safetensors_header_length_that_lies_is_refused(tmp_path: Path, head: bytes) -> None:
    (tmp_path / "w.safetensors").write_bytes(head)
    refused_promptly(tmp_path, *WEIGHTS, "w.safetensors",
                     expect="'w.safetensors' is not a readable safetensors file")


MILLION_TOKENS = ("--spec", "rope-tiny", "--set", "image_height=4100", "--set", "image_width=4100")


@pytest.mark.parametrize("argv, what", [
    (("logits", *MILLION_TOKENS, "--framework", "reference", "--out", "y.npy"),
     "for its weights and one image through the reference"),
    (("time", *MILLION_TOKENS, "--frameworks", "torch", "--batch", "1", "--eval-batches", "1"),
     "for a timing run's batches"),
])
def test_a_million_token_rope_spec_is_refused_by_the_memory_estimate(tmp_path: Path, argv: tuple[str, ...],
                                                                    what: str) -> None:
    """1025 x 1025 patches and two prefix tokens: a spec (no field is out of its bounds), whose
    attention cannot fit: the estimate says so, naming the tokens and the memory it needs."""
    line = refused_promptly(tmp_path, *argv, expect="spec 'rope-tiny' needs about ")
    assert f"GiB {what} (1,050,627 tokens an image, 10,304 parameters: " in line
    assert "of memory is available; use a smaller spec or batch" in line


def test_a_million_token_spec_is_still_a_spec_to_describe(tmp_path: Path) -> None:
    outcome = run_cli("spec", *MILLION_TOKENS[1:], "--json", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert json.loads(outcome.stdout)["derived"]["seq_len"] == 1_050_627
