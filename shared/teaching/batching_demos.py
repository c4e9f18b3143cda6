"""The catalogue's demonstration for batches of images at their own sizes (issue 37): a NaFlex batch
(each image's patches padded to one length, the padding keys masked) and a packed one (several
images in one sequence, attending block-diagonally), run in the torch port with its attention
handed an all-True mask, as a port that drops the mask computes, against the float64 reference on
the valid tokens, with the tap and image where `trace` first sees it (`demo_attention_mask`). The
mask has no spec field (the spec's batch always carries one); the same mutation fails every port at
float32 (tests/test_batching.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ports import create_port
from shared.core.presets import get_preset
from shared.core.spec import ModelSpec
from shared.teaching.demo import Demo, demo_case, gap
from shared.teaching.first_divergence import compare_taps, reference_taps

# preset -> what a port without the mask lets its tokens read
UNMASKED = {"naflex-tiny": "attends to the padding keys",
            "packed-tiny": "attends across the images of a sequence"}


def unmasked_port(spec: ModelSpec, weights: dict[str, np.ndarray]) -> Any:
    """The torch port whose attention gets an all-True mask (the pools keep theirs): a port that
    drops SigLIP2's pixel_attention_mask, or packs Pixtral's images without its block mask."""
    port = create_port("torch", spec)
    port.load(weights)
    prepare = port.prepare

    def without_mask(images: np.ndarray) -> tuple[Any, ...]:
        patches, keys, *rest = prepare(images)
        return patches, keys.new_ones(keys.shape), *rest

    port.prepare = without_mask
    return port


def demo_attention_mask() -> Demo:
    """The mask dropped on naflex-tiny and on packed-tiny: the logits' gap and the first divergent
    tap and image."""
    demo = Demo(None, ran_with=["reference", "torch"])
    for name, what in UNMASKED.items():
        spec = get_preset(name)
        case = demo_case(spec)
        pinned = reference_taps(spec, case.weights, case.images)
        port = unmasked_port(spec, case.weights)
        moved = gap(port.logits(case.images), pinned["logits"])
        trace = compare_taps(spec, pinned, port.intermediates(case.images), "torch", images=case.images)
        first = trace.first_divergence
        seen = "none" if first is None else f"{first.name}{f' ({first.note})' if first.note else ''}"
        demo.gap = max(demo.gap or 0.0, moved)
        demo.lines += [f"spec {name!r} ({spec.batching}, {spec.max_patches} patches a sequence), same "
                       f"canonical weights and batch: the torch port whose attention {what} moves the "
                       f"logits by {moved:.3g} from the reference; trace first sees it at {seen}"]
    demo.lines.append("Transformers' Siglip2VisionModel builds its encoder mask from pixel_attention_mask, "
                      "and Pixtral's generate_block_attention_mask the block-diagonal one; a kernel called "
                      "without them computes the padded or packed batch as one image")
    return demo
