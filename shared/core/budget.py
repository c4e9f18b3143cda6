"""Refuse before allocating: how much memory a spec needs, estimated from its derived
shapes (no tensor is built), so that a spec that cannot fit is refused in
one line in microseconds instead of dying in NumPy or growing without bound.

The spec's field bounds (spec.py) keep `spec.derived` cheap to compute. The estimate covers
what the parent process itself allocates: the canonical float32 weights,
their float64 copy in the reference, and the reference's largest live activations for a batch
(the token matrix a few times over, the MLP hidden layer, and the attention matrix of one block,
four times: the scores, shifted, exponentiated and normalised are live at once in its softmax).
A port's framework adds its own overhead on top; this is a lower bound that is never too small by
orders of magnitude, which is what a refusal needs.

Work that costs time rather than memory is bounded too (`check_work`): a count of steps,
epochs, repeats, processes or seeds beyond WORK_LIMITS is refused in one line before anything
runs (a typo such as --steps 1000000000000 would otherwise run for years). Writing a weights file
(`check_weights_file`) holds the float32 tensors and two serialized copies at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.core.memory import USABLE_FRACTION, available_bytes, gib
from shared.core.spec import ModelSpec
from shared.errors import SpecError

# The most any option that only scales work may ask for; each is far beyond a real use (the
# largest recipe trains 200 epochs; the plateau experiment's default is 600 steps).
WORK_LIMITS: dict[str, float] = {
    "steps": 10**6, "epochs": 10**5, "window": 10**6, "repeats": 10**5, "warmup": 10**4,
    "eval-batches": 10**4, "processes": 100, "seeds": 1000, "budget": 3600.0,
}


@dataclass(frozen=True)
class Estimate:
    params: int
    weight_bytes: int  # float32 canonical tensors + their float64 copy in the reference
    activation_bytes: int  # the reference's peak live activations for the batch

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes


def estimate(s: ModelSpec, batch: int) -> Estimate:
    tokens, params = s.derived.seq_len, s.derived.params  # cheap: field bounds cap the block count
    wide = max(s.dim, s.heads * s.head_dim, s.mlp_dim)
    pixels = s.image_height * s.image_width * s.channels
    per_image = 4 * tokens * wide + 4 * s.heads * tokens * tokens + pixels
    return Estimate(params=params, weight_bytes=params * (4 + 8), activation_bytes=8 * batch * per_image)


def check_fits(s: ModelSpec, batch: int, what: str, batches: str | None = None) -> Estimate:
    """The estimate, or a one-line SpecError stating it and the memory available (`batches`: how
    the images are given, where `batch` counts several batches of the command's --batch)."""
    found = estimate(s, batch)
    available = available_bytes()
    if available is not None and found.total_bytes > USABLE_FRACTION * available:
        at_batch = f" ({batches})" if batches else f" at batch {batch}" if batch > 1 else ""
        raise SpecError(
            f"spec {s.name!r} needs about {gib(found.total_bytes)} for {what}{at_batch} "
            f"({s.derived.seq_len:,} tokens an image, {found.params:,} parameters: "
            f"{gib(found.weight_bytes)} of weights, {gib(found.activation_bytes)} of activations), "
            f"but only {gib(available)} of memory "
            "is available; use a smaller spec or batch"
        )
    return found


def check_work(option: str, value: float, limit: str | None = None) -> None:
    """A one-line SpecError when `value` of `option` (e.g. --steps) exceeds its WORK_LIMITS entry
    (`limit`: the entry's key, when it differs from the option's name)."""
    bound = WORK_LIMITS[limit or option.lstrip("-").removeprefix("min-").removeprefix("max-")]
    if value > bound:
        raise SpecError(f"{option} {value:,}: at most {bound:,} (a bound on the work one command may "
                        "start; split it into several runs)")


def check_options(values: dict[str, float | None]) -> None:
    """`check_work` on each option given (None: not given)."""
    for option, value in values.items():
        if value is not None:
            check_work(option, value)


def check_weights_file(s: ModelSpec) -> int:
    """Bytes a command that writes `s`'s weights file holds at once (the float32 tensors, the
    serialized file and the library's own copy while it builds it), refused when they cannot fit."""
    need = 3 * 4 * s.derived.params
    available = available_bytes()
    if available is not None and need > USABLE_FRACTION * available:
        raise SpecError(f"spec {s.name!r} needs about {gib(need)} for writing its weights file "
                        f"({s.derived.params:,} parameters), but only {gib(available)} of memory is "
                        "available; use a smaller spec")
    return need
