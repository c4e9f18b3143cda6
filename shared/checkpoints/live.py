"""A built model object, read through its library: what the library attaches to it, as spec
fields with their source. Each
library's plug-in has `read_live(model) -> Reading | None` (None: not its library's model),
called in the model's own process (the user's worker). A reader looks at attributes only
(`getattr`, `get_config()`): the framework itself is never imported, so a reader of a library
that is not installed costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.checkpoints.common import LATER_FEATURES

Fact = tuple[Any, str]  # (value, where it was read)


@dataclass
class Reading:
    """What one library's configuration says about a model."""

    library: str  # how the output names it: "timm VisionTransformer", "keras-hub ViTImageClassifier"
    facts: dict[str, Fact] = field(default_factory=dict)
    fmt: str | None = None  # the checkpoint format (`shared.checkpoints.FORMATS`) of its state dict
    config: dict[str, Any] | None = None  # what that format's `infer` reads beside the tensors
    notes: list[str] = field(default_factory=list)
    # field -> its key in `config`, for fields the layers compute (shared/your_model/proposal_layers.py)
    config_keys: dict[str, str] = field(default_factory=dict)

    def fact(self, name: str, value: Any, source: str) -> None:
        self.facts[name] = (value, source)

    def plain_vit(self, source: str) -> None:
        """The 2020 ViT design: none of the later features (shared/checkpoints/common.py's
        LATER_FEATURES), a plain MLP and a patch projection with a bias."""
        for name in LATER_FEATURES:
            self.fact(name, 0 if name == "registers" else False, f"{source} (no such feature)")
        self.fact("mlp", "standard", source)
        self.fact("patch_bias", True, source)
        self.fact("rope", "none", f"{source} (no rotary position embeddings)")


def module_of(model: Any) -> str:
    return type(model).__module__


def size_of(value: Any) -> tuple[int, int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    return None


def is_identity(module: Any) -> bool:
    return module is None or type(module).__name__ == "Identity"
