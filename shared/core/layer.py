"""One layer of a built model as its framework's `ports/<fw>/user.py` reports it (`layers()`):
the record the ports hand back and `shared/your_model/` reads (binding by structure, the spec
check, the spec proposal). It sits in the core because the ports may import only the core."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Layer:
    """One layer in definition order: its path, its kind (`layer_norm`, `linear`, `attention`,
    `conv`, `gelu`, `dropout`, ...), the parameters it holds and the settings it computes with."""

    path: str
    kind: str
    params: tuple[str, ...]
    settings: dict[str, Any]
