"""One training step in MLX: mean cross-entropy from logits, gradients, global-norm clipping,
AdamW (`mlx.optimizers.AdamW`), with every default the frameworks disagree on pinned from the
`TrainSpec` (shared/core/train_spec.py).

Parallel text: every native port's train.py has the same names in the same order. The step runs
eagerly (`compiled = False`): MLX's AdamW reads epsilon as a Python attribute, which mx.compile
would freeze at the first trace, and the pinned epsilon changes at every update. (Eager in MLX
still builds a lazy graph; mx.eval runs it.)

Precision (shared/core/precision.py): MLX trains at float32 only. Its Port refuses the mixed
rungs (MLX has no mixed precision), and a pure rung is refused for training in every port
(shared.core.train_spec); the loss is taken on float32 logits all the same.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.optimizers as optim
import numpy as np
from mlx import nn
from mlx.utils import tree_flatten, tree_map, tree_unflatten

from ports.mlx import transfer
from ports.mlx.port import Port, call
from shared.core.spec import ModelSpec
from shared.core.train_spec import TrainSpec, check_training_precision, decayed
from shared.core.weights import Tensors

# Pins a test may switch off to show that it matters (tests/test_ports_mlx.py).
PIN_EPSILON_FORM = True  # MLX (bias_correction=True) adds eps to sqrt(v_hat): give it eps_at(t)
CLIP_EPSILON = 0.0  # optim.clip_grad_norm divides by norm + 1e-6; the spec's form has none
PIN_BIAS_CORRECTION = True  # MLX's AdamW default bias_correction=False is Adam without it
PIN_WEIGHT_DECAY = True  # False: MLX's AdamW default weight_decay=0.01, on every parameter
EVAL_BATCH = 1024  # evaluation batch: bounds memory, does not change the result


def canonical_sources(spec: ModelSpec) -> dict[str, list[str]]:
    """Native parameter path -> the canonical tensors it holds (always one here), as the port's
    own table links them."""
    return {link.native: list(link.canonical) for link in transfer.plan(spec).links}


def native_groups(port: Port, recipe: TrainSpec) -> tuple[set[str], set[str]]:
    """(decayed, not decayed) parameter paths, decided on canonical names (MLX's AdamW decays
    every parameter it is given, so the split is two optimizers under one MultiOptimizer)."""
    canonical = canonical_sources(port.spec)
    decay, keep = set(), set()
    for path, _ in tree_flatten(port.model.trainable_parameters()):
        (decay if any(decayed(recipe, c) for c in canonical[path]) else keep).add(path)
    return decay, keep


def clip_global_norm(grads: dict, max_norm: float) -> tuple[dict, mx.array]:
    """g *= min(1, max / ||g||) over all gradients together; returns (clipped, pre-clip norm).
    Not optim.clip_grad_norm, which divides by ||g|| + 1e-6."""
    norm = mx.sqrt(sum(mx.sum(mx.square(g)) for _, g in tree_flatten(grads)))
    scale = mx.minimum(max_norm / (norm + CLIP_EPSILON), 1.0)
    return tree_map(lambda g: g * scale, grads), norm


class Trainer:
    compiled = False  # eager; see the module docstring

    def __init__(self, port: Port, recipe: TrainSpec) -> None:
        check_training_precision(port.precision)
        self.port, self.recipe = port, recipe
        self.model = port.model
        self.updates = 0  # optimizer updates taken (Adam's t after the update)
        decay, _keep = native_groups(port, recipe)
        # Every argument given: MLX's defaults are eps 1e-8, weight_decay 1e-2 and
        # bias_correction=False (Adam without bias correction: a different update).
        pinned = {"bias_correction": True} if PIN_BIAS_CORRECTION else {}
        decays = [{"weight_decay": wd} for wd in (recipe.weight_decay, 0.0)] if PIN_WEIGHT_DECAY else [{}, {}]
        self.optimizers = [
            optim.AdamW(learning_rate=recipe.learning_rate, betas=[recipe.beta1, recipe.beta2],
                        eps=recipe.eps_at(1), **decay, **pinned)
            for decay in decays
        ]
        self.optimizer = optim.MultiOptimizer(self.optimizers, [lambda path, _: path in decay])
        self.loss_and_grad = nn.value_and_grad(self.model, _mean_cross_entropy)

    # ---- the contract the training loop and the timing harness use -------------------------
    def prepare_batch(self, images: np.ndarray, labels: np.ndarray) -> tuple[mx.array, mx.array]:
        target = mx.array(np.asarray(labels, dtype=np.int32))
        return self.port.prepare(images), target

    def step(self, batch: tuple[mx.array, mx.array]) -> mx.array:
        """One update: forward in train mode (at the port's rung), mean CE from float32 logits,
        gradients (of the scaled loss under float16), clipping, AdamW."""
        x, y = batch
        self.model.train()
        loss, grads = self.loss_and_grad(self.model, x, y)
        if self.recipe.clip_global_norm is not None:
            grads, _ = clip_global_norm(grads, self.recipe.clip_global_norm)
        if PIN_EPSILON_FORM:  # Keras' epsilon hat, expressed in MLX's placement
            for opt in self.optimizers:
                opt.eps = self.recipe.eps_at(self.updates + 1)
        self.optimizer.update(self.model, grads)
        mx.eval(loss, self.model.parameters(), self.optimizer.state)
        self.updates += 1
        return loss

    def loss_value(self, native_loss: mx.array) -> float:
        return float(native_loss)

    def loss_scale(self) -> float:
        """The loss scale of the next step (1.0 when the rung needs none)."""
        return 1.0  # MLX trains at float32 only

    def set_learning_rate(self, lr: float) -> None:
        for opt in self.optimizers:
            opt.learning_rate = float(lr)

    def evaluate(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
        """(mean cross-entropy, accuracy) in eval mode, dropout off."""
        self.model.eval()
        total_loss, correct = 0.0, 0
        for start in range(0, len(labels), EVAL_BATCH):
            x, y = self.prepare_batch(images[start:start + EVAL_BATCH], labels[start:start + EVAL_BATCH])
            logits = call(self.model, x).astype(mx.float32)
            total_loss += float(nn.losses.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(axis=-1) == y).sum())
        return total_loss / len(labels), correct / len(labels)

    # ---- checkpoints: parameters, Adam moments and the update count, canonical layout --------
    def reseed(self, seed: int) -> None:
        """Restart the dropout stream (called at every epoch start, so a resumed run matches)."""
        mx.random.seed(seed)

    def _moments(self, key: str) -> dict:
        """The Adam moment `key` ('m' or 'v') of every parameter, as a parameter-shaped tree;
        zeros before the first update."""
        flat = dict(tree_flatten(self.model.trainable_parameters()))
        for opt in self.optimizers:
            for path, value in tree_flatten(opt.state):
                if path.endswith("." + key) and path[: -len(key) - 1] in flat:
                    flat[path[: -len(key) - 1]] = value
        moments = {p: (v if self.updates else mx.zeros_like(v)) for p, v in flat.items()}
        return tree_unflatten(list(moments.items()))

    def export_state(self) -> tuple[Tensors, Tensors, int]:
        """(first moments, second moments, updates) in the canonical layout."""
        return (transfer.export_gradients(self.model, self._moments("m")),
                transfer.export_gradients(self.model, self._moments("v")), self.updates)

    def load_state(self, first: Tensors, second: Tensors, updates: int) -> None:
        native_m = transfer.plan(self.port.spec).to_native(first)
        native_v = transfer.plan(self.port.spec).to_native(second)
        self.optimizer.init(self.model.trainable_parameters())
        for opt in self.optimizers:
            flat = [(path, value) for path, value in tree_flatten(opt.state)
                    if not path.endswith((".m", ".v"))]
            paths = {path[:-2] for path, _ in tree_flatten(opt.state) if path.endswith(".m")}
            flat += [(f"{p}.m", mx.array(native_m[p])) for p in paths]
            flat += [(f"{p}.v", mx.array(native_v[p])) for p in paths]
            state = dict(tree_unflatten(flat))
            state["step"] = mx.array(updates, dtype=mx.uint64)
            opt.state = state
        self.updates = updates


def _mean_cross_entropy(model: nn.Module, x: mx.array, y: mx.array) -> mx.array:
    # nn.losses.cross_entropy defaults to reduction='none': the mean is explicit.
    return nn.losses.cross_entropy(call(model, x).astype(mx.float32), y, reduction="mean")  # in float32
