"""The one way portbench reads what a user hands over and writes what it produces.

Writes are atomic (a temporary file beside the target, fsync, then a rename: a reader never sees
half a file, and a failure leaves the target as it was) and, unless the user passed `--force`,
exclusive: the temporary file is hard-linked to the target name, which fails if the name exists,
so the existence check and the publication are one step and two writers started together cannot
both succeed. Reads decode with one-line errors that name the file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from shared.errors import InputError, PortbenchError

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
    where = f"{what} {str(path)!r}"
    data = read_user_bytes(path, where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                         f"offset {exc.start})") from None


# ---- reading a user's file: the one checked opener -----------------------------------------
# What a path can name besides a regular file, as a message says it. Reading any of them would
# hang (a FIFO with no writer), never end (/dev/zero) or fail with an unrelated message.
NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def open_user_file(path: str | Path, where: str,
                   error: type[PortbenchError] = InputError) -> BinaryIO:
    """`path` open for binary reading, if it is a regular file; otherwise one `error` line that
    starts with `where` (e.g. "input file 'x.npy'") and says what the path is. The kind is
    checked before opening (nothing is opened that is not a file) and again on the open
    descriptor (what was checked is what is read); the open itself never blocks."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        _refuse_not_regular(os.stat(path), where, error)
        fd = os.open(path, flags)
    except OSError as exc:
        raise _unreadable(exc, where, error) from None
    except ValueError:  # an embedded NUL byte
        raise error(f"{where} is not a usable file name (it contains a NUL byte)") from None
    try:
        _refuse_not_regular(os.fstat(fd), where, error)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_user_bytes(path: str | Path, where: str, error: type[PortbenchError] = InputError) -> bytes:
    """A user's whole (regular) file, refused first when it is larger than the memory left."""
    with open_user_file(path, where, error) as handle:
        from shared.core.budget import check_bytes_fit  # inside: budget -> spec -> ... -> files

        check_bytes_fit(os.fstat(handle.fileno()).st_size, f"{where} holds", error)
        try:
            return handle.read()
        except OSError as exc:
            raise _unreadable(exc, where, error) from None


def _refuse_not_regular(found: os.stat_result, where: str, error: type[PortbenchError]) -> None:
    if stat.S_ISREG(found.st_mode):
        return
    kind = next((name for test, name in NOT_REGULAR if test(found.st_mode)), "not a file")
    raise error(f"{where} is {kind}, not a regular file; expected a file to read")


def _unreadable(exc: OSError, where: str, error: type[PortbenchError]) -> PortbenchError:
    if isinstance(exc, FileNotFoundError):
        return error(f"{where} does not exist")
    return error(f"{where} cannot be read: {exc.strerror or exc}")
