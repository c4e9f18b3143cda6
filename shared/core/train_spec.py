"""`TrainSpec`: every setting that changes what one training run computes, framework-neutral.

Four AdamW implementations (torch, Keras, optax, MLX) agree only when every default they
disagree on is pinned (`shared/teaching/divergences.py` catalogues each disagreement). This
module pins them once:

- **Epsilon** is Keras' "epsilon hat" (Kingma & Ba, the formula before section 2.1):
  ``p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)``. torch and optax add epsilon to
  the bias-corrected sqrt(v_hat) instead, so they get ``eps / sqrt(1 - b2^t)`` at update t
  (31.6x eps at t=1 with b2=0.999). Keras is the one library whose placement cannot be
  changed from outside, so its form is the definition and torch/optax are given the per-update
  value ``eps_at(t)``.
- **Weight decay** is decoupled, applied to the pre-update parameter: ``p -= lr * wd * p``, on the
  tensors `weight_decay_on` names (`all`, as torch's AdamW on `model.parameters()`, or
  `kernels`: the dense/patch kernels only; biases, norms, class token and position table are
  not decayed). Keras decays every variable and optax every leaf unless told otherwise.
- **Clipping** is by the global norm over all gradients, ``g *= min(1, clip / ||g||)``, no epsilon:
  Keras `global_clipnorm` and optax `clip_by_global_norm` do exactly that; torch's
  `clip_grad_norm_` divides by ``||g|| + 1e-6``, so the torch port clips by hand. Keras'
  `clipnorm` clips each variable separately and is never used.
- **Loss** is the mean softmax cross-entropy from logits (Keras' sparse CE defaults to
  `from_logits=False`).
- **Learning rate**: one float per epoch from `shared.training.schedule.Controller` (linear warm-up from
  lr/warmup_epochs to lr, then reduce-on-plateau), set into each optimizer; no framework
  scheduler is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal, get_args

from shared.core.precision import Precision
from shared.core.record import Record, fail, pick
from shared.core.spec import is_integer, is_number
from shared.errors import FrameworkUnavailable

Metric = Literal["val_loss", "val_accuracy", "train_loss", "train_accuracy"]
DecayTarget = Literal["all", "kernels"]
ThresholdMode = Literal["rel", "abs"]
# Initialisation of a training run (shared/training/init_schemes.py states each distribution).
InitScheme = Literal["canonical", "torch", "keras", "flax", "vit"]
METRICS, DECAY_TARGETS, INIT_SCHEMES = get_args(Metric), get_args(DecayTarget), get_args(InitScheme)


@dataclass(frozen=True)
class TrainSpec(Record):
    """One training recipe. Defaults are the archive's; presets state every field. Serialisation
    and `--rset` overrides come from `Record`."""

    KIND: ClassVar[str] = "recipe"

    # AdamW, every default pinned.
    learning_rate: float = 5e-5
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-7  # Keras' epsilon hat (module docstring)
    weight_decay: float = 1e-4
    weight_decay_on: DecayTarget = "all"
    clip_global_norm: float | None = 1.0  # None: no clipping
    # Batches and epochs.
    batch_size: int = 256
    max_epochs: int = 200
    shuffle: bool = True  # reshuffle the training set every epoch (seeded, same in every port)
    drop_last: bool = False  # keep the final short batch
    # Schedule (shared/training/schedule.py): warm-up, then reduce-on-plateau.
    warmup_epochs: int = 5  # epoch e < W trains at lr * (e + 1) / W
    plateau_metric: Metric = "val_loss"
    plateau_factor: float = 0.8
    plateau_patience: int = 15  # cut after this many epochs in a row without improvement
    plateau_threshold: float = 1e-4
    plateau_threshold_mode: ThresholdMode = "rel"  # rel: better than best*(1-t); abs: better than best-t
    plateau_cooldown: int = 0  # epochs after a cut during which nothing is counted
    min_learning_rate: float = 0.0
    # Early stopping.
    early_stop_metric: Metric = "val_loss"
    early_stop_patience: int | None = 40  # None: never stop early
    # Data.
    validation_fraction: float = 0.2
    seed: int = 0
    # Initial weights (drawn in NumPy, identical in every port; shared/training/init_schemes.py).
    init: InitScheme = "canonical"
    init_kernel_gain: float = 1.0  # every kernel the scheme draws is multiplied by this
    init_pos_std: float | None = None  # None: the scheme's position table; else N(0, std^2)
    # Free text; not part of the recipe's function.
    name: str = field(default="custom", compare=False)

    def validate(self) -> None:
        _validate(self)

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


def check_training_precision(precision: Precision | None) -> None:
    """Training is offered at float32, TF32 and the mixed rungs; a pure rung is unavailable, in one
    line, the same in every port (each Trainer calls this; FrameworkUnavailable, so the timing
    harness records its train_step as an unavailable row, as for any rung a port lacks). Under
    pure the parameters and the Adam moments are held in the low dtype, so an update under half an
    ulp of its parameter is rounded away (a step of 1e-3 on a weight of 0.5 in bfloat16, whose ulp
    there is 2^-8 = 3.9e-3), and each optimizer rounds its moment arithmetic in its own order: what
    trains, and what the ports could be compared on, is no longer one recipe. Mixed keeps float32
    master parameters and moments, as every framework's own mixed-precision training does."""
    if precision is not None and precision.low and precision.mode == "pure":
        raise FrameworkUnavailable(
            f"training at {precision.rung} is not offered: pure low-precision parameters round away "
            "updates under half an ulp and each optimizer rounds its moments its own way; pass "
            f"--precision mixed (float32 master weights, {precision.dtype} compute)")


def get_recipe(name: str) -> TrainSpec:
    return pick("recipe", RECIPES, name)


def resolve_recipe(value: str | None, overrides: list[str] | None = None) -> TrainSpec:
    """A `--recipe` argument (name, JSON/TOML file or JSON document; default: archive), then
    `--rset` overrides."""
    recipe = TrainSpec.from_argument(value or "archive", RECIPES, "--recipe", "recipe")
    return recipe.with_overrides(overrides or [], "--rset")


# ---- validation -----------------------------------------------------------------------------
_fail = partial(fail, TrainSpec.KIND)
FLOAT32_MAX = 3.4028234663852886e38  # numpy.finfo(numpy.float32).max


def _validate(r: TrainSpec) -> None:
    # (field, whether its value is accepted, what was expected), checked in this order; None is
    # accepted only where the expectation says "or null".
    rules: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
        ("learning_rate", lambda v: is_number(v) and v > 0, "a finite number > 0"),
        ("beta1", lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
        ("beta2", lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
        ("epsilon", lambda v: is_number(v) and v > 0, "a finite number > 0"),
        ("weight_decay", lambda v: is_number(v) and v >= 0, "a finite number >= 0"),
        ("clip_global_norm", lambda v: v is None or (is_number(v) and v > 0),
         "a finite number > 0, or null for no clipping"),
        ("batch_size", lambda v: is_integer(v) and v >= 1, "a positive integer"),
        ("max_epochs", lambda v: is_integer(v) and v >= 1, "a positive integer"),
        ("warmup_epochs", lambda v: is_integer(v) and v >= 0, "an integer >= 0"),
        ("plateau_patience", lambda v: is_integer(v) and v >= 0, "an integer >= 0"),
        ("plateau_cooldown", lambda v: is_integer(v) and v >= 0, "an integer >= 0"),
        ("seed", lambda v: is_integer(v) and v >= 0, "an integer >= 0"),
        ("early_stop_patience", lambda v: v is None or (is_integer(v) and v >= 1),
         "a positive integer, or null"),
        ("plateau_factor", lambda v: is_number(v) and 0 < v <= 1, "a number in (0, 1] (1: never cut)"),
        ("plateau_threshold", lambda v: is_number(v) and v >= 0, "a finite number >= 0"),
        ("min_learning_rate", lambda v: is_number(v) and 0 <= v <= r.learning_rate,
         f"in [0, learning_rate = {r.learning_rate}]"),
        ("validation_fraction", lambda v: is_number(v) and 0 <= v < 1, "a fraction in [0, 1)"),
        ("init_kernel_gain", lambda v: is_number(v) and v > 0, "a finite number > 0"),
        ("init_pos_std", lambda v: v is None or (is_number(v) and v >= 0),
         "a finite number >= 0, or null for the scheme's own"),
    )
    for name, accepted, expected in rules:
        if not accepted(getattr(r, name)):
            _fail(name, getattr(r, name), expected)
    # Adam's first step, learning_rate / (1 - beta1), is a float32 in the optimizers (torch converts
    # it, and raised an internal error at 1e38); a rate below that diverges as a loss that is nan.
    if r.learning_rate / (1 - r.beta1) > FLOAT32_MAX:
        _fail("learning_rate", r.learning_rate, f"at most {FLOAT32_MAX * (1 - r.beta1):.3g} (Adam's first "
              "step, learning_rate / (1 - beta1), must be a float32)")
    uses_val = any(m.startswith("val_") for m in (r.plateau_metric, r.early_stop_metric))
    if uses_val and r.validation_fraction == 0:
        _fail("validation_fraction", 0, "> 0 when a val_ metric is monitored")


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
