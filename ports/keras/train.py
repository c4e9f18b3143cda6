"""One training step in Keras 3: mean cross-entropy from logits, gradients, global-norm clipping,
AdamW (`keras.optimizers.AdamW`), with every default the frameworks disagree on pinned from
the `TrainSpec` (shared/core/train_spec.py).

Parallel text: every native port's train.py has the same names in the same order. The step is one
`tf.function` (`compiled = True`): gradient tape, clipping, decay and the Adam update run as one
graph; the learning rate is an optimizer variable, so setting it does not retrace. Needs the
TensorFlow backend (Keras has no backend-neutral gradient API).

Precision (shared/core/precision.py): the Port built the model at the rung (mixed: the
`mixed_<dtype>` policy on the compute layers, float32 variables); the loss is taken on float32
logits and AdamW updates the float32 variables. float16-mixed wraps AdamW in Keras' own
`keras.optimizers.LossScaleOptimizer`, which takes no clipping option of its own: the clip stays
on the inner AdamW, which applies it to the gradients the wrapper has already unscaled (the
order torch's GradScaler.unscale_ gives). A pure rung is refused (shared.core.train_spec).
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from ports.keras import transfer
from ports.keras.port import BACKEND, Port, call
from shared.core.spec import ModelSpec
from shared.core.train_spec import TrainSpec, check_training_precision, decayed
from shared.core.weights import Tensors
from shared.errors import FrameworkUnavailable

# Pins a test may switch off to show that it matters (tests/test_training_parity.py).
FROM_LOGITS = True  # SparseCategoricalCrossentropy defaults to from_logits=False
USE_GLOBAL_CLIPNORM = True  # `clipnorm` would clip each variable on its own
EVAL_BATCH = 1024  # evaluation batch: bounds memory, does not change the result
# float16 loss scaling: LossScaleOptimizer's own defaults, written out (torch's pins to these).
LOSS_SCALE_INITIAL = 2.0**15
LOSS_SCALE_GROWTH_STEPS = 2000


def canonical_sources(spec: ModelSpec, model: keras.Model) -> dict[int, list[str]]:
    """id(variable) -> the canonical tensors it holds (always one: Keras' layout is canonical)."""
    return {id(v): [name] for name, v in transfer.bindings(model, spec).items()}


def native_groups(port: Port, recipe: TrainSpec) -> tuple[list[keras.Variable], list[keras.Variable]]:
    """(decayed, not decayed) variables, decided on canonical names (Keras decays every variable
    unless it is excluded before the optimizer is built)."""
    canonical = canonical_sources(port.spec, port.model)
    decay, keep = [], []
    for variable in port.model.trainable_variables:
        (decay if any(decayed(recipe, c) for c in canonical[id(variable)]) else keep).append(variable)
    return decay, keep


def clip_options(recipe: TrainSpec) -> dict[str, float | None]:
    """global_clipnorm is g * min(1, clip / ||g||) with no epsilon: the spec's form as it is."""
    if USE_GLOBAL_CLIPNORM:
        return {"clipnorm": None, "clipvalue": None, "global_clipnorm": recipe.clip_global_norm}
    return {"clipnorm": recipe.clip_global_norm, "clipvalue": None, "global_clipnorm": None}


class Trainer:
    compiled = True  # tf.function; see the module docstring

    def __init__(self, port: Port, recipe: TrainSpec) -> None:
        check_training_precision(port.precision)
        if BACKEND != "tensorflow":
            raise FrameworkUnavailable(
                f"training the Keras port needs KERAS_BACKEND=tensorflow, not {BACKEND!r}")
        import tensorflow as tf

        self.port, self.recipe = port, recipe
        self.model = port.model
        decay, keep = native_groups(port, recipe)
        # Every argument given: Keras' defaults are eps 1e-7 and weight_decay 0.004.
        # Its epsilon is the spec's "epsilon hat" form as it is, so no per-update value is needed.
        self.optimizer = keras.optimizers.AdamW(
            learning_rate=recipe.learning_rate, weight_decay=recipe.weight_decay,
            beta_1=recipe.beta1, beta_2=recipe.beta2, epsilon=recipe.epsilon, amsgrad=False,
            use_ema=False, loss_scale_factor=None, gradient_accumulation_steps=None,
            **clip_options(recipe),
        )
        self.optimizer.exclude_from_weight_decay(var_list=keep)  # before build, or it is ignored
        self.params = list(self.model.trainable_variables)
        # The optimizer the step applies through: under float16 the loss-scaling wrapper, which
        # unscales, skips a non-finite step (halving the scale) and else calls AdamW's apply.
        self.applier = self.optimizer
        if port.precision.dtype == "float16":
            self.applier = keras.optimizers.LossScaleOptimizer(
                self.optimizer, initial_scale=LOSS_SCALE_INITIAL,
                dynamic_growth_steps=LOSS_SCALE_GROWTH_STEPS)
        self.applier.build(self.params)  # the wrapper builds AdamW too
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(
            from_logits=FROM_LOGITS, reduction="sum_over_batch_size"  # the batch mean
        )

        def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = ops.cast(call(self.model, x, training=True), "float32")  # the loss in float32
                loss = self.loss_fn(y, logits)
                scaled = self.applier.scale_loss(loss)  # the loss as it is without the wrapper
            grads = tape.gradient(scaled, self.params)
            self.applier.apply(grads, self.params)  # (unscale,) clip, decay, Adam: one update
            return loss

        self._step = tf.function(train_step, jit_compile=False)
        assert len(decay) + len(keep) == len(self.params)

    @property
    def updates(self) -> int:
        return int(ops.convert_to_numpy(self.optimizer.iterations))

    # ---- the contract the training loop and the timing harness use -------------------------
    def prepare_batch(self, images: np.ndarray, labels: np.ndarray) -> tuple[object, object]:
        with keras.device(self.port.device):
            target = ops.convert_to_tensor(np.asarray(labels, dtype=np.int32))
        return self.port.prepare(images), target

    def step(self, batch: tuple[object, object]) -> object:
        """One update: forward in train mode (at the port's rung), mean CE from float32 logits,
        gradients (of the scaled loss under float16), clipping, AdamW."""
        x, y = batch
        with keras.device(self.port.device):
            return self._step(x, y)

    def loss_value(self, native_loss: object) -> float:
        return float(ops.convert_to_numpy(native_loss))

    def loss_scale(self) -> float:
        """The loss scale of the next step (1.0 when the rung needs none)."""
        if self.applier is self.optimizer:
            return 1.0
        return float(ops.convert_to_numpy(self.applier.dynamic_scale))

    def set_learning_rate(self, lr: float) -> None:
        self.optimizer.learning_rate = float(lr)  # assigns the optimizer's lr variable

    def evaluate(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
        """(mean cross-entropy, accuracy) in eval mode, dropout off."""
        total_loss, correct = 0.0, 0
        for start in range(0, len(labels), EVAL_BATCH):
            x, y = self.prepare_batch(images[start:start + EVAL_BATCH], labels[start:start + EVAL_BATCH])
            logits = ops.cast(call(self.model, x), "float32")
            per_example = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
            total_loss += float(ops.convert_to_numpy(ops.sum(per_example)))
            predicted = np.argmax(self.port.to_numpy(logits), axis=-1)
            correct += int(np.sum(predicted == labels[start:start + EVAL_BATCH]))
        return total_loss / len(labels), correct / len(labels)

    # ---- checkpoints: parameters, Adam moments and the update count, canonical layout --------
    def reseed(self, seed: int) -> None:
        """Restart the dropout streams (called at every epoch start, so a resumed run matches)."""
        generators = [g for layer in self.model._flatten_layers() for g in layer._seed_generators]
        for k, generator in enumerate(generators):
            generator.state.assign(np.array([(seed * 1009 + k) % 2**31, 0], dtype="uint32"))

    def export_state(self) -> tuple[Tensors, Tensors, int]:
        """(first moments, second moments, updates) in the canonical layout."""
        first, second = {}, {}
        for name, variable in transfer.bindings(self.model, self.port.spec).items():
            index = self.optimizer._get_variable_index(variable)  # Keras keeps no public map
            first[name] = np.asarray(ops.convert_to_numpy(self.optimizer._momentums[index]))
            second[name] = np.asarray(ops.convert_to_numpy(self.optimizer._velocities[index]))
        return first, second, self.updates

    def load_state(self, first: Tensors, second: Tensors, updates: int) -> None:
        for name, variable in transfer.bindings(self.model, self.port.spec).items():
            index = self.optimizer._get_variable_index(variable)
            self.optimizer._momentums[index].assign(first[name])
            self.optimizer._velocities[index].assign(second[name])
        self.optimizer.iterations.assign(updates)
