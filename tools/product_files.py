#!/usr/bin/env python3
"""How many of portbench's own files a command touches, per process: runs the command with a
`sitecustomize` that records, when each Python process exits, which modules under shared/,
ports/, experiments/ and the top-level scripts it imported (worker processes inherit it through
PYTHONPATH, which the launcher extends), then prints each process's count and the union.

    .venv/bin/python tools/product_files.py -- compare.py verify --spec quadrant --frameworks torch

docs/architecture.md states what this measured for the bare main job and `verify --model`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOOK = '''
import atexit, json, os, sys

def _record():
    paths = (os.path.relpath(os.path.abspath(m.__file__), {root!r})
             for m in list(sys.modules.values()) if getattr(m, "__file__", None))
    files = sorted(p for p in set(paths) if p.split(os.sep)[0] in ("shared", "ports", "experiments")
                   or p in ("compare.py", "portbench.py"))
    with open(os.path.join({out!r}, f"{{os.getpid()}}.json"), "w") as fh:
        json.dump({{"argv": sys.argv, "files": files}}, fh)

atexit.register(_record)
_exit = os._exit

def _recorded_exit(status):  # a worker ends with os._exit, which skips atexit
    _record()
    _exit(status)

os._exit = _recorded_exit
'''


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1:] if "--" in argv else argv
    with tempfile.TemporaryDirectory() as hook_dir, tempfile.TemporaryDirectory() as out:
        Path(hook_dir, "sitecustomize.py").write_text(HOOK.format(root=str(ROOT), out=out))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (hook_dir, os.environ.get("PYTHONPATH"))
                                                          if p))
        code = subprocess.run([sys.executable, *command], cwd=ROOT, env=env).returncode
        union: set[str] = set()
        for record in sorted(Path(out).glob("*.json")):
            found = json.loads(record.read_text())
            union |= set(found["files"])
            print(f"{len(found['files']):4d} files  {' '.join(Path(a).name for a in found['argv'][:3])}")
            if os.environ.get("PRODUCT_FILES_LIST"):
                print("      " + " ".join(found["files"]))
        print(f"{len(union):4d} files in all (exit status {code})")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
