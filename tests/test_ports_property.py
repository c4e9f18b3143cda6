"""Property test: random small valid specs (padding with odd sizes, head width != dim/heads,
post-norm, every pooling, no class token, oversized position tables, sincos, no qkv bias, and
the newer families' parts: registers, a distillation token, LayerScale, qk-norm, the gated MLP,
patch and pre-block norms, every activation, no classifier) give the reference's logits in every
port."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ports
from shared.core import reference
from shared.core.equivalence import check_logits
from shared.core.inputs import probe_batch
from shared.core.spec import ModelSpec
from shared.core.weights import init_weights
from shared.errors import SpecError
from shared.runtime.contract import PortInterface


@st.composite
def small_specs(draw: st.DrawFn) -> ModelSpec:
    class_token = draw(st.booleans())
    pos_embed = draw(st.sampled_from(["learned", "sincos", "none"]))
    activations = st.sampled_from(["gelu", "gelu_tanh", "quick_gelu", "silu"])
    registers = draw(st.integers(0, 2))
    poolings = ["mean", "mean_all", "flatten", "map"] + (["cls"] if class_token else [])
    pooling = draw(st.sampled_from(poolings))
    head_hidden = tuple(draw(st.lists(st.integers(3, 12), max_size=2)))
    num_classes = draw(st.integers(0, 5)) if not head_hidden else draw(st.integers(2, 5))
    image_h, image_w = draw(st.integers(3, 11)), draw(st.integers(3, 11))
    fields = dict(
        image_height=image_h, image_width=image_w, channels=draw(st.integers(1, 3)),
        patch_height=draw(st.integers(1, min(image_h, 5))), patch_width=draw(st.integers(1, min(image_w, 5))),
        remainder=draw(st.sampled_from(["drop", "pad"])),
        dim=draw(st.sampled_from([8, 12, 16])), class_token=class_token, pos_embed=pos_embed,
        pos_embed_class_row=class_token and pos_embed == "learned" and draw(st.booleans()),
        depth=draw(st.integers(1, 2)), heads=draw(st.integers(1, 3)), head_dim=draw(st.integers(2, 9)),
        mlp_dim=draw(st.integers(4, 24)), activation=draw(activations),
        norm=draw(st.sampled_from(["pre", "post"])),
        layer_norm_eps=draw(st.sampled_from([1e-6, 1e-5, 1e-3])), qkv_bias=draw(st.booleans()),
        final_norm=draw(st.sampled_from(["none", "tokens", "pooled"])), pooling=pooling,
        head_hidden=head_hidden, head_activation=draw(activations), num_classes=num_classes,
        registers=registers, mlp=draw(st.sampled_from(["standard", "gated"])), qk_norm=draw(st.booleans()),
        layer_scale=draw(st.booleans()), norm_before_blocks=draw(st.booleans()),
        patch_norm_in=draw(st.booleans()), patch_norm_out=draw(st.booleans()),
        pool_qkv_bias=pooling != "map" or draw(st.booleans()), name="hypothesis",
        distill_token=class_token and pooling == "cls" and num_classes > 0 and not head_hidden
        and draw(st.booleans()),
    )
    fields["pos_embed_register_rows"] = (registers > 0 and pos_embed == "learned"
                                         and (fields["pos_embed_class_row"] or not class_token)
                                         and draw(st.booleans()))
    try:
        spec = ModelSpec(**fields)
    except SpecError:
        assume(False)
    if pos_embed == "learned" and draw(st.booleans()):  # an oversized table: only the first rows used
        spec = spec.replace(pos_rows=spec.derived.pos_rows_used + draw(st.integers(1, 5)))
    return spec


# JAX runs an eager forward op by op and compiles each op for each new shape, and every example
# draws new shapes: Flax's eager pass cost 9x its jitted one here (330 s vs 37 s for the 8
# examples on a loaded 2-core machine), more than the three other ports together. The jitted pass
# traces the same Python model code, which is what a random spec exercises; eager Flax is checked
# on every preset by test_ports.py.
TRACED = {"flax"}


def logits(framework: str, port: PortInterface, images: np.ndarray) -> np.ndarray:
    if framework in TRACED:
        return port.to_numpy(port.compiled_forward()(port.prepare(images)))
    return port.logits(images)


# derandomize: CI runs the same examples every time (a new failure shows up locally, not as a
# flaky landing); widen locally with --hypothesis-seed or more examples.
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(), seed=st.integers(0, 2**16))
def test_every_port_matches_the_reference_on_random_specs(spec: ModelSpec, seed: int) -> None:
    tensors = init_weights(spec, seed)
    images = probe_batch(spec, batch=3, seed=seed)
    ref = reference.forward(spec, tensors, images)
    for framework in ports.NATIVE:
        port = ports.create_port(framework, spec)
        port.load(tensors)
        verdict = check_logits(spec, logits(framework, port, images), ref, port.param_count())
        assert verdict.passed, f"{framework}: {verdict.reason} on {spec.to_json()}"
        exported = port.export()
        assert all(np.array_equal(exported[k], v) for k, v in tensors.items())
