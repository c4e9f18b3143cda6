"""The one way portbench reads what a user hands over and writes what it produces.

Every output path goes through `shared.core.paths.output_path` (the one path-safety check) and
is checked there before any work (`check_output`, re-exported here). Writes are atomic (a
temporary file `.NAME.<pid>.<random>.tmp` beside the target, fsync, then publication: a reader
never sees half a file, a failure leaves the target as it was) and, unless the user passed
`--force`, exclusive: the temporary file is hard-linked to the target name, which fails if the
name exists, so the existence check and the publication are one step, at the moment of
writing, and two writers cannot both succeed. `--force` replaces a regular file and nothing
else (a FIFO, a device, a symlink or a folder is refused), and only the file that was there when
the run checked its outputs, before the work: one that appeared or changed at that name while the
run worked is kept (shared/core/paths.py `changed_since_check`). The outputs of one run are published
together (`Outputs`): all of them or none. A temporary whose writer died (SIGKILL) is removed
the next time the same target is written. Reads decode with one-line errors that name the file.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from shared.core.memory import check_bytes_fit
from shared.core.paths import (
    article,
    changed_since_check,
    check_distinct,
    check_output,
    check_target,
    clean_stale,
    existing_kind,
    forget_check,
    identity,
    make_folders,
    remove_empty,
)
from shared.errors import InputError, PortbenchError

__all__ = ["Outputs", "check_output", "read_text", "write_folder", "write_output"]

UMASK = os.umask(0)  # read once (there is no way to read it without setting it) ...
os.umask(UMASK)  # ... and put back at once


# ---- writing --------------------------------------------------------------------------------
class Outputs:
    """The outputs of one run, published together: each is staged as a temporary beside its
    target (written and fsynced: a full disk fails here, before anything is published), then all
    are published; if any fails, the ones already published by this run are taken back (a file
    it replaced under --force is put back). Temporaries are removed on every way out, including
    Ctrl-C and SIGTERM (compare.py turns SIGTERM into KeyboardInterrupt)."""

    def __init__(self, force: bool = False, make_folders: bool = False) -> None:
        self.force, self.make_folders = force, make_folders
        self.staged: list[tuple[Path, Path, bool]] = []  # (temporary, target, force)
        self.created: list[Path] = []  # folders made for the outputs: removed if none is published

    def add(self, path: str | Path, data: bytes, force: bool | None = None, *,
            shown_as: Path | None = None) -> Path:
        """Stage `data` for `path` (`force`: this output's own, else the run's); returns `path`.
        `shown_as`: the name the user knows the file by, when `path` lies in a staging folder of
        portbench's own (a full disk names the output asked for, not a temporary)."""
        if self.make_folders:
            self.created.extend(make_folders(Path(path).parent))
        path = check_target(path, force=True)  # folder checks; existence is decided at publication
        named = {f"output {str(target)!r}": target for _, target, _ in self.staged}
        check_distinct({**named, f"output {str(path)!r}": path})
        clean_stale(path)
        try:
            tmp = _stage(path, data)
        except OSError as exc:  # e.g. ENOSPC: nothing is left under any name
            raise InputError(f"output {str(shown_as or path)!r} cannot be written: {exc.strerror}") from None
        self.staged.append((tmp, path, self.force if force is None else force))
        return path

    def publish(self) -> None:
        done: list[tuple[Path, Path | None]] = []  # (target, the backup of what it replaced)
        try:
            for tmp, path, force in self.staged:
                done.append((path, _publish(tmp, path, force)))
        except BaseException:
            for path, backup in reversed(done):
                _take_back(path, backup)
            self.discard()
            raise
        self.created = []  # published: the folders hold the outputs now
        self.discard()
        for path, backup in done:
            forget_check(path)
            if backup is not None:
                backup.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove every temporary (and the folders made for them, when nothing was published)."""
        for tmp, _, _ in self.staged:
            tmp.unlink(missing_ok=True)
        self.staged = []
        remove_empty(self.created)
        self.created = []

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def write_output(path: str | Path, data: bytes, *, force: bool = False,
                 shown_as: Path | None = None) -> None:
    """Publish `data` at `path` atomically; without `force`, only if nothing is there yet
    (`shown_as`: as `Outputs.add`)."""
    with Outputs(force) as outputs:
        outputs.add(path, data, shown_as=shown_as)
        outputs.publish()


def write_folder(path: str | Path, files: dict[str, bytes]) -> None:
    """A new folder holding `files`, published whole: staged in `.NAME.<pid>.<random>.tmp`
    beside it, then renamed onto the name, which must not exist (a folder is never replaced)."""
    path = check_output(path, force=False, folder=True)
    clean_stale(path)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                                        dir=path.parent))
    except OSError as exc:
        raise InputError(f"output {str(path)!r} cannot be written: {exc.strerror}") from None
    try:
        staging.chmod(0o777 & ~UMASK)  # mkdtemp makes 0700; a published folder gets the usual mode
        for name, data in files.items():
            write_output(staging / name, data, shown_as=path / name)
        try:
            os.mkdir(path)  # exclusive: fails when the name exists ...
        except FileExistsError:
            raise InputError(f"output {str(path)!r} already exists; choose another --out") from None
        try:
            os.rename(staging, path)  # ... and the rename replaces only that empty folder of ours
        except OSError as exc:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise InputError(f"output {str(path)!r} cannot be written: {exc.strerror}") from None
    except OSError as exc:
        raise InputError(f"output {str(path)!r} cannot be written: {exc.strerror}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stage(path: Path, data: bytes) -> Path:
    """`data` written and fsynced in a new temporary beside `path`; on any failure (an OSError
    such as ENOSPC, or an interrupt) the temporary is removed and the exception raised."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                                dir=path.parent if str(path.parent) else ".")
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp makes 0600; a published file gets the usual mode
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _publish(tmp: Path, path: Path, force: bool) -> Path | None:
    """Link `tmp` to `path` (exclusive); with `force`, replace the regular file the run found there
    before its work and return a backup link to it (so the run can take it back), refusing
    anything else."""
    try:
        os.link(tmp, path)  # atomic create-if-absent: fails when the name exists
        return None
    except FileExistsError:
        if not force:
            raise InputError(f"output {str(path)!r} already exists; pass --force to replace it") from None
    except OSError:  # a filesystem without hard links: reserve the name exclusively, then fill it
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            if not force:
                raise InputError(f"output {str(path)!r} already exists; pass --force to replace it") from None
        else:
            _replace(tmp, path)
            return None
    kind = existing_kind(path)
    if kind != "regular file":
        raise InputError(f"output {str(path)!r} is {article(kind or 'missing file')}; --force replaces "
                         "only a regular file")
    backup = Path(f"{tmp}.old.tmp")
    try:
        os.link(path, backup)  # what is judged below is the file the backup holds
    except OSError:
        backup = None  # type: ignore[assignment]
    # Only the file that was there when the run started: the backup pins which file that is
    # (without one, the name is read), so what is replaced is what was judged, unless another
    # writer swaps the name in the microseconds between this check and the rename.
    why = changed_since_check(path, identity(backup if backup is not None else path))
    if why:
        if backup is not None:
            backup.unlink(missing_ok=True)
        raise InputError(why)
    _replace(tmp, path)
    return backup


def _replace(tmp: Path, path: Path) -> None:
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"output {str(path)!r} cannot be written: {exc.strerror}") from None


def _take_back(path: Path, backup: Path | None) -> None:
    """Undo one publication of this run: restore what --force replaced, else remove ours."""
    try:
        if backup is not None:
            os.replace(backup, path)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def read_text(path: str | Path, where: str, error: type[PortbenchError] = InputError) -> str:
    """A user's text file as UTF-8 (a leading byte-order mark skipped), or one `error` line naming
    it (`where`: "results file 'r.json'") and the problem: the reader of a user's text file."""
    blob = read_user_bytes(path, where, error)  # a regular file only: a FIFO or /dev/zero never hangs
    skip = len(codecs.BOM_UTF8) if blob.startswith(codecs.BOM_UTF8) else 0
    try:
        return blob[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = skip + exc.start
        raise error(f"{where} is not UTF-8 text: byte 0x{blob[at]:02x} at offset {at} "
                    f"({exc.reason})") from None


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
