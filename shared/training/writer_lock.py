"""One train folder, one writer: `compare.py train` holds `LOCK` in its checkpoint folder for
the whole run, so a second run into the same folder (another recipe, another seed list) is
refused in one line that names the owner, instead of both saving units and each deleting the
other's as superseded.

The lock is the kernel's (`flock` on the open file, released when its process ends however it
ends), so a run killed with SIGKILL leaves no lock that holds anyone out; the file's content only
says who holds it: pid, host, start time, recipe, spec, framework and seeds. A `LOCK` left by a
run of this host that is gone is taken over with a note naming it; a file of that name that holds
no such record is not ours, and is kept (refused). One written from another host
is refused while it is there: whether that run still goes on cannot be told from here (a network
filesystem's locks may not reach across hosts), so the message says which file to remove once it
has ended. The owner removes `LOCK` when it ends (and the folder, if it made it and left it empty).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from shared.core.documents import decode_json
from shared.core.paths import make_folders, remove_empty, writer_alive
from shared.errors import InputError

LOCK = "LOCK"
RECORD_BYTES = 4096  # a record is a few hundred bytes; more is not ours and is not read
ATTEMPTS = 3  # a lock file removed by its releasing owner between our open and our flock: retry


def owner_record(**fields: Any) -> dict[str, Any]:
    """What `LOCK` says about the run that holds it: this process, this host, now, and `fields`
    (recipe, spec, framework, seeds)."""
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **fields}


@contextlib.contextmanager
def hold(folder: Path, owner: dict[str, Any], note: Callable[[str], None]) -> Iterator[None]:
    """Hold `folder`'s lock while the body runs, or refuse in one line naming who holds it;
    `note` says so when a lock left by a run that is gone is taken over."""
    created = make_folders(folder)
    try:
        fd = _acquire(folder, owner, note)
    except BaseException:
        remove_empty(created)
        raise
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if _still_named(fd, folder / LOCK):  # ours still: removed before the kernel lock goes,
                os.unlink(folder / LOCK)  # so a run that opens it later finds no file to wait on
        os.close(fd)
        remove_empty(created)


def _acquire(folder: Path, owner: dict[str, Any], note: Callable[[str], None]) -> int:
    path = folder / LOCK
    for _ in range(ATTEMPTS):
        opened = _open(folder, path)
        if opened is None:  # there as we looked, gone as we opened it: look again
            continue
        fd, created = opened
        try:
            _refuse_not_regular(fd, path)
            held = _lock(fd, path)
            previous = _read(fd)
            if not held:
                raise InputError(f"--checkpoints {str(folder)!r} is in use by another train run "
                                 f"({describe(previous)}); one train folder has one writer: wait for "
                                 "it to end or choose another --checkpoints folder")
            if not _still_named(fd, path):  # its owner removed it as we opened it: a new one
                os.close(fd)
                continue
            if previous is None and os.fstat(fd).st_size:  # a file of someone else's, not ours to empty
                raise InputError(f"{str(path)!r} is not a train run's lock (it holds no owner record); "
                                 "it is kept: move it away, or choose another --checkpoints folder")
            _check_stale(folder, previous, note)
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
        except BaseException:
            with contextlib.suppress(OSError):
                if created:  # refused with the file ours and empty: the folder is left as it was
                    os.unlink(path)
                os.close(fd)
            raise
        return fd
    raise InputError(f"--checkpoints {str(folder)!r}: its lock {LOCK!r} kept changing hands; another "
                     "train run is starting there: choose another --checkpoints folder")


def _open(folder: Path, path: Path) -> tuple[int, bool] | None:
    """(descriptor, whether this call created the file), or None when it vanished meanwhile."""
    flags = os.O_RDWR | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        try:
            return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            return os.open(path, flags), False
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"--checkpoints {str(folder)!r}: its lock {LOCK!r} cannot be opened "
                         f"({exc.strerror}); one train folder has one writer") from None


def _lock(fd: int, path: Path) -> bool:
    """Whether this process now holds the kernel lock on `fd` (False: a live process does)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        raise InputError(f"{str(path)!r} cannot be locked ({exc.strerror}): this filesystem offers no "
                         "file locks; choose --checkpoints on a local disk") from None
    return True


def _refuse_not_regular(fd: int, path: Path) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise InputError(f"{str(path)!r} is not a regular file; a checkpoint folder's {LOCK!r} is the "
                         "file train holds while it writes there: move it away")


def _read(fd: int) -> dict[str, Any] | None:
    """The owner record in `LOCK`; None when there is none (an empty file: new, or its owner is
    writing it or died before it did; or a file that is not a lock of ours)."""
    try:
        record = decode_json(os.pread(fd, RECORD_BYTES, 0).decode("utf-8"), f"lock {LOCK!r}", InputError)
    except (UnicodeDecodeError, InputError):  # nesting too deep included: RecursionError was a crash
        return None
    return record if isinstance(record.get("pid"), int) and isinstance(record.get("host"), str) else None


def _still_named(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.lstat(path))
    except FileNotFoundError:
        return False


def _check_stale(folder: Path, previous: dict[str, Any] | None, note: Callable[[str], None]) -> None:
    """The kernel lock is ours, so no process of this host holds it: a record left behind is a
    run that is gone (said in a note), unless it names another host, which is refused."""
    if previous is None:
        return  # a new file, or one whose owner died before it wrote who it was
    if previous["host"] != socket.gethostname():
        raise InputError(f"--checkpoints {str(folder)!r} is locked by a train run on another host "
                         f"({describe(previous)}); whether it still runs cannot be told from here: once "
                         f"it has ended, remove {str(folder / LOCK)!r}")
    gone = "that is gone" if not writer_alive(previous["pid"]) else "that no longer holds it"
    note(f"note: --checkpoints {str(folder)!r}: took over the lock of a train run {gone} "
         f"({describe(previous)}); its checkpoints are checked as any others")


def describe(record: dict[str, Any] | None) -> str:
    """Who holds a lock, from its record, as a message says it."""
    if record is None:
        return "its owner has not yet written who it is"
    fields = [f"pid {record.get('pid')} on host {record.get('host')!r}", f"started {record.get('started')}"]
    fields += [f"{key} {record[key]!r}" for key in ("recipe", "spec", "framework", "seeds") if key in record]
    return ", ".join(fields)
