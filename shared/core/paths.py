"""Where portbench may write, decided by one function: `output_path` is the path-safety check of
every writer (results, checkpoints, HTML pages, converted files and folders), and `name_part`
turns content (a spec name, a framework) into one safe path component, so that a default path
built from it (`inside`) cannot leave the folder the user named. Also: the checks made before
any work (`check_output`, `check_distinct`) and what each output's name held then
(`changed_since_check`: `--force` replaces that file, never one that appeared while the run
worked), the folders a run creates, and the removal of the temporaries a killed writer left
(`clean_stale`). The writing itself is shared/core/files.py.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

from shared.errors import InputError

UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")


# ---- where an output may go ---------------------------------------------------------------
def output_path(path: str | Path, *, folder: bool = False) -> Path:
    """The one path-safety check of every writer: `path` must name a file (`folder`: a folder)
    by a last component that is a real name: not empty, `.`, `..`, nor, for a file, ending in a
    separator (`newdir/` names a folder, and is never written as a file called `newdir`)."""
    text = os.fspath(path)
    if not text or "\0" in text:
        raise InputError(f"output {text!r} is not a usable path")
    if not folder and text.endswith((os.sep, "/")):
        raise InputError(f"output {text!r} ends with {os.sep!r}: it names a folder; expected a file name")
    if Path(text).name in ("", ".", ".."):
        raise InputError(f"output {text!r} does not end in a file or folder name")
    return Path(text)


def name_part(text: str) -> str:
    """Content (a spec name, a framework) as ONE safe path component: separators, `..` and
    control characters cannot survive, so a default path built from it stays in its folder."""
    part = UNSAFE.sub("_", str(text))[:100]
    return "_" + part if part.startswith(".") or not part else part


def inside(folder: str | Path, *parts: str) -> Path:
    """`folder`/`part`/..., each part through `name_part`, checked to stay inside `folder`."""
    base = Path(folder)
    path = base.joinpath(*(name_part(p) for p in parts))
    if os.path.commonpath([os.path.abspath(base), os.path.abspath(path)]) != os.path.abspath(base):
        raise InputError(f"output {str(path)!r} would leave the folder {str(base)!r}")  # never, by name_part
    return output_path(path)


def check_output(path: str | Path, force: bool, *, folder: bool = False, creatable: bool = False) -> Path:
    """Fail early, before any work, when `path` is unsafe, exists (without --force; with it,
    when it is not a regular file), or sits in a folder that is missing (`creatable`: that
    cannot be made) or not writable. Remembers what the name holds now: the write checks again,
    atomically, and `--force` then replaces that file only (`changed_since_check`)."""
    path = check_target(path, force, folder=folder, creatable=creatable)
    if not folder:  # a folder output is never replaced: nothing to compare at the write
        CHECKED[_name_key(path)] = identity(path)
    return path


def check_target(path: str | Path, force: bool, *, folder: bool = False, creatable: bool = False) -> Path:
    """`check_output`'s checks alone, remembering nothing (a write staging its temporary checks
    the folder again; what the name held before the work stays what --force may replace)."""
    path = output_path(path, folder=folder)
    kind = existing_kind(path)
    if kind is not None:
        if folder:
            raise InputError(f"output {str(path)!r} already exists ({article(kind)}); a folder output "
                             "is never replaced, even with --force: choose a new name")
        if kind != "regular file":
            raise InputError(f"output {str(path)!r} is {article(kind)}; expected a file name (--force "
                             "replaces only a regular file)")
        if not force:
            raise InputError(f"output {str(path)!r} already exists; pass --force to replace it")
    parent = path.parent if str(path.parent) else Path(".")
    if creatable and not parent.is_dir():
        check_creatable(parent)
        return path
    if not parent.is_dir():
        raise InputError(f"output {str(path)!r}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"output {str(path)!r}: directory {str(parent)!r} is not writable")
    return path


# ---- what an output's name held when the run checked it ----------------------------------------
# `--force` means "replace the file that is there now", said before the work: a file created at
# that name while the run worked (or changed there since) is someone else's, and is kept.
Identity = tuple[int, int, int, int]  # (device, inode, mtime in ns, size) of what a name holds
CHECKED: dict[str, Identity | None] = {}  # the name, as `_name_key` -> what it held (None: nothing)


def identity(path: Path) -> Identity | None:
    """Which file `path` names now, and whether it was written since (None: nothing there)."""
    try:
        found = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise InputError(f"output {str(path)!r} cannot be used: {exc.strerror}") from None
    return found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size


def changed_since_check(path: Path, now: Identity | None) -> str | None:
    """Why `--force` may not replace what `path` holds (`now`: its identity) — it appeared or
    changed after `check_output` looked — or None (the same file, or a name never checked: a
    file portbench itself replaces each run, such as a generated page or a cache)."""
    key = _name_key(path)
    if key not in CHECKED:
        return None
    before = CHECKED[key]
    if before == now:
        return None
    happened = "was created" if before is None else "was replaced or changed"
    return (f"output {str(path)!r} {happened} while the run worked; it is kept (--force replaces only "
            "the file that was there when the run started): move it away or choose another name")


def forget_check(path: Path) -> None:
    """The output is written: what its name held before no longer says anything."""
    CHECKED.pop(_name_key(path), None)


def _name_key(path: Path) -> str:
    # The folder resolved (a relative path, a symlinked folder), the last component as given:
    # the name itself is what is checked, whatever it may come to point at.
    parent = path.parent if str(path.parent) else Path(".")
    return os.path.join(os.path.realpath(parent), path.name)


def check_suffix(option: str, path: str | Path, suffixes: tuple[str, ...], what: str) -> None:
    """Refuse an output named with another suffix than what it holds (`--out logits.json` would be
    .npy bytes under a JSON name)."""
    if Path(path).suffix.lower() not in suffixes:
        raise InputError(f"{option} {str(path)!r}: expected a {' or '.join(suffixes)} file ({what})")


def check_distinct(outputs: dict[str, str | Path | None],
                   inputs: dict[str, str | Path | None] | None = None) -> None:
    """Refuse, before any work, two outputs of one run that name the same file (--json == --csv),
    and an output that names a file the run reads (--out == --weights: --force would replace the
    run's own input with its result)."""
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        key = os.path.normcase(os.path.realpath(path))
        if key in seen:
            raise InputError(f"{seen[key]} and {option} both name {str(path)!r}: one output of a run "
                             "would replace another; give each its own file")
        seen[key] = option
    for option, path in (inputs or {}).items():
        key = None if path is None else os.path.normcase(os.path.realpath(path))
        if key in seen:
            raise InputError(f"{seen[key]} names {str(path)!r}, the {option} file this run reads: an output "
                             "never replaces the run's own input; give it another name")


def existing_kind(path: Path) -> str | None:
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there (a file is in the way above it)
        return None
    except OSError as exc:
        raise InputError(f"output {str(path)!r} cannot be used: {exc.strerror}") from None
    for test, kind in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISLNK, "symbolic link"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "special file"


def article(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def check_creatable(folder: Path) -> None:
    """`folder` can be made: its nearest existing ancestor is a writable folder."""
    above = next((p for p in (folder, *folder.parents) if os.path.lexists(p)), Path("."))
    why = ("Not a directory" if not above.is_dir() else
           "Permission denied" if not os.access(above, os.W_OK | os.X_OK) else None)
    if why:
        raise InputError(f"output directory {str(folder)!r} cannot be created ({why}: {str(above)!r})")


def make_folders(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; the ones created, outermost first, so that a run
    that writes nothing can remove exactly those (`remove_empty`)."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"output directory {str(folder)!r} cannot be created ({exc.strerror})") from None
    return missing


def remove_empty(created: list[Path]) -> None:
    for path in reversed(created):
        try:
            path.rmdir()
        except OSError:  # not empty: something was written there; keep it
            return


# ---- what a killed writer left ----------------------------------------------------------------
def clean_stale(path: Path) -> list[Path]:
    """Remove portbench's temporaries of this same target (`.NAME.<pid>.<random>.tmp`, files or
    staging folders, ours by owner) whose writing process no longer exists; the ones removed."""
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.(\d+)\.[A-Za-z0-9_]+\.tmp(\.old\.tmp)?$")
    parent = path.parent if str(path.parent) else Path(".")
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if not match or writer_alive(int(match.group(1))):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid() or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def writer_alive(pid: int) -> bool:
    """Whether the process that named a temporary after itself may still be writing it."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # exists (another user's) or not a pid we can judge: keep its files
    return True
