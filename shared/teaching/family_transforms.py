"""The catalogue's alternatives for the newer families' conventions (LayerScale, registers, the
gated MLP, the attention pool, QuickGELU, the distillation head), in the style of
`shared.teaching.transforms`: each turns one run of the reference into what a port that made the
family's known slip computes, or None when it does not apply to that case.
"""

from __future__ import annotations

import numpy as np

from shared.teaching.transforms import Case, Transform, with_spec, with_weights


# ---- the newer families' conventions (LayerScale, registers, SwiGLU, MAP pool, distillation) --
def layer_scale_dropped(case: Case) -> Case | None:
    """Every LayerScale gamma one: what a loader that ignores `ls1`/`ls2` (timm) or
    `layer_scale1.lambda1` (Transformers) computes with a LayerScale module left at its init of 1
    (the public MLX DINOv2 port)."""
    if not case.spec.layer_scale:
        return None
    return with_weights(case, **{name: np.ones_like(value) for name, value in case.weights.items()
                                  if name.endswith((".ls1.gamma", ".ls2.gamma"))})


def pool_qkv_biases_dropped(case: Case) -> Case | None:
    """The attention pool's query/key/value biases off (its output bias kept): AlgoPerf's PyTorch
    MAP head against its JAX one, which has them."""
    s = case.spec
    if s.pooling != "map" or not s.pool_qkv_bias:
        return None
    weights = {k: v for k, v in case.weights.items()
               if k not in {f"pool.attn.{proj}.bias" for proj in ("query", "key", "value")}}
    return Case(s.replace(pool_qkv_bias=False), weights, case.images)


def quick_gelu_swapped(case: Case) -> Case | None:
    """QuickGELU x*sigmoid(1.702x) <-> exact GELU in the MLPs: OpenAI CLIP's activation run as
    GELU (a CLIP config left at nn.GELU), or an exact-GELU model run with MLX's
    gelu_fast_approx (nn.GELU(approx='fast')), which is QuickGELU."""
    swap = {"quick_gelu": "gelu", "gelu": "quick_gelu"}
    if case.spec.activation not in swap:
        return None
    return with_spec(case, activation=swap[case.spec.activation])


def gated_halves_swapped(case: Case) -> Case | None:
    """The gated MLP's two halves exchanged: act(fc1 x) * gate x instead of act(gate x) * fc1 x.
    A packed fc1 (timm's SwiGLUPacked, DINOv2's w12, Transformers' weights_in) is gate first;
    timm's GluMlp default (gate_last=True) reads the gate from the second half."""
    s = case.spec
    if s.mlp != "gated":
        return None
    swapped: dict[str, np.ndarray] = {}
    for i in range(s.depth):
        p = f"blocks.{i}.mlp."
        for part in ("kernel", "bias"):
            swapped[f"{p}gate.{part}"] = case.weights[f"{p}fc1.{part}"]
            swapped[f"{p}fc1.{part}"] = case.weights[f"{p}gate.{part}"]
    return with_weights(case, **swapped)


def registers_in_mean(case: Case) -> Case | None:
    """Mean pooling over the registers and the patches (a port that skips only the class token).
    The same function as `flatten` pooling whose first head kernel repeats the pinned one / (R + N)
    on every register and patch row and is zero on the class (and distillation) token's: the
    reference runs that. Not expressible when the final norm sits after pooling or there is no
    head layer to carry the weighting."""
    s = case.spec
    if s.pooling != "mean" or not s.registers or s.final_norm == "pooled":
        return None
    if not (s.head_hidden or s.num_classes):
        return None
    name = "head.hidden.0.kernel" if s.head_hidden else "head.out.kernel"
    kernel = case.weights[name]
    skipped = s.derived.prefix_tokens - s.registers  # class and distillation tokens
    averaged = s.derived.seq_len - skipped
    rows = np.concatenate([np.zeros((skipped, *kernel.shape)),
                           np.broadcast_to(kernel / averaged, (averaged, *kernel.shape))])
    flat = rows.reshape(s.derived.seq_len * s.dim, kernel.shape[1]).astype(np.float32)
    return Case(s.replace(pooling="flatten"), {**case.weights, name: flat}, case.images)


def register_rows_dropped(case: Case) -> Case | None:
    """A table with register rows (timm without no_embed_class) loaded by a port whose registers
    get no position (DINOv2's, Transformers'): the register rows are cut, the patches keep theirs."""
    s = case.spec
    if not s.pos_embed_register_rows:
        return None
    table = case.weights["pos_embed"]
    first = int(s.class_token) + int(s.distill_token) if s.pos_embed_class_row else 0  # first register row
    kept = np.concatenate([table[:first], table[first + s.registers:]])
    pos_rows = None if s.pos_rows is None else s.pos_rows - s.registers
    spec = s.replace(pos_embed_register_rows=False, pos_rows=pos_rows)
    return Case(spec, {**case.weights, "pos_embed": np.ascontiguousarray(kept)}, case.images)


def register_rows_read_as_patches(case: Case) -> Case | None:
    """A table with register rows read by a port that gives registers none and takes the table's
    first rows (this spec's own convention for a larger table): the patches get the register rows
    and their neighbours', shifted by the number of registers."""
    s = case.spec
    if not s.pos_embed_register_rows:
        return None
    return with_spec(case, pos_embed_register_rows=False, pos_rows=s.derived.pos_rows_total)


def distilled_head_alone(which: str) -> Transform:
    """A distilled model read through one head only (`which`: "class" or "distillation"), not
    the mean of both: Transformers' DeiTForImageClassification reads the class token alone. The
    same function as the mean with that head's weights doubled and the other head zero."""
    def run(case: Case) -> Case | None:
        if not case.spec.distill_token:
            return None
        heads = ("head.out.", "head_dist.out.")
        kept, zeroed = heads if which == "class" else heads[::-1]
        changed: dict[str, np.ndarray] = {}
        for part in ("kernel", "bias"):
            changed[kept + part] = case.weights[kept + part] * np.float32(2)  # exact in float32
            changed[zeroed + part] = np.zeros_like(case.weights[zeroed + part])
        return with_weights(case, **changed)
    return run


# ---- the 2026 towers' blocks (RMSNorm, bias per projection, grouped-query attention) ----------
def norm_type_swapped(case: Case) -> Case | None:
    """RMSNorm <-> LayerNorm on every norm: an RMSNorm tower (AIMv2, Pixtral, Qwen2.5-VL, InternViT
    with norm_type 'rms_norm') run with LayerNorms whose biases are zero, which subtract the mean;
    or a LayerNorm model run with RMSNorms, which drop the mean and the biases."""
    s = case.spec
    if s.norm_type == "rms_norm":
        zeros = {name[: -len("scale")] + "bias": np.zeros_like(value) for name, value in case.weights.items()
                 if name.endswith(".scale")}
        return Case(s.replace(norm_type="layer_norm"), {**case.weights, **zeros}, case.images)
    swapped = s.replace(norm_type="rms_norm")
    kept = {name: case.weights[name] for name in swapped.derived.tensor_shapes}
    return Case(swapped, kept, case.images)


def key_bias_given_the_values(case: Case) -> Case | None:
    """A tower without a key bias (DINOv3) loaded by a port that packs the biases it has, q's and v's,
    into the first two thirds of a packed qkv bias: the key gets the value's bias, where the softmax
    cancels it (it adds q.b to every score of a query), and the values get none."""
    s = case.spec
    if "attn.key" not in s.bias_free:
        return None
    weights = dict(case.weights)
    for i in range(s.depth):
        p = f"blocks.{i}.attn."
        weights[p + "key.bias"] = weights[p + "value.bias"]
        weights[p + "value.bias"] = np.zeros_like(weights[p + "value.bias"])
    kept = tuple(name for name in s.bias_free if name != "attn.key")
    return Case(s.replace(bias_free=kept), weights, case.images)


def kv_heads_tiled(case: Case) -> Case | None:
    """A grouped-query tower run by a port that tiles its k/v heads (query head h reads k/v head
    h mod kv_heads) where the tower repeats each one in place (h reads h // (heads / kv_heads)):
    the same computation as plain multi-head attention whose k and v are the tiled heads."""
    s = case.spec
    kv = s.derived.kv_heads
    if kv == s.heads or kv == 1:  # one k/v head reads the same in either order
        return None
    weights = dict(case.weights)
    for i in range(s.depth):
        for part in ("key", "value"):
            p = f"blocks.{i}.attn.{part}."
            weights[p + "kernel"] = np.tile(weights[p + "kernel"], (1, s.heads // kv, 1))
            if p + "bias" in weights:
                weights[p + "bias"] = np.tile(weights[p + "bias"], (s.heads // kv, 1))
    return Case(s.replace(kv_heads=None), weights, case.images)
