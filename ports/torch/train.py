"""One training step in PyTorch: mean cross-entropy from logits, gradients, global-norm clipping,
AdamW (`torch.optim.AdamW`), with every default the frameworks disagree on pinned from the
`TrainSpec` (shared/core/train_spec.py).

Parallel text: every native port's train.py has the same names in the same order. The step runs
eagerly (`compiled = False`): torch.compile of a whole optimizer step is possible but recompiles
whenever the learning rate or epsilon changes, and eager is what the archive ran.

Precision (shared/core/precision.py): the forward runs under the port's autocast (float32 when
the rung is float32), the loss is taken on float32 logits, and AdamW updates the float32 master
parameters. float16-mixed scales the loss with torch's own `torch.amp.GradScaler` and unscales
before the global-norm clip; a pure rung is refused (shared.core.train_spec).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from ports.torch import transfer
from ports.torch.port import Port, call
from shared.core.spec import ModelSpec
from shared.core.train_spec import TrainSpec, check_training_precision, decayed
from shared.core.weights import Tensors

# Pins a test may switch off to show that it matters (tests/test_training_parity.py).
PIN_EPSILON_FORM = True  # torch adds eps to sqrt(v_hat): give it Keras' eps / sqrt(1 - b2^t)
CLIP_EPSILON = 0.0  # torch's clip_grad_norm_ divides by norm + 1e-6; the spec's form has none
EVAL_BATCH = 1024  # evaluation batch: bounds memory, does not change the result
# float16 loss scaling, pinned to Keras' LossScaleOptimizer (torch's GradScaler starts at 2^16).
LOSS_SCALE_INITIAL = 2.0**15
LOSS_SCALE_GROWTH_STEPS = 2000  # both frameworks' default: double after 2000 finite steps


def canonical_sources(spec: ModelSpec) -> dict[str, list[str]]:
    """Native parameter name -> the canonical tensors packed into it (qkv packs three), as the
    port's own table links them."""
    return {link.native: list(link.canonical) for link in transfer.plan(spec).links}


def native_groups(port: Port, recipe: TrainSpec) -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]]:
    """(decayed, not decayed) parameters, decided on canonical names (torch decays every
    parameter it is given, so the split is two param groups)."""
    canonical = canonical_sources(port.spec)
    decay, keep = [], []
    for name, param in port.model.named_parameters():
        (decay if any(decayed(recipe, c) for c in canonical[name]) else keep).append(param)
    return decay, keep


def clip_global_norm(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """g *= min(1, max / ||g||) over all gradients together; returns the pre-clip norm.
    Not clip_grad_norm_, which divides by ||g|| + 1e-6 (relative 5e-4 at a norm of 2e-3)."""
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    scale = torch.clamp(max_norm / (norm + CLIP_EPSILON), max=1.0)
    for g in grads:
        g.mul_(scale)
    return norm


class Trainer:
    compiled = False  # eager; see the module docstring

    def __init__(self, port: Port, recipe: TrainSpec) -> None:
        check_training_precision(port.precision)
        self.port, self.recipe = port, recipe
        self.model = port.model
        self.updates = 0  # optimizer updates taken (Adam's t after the update)
        decay, keep = native_groups(port, recipe)
        groups = [{"params": decay, "weight_decay": recipe.weight_decay},
                  {"params": keep, "weight_decay": 0.0}]
        # Every argument given: torch's defaults are eps 1e-8 and weight_decay 1e-2.
        self.optimizer = torch.optim.AdamW(
            [g for g in groups if g["params"]], lr=recipe.learning_rate,
            betas=(recipe.beta1, recipe.beta2), eps=recipe.eps_at(1),
            weight_decay=recipe.weight_decay, amsgrad=False, maximize=False,
        )
        self.params = [p for g in self.optimizer.param_groups for p in g["params"]]
        # Halves the scale and skips the update on a non-finite gradient, as Keras' does.
        self.scaler = torch.amp.GradScaler(
            port.device.type, init_scale=LOSS_SCALE_INITIAL, growth_factor=2.0, backoff_factor=0.5,
            growth_interval=LOSS_SCALE_GROWTH_STEPS, enabled=port.precision.dtype == "float16")
        self._last_scale = self.loss_scale()

    # ---- the contract the training loop and the timing harness use -------------------------
    def prepare_batch(self, images: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        target = torch.from_numpy(np.asarray(labels, dtype=np.int64)).to(self.port.device)
        return self.port.prepare(images), target

    def step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """One update: forward in train mode (at the port's rung), mean CE from float32 logits,
        gradients (of the scaled loss under float16), clipping, AdamW."""
        x, y = batch
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with self.port.autocast():
            logits = call(self.model, x)
        loss = F.cross_entropy(logits.float(), y, reduction="mean")  # the loss in float32
        self.scaler.scale(loss).backward()  # the loss as it is when scaling is off
        self.scaler.unscale_(self.optimizer)  # before the clip: it bounds the true gradient
        if self.recipe.clip_global_norm is not None:
            clip_global_norm([p.grad for p in self.params if p.grad is not None],
                             self.recipe.clip_global_norm)
        if PIN_EPSILON_FORM:  # Keras' epsilon hat, expressed in torch's placement
            for group in self.optimizer.param_groups:
                group["eps"] = self.recipe.eps_at(self.updates + 1)
        self.scaler.step(self.optimizer)  # skipped when a gradient is not finite
        self.scaler.update()
        scale = self.loss_scale()  # 1.0 and no device sync when scaling is off
        if scale >= self._last_scale:  # a skipped step halved it and took no update: Adam's t stays
            self.updates += 1
        self._last_scale = scale
        return loss.detach()

    def loss_value(self, native_loss: torch.Tensor) -> float:
        return float(native_loss.cpu())

    def loss_scale(self) -> float:
        """The loss scale of the next step (1.0 when the rung needs none)."""
        return float(self.scaler.get_scale()) if self.scaler.is_enabled() else 1.0

    def set_learning_rate(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = float(lr)

    def evaluate(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
        """(mean cross-entropy, accuracy) in eval mode, dropout off."""
        self.model.eval()
        total_loss, correct = 0.0, 0
        with torch.no_grad():
            for start in range(0, len(labels), EVAL_BATCH):
                x, y = self.prepare_batch(images[start:start + EVAL_BATCH], labels[start:start + EVAL_BATCH])
                with self.port.autocast():
                    logits = call(self.model, x).float()
                total_loss += float(F.cross_entropy(logits, y, reduction="sum"))
                correct += int((logits.argmax(dim=-1) == y).sum())
        return total_loss / len(labels), correct / len(labels)

    # ---- checkpoints: parameters, Adam moments and the update count, canonical layout --------
    def reseed(self, seed: int) -> None:
        """Restart the dropout stream (called at every epoch start, so a resumed run matches)."""
        torch.manual_seed(seed)

    def export_state(self) -> tuple[Tensors, Tensors, int]:
        """(first moments, second moments, updates) in the canonical layout."""
        native_m, native_v = {}, {}
        for name, param in self.model.named_parameters():
            state = self.optimizer.state.get(param, {})
            native_m[name] = _numpy(state.get("exp_avg"), param)
            native_v[name] = _numpy(state.get("exp_avg_sq"), param)
        spec = self.port.spec
        return transfer.from_native(spec, native_m), transfer.from_native(spec, native_v), self.updates

    def load_state(self, first: Tensors, second: Tensors, updates: int) -> None:
        native_m = transfer.plan(self.port.spec).to_native(first)
        native_v = transfer.plan(self.port.spec).to_native(second)
        for name, param in self.model.named_parameters():
            self.optimizer.state[param] = {
                "step": torch.tensor(float(updates)),
                "exp_avg": torch.tensor(native_m[name], device=param.device),
                "exp_avg_sq": torch.tensor(native_v[name], device=param.device),
            }
        self.updates = updates


def _numpy(value: torch.Tensor | None, like: torch.Tensor) -> np.ndarray:
    if value is None:  # before the first update the moments are zero
        return np.zeros(tuple(like.shape), dtype=np.float32)
    return value.detach().cpu().numpy()
