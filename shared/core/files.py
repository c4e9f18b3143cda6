"""The one way portbench reads what a user hands over and writes what it produces.

Writes are atomic (a temporary file beside the target, fsync, then a rename: a reader never sees
half a file, and a failure leaves the target as it was) and, unless the user passed `--force`,
exclusive: the temporary file is hard-linked to the target name, which fails if the name exists,
so the existence check and the publication are one step and two writers started together cannot
both succeed. Reads decode with one-line errors that name the file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from shared.errors import InputError

UMASK = os.umask(0)  # read once (there is no way to read it without setting it) ...
os.umask(UMASK)  # ... and put back at once


def check_output(path: str | Path, force: bool) -> Path:
    """Fail early, before any work, when `path` exists without --force, names a directory, or
    sits in a folder that is missing or not writable. The write itself checks again."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"output {str(path)!r} is a directory; expected a file name")
    if path.exists() and not force:
        raise InputError(f"output {str(path)!r} already exists; pass --force to replace it")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"output {str(path)!r}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"output {str(path)!r}: directory {str(parent)!r} is not writable")
    return path


def write_output(path: str | Path, data: bytes, *, force: bool = False) -> None:
    """Publish `data` at `path` atomically; without `force`, only if nothing is there yet."""
    path = Path(path)
    check_output(path, force=True)  # folder checks; existence is decided atomically below
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    except OSError as exc:
        raise InputError(f"output {str(path)!r} cannot be written: {exc.strerror}") from None
    try:
        os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp makes 0600; a published file gets the usual mode
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        _publish(Path(tmp), path, force)
    except OSError as exc:
        raise InputError(f"output {str(path)!r} cannot be written: {exc.strerror}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def _publish(tmp: Path, path: Path, force: bool) -> None:
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic create-if-absent: fails when the name exists
    except FileExistsError:
        raise InputError(f"output {str(path)!r} already exists; pass --force to replace it") from None
    except OSError:  # a filesystem without hard links: reserve the name exclusively, then fill it
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            raise InputError(f"output {str(path)!r} already exists; pass --force to replace it") from None
        os.replace(tmp, path)


def read_text(path: str | Path, what: str) -> str:
    """A user's text file as UTF-8, or a one-line InputError naming it and the problem."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {str(path)!r} is a directory; expected a file") from None
    except OSError as exc:
        raise InputError(f"{what} {str(path)!r} cannot be read: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {str(path)!r} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                         f"offset {exc.start})") from None
