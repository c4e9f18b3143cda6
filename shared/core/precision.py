"""The precision ladder: which dtype a port computes in, and the one contract every port keeps at
each rung so that two ports at one rung compute the same function.

Rungs: `float32` (the default), `tf32` (float32 storage, GPU tensor-core matmuls with a 10-bit
mantissa; CUDA only), and `bfloat16` / `float16`, each `pure` or `mixed`:

- **pure**: every parameter and activation is held in the low dtype; images are cast to it.
- **mixed**: parameters stay float32; convolution, linear layers and the attention products run
  in the low dtype (their inputs and weights rounded at each such op), the way each framework
  does it natively: torch autocast, Keras' `mixed_bfloat16` / `mixed_float16` policies, Flax's
  `dtype` beside `param_dtype`.

The pinned contract (what the frameworks' native mechanisms do differently, made one choice):

1. The token stream (the residual sum, LayerNorm outputs, pooled features) is held in the
   parameter dtype: float32 under mixed, the low dtype under pure. torch autocast and Flax get
   this from type promotion (a bfloat16 branch added to a float32 stream is float32) — but only
   once a float32 tensor enters the sum, so a spec without position embeddings would keep a
   bfloat16 stream; Keras' global `mixed_bfloat16` policy casts every layer's inputs and keeps a
   bfloat16 stream. So every port casts the patch embedding to the parameter dtype, and the Keras
   port gives its compute layers the mixed policy and its container layers float32.
2. LayerNorm statistics and the attention softmax are computed in float32 and rounded to the
   stream (LayerNorm) or compute (probabilities) dtype, as every framework's kernel here does.
3. The logits come out of the head's last linear layer in the compute dtype; the loss is taken
   in float32.

`expected_tap_dtype` states the contract per named intermediate; a test reads every port's taps
at every rung and holds it. MLX has no mixed-precision mechanism (no autocast, no dtype policy,
no per-layer compute dtype: a model runs in one dtype, `Module.set_dtype`), so MLX runs pure
only and a mixed request is an `unavailable` row that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from shared.core.data_record import DataRecord, derived
from shared.errors import SpecError

if TYPE_CHECKING:
    from shared.core.spec import ModelSpec

DTYPES = ("float32", "bfloat16", "float16")
MODES = ("pure", "mixed")
# Unit roundoff of each storage format (2^-mantissa bits - 1): the scale of one rounding.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "tf32": 2.0**-11, "bfloat16": 2.0**-8, "float16": 2.0**-11}
COMPUTE_TAPS = ("attn", "attn_probs", "mlp", "logits")  # outputs of compute-dtype ops


@dataclass(frozen=True)
class Precision(DataRecord):
    """A rung, as the command line asks for it and as jobs and results files carry it (`to_dict`:
    the rung's name first, then what it is made of)."""

    KIND: ClassVar[str] = "precision"

    rung: str = derived()
    # str, not Literal: a wrong value is refused in the words of the option that gave it (validate)
    dtype: str = "float32"
    mode: str = "pure"
    tf32: bool = False

    def derived_values(self) -> dict[str, Any]:
        """One name per rung: float32, tf32, bfloat16-pure, bfloat16-mixed, float16-pure, ..."""
        if self.dtype == "float32":
            return {"rung": "tf32" if self.tf32 else "float32"}
        return {"rung": f"{self.dtype}-{self.mode}"}

    def validate(self) -> None:
        if self.dtype not in DTYPES:
            raise SpecError(f"--dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")
        if self.mode not in MODES:
            raise SpecError(f"--precision {self.mode!r}: expected pure or mixed")
        if self.mode == "mixed" and self.dtype == "float32":
            raise SpecError("--precision mixed with --dtype float32: mixed means float32 parameters "
                            "computing in a lower dtype; pass --dtype bfloat16 or float16")
        if self.tf32 and self.dtype != "float32":
            raise SpecError(f"--allow-tf32 with --dtype {self.dtype}: TF32 is a mode of float32 "
                            "matmuls; pass --dtype float32 (the default)")

    @property
    def low(self) -> bool:
        return self.dtype != "float32"

    @property
    def param_dtype(self) -> str:
        """The dtype parameters and the token stream are held in."""
        return "float32" if self.mode == "mixed" else self.dtype

    @property
    def compute_dtype(self) -> str:
        return self.dtype

    @classmethod
    def from_rung(cls, rung: str) -> Precision:
        if rung in ("float32", "tf32"):
            return cls(tf32=rung == "tf32")
        dtype, _, mode = rung.partition("-")
        if dtype not in DTYPES[1:] or mode not in MODES:
            raise SpecError(f"rung {rung!r}: expected one of {', '.join(RUNGS)}")
        return cls(dtype, mode)


FLOAT32 = Precision()
RUNGS = ("float32", "tf32", "bfloat16-pure", "bfloat16-mixed", "float16-pure", "float16-mixed")
LOW_RUNGS = RUNGS[2:]  # the rungs a CPU can run besides float32 (TF32 needs tensor cores)


def from_args(args: Any) -> Precision:
    """The rung a command line asks for (`--dtype`, `--precision`, `--allow-tf32`)."""
    dtype = getattr(args, "dtype", None) or "float32"
    mode = getattr(args, "precision", None) or "pure"
    return Precision(dtype, mode, bool(getattr(args, "allow_tf32", False)))


def expected_tap_dtype(tap: str, precision: Precision, spec: ModelSpec) -> str:
    """The dtype the pinned contract holds a named intermediate in: a compute op's output
    (`blockN.attn`, `blockN.mlp`, the probabilities, the logits) in the compute dtype, the token
    stream (everything else) in the parameter dtype. Two outputs join the stream: a branch
    scaled by its LayerScale gamma (a parameter, held in the stream), and the output of a model
    without a classifier (the pooled vector itself)."""
    leaf = tap.rsplit(".", 1)[-1]
    in_stream = (leaf in ("attn", "mlp") and tap.startswith("block") and spec.layer_scale) or (
        leaf == "logits" and not spec.num_classes)
    return precision.compute_dtype if leaf in COMPUTE_TAPS and not in_stream else precision.param_dtype
