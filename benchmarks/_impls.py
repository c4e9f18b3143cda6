"""One implementation's forward timing, run as its own fresh process by benchmarks/peers.py:

    python benchmarks/_impls.py IMPL --threads N --batch B --spec SPEC --repeats R --out FILE

Threads are pinned (affinity + every library's variable) before anything numerical is imported,
exactly as `compare.py time`'s worker does. Every model is randomly initialised: nothing is
downloaded. Each timed call is synchronised (CPU torch is synchronous; JAX block_until_ready;
TF/Keras results are read back to NumPy).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.runtime.launch import pin_cpus, thread_env

Runner = tuple[Callable[[], Any], dict[str, Any]]  # (one synchronised call, notes)


# ---- fp32 GEMM rate, the roof every implementation is measured against ---------------------------
def matmul(framework: str, _spec: Any, _batch: int) -> Runner:
    n = 2048
    if framework == "torch":
        import torch

        a, b = torch.randn(n, n), torch.randn(n, n)
        return (lambda: torch.mm(a, b)), {"flops": 2 * n**3}
    if framework == "jax":
        import jax
        import jax.numpy as jnp

        a = jax.random.normal(jax.random.key(0), (n, n))
        f = jax.jit(lambda x, y: jnp.dot(x, y, precision="highest"))
        return (lambda: f(a, a).block_until_ready()), {"flops": 2 * n**3}
    import tensorflow as tf

    a = tf.random.normal((n, n))
    return (lambda: tf.linalg.matmul(a, a).numpy()), {"flops": 2 * n**3}


# ---- this project's ports -------------------------------------------------------------------------
def port(name: str, mode: str, spec: Any, batch: int) -> Runner:
    from ports import create_port
    from shared.core.inputs import probe_batch
    from shared.core.weights import init_weights

    p = create_port(name, spec, device="cpu")
    p.load(init_weights(spec, seed=0))
    x = p.prepare(probe_batch(spec, batch=batch))
    if mode == "eager":
        fn = lambda: p.to_numpy(p.forward(x))  # noqa: E731
    elif mode == "compiled":
        compiled = p.compiled_forward()
        fn = lambda: p.to_numpy(compiled(x))  # noqa: E731
    elif mode == "tf-function":  # Keras on TF in a graph without XLA (what keras-hub gets on CPU)
        import tensorflow as tf

        graph = tf.function(lambda t: p.model(t, training=False), jit_compile=False)
        fn = lambda: graph(x).numpy()  # noqa: E731
    else:
        raise SystemExit(f"unknown port mode {mode!r}")
    return fn, {}


# ---- the public peers --------------------------------------------------------------------------------
def timm_vit(mode: str, _spec: Any, batch: int) -> Runner:
    import numpy as np
    import timm
    import torch

    torch.set_float32_matmul_precision("highest")
    model = timm.create_model("vit_base_patch16_224", pretrained=False).eval()
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((batch, 3, 224, 224), dtype=np.float32))
    run = torch.compile(model) if mode == "compile" else model

    def call() -> Any:
        with torch.no_grad():
            return run(x)

    return call, {"attention": "F.scaled_dot_product_attention (fused)"}


def hf_flax_vit(_spec: Any, batch: int) -> Runner:
    import jax
    import numpy as np
    from transformers import FlaxViTModel, ViTConfig

    jax.config.update("jax_default_matmul_precision", "highest")
    model = FlaxViTModel(ViTConfig(), seed=0)  # random init; ViT-B/16 sizes are the defaults
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224), dtype=np.float32)
    f = jax.jit(lambda params, pixels: model(pixels, params=params).pooler_output)
    params = model.params
    return (lambda: f(params, x).block_until_ready()), {"attention": "explicit einsum softmax (flax linen)"}


def hf_tf_vit(_spec: Any, batch: int) -> Runner:
    import numpy as np
    import tensorflow as tf
    from transformers import TFViTModel, ViTConfig

    tf.config.experimental.enable_tensor_float_32_execution(False)
    model = TFViTModel(ViTConfig())
    x = tf.constant(np.random.default_rng(0).standard_normal((batch, 3, 224, 224), dtype=np.float32))
    f = tf.function(lambda pixels: model(pixel_values=pixels, training=False).pooler_output)
    return (lambda: f(x).numpy()), {"mode": "tf.function (no XLA)"}


def keras_hub_vit(_spec: Any, batch: int) -> Runner:
    import keras_hub
    import numpy as np

    backbone = keras_hub.models.ViTBackbone(image_shape=(224, 224, 3), patch_size=16, num_layers=12,
                                            num_heads=12, hidden_dim=768, mlp_dim=3072)
    model = keras_hub.models.ViTImageClassifier(backbone=backbone, num_classes=1000)
    x = np.random.default_rng(0).standard_normal((batch, 224, 224, 3), dtype=np.float32)
    return (lambda: model.predict_on_batch(x)), {"mode": "predict_on_batch (jit_compile auto)"}


def build(impl: str, spec: Any, batch: int) -> Runner:
    kind, _, rest = impl.partition(":")
    if kind == "matmul":
        return matmul(rest, spec, batch)
    if kind == "port":
        name, _, mode = rest.partition(":")
        return port(name, mode, spec, batch)
    if kind == "timm":
        return timm_vit(rest, spec, batch)
    if kind == "hf-flax":
        return hf_flax_vit(spec, batch)
    if kind == "hf-tf":
        return hf_tf_vit(spec, batch)
    if kind == "keras-hub":
        return keras_hub_vit(spec, batch)
    raise SystemExit(f"unknown implementation {impl!r}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("impl")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--spec", default="vit-b16")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.environ.update(thread_env(args.threads))
    pinning = pin_cpus(args.threads)

    from shared.core.presets import get_preset
    from shared.measure.stats import summarise

    spec = get_preset(args.spec)
    t0 = time.perf_counter()
    call, notes = build(args.impl, spec, args.batch)
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    for _ in range(max(0, args.warmup - 1)):
        call()
    samples = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    util = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    result = {"impl": args.impl, "setup_s": setup, "first_call_s": first, "samples": samples,
              **summarise(samples), "cpu_util": util, **pinning, **notes}
    Path(args.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
