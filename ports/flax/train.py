"""One training step in Flax (flax.nnx + optax): mean cross-entropy from logits, gradients,
global-norm clipping, AdamW (`optax.adamw` after `optax.clip_by_global_norm`), with every default
the frameworks disagree on pinned from the `TrainSpec` (shared/core/train_spec.py).

Parallel text: every native port's train.py has the same names in the same order. The step is one
`nnx.jit` function (`compiled = True`); the learning rate lives in the optimizer state
(`optax.inject_hyperparams`), so setting it does not retrace.

Precision (shared/core/precision.py): the Port built the model at the rung (mixed: a compute
`dtype` on the compute layers, float32 `param_dtype`); the loss is taken on float32 logits and
optax updates the float32 parameters. float16-mixed is not offered: optax has no loss scaling
(DeepMind's `jmp` has one, and is not a dependency here), and float16 gradients unscaled underflow.
A pure rung is refused (shared.core.train_spec).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from ports.flax import transfer
from ports.flax.port import Port, call
from shared.core.spec import ModelSpec
from shared.core.train_spec import TrainSpec, check_training_precision, decayed
from shared.core.weights import Tensors
from shared.errors import FrameworkUnavailable

# Pins a test may switch off to show that it matters (tests/test_training_parity.py).
PIN_EPSILON_FORM = True  # optax adds eps to sqrt(v_hat): give it Keras' eps / sqrt(1 - b2^t)
EVAL_BATCH = 1024  # evaluation batch: bounds memory, does not change the result

Path = tuple[object, ...]


def canonical_sources(spec: ModelSpec, model: nnx.Module) -> dict[Path, list[str]]:
    """Graph path of each nnx.Param -> the canonical tensors it holds (always one)."""
    by_id = {id(param): name for name, param in transfer.bindings(model, spec).items()}
    return {path: [by_id[id(node)]] for path, node in nnx.iter_graph(model) if id(node) in by_id}


def native_groups(port: Port, recipe: TrainSpec) -> tuple[set[Path], set[Path]]:
    """(decayed, not decayed) parameter paths, decided on canonical names (optax.adamw decays
    every leaf unless given a mask)."""
    canonical = canonical_sources(port.spec, port.model)
    decay, keep = set(), set()
    for path, names in canonical.items():
        (decay if any(decayed(recipe, c) for c in names) else keep).add(path)
    return decay, keep


def decay_mask(decay: set[Path]):
    """optax mask: True where a leaf's path (DictKeys of the parameter state) is decayed."""
    def mask(params: nnx.State) -> nnx.State:
        def leaf(key_path: tuple[object, ...], _: object) -> bool:
            path = tuple(k.key for k in key_path if isinstance(k, jax.tree_util.DictKey))
            return path in decay

        return jax.tree_util.tree_map_with_path(leaf, params)

    return mask


_TRANSFORMS: dict[tuple[object, ...], optax.GradientTransformation] = {}


def transform(recipe: TrainSpec, decay: frozenset[Path]) -> optax.GradientTransformation:
    """clip, then AdamW. Cached per (recipe, mask, pin): the optimizer's graph holds the
    transformation as a static attribute, so an equal object lets nnx.jit reuse the compiled
    step for the next seed instead of compiling again."""
    key = (recipe.replace(name="", seed=0, max_epochs=1), decay, PIN_EPSILON_FORM)
    if key in _TRANSFORMS:
        return _TRANSFORMS[key]
    b2, eps = recipe.beta2, recipe.epsilon
    # optax's eps is added to sqrt(v_hat); Keras' epsilon hat at update t equals
    # eps / sqrt(1 - b2^t) there (31.6 eps at t = 1). inject_hyperparams evaluates a callable on the
    # count of updates already taken, so update t sees count t - 1.
    eps_schedule = (lambda count: eps / jnp.sqrt(1.0 - b2 ** (count + 1.0))) if PIN_EPSILON_FORM else eps
    # static_args: inject_hyperparams calls every callable argument as a schedule of the
    # count, which would turn the mask function into a scalar False (nothing decayed).
    adamw = optax.inject_hyperparams(optax.adamw, static_args=("mask",))(
        learning_rate=recipe.learning_rate, b1=recipe.beta1, b2=b2, eps=eps_schedule,
        eps_root=0.0, weight_decay=recipe.weight_decay, mask=decay_mask(set(decay)), nesterov=False,
    )
    # clip_by_global_norm is g * min(1, clip / ||g||) with no epsilon: the spec's form.
    clip = (optax.clip_by_global_norm(recipe.clip_global_norm) if recipe.clip_global_norm
            else optax.identity())
    _TRANSFORMS[key] = optax.chain(clip, adamw)
    return _TRANSFORMS[key]


@nnx.jit
def train_step(model: nnx.Module, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array) -> jax.Array:
    def loss_fn(model: nnx.Module) -> jax.Array:
        # optax returns per-example losses: the mean is explicit, as torch's default.
        logits = call(model, x).astype(jnp.float32)  # the loss in float32
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)  # clip, decay, Adam: one update
    return loss


class Trainer:
    compiled = True  # nnx.jit; see the module docstring

    def __init__(self, port: Port, recipe: TrainSpec) -> None:
        check_training_precision(port.precision)
        if port.precision.dtype == "float16":
            raise FrameworkUnavailable(
                f"flax: training at {port.precision.rung} is not offered: optax has no loss scaling "
                "(float16 gradients underflow without it; DeepMind's jmp has one, not a dependency "
                "here); train at bfloat16-mixed, whose float32 exponent range needs none")
        self.port, self.recipe = port, recipe
        self.model = port.model
        decay, _keep = native_groups(port, recipe)
        with jax.default_device(port.device):
            self.optimizer = nnx.Optimizer(self.model, transform(recipe, frozenset(decay)), wrt=nnx.Param)
        self._commit()
        self._step = train_step

    def _commit(self) -> None:
        """Commit every array to the device: freshly loaded ones are uncommitted, the step's
        outputs are committed, and XLA would otherwise compile the step again (~15 s here)."""
        both = (self.model, self.optimizer)
        nnx.update(both, jax.device_put(nnx.state(both), self.port.device))

    @property
    def updates(self) -> int:
        return int(self.optimizer.step.value)

    # ---- the contract the training loop and the timing harness use -------------------------
    def prepare_batch(self, images: np.ndarray, labels: np.ndarray) -> tuple[jax.Array, jax.Array]:
        target = jax.device_put(np.asarray(labels, dtype=np.int32), self.port.device)
        return self.port.prepare(images), target

    def step(self, batch: tuple[jax.Array, jax.Array]) -> jax.Array:
        """One update: forward in train mode (at the port's rung), mean CE from float32 logits,
        gradients (of the scaled loss under float16), clipping, AdamW."""
        x, y = batch
        self.model.train()  # dropout on
        return self._step(self.model, self.optimizer, x, y)

    def loss_value(self, native_loss: jax.Array) -> float:
        return float(native_loss)

    def loss_scale(self) -> float:
        """The loss scale of the next step (1.0 when the rung needs none)."""
        return 1.0  # float16, the one rung that needs a scale, is not offered here

    def set_learning_rate(self, lr: float) -> None:
        # device_put, not jnp.asarray: an uncommitted scalar would recompile the step.
        lr_array = jax.device_put(np.float32(lr), self.port.device)
        self.optimizer.opt_state[1].hyperparams["learning_rate"].value = lr_array

    def evaluate(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
        """(mean cross-entropy, accuracy) in eval mode, dropout off."""
        self.model.eval()
        total_loss, correct = 0.0, 0
        for start in range(0, len(labels), EVAL_BATCH):
            x, y = self.prepare_batch(images[start:start + EVAL_BATCH], labels[start:start + EVAL_BATCH])
            logits = call(self.model, x).astype(jnp.float32)
            total_loss += float(optax.softmax_cross_entropy_with_integer_labels(logits, y).sum())
            correct += int((logits.argmax(axis=-1) == y).sum())
        return total_loss / len(labels), correct / len(labels)

    # ---- checkpoints: parameters, Adam moments and the update count, canonical layout --------
    def reseed(self, seed: int) -> None:
        """Restart the dropout stream (called at every epoch start, so a resumed run matches)."""
        nnx.reseed(self.model, dropout=seed)

    def _adam_state(self) -> optax.ScaleByAdamState:
        inner = self.optimizer.opt_state[1].inner_state  # chain(clip, inject(adamw)) -> adamw
        return next(s for s in inner if isinstance(s, optax.ScaleByAdamState))

    def export_state(self) -> tuple[Tensors, Tensors, int]:
        """(first moments, second moments, updates) in the canonical layout."""
        adam = self._adam_state()
        return (transfer.export_gradients(self.model, _plain(adam.mu)),
                transfer.export_gradients(self.model, _plain(adam.nu)), self.updates)

    def load_state(self, first: Tensors, second: Tensors, updates: int) -> None:
        adam = self._adam_state()
        paths = canonical_sources(self.port.spec, self.model)
        for moments, tensors in ((adam.mu, first), (adam.nu, second)):
            flat = dict(nnx.to_flat_state(moments)) if hasattr(nnx, "to_flat_state") else None
            for path, names in paths.items():
                target = flat[path] if flat is not None else _lookup(moments, path)
                target.value = jnp.asarray(tensors[names[0]])
        count = jnp.asarray(updates, dtype=jnp.int32)
        self.optimizer.step.value = count.astype(self.optimizer.step.value.dtype)
        injected = self.optimizer.opt_state[1]
        injected.count.value = count
        for schedule_state in injected.hyperparams_states.values():  # the epsilon schedule's own count
            schedule_state.count.value = count
        adam.count.value = count
        self._commit()  # the port's load() and these assignments leave uncommitted arrays


def _plain(moments: nnx.State) -> nnx.State:
    """The optimizer's moment state with its Opt* variables read as plain arrays."""
    return jax.tree.map(lambda v: v.value if isinstance(v, nnx.Variable) else v, moments,
                        is_leaf=lambda v: isinstance(v, nnx.Variable))


def _lookup(state: nnx.State, path: Path) -> nnx.Variable:
    node = state
    for key in path:
        node = node[key]
    return node
