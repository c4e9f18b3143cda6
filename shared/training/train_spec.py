"""`TrainSpec`: every setting that changes what one training run computes, framework-neutral.

Three AdamW implementations agree only when every default they disagree on is pinned
(`../shared/reference/divergences.md` rows 21-35, 43). This module pins them once:

- **Epsilon** is Keras' "epsilon hat" (Kingma & Ba, the formula before section 2.1):
  ``p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)``. torch and optax add epsilon to
  the bias-corrected sqrt(v_hat) instead, so they get ``eps / sqrt(1 - b2^t)`` at update t
  (31.6x eps at t=1 with b2=0.999; row 22). Keras is the one library whose placement cannot be
  changed from outside, so its form is the definition and torch/optax are given the per-update
  value ``eps_at(t)``.
- **Weight decay** is decoupled, applied to the pre-update parameter: ``p -= lr * wd * p``, on the
  tensors `weight_decay_on` names (`all`, as torch's AdamW on `model.parameters()`, or
  `kernels`: the dense/patch kernels only; biases, norms, class token and position table are
  not decayed). Keras decays every variable and optax every leaf unless told otherwise (row 23).
- **Clipping** is by the global norm over all gradients, ``g *= min(1, clip / ||g||)``, no epsilon:
  Keras `global_clipnorm` and optax `clip_by_global_norm` do exactly that; torch's
  `clip_grad_norm_` divides by ``||g|| + 1e-6`` (row 25), so the torch port clips by hand. Keras'
  `clipnorm` clips each variable separately (row 26) and is never used.
- **Loss** is the mean softmax cross-entropy from logits (Keras' sparse CE defaults to
  `from_logits=False`, row 32).
- **Learning rate**: one float per epoch from `shared.training.schedule.Controller` (linear warm-up from
  lr/warmup_epochs to lr, then reduce-on-plateau), set into each optimizer; no framework
  scheduler is used (rows 27-31).
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from shared.errors import SpecError

METRICS = ("val_loss", "val_accuracy", "train_loss", "train_accuracy")
DECAY_TARGETS = ("all", "kernels")
# Initialisation of a training run (shared/training/init_schemes.py states each distribution).
INIT_SCHEMES = ("canonical", "torch", "keras", "flax", "vit")
EPSILON_FORM = "keras-hat"  # see the module docstring; not a field: every port implements this one
CLIP_FORM = "g * min(1, clip / ||g||)"  # no epsilon in the denominator


@dataclass(frozen=True)
class TrainSpec:
    """One training recipe. Defaults are the archive's; presets state every field."""

    # AdamW, every default pinned.
    learning_rate: float = 5e-5
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-7  # Keras' epsilon hat (module docstring)
    weight_decay: float = 1e-4
    weight_decay_on: str = "all"  # all | kernels
    clip_global_norm: float | None = 1.0  # None: no clipping
    # Batches and epochs.
    batch_size: int = 256
    max_epochs: int = 200
    shuffle: bool = True  # reshuffle the training set every epoch (seeded, same in every port)
    drop_last: bool = False  # keep the final short batch
    # Schedule (shared/training/schedule.py): warm-up, then reduce-on-plateau.
    warmup_epochs: int = 5  # epoch e < W trains at lr * (e + 1) / W
    plateau_metric: str = "val_loss"
    plateau_factor: float = 0.8
    plateau_patience: int = 15  # cut after this many epochs in a row without improvement
    plateau_threshold: float = 1e-4
    plateau_threshold_mode: str = "rel"  # rel: better than best*(1-t); abs: better than best-t
    plateau_cooldown: int = 0  # epochs after a cut during which nothing is counted
    min_learning_rate: float = 0.0
    # Early stopping.
    early_stop_metric: str = "val_loss"
    early_stop_patience: int | None = 40  # None: never stop early
    # Data.
    validation_fraction: float = 0.2
    seed: int = 0
    # Initial weights (drawn in NumPy, identical in every port; shared/training/init_schemes.py).
    init: str = "canonical"  # canonical | torch | keras | flax | vit
    init_kernel_gain: float = 1.0  # every kernel the scheme draws is multiplied by this
    init_pos_std: float | None = None  # None: the scheme's position table; else N(0, std^2)
    # Free text; not part of the recipe's function.
    name: str = field(default="custom", compare=False)

    def __post_init__(self) -> None:
        _validate(self)

    # ---- serialisation (as ModelSpec) -----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainSpec:
        if not isinstance(data, dict):
            raise SpecError(f"recipe: expected a mapping of fields, got {type(data).__name__}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise SpecError(
                f"recipe field {unknown[0]!r} is unknown; expected one of: {', '.join(known)}"
            )
        return cls(**{k: _coerce(k, v, str(known[k].type)) for k, v in data.items()})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_toml(self) -> str:
        lines = [f"{k} = {_toml_value(v)}" for k, v in self.to_dict().items() if v is not None]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_json(cls, text: str) -> TrainSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"recipe JSON is malformed: {exc.msg} at line {exc.lineno}") from None
        if isinstance(data, dict) and isinstance(data.get("recipe"), dict):
            data = data["recipe"]  # a results JSON written by `compare.py train`
        return cls.from_dict(data)

    @classmethod
    def from_toml(cls, text: str) -> TrainSpec:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SpecError(f"recipe TOML is malformed: {exc}") from None
        if isinstance(data.get("recipe"), dict):
            data = data["recipe"]
        # TOML has no null: a missing optional field means None, not the dataclass default.
        for name in ("clip_global_norm", "early_stop_patience"):
            data.setdefault(name, None)
        return cls.from_dict(data)

    @classmethod
    def from_file(cls, path: str | Path) -> TrainSpec:
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise SpecError(f"recipe file {str(path)!r} cannot be read: {exc.strerror}") from None
        return cls.from_toml(text) if path.suffix == ".toml" else cls.from_json(text)

    def replace(self, **changes: Any) -> TrainSpec:
        return dataclasses.replace(self, **changes)

    # ---- pinned quantities every port uses --------------------------------------------------
    def eps_at(self, update: int) -> float:
        """The epsilon that torch/optax must add to sqrt(v_hat) at 1-based update `update` to
        compute Keras' update: eps / sqrt(1 - beta2^t)."""
        return self.epsilon / math.sqrt(1.0 - self.beta2**update)


def decayed(recipe: TrainSpec, canonical_name: str) -> bool:
    """Whether weight decay applies to a canonical tensor (shared/core/weights.py names)."""
    if recipe.weight_decay_on == "all":
        return True
    return canonical_name.endswith(".kernel")


def get_recipe(name: str) -> TrainSpec:
    if name not in RECIPES:
        raise SpecError(f"unknown recipe {name!r}; expected one of: {', '.join(RECIPES)}")
    return RECIPES[name]


def resolve_recipe(value: str | None, overrides: list[str] | None = None,
                   default: str = "archive") -> TrainSpec:
    """A `--recipe` argument (name, JSON/TOML file or JSON document), then `--rset` overrides."""
    text = (value or default).strip()
    if text in RECIPES:
        recipe = RECIPES[text]
    elif text.startswith("{"):
        recipe = TrainSpec.from_json(text)
    elif Path(text).is_file():
        recipe = TrainSpec.from_file(text)
    else:
        raise SpecError(
            f"--recipe {value!r} is neither a recipe ({', '.join(RECIPES)}) nor a recipe file "
            "nor a JSON document"
        )
    data = recipe.to_dict()
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise SpecError(f"--rset {item!r}: expected FIELD=VALUE")
        if key not in data:
            raise SpecError(f"--rset: recipe field {key!r} is unknown; expected one of: {', '.join(data)}")
        data[key] = raw
    return TrainSpec.from_dict(data) if overrides else recipe


# ---- validation -----------------------------------------------------------------------------
def _fail(name: str, value: Any, expected: str) -> None:
    raise SpecError(f"recipe field {name!r} = {value!r}: expected {expected}")


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _validate(r: TrainSpec) -> None:
    if not _number(r.learning_rate) or r.learning_rate <= 0:
        _fail("learning_rate", r.learning_rate, "a finite number > 0")
    for name in ("beta1", "beta2"):
        if not _number(getattr(r, name)) or not 0 <= getattr(r, name) < 1:
            _fail(name, getattr(r, name), "a number in [0, 1)")
    if not _number(r.epsilon) or r.epsilon <= 0:
        _fail("epsilon", r.epsilon, "a finite number > 0")
    if not _number(r.weight_decay) or r.weight_decay < 0:
        _fail("weight_decay", r.weight_decay, "a finite number >= 0")
    if r.weight_decay_on not in DECAY_TARGETS:
        _fail("weight_decay_on", r.weight_decay_on, "one of " + " | ".join(DECAY_TARGETS))
    if r.clip_global_norm is not None and (not _number(r.clip_global_norm) or r.clip_global_norm <= 0):
        _fail("clip_global_norm", r.clip_global_norm, "a finite number > 0, or null for no clipping")
    for name in ("batch_size", "max_epochs"):
        value = getattr(r, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            _fail(name, value, "a positive integer")
    for name in ("warmup_epochs", "plateau_patience", "plateau_cooldown", "seed"):
        value = getattr(r, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            _fail(name, value, "an integer >= 0")
    if r.early_stop_patience is not None and (
        isinstance(r.early_stop_patience, bool) or not isinstance(r.early_stop_patience, int)
        or r.early_stop_patience < 1
    ):
        _fail("early_stop_patience", r.early_stop_patience, "a positive integer, or null")
    for name in ("shuffle", "drop_last"):
        if not isinstance(getattr(r, name), bool):
            _fail(name, getattr(r, name), "true or false")
    for name in ("plateau_metric", "early_stop_metric"):
        if getattr(r, name) not in METRICS:
            _fail(name, getattr(r, name), "one of " + " | ".join(METRICS))
    if not _number(r.plateau_factor) or not 0 < r.plateau_factor <= 1:
        _fail("plateau_factor", r.plateau_factor, "a number in (0, 1] (1: never cut)")
    if not _number(r.plateau_threshold) or r.plateau_threshold < 0:
        _fail("plateau_threshold", r.plateau_threshold, "a finite number >= 0")
    if r.plateau_threshold_mode not in ("rel", "abs"):
        _fail("plateau_threshold_mode", r.plateau_threshold_mode, "rel or abs")
    if not _number(r.min_learning_rate) or not 0 <= r.min_learning_rate <= r.learning_rate:
        _fail("min_learning_rate", r.min_learning_rate, f"in [0, learning_rate = {r.learning_rate}]")
    if not _number(r.validation_fraction) or not 0 <= r.validation_fraction < 1:
        _fail("validation_fraction", r.validation_fraction, "a fraction in [0, 1)")
    if r.init not in INIT_SCHEMES:
        _fail("init", r.init, "one of " + " | ".join(INIT_SCHEMES))
    if not _number(r.init_kernel_gain) or r.init_kernel_gain <= 0:
        _fail("init_kernel_gain", r.init_kernel_gain, "a finite number > 0")
    if r.init_pos_std is not None and (not _number(r.init_pos_std) or r.init_pos_std < 0):
        _fail("init_pos_std", r.init_pos_std, "a finite number >= 0, or null for the scheme's own")
    uses_val = any(m.startswith("val_") for m in (r.plateau_metric, r.early_stop_metric))
    if uses_val and r.validation_fraction == 0:
        _fail("validation_fraction", 0, "> 0 when a val_ metric is monitored")


def _coerce(name: str, value: Any, annotation: str) -> Any:
    """Accept JSON/TOML/CLI strings; anything that does not fit is left for validation."""
    if not isinstance(value, str):
        if "float" in annotation and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value
    low = value.strip().lower()
    if "None" in annotation and low in ("none", "null", ""):
        return None
    if annotation == "bool":
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        _fail(name, value, "true or false")
    if annotation.startswith("int"):
        try:
            return int(low)
        except ValueError:
            _fail(name, value, "an integer")
    if annotation.startswith("float"):
        try:
            return float(low)
        except ValueError:
            _fail(name, value, "a number")
    return value


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value) if isinstance(value, float) else str(value)


# ---- presets --------------------------------------------------------------------------------
RECIPES: dict[str, TrainSpec] = {
    "archive": TrainSpec(
        name="archive", learning_rate=5e-5, beta1=0.9, beta2=0.999, epsilon=1e-7,
        weight_decay=1e-4, weight_decay_on="all", clip_global_norm=1.0, batch_size=256,
        max_epochs=200, shuffle=True, drop_last=False, warmup_epochs=5, plateau_metric="val_loss",
        plateau_factor=0.8, plateau_patience=15, plateau_threshold=1e-4,
        plateau_threshold_mode="rel", plateau_cooldown=0, min_learning_rate=0.0,
        early_stop_metric="val_loss", early_stop_patience=40, validation_fraction=0.2, seed=0,
        init="canonical", init_kernel_gain=1.0, init_pos_std=None,
    ),
    "mnist": TrainSpec(
        name="mnist", learning_rate=1e-4, beta1=0.9, beta2=0.999, epsilon=1e-7,
        weight_decay=1e-4, weight_decay_on="all", clip_global_norm=1.0, batch_size=64,
        max_epochs=100, shuffle=True, drop_last=False, warmup_epochs=0,
        plateau_metric="val_accuracy", plateau_factor=1.0, plateau_patience=15,
        plateau_threshold=0.0, plateau_threshold_mode="abs", plateau_cooldown=0,
        min_learning_rate=0.0, early_stop_metric="val_accuracy", early_stop_patience=15,
        validation_fraction=0.2, seed=0, init="canonical", init_kernel_gain=1.0, init_pos_std=None,
    ),
    # This project's recipe for the small demo tasks (quadrant, digits): short and fast.
    "quick": TrainSpec(
        name="quick", learning_rate=1e-3, beta1=0.9, beta2=0.999, epsilon=1e-7,
        weight_decay=1e-4, weight_decay_on="kernels", clip_global_norm=1.0, batch_size=64,
        max_epochs=30, shuffle=True, drop_last=False, warmup_epochs=2, plateau_metric="val_loss",
        plateau_factor=0.5, plateau_patience=5, plateau_threshold=1e-4,
        plateau_threshold_mode="rel", plateau_cooldown=0, min_learning_rate=1e-5,
        early_stop_metric="val_loss", early_stop_patience=None, validation_fraction=0.2, seed=0,
        init="canonical", init_kernel_gain=1.0, init_pos_std=None,
    ),
}
RECIPE_NOTES = {
    "archive": "The archive's recipe: AdamW lr 5e-5, wd 1e-4 on every parameter (torch's AdamW on "
               "model.parameters()), batch 256, up to 200 epochs, 5-epoch linear warm-up, "
               "plateau x0.8 after 15 epochs, early stop after 40, global-norm clip 1.0.",
    "mnist": "The archive's MNIST recipe: AdamW lr 1e-4, wd 1e-4, batch 64, up to 100 epochs, early "
             "stop after 15 epochs without a better accuracy on a held-out fifth of the training "
             "set; no schedule (plateau factor 1). The last epoch is reported, not the best.",
    "quick": "This project's recipe for the 8x8 demo tasks: lr 1e-3 after a 2-epoch warm-up, halved "
             "after 5 flat epochs, decay on kernels only, 30 epochs, no early stop.",
}
