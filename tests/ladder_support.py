"""The precision ladder's worker runs (tests/test_ports_precision.py): one background task
(tests/background.py), a worker per framework, started as soon as pytest has collected its tests.

Why in the background: every case in every port at every low rung is minutes of CPU, mostly
Flax's per-op compilations and MLX's reference BLAS, while the rest of the suite keeps about one of
CI's two cores busy; niced, the ladder uses what the in-process tests leave idle.

Which presets: those that differ in a code path the precision contract touches — flatten pooling
and a dropped remainder (archive-torch), padding, mean pooling and head width 4x dim/heads
(archive-keras), an oversized position table (archive-final), post-norm with a class token
(mnist-vit-small), the toy task (quadrant), a class token on 2x2 patches (digits), a stream
without positions, and the newer families' casts: LayerScale, registers and the gated MLP
(dinov2-reg-tiny), the attention pool and a tower without a classifier, whose output stays in the
stream dtype (siglip-tiny), and Qwen's patch merger and deepstack mergers, whose merged tokens are
the new stream (qwen3-vl-tiny: every port once left them in the compute dtype at the mixed
rungs). The widest case is archive-final (width 128, 1.1M parameters). The
presets left out run the same code at another size (quadrant-narrow, mnist-vit,
archive-final-repaired, and the pre-norm ViTs vit-ti16, vit-s16, vit-b16 — together over a minute
of the ladder's CPU, most of it Keras' and Flax's per-case compilation and MLX's reference BLAS):
with each case's bound derived from its own emulated rounding they would repeat a proof.
`compare.py tolerances` still measures every preset.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import ports
from shared.core.inputs import probe_batch
from shared.core.precision import LOW_RUNGS, Precision
from shared.core.reference import forward
from shared.core.weights import init_weights
from shared.runtime.verify import VerifyCase, collect_logits, fill_reference, start_logits
from shared.teaching.precision_demos import stream_spec
from tests import background
from tests.ports_cache import case

PRESET_KEYS = ["archive-torch", "archive-keras", "archive-final", "mnist-vit-small", "quadrant", "digits",
               "no-positions", "dinov2-reg-tiny", "siglip-tiny", "qwen3-vl-tiny"]
TIMEOUT_S = 900.0
Ladder = tuple[list[tuple[str, VerifyCase]], dict[str, list[dict[str, Any]]]]


def ladder_cases() -> list[tuple[str, VerifyCase]]:
    """(preset key, case) for each ladder preset, plus quadrant without positions, at every low rung."""
    cases = []
    for preset in PRESET_KEYS:
        if preset == "no-positions":
            # No float32 position table enters the stream, so torch autocast and Flax would leave it
            # in bfloat16 by promotion alone: the ports' cast of the patch embedding keeps the contract.
            spec = stream_spec("quadrant")
            tensors, images = init_weights(spec, 0), probe_batch(spec, 1)
            ref = forward(spec, tensors, images)
        else:
            spec, tensors, images, ref = case(preset)
        cases += [(preset, VerifyCase(spec, tensors, images, precision=Precision.from_rung(r), reference=ref,
                                read_dtypes=True)) for r in LOW_RUNGS]
    return cases


@background.task("precision-ladder", "test_ports_precision.py::")
def run_ladder(start: background.Start) -> Ladder:
    cases = ladder_cases()
    workdir = Path(tempfile.mkdtemp(prefix="portbench-ladder-"))
    reports: dict[str, list[dict[str, Any]]] = {}
    for framework in ports.NATIVE:
        # One thread, unpinned: the worker shares the cores with the in-process tests.
        worker = start(start_logits(framework, [c for _, c in cases], workdir, "cpu", threads=1, pin=False))
        # Each case's emulated rounding gap (the bound's scale), while the first worker runs.
        fill_reference([c for _, c in cases])
        reports[framework] = collect_logits(worker, TIMEOUT_S)
    return cases, reports


def result() -> Ladder:
    """The ladder's (cases, framework -> reports), waiting for the background run."""
    return background.result("precision-ladder")
