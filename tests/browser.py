"""Headless Chromium for the HTML tests: load a page from disk (no server, no network), collect
its console messages, the DOM after its scripts ran, and a screenshot.

`make test` finds the browser with tools/chromium.sh (installing Debian's `chromium` as root when it
is missing) and passes its path in PORTBENCH_CHROMIUM; a machine without one fails these tests with
a message saying how to get one (they are not skipped: the page is the product)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


@dataclass
class Rendered:
    dom: str
    console: list[str]  # every console message the page produced (errors included)
    screenshot: np.ndarray  # H x W x channels, floats in [0, 1]


def chromium() -> str:
    found = (os.environ.get("PORTBENCH_CHROMIUM") or shutil.which("chromium")
             or shutil.which("chromium-browser") or shutil.which("google-chrome"))
    assert found, "headless Chromium is needed for the HTML tests: run tools/chromium.sh (or make test)"
    return found


def _run(page: Path, extra: list[str], profile: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)


def render(page: Path, width: int = 1100, height: int = 1400) -> Rendered:
    from matplotlib.image import imread

    with tempfile.TemporaryDirectory(prefix="portbench-chromium-") as tmp:
        dom = _run(page, ["--dump-dom"], tmp + "/a")
        shot = Path(tmp) / "shot.png"
        _run(page, [f"--window-size={width},{height}", f"--screenshot={shot}"], tmp + "/b")
        assert shot.exists(), "Chromium wrote no screenshot"
        image = imread(shot)
    console = re.findall(r"CONSOLE[^\]]*\] (.*)", dom.stderr)
    return Rendered(dom.stdout, console, image)


def not_blank(image: np.ndarray) -> bool:
    """A page with content has many distinct colours and ink covering a real share of it."""
    flat = image[..., :3].reshape(-1, 3)
    ink = float(np.mean(flat.mean(axis=1) < 0.85))
    return len(np.unique(np.round(flat[::97] * 255), axis=0)) > 20 and ink > 0.01
