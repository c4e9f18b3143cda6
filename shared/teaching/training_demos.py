"""The catalogue's training-step and numerics demonstrations: NumPy formulas for what each
framework's optimizer, clipping, loss and LayerNorm compute, checked against the frameworks
themselves where they are installed (`ports/<fw>/demos.py`)."""

from __future__ import annotations

import math

import numpy as np

from ports import NATIVE
from shared.core.presets import get_preset
from shared.core.reference import forward, layer_norm
from shared.teaching.demo import Demo, demo_case, framework, gap, quadrant

# What each framework's AdamW is called in the demonstration lines.
OPTIMIZER_NAMES = {"torch": "torch", "keras": "keras", "flax": "optax", "mlx": "mlx"}


def adam_numpy(p: np.ndarray, g: np.ndarray, lr: float, eps: float, eps_hat: bool) -> np.ndarray:
    """One Adam step from zero moments, at the default betas. eps_hat: Keras' placement (eps added
    to sqrt(v) before bias correction), else torch/optax (eps added to sqrt(v_hat))."""
    b1, b2, t = 0.9, 0.999, 1
    m, v = (1 - b1) * g, (1 - b2) * g * g
    if eps_hat:
        step = lr * math.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
    else:
        step = lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return p - step


def _synthetic(scale: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.standard_normal(64).astype(np.float32), (scale * rng.standard_normal(64)).astype(np.float32)


def demo_adamw_eps() -> Demo:
    lr, eps = 1e-3, 1e-8
    demo = Demo(None, ran_with=["numpy"])
    for scale in (1e-2, 1e-7):
        p, g = _synthetic(scale)
        moved = gap(adam_numpy(p, g, lr, eps, True), adam_numpy(p, g, lr, eps, False))
        demo.gap = max(demo.gap or 0.0, moved)
        demo.lines.append(f"1 step, eps {eps:g}, gradients ~{scale:g}: Keras placement vs torch/optax "
                          f"{moved:.3g} (numpy formulas)")
    p, g = _synthetic(1e-7)
    measured = {}
    for fw in NATIVE:
        module = framework(fw)
        if module is not None:
            measured[OPTIMIZER_NAMES[fw]] = module.adam_step(p, g, lr, eps, 0.0)
    for name, value in measured.items():
        demo.ran_with.append(name)
        ref = adam_numpy(p, g, lr, eps, eps_hat=(name == "keras"))
        demo.lines.append(f"{name} AdamW(eps={eps:g}, wd=0), gradients ~1e-7: matches its formula "
                          f"to {gap(value, ref):.3g}")
    if "torch" in measured and "keras" in measured:
        moved = gap(measured["torch"], measured["keras"])
        demo.gap = max(demo.gap or 0.0, moved)
        demo.lines.append(f"torch vs keras after one step: {moved:.3g}; pin: TrainSpec.epsilon is Keras' "
                          "epsilon hat, torch/optax get eps/sqrt(1 - b2^t) each update")
    return demo


def demo_weight_decay() -> Demo:
    lr, wd = 1e-3, 0.05
    p, g = _synthetic(1e-2)
    demo = Demo(None, ran_with=["numpy"])
    decoupled = adam_numpy(p * (1 - lr * wd), g, lr, 1e-8, False)
    l2 = adam_numpy(p, g + wd * p, lr, 1e-8, False)
    demo.gap = gap(decoupled, l2)
    demo.lines.append(f"1 step, wd {wd:g}: decoupled (AdamW) vs L2 (torch Adam(weight_decay)) {demo.gap:.3g}")
    bias = np.full(8, 0.5, np.float32)
    decayed = bias * (1 - lr * wd)
    demo.lines.append(f"a bias with zero gradient still moves by {float(np.max(bias - decayed)):.3g} per "
                      "step when every variable is decayed (Keras, optax without mask); pin: "
                      "TrainSpec.weight_decay_on")
    torch = framework("torch")
    if torch is not None:
        moved = gap(torch.adam_step(p, g, lr, 1e-8, wd, decoupled=False),
                    torch.adam_step(p, g, lr, 1e-8, wd, decoupled=True))
        demo.ran_with.append("torch")
        demo.gap = max(demo.gap, moved)
        demo.lines.append(f"torch Adam(weight_decay={wd}) vs AdamW(weight_decay={wd}), 1 step: {moved:.3g} "
                          "(torch.optim's functional adam/adamw)")
    return demo


def demo_clipnorm() -> Demo:
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(16) * 2.0, rng.standard_normal(4) * 0.5, rng.standard_normal(8) * 0.01]
    clip = 1.0
    total = math.sqrt(sum(float(np.sum(x * x)) for x in grads))
    global_clipped = [x * min(1.0, clip / total) for x in grads]
    per_var = [x * min(1.0, clip / float(np.linalg.norm(x))) for x in grads]
    moved = max(gap(a, b) for a, b in zip(global_clipped, per_var, strict=True))
    demo = Demo(moved, ran_with=["numpy"])
    demo.lines.append(f"3 gradients, global norm {total:.3g}, clip {clip:g}: per-variable (Keras clipnorm) "
                      f"vs global clipping {moved:.3g}")
    keras = framework("keras")
    if keras is not None:
        per = keras.clipped_sgd_updates(grads, clip, per_variable=True)
        glob = keras.clipped_sgd_updates(grads, clip, per_variable=False)
        demo.ran_with.append("keras")
        g_keras = max(gap(a, b) for a, b in zip(per, glob, strict=True))
        demo.gap = max(demo.gap or 0.0, g_keras)
        vs_numpy = max(gap(a, b) for a, b in zip(glob, global_clipped, strict=True))
        demo.lines.append(f"keras SGD(lr=1): clipnorm vs global_clipnorm updates differ by {g_keras:.3g}; "
                          f"global_clipnorm vs numpy global {vs_numpy:.3g}")
    mlx = framework("mlx")
    if mlx is not None:  # its 1e-6 in the denominator: 1e-6 relative, unless the norm is that small
        demo.ran_with.append("mlx")
        for scale in (1.0, 1e-6):
            small = [x * scale for x in grads]
            exact = [x * min(1.0, clip * scale / (total * scale)) for x in small]
            clipped = mlx.clip_grad_norm(small, clip * scale)
            rel = max(gap(a, e) for a, e in zip(clipped, exact, strict=True)) / max(
                float(np.max(np.abs(e))) for e in exact)
            demo.lines.append(f"mlx optim.clip_grad_norm, norm {total * scale:.3g} clipped to "
                              f"{clip * scale:g}: {rel:.3g} relative to the exact global clip")
    return demo


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def demo_cross_entropy() -> Demo:
    spec = quadrant()
    case = demo_case(spec)
    logits = forward(spec, case.weights, case.images)
    labels = np.arange(logits.shape[0]) % spec.num_classes
    per = -_log_softmax(logits)[np.arange(len(labels)), labels]
    demo = Demo(abs(per.sum() - per.mean()), ran_with=["numpy"])
    demo.lines.append(f"quadrant probe batch of {len(labels)}: sum vs mean reduction {demo.gap:.3g} "
                      f"(mean {per.mean():.4f})")
    keras = framework("keras")
    if keras is not None:
        for flag in (None, True):
            loss = keras.sparse_cross_entropy(labels, logits, from_logits=flag)
            demo.lines.append(f"keras SparseCategoricalCrossentropy({'from_logits=True' if flag else ''}): "
                              f"{loss:.4f}")
            if flag is None:
                demo.gap = max(demo.gap, abs(loss - per.mean()))
        demo.ran_with.append("keras")
    return demo


def demo_dropout() -> Demo:
    spec = get_preset("mnist-vit-small")  # MLP dropout 0.1
    demo = Demo(None)
    torch = framework("torch")
    if torch is None:
        demo.lines.append("needs torch (dropout masks exist only in a framework)")
        return demo
    case = demo_case(spec)
    logits = torch.dropout_logits(spec, case.weights, case.images)
    reference = forward(spec, case.weights, case.images)
    demo.ran_with.append("torch")
    demo.gap = gap(logits["train"], reference)
    demo.lines.append(f"mnist-vit-small (MLP dropout {spec.dropout_mlp}): torch module left in train mode "
                      f"{demo.gap:.3g}, after .eval() {gap(logits['eval'], reference):.3g}")
    return demo


def demo_precision() -> Demo:
    spec = get_preset("mnist-vit")
    demo = Demo(None)
    torch = framework("torch")
    if torch is None:
        demo.lines.append("needs torch")
        return demo
    case = demo_case(spec)
    logits = torch.precision_logits(spec, case.weights, case.images)
    reference = forward(spec, case.weights, case.images)
    pinned, medium = gap(logits["highest"], reference), gap(logits["medium"], reference)
    bf16 = gap(logits["autocast bf16"], reference)
    demo.ran_with.append("torch")
    demo.gap = max(abs(medium - pinned), bf16)
    demo.lines.append(f"mnist-vit, torch vs fp64 reference: 'highest' {pinned:.3g}, 'medium' {medium:.3g} "
                      f"({'bf16 matmuls on this CPU' if medium > 10 * pinned else 'no effect on this CPU'})"
                      f", autocast bf16 {bf16:.3g}")
    return demo


def demo_variance() -> Demo:
    rng = np.random.default_rng(5)
    x = (1000.0 + rng.standard_normal((8, 64))).astype(np.float32)
    scale, bias = np.ones(64), np.zeros(64)
    exact = layer_norm(x.astype(np.float64), scale, bias, 1e-6)
    mean = x.mean(axis=-1, keepdims=True, dtype=np.float32)
    fast_var = (x * x).mean(axis=-1, keepdims=True, dtype=np.float32) - mean * mean
    fast = (x - mean) / np.sqrt(np.maximum(fast_var, 0) + np.float32(1e-6))
    two_pass_var = ((x - mean) ** 2).mean(axis=-1, keepdims=True, dtype=np.float32)
    two_pass = (x - mean) / np.sqrt(two_pass_var + np.float32(1e-6))
    demo = Demo(gap(fast, exact), ran_with=["numpy"])
    demo.lines.append(f"float32 tokens with mean 1000: E[x^2]-E[x]^2 variance {demo.gap:.3g} vs fp64, "
                      f"two-pass {gap(two_pass, exact):.3g}")
    flax = framework("flax")
    if flax is not None:
        for fast_flag in (True, False):
            err = gap(flax.layer_norm(x, 1e-6, fast_variance=fast_flag), exact)
            demo.lines.append(f"flax nnx.LayerNorm(use_fast_variance={fast_flag}): {err:.3g}")
            if fast_flag:
                demo.gap = max(demo.gap, err)
        demo.ran_with.append("flax")
    return demo


def demo_bias_correction() -> Demo:
    lr = 1e-3
    p, g = _synthetic(1e-2)
    m, v = 0.1 * g, 0.001 * g * g  # Adam's moments after one step from zero
    uncorrected = p - lr * m / (np.sqrt(v) + 1e-8)
    corrected = adam_numpy(p, g, lr, 1e-8, eps_hat=False)
    demo = Demo(gap(uncorrected, corrected), ran_with=["numpy"])
    demo.lines.append(f"1 step, lr {lr:g}: Adam without bias correction vs with {demo.gap:.3g} "
                      "(numpy formulas; the first update is ~0.32 of the corrected one)")
    mlx = framework("mlx")
    if mlx is None:
        return demo
    default = mlx.adam_step(p, g, lr, 1e-8, 0.0, bias_correction=False)
    pinned = mlx.adam_step(p, g, lr, 1e-8, 0.0, bias_correction=True)
    demo.ran_with.append("mlx")
    demo.gap = max(demo.gap, gap(default, corrected))
    demo.lines.append(f"mlx AdamW(bias_correction=False), its default: {gap(default, corrected):.3g} from "
                      f"torch's update; bias_correction=True: {gap(pinned, corrected):.3g}")
    bias = np.full(8, 0.5, np.float32)
    decayed = mlx.adam_step(bias, np.zeros_like(bias), lr, 1e-8, 0.01)
    demo.lines.append(f"mlx AdamW's default weight_decay 0.01 moves a bias with zero gradient by "
                      f"{gap(decayed, bias):.3g} per step; pin: every weight_decay given")
    return demo


def demo_float64() -> Demo:
    demo = Demo(None)
    mlx = framework("mlx")
    if mlx is None:
        demo.lines.append("needs mlx")
        return demo
    spec = quadrant()
    case = demo_case(spec)
    reference = forward(spec, case.weights, case.images)
    logits = mlx.float64_logits(spec, case.weights, case.images)
    demo.ran_with.append("mlx")
    demo.gap = gap(logits["float64"], reference)
    as_given = gap(logits["float64, input left to mx.array"], reference)
    demo.lines.append(f"quadrant, mlx vs the NumPy float64 reference: float32 "
                      f"{gap(logits['float32'], reference):.3g}, float64 on the CPU {demo.gap:.3g} (its "
                      f"float64 convolution keeps float32 precision), input left to mx.array {as_given:.3g}")
    gpu = logits["gpu"]
    demo.lines.append("mx.gpu: none on this machine" if gpu is None else f"mx.gpu with float64: {gpu}")
    return demo
