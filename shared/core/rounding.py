"""The rung-emulating reference: the float64 oracle (shared/core/reference.py, the one forward)
with bfloat16 / float16 rounding applied at exactly the precision contract's cast points
(shared/core/precision.py), accumulating in float64 between them.

Where it rounds (`RungRounding`, the `Rounding` hook `reference.forward` takes):

- every stored tensor (weights, position table, images under pure) to the parameter dtype;
- every compute op (patch-embedding conv, linear layers, q k^T, probabilities @ v): its inputs,
  weights and bias to the compute dtype, its output to the compute dtype; the GELU and the
  softmax probabilities (computed unrounded, as the frameworks compute them in float32) to the
  compute dtype;
- the token stream (residual sums, LayerNorm outputs, pooled features) to the parameter dtype.

What it leaves out is each kernel's own accumulation order and internal precision (float32, or a
blocked bfloat16 sum in Eigen's bfloat16 GEMM): that is exactly what differs between CPUs. So
|emulated - float64| is the size of this rung's rounding error for this spec, these weights and
these images, and a port's own gap is a measured multiple of it (shared/core/tolerance.py).

The rounding itself is ml_dtypes' (round to nearest even, the frameworks' own cast)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from shared.core import reference
from shared.core.precision import Precision
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors

NUMPY_DTYPES: dict[str, type] = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16,
                                 "float16": np.float16}
# TF32 (float32 storage, 10-bit-mantissa matmul inputs) is emulated as float16-pure, whose bound it
# borrows (shared/core/tolerance.py): the same mantissa, rounded in more places.
EMULATED_AS = {"tf32": Precision("float16", "pure")}


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """x rounded to `dtype` (nearest even) and back to float64. Through float32, as a framework
    casts its float32 values (and 3x faster than ml_dtypes' direct float64 -> bfloat16)."""
    return np.asarray(x).astype(np.float32).astype(NUMPY_DTYPES[dtype]).astype(np.float64)


class RungRounding(reference.Rounding):
    """The cast points of one rung: the stream in the parameter dtype, compute ops in the
    compute dtype."""

    def __init__(self, precision: Precision) -> None:
        precision = EMULATED_AS.get(precision.rung, precision)
        self.param_dtype, self.compute_dtype = precision.param_dtype, precision.compute_dtype

    def param(self, x: np.ndarray) -> np.ndarray:
        return round_to(x, self.param_dtype)

    def compute(self, x: np.ndarray) -> np.ndarray:
        return round_to(x, self.compute_dtype)


def emulated_forward(spec: ModelSpec, weights: Tensors, images: np.ndarray, precision: Precision,
                     taps: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The reference's logits as a port at `precision` that rounds only at the contract's cast
    points would compute them (float64 logits of rounded values)."""
    return reference.forward(spec, weights, images, taps, rounding=RungRounding(precision))


def emulated_gap(spec: ModelSpec, weights: Tensors, images: np.ndarray, precision: Precision,
                 reference_logits: np.ndarray | None = None,
                 taps: dict[str, np.ndarray] | None = None) -> float | None:
    """max |emulated logits - float64 logits|: the scale of this rung's rounding error on this
    case; None at float32 (nothing to emulate). `taps`, if given, receives the emulating pass's
    named tensors (an extra output's own rounding scale)."""
    if not precision.low and not precision.tf32:
        return None
    exact = reference.forward(spec, weights, images) if reference_logits is None else reference_logits
    return float(np.max(np.abs(emulated_forward(spec, weights, images, precision, taps) - exact)))
