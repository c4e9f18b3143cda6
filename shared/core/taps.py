"""A recorder for named intermediates ("taps") that every port and the reference fill in.

It is an object rather than a dict on purpose: Keras' `Layer.__call__` copies dict and list
arguments while it maps over them, so a dict passed down would be filled in a copy and lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class Taps:
    def __init__(self) -> None:
        self.tensors: dict[str, Any] = {}

    def __setitem__(self, name: str, value: Any) -> None:
        self.tensors[name] = value

    def __getitem__(self, name: str) -> Any:
        return self.tensors[name]


class NoTaps(Taps):
    """Records nothing: the default, so a plain forward pass keeps no intermediates alive."""

    def __setitem__(self, name: str, value: Any) -> None:
        pass


NO_TAPS = NoTaps()


class NamedTaps(Taps):
    """Records only `names`: a caller that needs a few tensors of a forward pass (a tower's tokens,
    Qwen3-VL's extra outputs) keeps no others alive. A whole float64 pass's taps hold every block's
    attention map: 48 GB for Pixtral's encoder at one image."""

    def __init__(self, names: Iterable[str]) -> None:
        super().__init__()
        self.names = frozenset(names)

    def __setitem__(self, name: str, value: Any) -> None:
        if name in self.names:
            self.tensors[name] = value
