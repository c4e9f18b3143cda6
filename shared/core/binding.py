"""A user's model bound to canonical tensors: what each framework's `ports/<fw>/user.py` reports
about the model's layers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Layer:
    path: str
    kind: str
    params: tuple[str, ...]
    settings: dict[str, Any]
