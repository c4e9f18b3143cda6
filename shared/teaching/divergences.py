"""The catalogue: every place where torch, Keras and Flax silently differ for this model, what the
spec (or the training recipe) pins, and a measured demonstration.

Each entry states what differs, reads each framework's default from the installed framework
(`shared.teaching.framework_defaults`), names the pin, and demonstrates the gap by running the same
canonical weights with the pin and without it: through the float64 reference with a changed
spec/weights/images (`shared.teaching.variants`), or, where the divergence lives in a framework API
(batch_first, kernel layouts, optimizers, losses, dropout flags, CPU precision), through that
API. Facts and expected magnitudes: ../shared/reference/divergences.md (rows cited per entry).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.reference import attention, forward, layer_norm
from shared.core.spec import ModelSpec
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable
from shared.teaching.framework_defaults import FRAMEWORKS, read_default
from shared.teaching.variants import Case, variant

DEMO_SEED = 0  # canonical weights for every demonstration: init_weights(spec, DEMO_SEED)


@dataclass
class Demo:
    gap: float | None  # the headline: max |unpinned - pinned|; None when nothing could run
    lines: list[str] = field(default_factory=list)  # each measurement, one line
    ran_with: list[str] = field(default_factory=list)  # "reference", "torch", ...


@dataclass(frozen=True)
class Entry:
    key: str
    title: str
    differs: str
    pin: str  # the spec / train-spec field or fixed convention that pins it
    kind: str  # forward | training | numerics
    rows: str  # rows of divergences.md
    demo: Callable[[], Demo]
    variants: tuple[str, ...] = ()  # shared.teaching.variants keys that model the unpinned port

    def defaults(self) -> dict[str, str]:
        return {fw: read_default(self.key, fw) for fw in FRAMEWORKS}

    def run_demo(self) -> Demo:
        return self.demo()


# ---- helpers -----------------------------------------------------------------------------
def _demo_case(spec: ModelSpec) -> Case:
    return Case(spec, init_weights(spec, DEMO_SEED), probe_batch(spec))


def _gap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def _variant_demo(spec: ModelSpec, keys: tuple[str, ...], note: str = "") -> Demo:
    case = _demo_case(spec)
    pinned = forward(case.spec, case.weights, case.images)
    demo = Demo(None, ran_with=["reference"])
    for key in keys:
        changed = variant(key).apply(case)
        if changed is None:
            demo.lines.append(f"{key}: does not apply to spec {spec.name!r}")
            continue
        gap = _gap(forward(changed.spec, changed.weights, changed.images), pinned)
        demo.gap = max(demo.gap or 0.0, gap)
        demo.lines.append(f"spec {spec.name!r}, same canonical weights: logits move by {gap:.3g} "
                          f"with {key}")
    if note:
        demo.lines.append(note)
    return demo


def _quadrant() -> ModelSpec:
    return get_preset("quadrant")


# ---- forward-pass demonstrations through the reference -----------------------------------
def _demo_eps() -> Demo:
    from shared.teaching.framework_defaults import layer_norm_eps_defaults

    spec = _quadrant()
    read = layer_norm_eps_defaults()
    case = _demo_case(spec)
    pinned = forward(spec, case.weights, case.images)
    demo = Demo(None, ran_with=["reference"])
    documented = {"torch": 1e-5, "keras": 1e-3, "flax": 1e-6}
    for fw, eps in {**documented, **read}.items():
        source = "read" if fw in read else "documented (framework not installed)"
        if math.isclose(eps, spec.layer_norm_eps):
            demo.lines.append(f"{fw} default {eps:g} ({source}) equals the spec's "
                              f"{spec.layer_norm_eps:g}: gap 0")
            continue
        gap = _gap(forward(spec.replace(layer_norm_eps=eps), case.weights, case.images), pinned)
        demo.gap = max(demo.gap or 0.0, gap)
        demo.lines.append(f"spec {spec.name!r} (eps {spec.layer_norm_eps:g}) run with {fw}'s default "
                          f"{eps:g} ({source}): logits move by {gap:.3g}")
    small = get_preset("archive-torch")
    c2 = _demo_case(small)
    g2 = _gap(forward(small.replace(layer_norm_eps=1e-6), c2.weights, c2.images),
              forward(small, c2.weights, c2.images))
    demo.lines.append(f"spec 'archive-torch' with eps 1e-6 instead of 1e-5: {g2:.3g}, below the 5e-6 "
                      "tolerance: on some models only the spec, not the tolerance, catches it")
    return demo


def _demo_head_width() -> Demo:
    spec = _quadrant()
    demo = _variant_demo(spec, ("attention scaled by 1/sqrt(dim)", "heads merged into one"))
    wide = spec.replace(head_dim=spec.dim)
    demo.lines.append(
        f"taking the integer {spec.dim} as Keras' key_dim builds a different model: attention "
        f"params {spec.derived.param_groups['blocks.attn']:,} -> {wide.derived.param_groups['blocks.attn']:,}"
    )
    return demo


def _demo_remainder() -> Demo:
    base = get_preset("archive-keras")
    spec = base.replace(name="archive-keras", remainder="drop", pos_rows=32)
    demo = _variant_demo(spec, ("remainder=pad",))
    drop, pad = spec.derived, spec.replace(remainder="pad").derived
    demo.lines.insert(0, f"{spec.image_height}x{spec.image_width} image, {spec.patch_height}x"
                         f"{spec.patch_width} patches: drop -> {drop.num_patches} tokens "
                         f"({drop.cols_dropped} columns discarded), pad -> {pad.num_patches} tokens")
    return demo


def _demo_patch_layout() -> Demo:
    spec = _quadrant().replace(name="quadrant-rgb", channels=3)
    return _variant_demo(spec, ("patches flattened (C, ph, pw)", "images reshaped to NCHW"),
                         note="with one channel both flatten orders coincide (gap 0): test with C > 1")


def _demo_gelu() -> Demo:
    return _variant_demo(_quadrant(), ("gelu form flipped (MLP)",))


def _demo_norm() -> Demo:
    return _variant_demo(_quadrant(), ("norm=post",))


def _demo_pooling() -> Demo:
    return _variant_demo(_quadrant(), ("pooling=mean", "final_norm=pooled", "final_norm=none"),
                         note="final_norm=pooled on the class token equals tokens (gap 0): LayerNorm "
                              "is per token")


def _demo_pos_rows() -> Demo:
    spec = get_preset("archive-final")
    demo = _variant_demo(spec, ("position rows taken from the end",))
    case = _demo_case(spec)
    repaired = get_preset("archive-final-repaired")
    trimmed = dict(case.weights)
    trimmed["pos_embed"] = case.weights["pos_embed"][: repaired.derived.pos_rows_total]
    gap = _gap(forward(repaired, trimmed, case.images), forward(spec, case.weights, case.images))
    demo.lines.append(f"the first {repaired.derived.pos_rows_total} of {spec.derived.pos_rows_total} rows "
                      f"alone (archive-final-repaired): gap {gap:.3g}: the "
                      f"{spec.derived.pos_rows_unused} extra rows are dead weight")
    return demo


def _demo_attention_scale() -> Demo:
    return _variant_demo(_quadrant(), ("attention scaled by 1/sqrt(dim)", "attention not scaled"))


def _block0_attention_io(spec: ModelSpec) -> tuple[Case, np.ndarray, np.ndarray]:
    case = _demo_case(spec)
    taps: dict[str, np.ndarray] = {}
    forward(spec, case.weights, case.images, taps)
    return case, taps["block0.norm1"], taps["block0.attn"]


def _demo_batch_first() -> Demo:
    spec = _quadrant()
    case, h, expected = _block0_attention_io(spec)
    w = {k: v.astype(np.float64) for k, v in case.weights.items()}
    # (B, T, E) read as (T, B, E): attention runs across the batch at each token position
    swapped = attention(spec, w, "blocks.0.", h.transpose(1, 0, 2)).transpose(1, 0, 2)
    demo = Demo(_gap(swapped, expected), ran_with=["reference"])
    demo.lines.append(f"block 0 attention, (B, T, E) read as (T, B, E) (reference): {demo.gap:.3g}")
    try:
        torch_out = _torch_mha(spec, case, h, batch_first=True)
        default_out = _torch_mha(spec, case, h, batch_first=None)
    except FrameworkUnavailable:
        return demo
    demo.ran_with.append("torch")
    demo.lines.append(f"torch nn.MultiheadAttention(batch_first=True) vs reference: "
                      f"{_gap(torch_out, expected):.3g}")
    gap = _gap(default_out, expected)
    demo.gap = max(demo.gap, gap)
    demo.lines.append(f"torch nn.MultiheadAttention() with its default batch_first: {gap:.3g}, no error")
    return demo


def _torch_mha(spec: ModelSpec, case: Case, h: np.ndarray, batch_first: bool | None) -> np.ndarray:
    """Block 0's canonical attention weights in torch's nn.MultiheadAttention (head width
    dim/heads, so only for specs where heads * head_dim == dim)."""
    from shared.core.weights import attn_out_to_out_in, qkv_bias_pack, qkv_pack
    from shared.teaching.framework_defaults import torch_modules

    torch, nn = torch_modules()
    kwargs = {} if batch_first is None else {"batch_first": batch_first}
    mha = nn.MultiheadAttention(spec.dim, spec.heads, **kwargs).double()
    p = "blocks.0.attn."
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(qkv_pack(*[case.weights[p + n + ".kernel"]
                                                             for n in ("query", "key", "value")])))
        mha.in_proj_bias.copy_(torch.from_numpy(qkv_bias_pack(*[case.weights[p + n + ".bias"]
                                                                for n in ("query", "key", "value")])))
        mha.out_proj.weight.copy_(torch.from_numpy(attn_out_to_out_in(case.weights[p + "out.kernel"])))
        mha.out_proj.bias.copy_(torch.from_numpy(case.weights[p + "out.bias"]))
        x = torch.from_numpy(h)
        out, _ = mha(x, x, x, need_weights=False)
    return out.numpy()


def _demo_conv_layout() -> Demo:
    spec = _quadrant()
    demo = _variant_demo(spec, ("patch kernel reshaped to OIHW",))
    try:
        from shared.core.weights import conv_hwio_to_oihw
        from shared.teaching.framework_defaults import torch_modules

        torch, nn = torch_modules()
    except FrameworkUnavailable:
        return demo
    case = _demo_case(spec)
    taps: dict[str, np.ndarray] = {}
    forward(spec, case.weights, case.images, taps)
    k = case.weights["patch_embed.kernel"]
    conv = nn.Conv2d(spec.channels, spec.dim, (spec.patch_height, spec.patch_width),
                     stride=(spec.patch_height, spec.patch_width)).double()
    x = torch.from_numpy(case.images.astype(np.float64)).permute(0, 3, 1, 2)
    results = {}
    for label, weight in (("transpose(3, 2, 0, 1)", conv_hwio_to_oihw(k)),
                          ("reshape", k.reshape(spec.dim, spec.channels, *k.shape[:2]))):
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight)))
            conv.bias.copy_(torch.from_numpy(case.weights["patch_embed.bias"]))
            results[label] = conv(x).flatten(2).transpose(1, 2).numpy()
    demo.ran_with.append("torch")
    good = _gap(results["transpose(3, 2, 0, 1)"], taps["patch_embed"])
    bad = _gap(results["reshape"], taps["patch_embed"])
    demo.gap = max(demo.gap or 0.0, bad)
    demo.lines.append(f"torch Conv2d patch embedding: HWIO->OIHW by transpose {good:.3g}, by reshape "
                      f"{bad:.3g} (same shape, no error)")
    return demo


def _demo_dense_layout() -> Demo:
    spec = _quadrant()
    demo = _variant_demo(spec, ("dense kernels reshaped to (out, in)",))
    try:
        from shared.teaching.framework_defaults import torch_modules

        torch, nn = torch_modules()
    except FrameworkUnavailable:
        return demo
    case = _demo_case(spec)
    k, b = case.weights["blocks.0.mlp.fc1.kernel"], case.weights["blocks.0.mlp.fc1.bias"]
    x = np.random.default_rng(0).standard_normal((4, k.shape[0]))
    expected = x @ k + b
    lin = nn.Linear(*k.shape).double()
    out = {}
    for label, weight in (("k.T", k.T), ("k.reshape(out, in)", k.reshape(k.shape[1], k.shape[0]))):
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight)))
            lin.bias.copy_(torch.from_numpy(b))
            out[label] = lin(torch.from_numpy(x)).numpy()
    demo.ran_with.append("torch")
    bad = _gap(out["k.reshape(out, in)"], expected)
    demo.gap = max(demo.gap or 0.0, bad)
    good = _gap(out["k.T"], expected)
    demo.lines.append(f"torch nn.Linear{tuple(k.shape)[::-1]}: weight = k.T {good:.3g}, "
                      f"weight = k.reshape(out, in) {bad:.3g}")
    return demo


# ---- training-step demonstrations ------------------------------------------------------
def _adam_numpy(p: np.ndarray, g: np.ndarray, lr: float, eps: float, eps_hat: bool,
                b1: float = 0.9, b2: float = 0.999, t: int = 1) -> np.ndarray:
    """One Adam step from zero moments. eps_hat: Keras' placement (eps added to sqrt(v) before
    bias correction), else torch/optax (eps added to sqrt(v_hat))."""
    m, v = (1 - b1) * g, (1 - b2) * g * g
    if eps_hat:
        step = lr * math.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
    else:
        step = lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return p - step


def _synthetic(scale: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.standard_normal(64).astype(np.float32), (scale * rng.standard_normal(64)).astype(np.float32)


def _demo_adamw_eps() -> Demo:
    lr, eps = 1e-3, 1e-8
    demo = Demo(None, ran_with=["numpy"])
    for scale in (1e-2, 1e-7):
        p, g = _synthetic(scale)
        gap = _gap(_adam_numpy(p, g, lr, eps, True), _adam_numpy(p, g, lr, eps, False))
        demo.gap = max(demo.gap or 0.0, gap)
        demo.lines.append(f"1 step, eps {eps:g}, gradients ~{scale:g}: Keras placement vs torch/optax "
                          f"{gap:.3g} (numpy formulas)")
    p, g = _synthetic(1e-7)
    measured = _framework_adam_steps(p, g, lr, eps)
    for name, value in measured.items():
        demo.ran_with.append(name)
        ref = _adam_numpy(p, g, lr, eps, eps_hat=(name == "keras"))
        demo.lines.append(f"{name} AdamW(eps={eps:g}, wd=0), gradients ~1e-7: matches its formula "
                          f"to {_gap(value, ref):.3g}")
    if "torch" in measured and "keras" in measured:
        gap = _gap(measured["torch"], measured["keras"])
        demo.gap = max(demo.gap or 0.0, gap)
        demo.lines.append(f"torch vs keras after one step: {gap:.3g}; pin: TrainSpec.epsilon is Keras' "
                          "epsilon hat, torch/optax get eps/sqrt(1 - b2^t) each update")
    return demo


def _framework_adam_steps(p: np.ndarray, g: np.ndarray, lr: float, eps: float) -> dict[str, np.ndarray]:
    from shared.teaching import framework_defaults as fd

    out: dict[str, np.ndarray] = {}
    with contextlib.suppress(FrameworkUnavailable):
        out["torch"] = fd.torch_adam_step(p, g, lr, eps, 0.0)
    try:
        jax, _, optax = fd.flax_modules()
        opt = optax.adamw(lr, eps=eps, weight_decay=0.0)
        params = jax.numpy.asarray(p)
        updates, _ = opt.update(jax.numpy.asarray(g), opt.init(params), params)
        out["optax"] = np.asarray(optax.apply_updates(params, updates))
    except FrameworkUnavailable:
        pass
    try:
        keras = fd.keras_module()
        var = keras.Variable(p.copy())
        opt = keras.optimizers.AdamW(learning_rate=lr, epsilon=eps, weight_decay=0.0)
        opt.apply_gradients([(keras.ops.convert_to_tensor(g), var)])
        out["keras"] = np.asarray(keras.ops.convert_to_numpy(var))
    except FrameworkUnavailable:
        pass
    return out


def _demo_weight_decay() -> Demo:
    lr, wd = 1e-3, 0.05
    p, g = _synthetic(1e-2)
    demo = Demo(None, ran_with=["numpy"])
    decoupled = _adam_numpy(p * (1 - lr * wd), g, lr, 1e-8, False)
    l2 = _adam_numpy(p, g + wd * p, lr, 1e-8, False)
    demo.gap = _gap(decoupled, l2)
    demo.lines.append(f"1 step, wd {wd:g}: decoupled (AdamW) vs L2 (torch Adam(weight_decay)) {demo.gap:.3g}")
    bias = np.full(8, 0.5, np.float32)
    decayed = bias * (1 - lr * wd)
    demo.lines.append(f"a bias with zero gradient still moves by {float(np.max(bias - decayed)):.3g} per "
                      "step when every variable is decayed (Keras, optax without mask); pin: "
                      "TrainSpec.weight_decay_on")
    try:
        from shared.teaching.framework_defaults import torch_adam_step

        adam = torch_adam_step(p, g, lr, 1e-8, wd, decoupled=False)
        adamw = torch_adam_step(p, g, lr, 1e-8, wd, decoupled=True)
        gap = _gap(adam, adamw)
        demo.ran_with.append("torch")
        demo.gap = max(demo.gap, gap)
        demo.lines.append(f"torch Adam(weight_decay={wd}) vs AdamW(weight_decay={wd}), 1 step: {gap:.3g} "
                          "(torch.optim's functional adam/adamw)")
    except FrameworkUnavailable:
        pass
    return demo


def _demo_clipnorm() -> Demo:
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(16) * 2.0, rng.standard_normal(4) * 0.5, rng.standard_normal(8) * 0.01]
    clip = 1.0
    total = math.sqrt(sum(float(np.sum(x * x)) for x in grads))
    global_clipped = [x * min(1.0, clip / total) for x in grads]
    per_var = [x * min(1.0, clip / float(np.linalg.norm(x))) for x in grads]
    gap = max(_gap(a, b) for a, b in zip(global_clipped, per_var, strict=True))
    demo = Demo(gap, ran_with=["numpy"])
    demo.lines.append(f"3 gradients, global norm {total:.3g}, clip {clip:g}: per-variable (Keras clipnorm) "
                      f"vs global clipping {gap:.3g}")
    try:
        from shared.teaching.framework_defaults import keras_module

        keras = keras_module()
        deltas = {}
        for kw in ("clipnorm", "global_clipnorm"):
            variables = [keras.Variable(np.zeros_like(x, dtype=np.float32)) for x in grads]
            opt = keras.optimizers.SGD(learning_rate=1.0, **{kw: clip})
            opt.apply_gradients([(keras.ops.convert_to_tensor(x.astype(np.float32)), v)
                                 for x, v in zip(grads, variables, strict=True)])
            deltas[kw] = [-np.asarray(keras.ops.convert_to_numpy(v)) for v in variables]
        demo.ran_with.append("keras")
        g_keras = max(_gap(a, b) for a, b in zip(deltas["clipnorm"], deltas["global_clipnorm"], strict=True))
        demo.gap = max(demo.gap or 0.0, g_keras)
        vs_numpy = max(_gap(a, b) for a, b in zip(deltas["global_clipnorm"], global_clipped, strict=True))
        demo.lines.append(f"keras SGD(lr=1): clipnorm vs global_clipnorm updates differ by {g_keras:.3g}; "
                          f"global_clipnorm vs numpy global {vs_numpy:.3g}")
    except FrameworkUnavailable:
        pass
    return demo


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _demo_cross_entropy() -> Demo:
    spec = _quadrant()
    case = _demo_case(spec)
    logits = forward(spec, case.weights, case.images)
    labels = np.arange(logits.shape[0]) % spec.num_classes
    per = -_log_softmax(logits)[np.arange(len(labels)), labels]
    demo = Demo(None, ran_with=["numpy"])
    gap = abs(per.sum() - per.mean())
    demo.gap = gap
    demo.lines.append(f"quadrant probe batch of {len(labels)}: sum vs mean reduction {gap:.3g} "
                      f"(mean {per.mean():.4f})")
    try:
        from shared.teaching.framework_defaults import keras_module

        keras = keras_module()
        for flag in (None, True):
            kwargs = {} if flag is None else {"from_logits": True}
            loss_fn = keras.losses.SparseCategoricalCrossentropy(**kwargs)
            loss = float(loss_fn(labels, logits.astype(np.float32)))
            demo.lines.append(f"keras SparseCategoricalCrossentropy({'from_logits=True' if flag else ''}): "
                              f"{loss:.4f}")
            if flag is None:
                demo.gap = max(demo.gap, abs(loss - per.mean()))
        demo.ran_with.append("keras")
    except FrameworkUnavailable:
        pass
    return demo


def _demo_dropout() -> Demo:
    spec = get_preset("mnist-vit-small")  # MLP dropout 0.1
    demo = Demo(None)
    try:
        from shared.teaching.framework_defaults import torch_modules

        torch, _ = torch_modules()
    except FrameworkUnavailable:
        demo.lines.append("needs torch (dropout masks exist only in a framework)")
        return demo
    from ports.torch.port import Port

    case = _demo_case(spec)
    port = Port(spec)
    port.load(case.weights)
    reference = forward(spec, case.weights, case.images)
    torch.manual_seed(0)
    fresh = port.model.train()  # what a freshly built nn.Module is in
    with torch.no_grad():
        train_logits = fresh(port.prepare(case.images)).numpy()
    eval_logits = port.logits(case.images)
    demo.ran_with.append("torch")
    demo.gap = _gap(train_logits, reference)
    demo.lines.append(f"mnist-vit-small (MLP dropout {spec.dropout_mlp}): torch module left in train mode "
                      f"{demo.gap:.3g}, after .eval() {_gap(eval_logits, reference):.3g}")
    return demo


def _demo_precision() -> Demo:
    spec = get_preset("mnist-vit")
    demo = Demo(None)
    try:
        from shared.teaching.framework_defaults import torch_modules

        torch, _ = torch_modules()
    except FrameworkUnavailable:
        demo.lines.append("needs torch")
        return demo
    from ports.torch.port import Port

    case = _demo_case(spec)
    port = Port(spec)  # pins 'highest'
    port.load(case.weights)
    reference = forward(spec, case.weights, case.images)
    pinned = _gap(port.logits(case.images), reference)
    try:
        torch.set_float32_matmul_precision("medium")
        medium = _gap(port.logits(case.images), reference)
    finally:
        torch.set_float32_matmul_precision("highest")
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        bf16 = port.to_numpy(port.model(port.prepare(case.images)).float())
    demo.ran_with.append("torch")
    demo.gap = max(abs(medium - pinned), _gap(bf16, reference))
    demo.lines.append(f"mnist-vit, torch vs fp64 reference: 'highest' {pinned:.3g}, 'medium' {medium:.3g} "
                      f"({'bf16 matmuls on this CPU' if medium > 10 * pinned else 'no effect on this CPU'})"
                      f", autocast bf16 {_gap(bf16, reference):.3g}")
    return demo


def _demo_variance() -> Demo:
    rng = np.random.default_rng(5)
    x = (1000.0 + rng.standard_normal((8, 64))).astype(np.float32)
    scale, bias = np.ones(64), np.zeros(64)
    exact = layer_norm(x.astype(np.float64), scale, bias, 1e-6)
    mean = x.mean(axis=-1, keepdims=True, dtype=np.float32)
    fast_var = (x * x).mean(axis=-1, keepdims=True, dtype=np.float32) - mean * mean
    fast = (x - mean) / np.sqrt(np.maximum(fast_var, 0) + np.float32(1e-6))
    two_pass_var = ((x - mean) ** 2).mean(axis=-1, keepdims=True, dtype=np.float32)
    two_pass = (x - mean) / np.sqrt(two_pass_var + np.float32(1e-6))
    demo = Demo(_gap(fast, exact), ran_with=["numpy"])
    demo.lines.append(f"float32 tokens with mean 1000: E[x^2]-E[x]^2 variance {demo.gap:.3g} vs fp64, "
                      f"two-pass {_gap(two_pass, exact):.3g}")
    try:
        from shared.teaching.framework_defaults import flax_modules

        jax, nnx, _ = flax_modules()
        for fast_flag in (True, False):
            ln = nnx.LayerNorm(64, epsilon=1e-6, use_fast_variance=fast_flag, rngs=nnx.Rngs(0))
            err = _gap(np.asarray(ln(jax.numpy.asarray(x))), exact)
            demo.lines.append(f"flax nnx.LayerNorm(use_fast_variance={fast_flag}): {err:.3g}")
            if fast_flag:
                demo.gap = max(demo.gap, err)
        demo.ran_with.append("flax")
    except FrameworkUnavailable:
        pass
    return demo


CATALOGUE: tuple[Entry, ...] = (
    Entry("head_width", "What the integer in 'heads=4, dim 32' means",
          "torch nn.MultiheadAttention's head width is embed_dim/num_heads; Keras' key_dim is the "
          "width of each head, so passing the same integer gives heads four times wider",
          "ModelSpec.head_dim", "forward", "4", _demo_head_width,
          ("attention scaled by 1/sqrt(dim)", "heads merged into one")),
    Entry("remainder", "Trailing pixels: drop or pad",
          "a 'valid' conv/unfold drops pixels that do not fill a patch; 'same' padding adds zeros "
          "and more tokens (32x31 with 8x4 patches: 28 vs 32)", "ModelSpec.remainder", "forward",
          "17", _demo_remainder, ("remainder=pad", "remainder=drop")),
    Entry("patch_layout", "Patch flatten order and NCHW/NHWC",
          "torch flattens patches (C, ph, pw) and takes NCHW; Keras and Flax flatten (ph, pw, C) "
          "and take NHWC", "convention: NHWC input, (ph, pw, C) flatten (shared/core/spec.py)", "forward",
          "16", _demo_patch_layout, ("patches flattened (C, ph, pw)", "images reshaped to NCHW")),
    Entry("layer_norm_eps", "LayerNorm epsilon",
          "torch 1e-5, Flax 1e-6, Keras 1e-3 by default", "ModelSpec.layer_norm_eps", "forward", "1",
          _demo_eps, tuple(f"layer_norm_eps={v:g}" for v in (1e-3, 1e-5, 1e-6, 1e-7, 1e-12))),
    Entry("gelu", "GELU: exact or tanh",
          "torch and keras.activations use exact erf; jax.nn.gelu, nnx.gelu and keras.ops.gelu "
          "default to the tanh approximation", "ModelSpec.activation / head_activation", "forward",
          "3", _demo_gelu, ("gelu form flipped (MLP)", "gelu form flipped (head)",
                            "gelu form flipped (MLP and head)")),
    Entry("norm_placement", "Pre-norm or post-norm",
          "x + f(LN(x)) (ViT) vs LN(x + f(x)) (torch TransformerEncoderLayer's default)",
          "ModelSpec.norm", "forward", "20", _demo_norm, ("norm=pre", "norm=post")),
    Entry("pooling", "Readout: class token, mean or flatten; where the final norm sits",
          "timm reads the class token, Keras' GlobalAveragePooling1D averages every token, "
          "big_vision averages the patches; timm's fc_norm normalises after pooling",
          "ModelSpec.pooling / final_norm", "forward", "-", _demo_pooling,
          ("pooling=cls", "pooling=mean", "final_norm=pooled", "final_norm=tokens", "final_norm=none")),
    Entry("pos_table_rows", "A position table larger than the sequence",
          "only the first rows receive a position; a port that slices differently (or interpolates) "
          "computes another function", "ModelSpec.pos_rows (first rows used)", "forward", "-",
          _demo_pos_rows, ("position rows taken from the end", "no position embedding")),
    Entry("batch_first", "torch nn.MultiheadAttention batch_first=False",
          "the default expects (T, B, E); a (B, T, E) tensor runs without error and attends across "
          "the batch", "convention: (B, T, E) everywhere; the torch port uses its own Attention",
          "forward", "8", _demo_batch_first),
    Entry("attention_scale", "Attention scale 1/sqrt(head width)",
          "every framework scales by 1/sqrt of its own head width, so the scale follows the head "
          "width; a hand-written 1/sqrt(dim) or no scale changes the function",
          "ModelSpec.head_dim", "forward", "6", _demo_attention_scale,
          ("attention scaled by 1/sqrt(dim)", "attention not scaled")),
    Entry("conv_kernel_layout", "Conv2d kernel OIHW vs HWIO",
          "torch stores (O, I, H, W), Keras and Flax (H, W, I, O); a reshape instead of "
          "transpose(3, 2, 0, 1) keeps the shape and scrambles the values",
          "canonical HWIO + shared.core.weights.conv_hwio_to_oihw", "forward", "14", _demo_conv_layout,
          ("patch kernel reshaped to OIHW",)),
    Entry("dense_kernel_layout", "Dense kernel (out, in) vs (in, out)",
          "torch Linear weights are (out, in), Keras/Flax kernels (in, out); a square layer with a "
          "missed transpose raises nothing", "canonical (in, out) + shared.core.weights.dense_to_out_in",
          "forward", "13", _demo_dense_layout, ("dense kernels reshaped to (out, in)",)),
    Entry("adamw_epsilon", "AdamW epsilon placement and defaults",
          "torch/optax add eps to sqrt(v_hat); Keras adds it before bias correction (effective "
          "eps/sqrt(1-b2^t)); defaults 1e-8 / 1e-7 / 1e-8", "TrainSpec.epsilon (Keras' epsilon hat)",
          "training", "21, 22", _demo_adamw_eps),
    Entry("weight_decay", "Weight-decay semantics",
          "torch Adam(weight_decay) is L2, AdamW decoupled; Keras and optax decay every variable "
          "unless told otherwise; defaults 1e-2 / 4e-3 / 1e-4",
          "TrainSpec.weight_decay / weight_decay_on", "training", "23, 24", _demo_weight_decay),
    Entry("clipnorm", "Keras clipnorm (per variable) vs global-norm clipping",
          "clipnorm clips each variable on its own; global_clipnorm, optax.clip_by_global_norm and "
          "torch clip_grad_norm_ clip the global norm (torch with a 1e-6 in the denominator)",
          "TrainSpec.clip_global_norm (global, no epsilon)", "training", "25, 26", _demo_clipnorm),
    Entry("cross_entropy", "Cross-entropy reduction and from_logits",
          "torch takes logits and averages; Keras' sparse CE defaults to probabilities "
          "(from_logits=False); optax returns per-example losses", "loss: mean softmax CE from logits",
          "training", "32", _demo_cross_entropy),
    Entry("dropout_flags", "Dropout placement and train/eval flags",
          "a new torch module is in train mode; Keras layers are in inference unless training=True; "
          "nnx.Dropout is active by default and Flax attention shares one mask across batch and heads",
          "ModelSpec.dropout_* (rates); eval mode for every equivalence check", "forward", "18, 19",
          _demo_dropout),
    Entry("cpu_precision", "Default float precision on CPU (oneDNN, XLA, bf16)",
          "torch 'medium' matmul precision runs bf16 on AMX CPUs; autocast/mixed policies change "
          "the numbers by 1e-2; oneDNN on/off and JAX precision flags are noise on CPU",
          "each port's pin_precision() ('highest')", "numerics", "36, 37", _demo_precision),
    Entry("layer_norm_variance", "LayerNorm variance formula",
          "Flax computes E[x^2]-E[x]^2 by default (use_fast_variance=True): cancellation when "
          "tokens carry a large mean", "use_fast_variance=False in the Flax port", "numerics", "2",
          _demo_variance),
)


def entry(key: str) -> Entry:
    for e in CATALOGUE:
        if e.key == key:
            return e
    raise KeyError(key)
