"""The oracle: a plain NumPy float64 forward pass of any valid spec, written to be read.

Every port is tested against this. It follows the spec's conventions literally (see spec.py) and
records named intermediates ("taps") that `compare.py trace` lines up against the ports'.

`forward` takes a `Rounding`: where it rounds to a dtype. The default, EXACT, rounds nowhere
(float64 throughout); shared/core/rounding.py's `RungRounding` rounds at a precision rung's cast
points (shared/core/precision.py), so the same forward also emulates a bfloat16 or float16 port.
"""

from __future__ import annotations

import numpy as np

from shared.core.activations import activation
from shared.core.batching import attention_mask, merge_index, pool_mask, window_mask
from shared.core.inputs import check_images
from shared.core.positions import image_positions, sequence_positions
from shared.core.rotary import RotaryTables, rotary_tables, tables_for_tokens, token_rows
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps
from shared.core.weights import Tensors


class Rounding:
    """The cast points of a forward pass: `param` where a tensor is held in the parameter (stream)
    dtype, `compute` where a compute op (conv, linear, attention product) reads or writes the
    compute dtype. This base rounds nowhere."""

    def param(self, x: np.ndarray) -> np.ndarray:
        return x

    def compute(self, x: np.ndarray) -> np.ndarray:
        return x


EXACT = Rounding()


def dense(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray | None, r: Rounding = EXACT) -> np.ndarray:
    """x @ kernel + bias, a compute op: its inputs, weights and output in the compute dtype."""
    y = r.compute(x) @ r.compute(kernel)
    return r.compute(y if bias is None else y + r.compute(bias))


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # two-pass, biased (as every framework)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def rms_norm(x: np.ndarray, scale: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps) * scale  # no mean subtracted, no bias


def normalize(spec: ModelSpec, w: Tensors, name: str, x: np.ndarray, place: str) -> np.ndarray:
    """The spec's norm (spec.norm_type) under the tensor prefix `name`, with the epsilon of its
    place (spec.derived.norm_eps)."""
    eps = spec.derived.norm_eps[place]
    if spec.norm_type == "rms_norm":
        return rms_norm(x, w[f"{name}.scale"], eps)
    return layer_norm(x, w[f"{name}.scale"], w[f"{name}.bias"], eps)


def softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def patchify(spec: ModelSpec, images: np.ndarray) -> np.ndarray:
    """NHWC images -> (B, patches, ph*pw*C), patches row-major, each flattened (ph, pw, C)."""
    d = spec.derived
    ph, pw = spec.patch_height, spec.patch_width
    if spec.remainder == "pad":
        images = np.pad(images, ((0, 0), (0, d.rows_padded), (0, d.cols_padded), (0, 0)))
    images = images[:, : d.grid_rows * ph, : d.grid_cols * pw, :]  # `drop`: valid unfold
    b = images.shape[0]
    x = images.reshape(b, d.grid_rows, ph, d.grid_cols, pw, spec.channels)
    return x.transpose(0, 1, 3, 2, 4, 5).reshape(b, d.num_patches, d.patch_features)


def attention(spec: ModelSpec, w: Tensors, p: str, x: np.ndarray, taps: Taps | dict | None = None,
              r: Rounding = EXACT, queries: np.ndarray | None = None,
              mask: np.ndarray | None = None, rows: np.ndarray | None = None) -> np.ndarray:
    """Multi-head attention with head width spec.head_dim, scaled by 1/sqrt(head_dim), under the
    tensor prefix `p` (`blocks.i.attn.` or the map pool's `pool.attn.`). Kernels are (D, H, hd);
    the projections are matmuls on (D, H*hd) views of them. `queries` (the map pool's probe)
    attend over `x`; by default `x` attends over itself. Grouped-query attention: k and v have as
    many heads as their width holds, key/value head j serving query heads j*g .. j*g+g-1 (g = H / theirs).
    `mask` (B, keys) bool, a naflex batch's key-padding mask, or (B, queries, keys), a packed batch's
    block-diagonal one: a False key gets probability exactly 0 (its score -inf; every row keeps a
    key, so none is all -inf). `rows`: each token's rotary row (shared/core/rotary.py's token_rows)."""
    tables = rotary_tables(spec) if queries is None else None  # the map pool's probe has no position
    if tables is not None and rows is not None:  # a naflex or packed batch: each token's own row
        tables = tables_for_tokens(tables, rows)
    queries = x if queries is None else queries
    heads, hd, d = spec.heads, spec.head_dim, spec.dim

    def project(name: str, y: np.ndarray) -> np.ndarray:  # (B, N, D) -> (B, H, N, hd)
        bias = w.get(f"{p}{name}.bias")  # absent without qkv bias, or named in bias_free
        bias = None if bias is None else bias.reshape(-1)
        y = dense(y, w[f"{p}{name}.kernel"].reshape(d, -1), bias, r)
        return y.reshape(y.shape[0], y.shape[1], -1, hd).transpose(0, 2, 1, 3)  # k/v: their own heads

    q, k, v = project("query", queries), project("key", x), project("value", x)
    group = heads // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # each k/v head, consecutively
    if f"{p}q_norm.scale" in w:  # qk-norm: the spec's norm over each head's width, before the scale
        q = r.compute(normalize(spec, w, f"{p}q_norm", q, "qk"))
        k = r.compute(normalize(spec, w, f"{p}k_norm", k, "qk"))
    if tables is not None:  # RoPE: each head's patch queries and keys rotated, prefix tokens not
        q, k = rotate(q, tables, r), rotate(k, tables, r)
    scores = r.compute(q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd))  # (B, H, queries, keys)
    if mask is not None:  # no query reads a masked key: padding, or another packed image's
        scores = np.where(mask.reshape(len(mask), 1, -1, mask.shape[-1]), scores, -np.inf)
    probs = r.compute(softmax(scores))  # the softmax in float32 (here float64), rounded once
    if taps is not None:
        taps[p.replace("blocks.", "block").replace(".attn.", ".").rstrip(".") + ".attn_probs"] = probs
    b, n = queries.shape[:2]
    context = r.compute(probs @ v).transpose(0, 2, 1, 3).reshape(b, n, heads * hd)  # heads concatenated
    return dense(context, w[f"{p}out.kernel"].reshape(heads * hd, d), w.get(f"{p}out.bias"), r)


def rotate(x: np.ndarray, t: RotaryTables, r: Rounding = EXACT) -> np.ndarray:
    """(B, H, N, hd) rotated pairwise by the sequence's angles (shared/core/rotary.py): timm's
    `apply_rot_embed`, x * cos + rot(x) * sin, with rot(x) = x[partner] times the sign in `sin`."""
    return r.compute(x * r.compute(t.cos) + x[..., t.partner] * r.compute(t.sin))


def mlp(spec: ModelSpec, w: Tensors, p: str, x: np.ndarray, r: Rounding = EXACT) -> np.ndarray:
    """fc2(act(fc1 x)), or gated: fc2(act(gate x) * fc1 x) (SwiGLU when the activation is silu)."""
    hidden = dense(x, w[f"{p}fc1.kernel"], w.get(f"{p}fc1.bias"), r)
    if f"{p}gate.kernel" in w:
        gate = dense(x, w[f"{p}gate.kernel"], w.get(f"{p}gate.bias"), r)
        gate = r.compute(activation(gate, spec.activation))
        hidden = r.compute(gate * hidden)
    else:
        hidden = r.compute(activation(hidden, spec.activation))
    return dense(hidden, w[f"{p}fc2.kernel"], w.get(f"{p}fc2.bias"), r)


def block(spec: ModelSpec, w: Tensors, i: int, x: np.ndarray, taps: Taps | dict,
          r: Rounding = EXACT, mask: np.ndarray | None = None, rows: np.ndarray | None = None) -> np.ndarray:
    p = f"blocks.{i}."

    def norm(name: str, y: np.ndarray) -> np.ndarray:  # statistics unrounded, output in the stream
        return r.param(normalize(spec, w, p + name, y, "blocks"))

    def scaled(name: str, branch: np.ndarray) -> np.ndarray:  # LayerScale: a per-channel gamma
        return r.param(branch * w[f"{p}{name}.gamma"]) if spec.layer_scale else branch

    if spec.norm == "pre":  # x + f(LN(x))
        h = norm("norm1", x)
        taps[f"block{i}.norm1"] = h
        a = scaled("ls1", attention(spec, w, p + "attn.", h, taps, r, mask=mask, rows=rows))
        taps[f"block{i}.attn"] = a
        x = r.param(x + a)
        h = norm("norm2", x)
        taps[f"block{i}.norm2"] = h
        m = scaled("ls2", mlp(spec, w, p + "mlp.", h, r))
        taps[f"block{i}.mlp"] = m
        x = r.param(x + m)
    else:  # post: LN(x + f(x))
        a = scaled("ls1", attention(spec, w, p + "attn.", x, taps, r, mask=mask, rows=rows))
        taps[f"block{i}.attn"] = a
        x = norm("norm1", r.param(x + a))
        taps[f"block{i}.norm1"] = x
        m = scaled("ls2", mlp(spec, w, p + "mlp.", x, r))
        taps[f"block{i}.mlp"] = m
        x = norm("norm2", r.param(x + m))
        taps[f"block{i}.norm2"] = x
    taps[f"block{i}.out"] = x
    return x


def forward(spec: ModelSpec, weights: Tensors, images: np.ndarray,
            taps: Taps | dict[str, np.ndarray] | None = None, rounding: Rounding = EXACT) -> np.ndarray:
    """Logits (B, derived.outputs) in float64 for NHWC float32 images (a naflex or packed spec: its
    patch batch, shared/core/batching.py; packed: B * pack_images rows, one per image); fills `taps`
    (a Taps or a dict) if given. `rounding` says where to round to a rung's dtypes (EXACT: nowhere)."""
    check_images(spec, images)
    taps = NO_TAPS if taps is None else taps  # none asked for: no block's tensors kept alive
    r = rounding
    w = {name: r.param(np.asarray(t, dtype=np.float64)) for name, t in weights.items()}  # held as stored

    def norm(name: str, y: np.ndarray, place: str) -> np.ndarray:
        return r.param(normalize(spec, w, name, y, place))

    mask = pooled = rows = windows = merges = None
    if spec.batching != "fixed":  # each image already patchified at its own grid, padded or packed
        mask, pooled = attention_mask(spec, images), pool_mask(spec, images)
        windows = window_mask(spec, images)  # None without window attention
        merges = merge_index(spec, images)  # None without a patch merger
        rows = token_rows(spec, images) if spec.rope != "none" else None
    x = taps["patch_embed"] = embed_patches(spec, w, images, r)
    prefix = [w[name][None] for name in ("cls_token", "dist_token") if name in w]
    if spec.registers:
        prefix.append(w["reg_tokens"])
    if prefix:  # [class, distillation, registers] then the patches
        tokens = np.concatenate(prefix)
        x = np.concatenate([np.broadcast_to(tokens, (x.shape[0], *tokens.shape)), x], axis=1)
    table = sequence_positions(spec, w.get("pos_embed")) if mask is None else None
    if mask is not None and spec.pos_embed == "learned":  # the table resized to each image's grid
        table = image_positions(spec, w["pos_embed"], images)
    if table is not None:  # zero rows for the tokens the table does not cover: adding 0 is exact
        x = r.param(x + r.param(table))
    taps["pos_embed"] = x
    if spec.norm_before_blocks:  # CLIP's ln_pre
        x = taps["norm_pre"] = norm("norm_pre", x, "pre")
    for i in range(spec.depth):  # window blocks attend within each image's windows (Qwen2.5-VL's)
        windowed = windows is not None and i not in spec.full_attention_blocks
        x = block(spec, w, i, x, taps, r, windows if windowed else mask, rows)
        if i in spec.deepstack_blocks:  # Qwen3-VL's extra outputs, from this block's tokens
            name = f"deepstack.{spec.deepstack_blocks.index(i)}"
            taps[name] = merge(spec, w, x, merges, r, name)
    if spec.final_norm == "tokens":
        x = taps["final_norm"] = norm("final_norm", x, "final")
    tokens = x
    if merges is not None:  # Qwen's patch merger: the merged tokens are what is pooled
        x = taps["merger"] = merge(spec, w, x, merges, r)
    x = pool(spec, w, x, taps, r, pooled)
    if spec.final_norm == "pooled":
        x = norm("final_norm", x, "final")
    taps["pooled"] = x
    for j in range(len(spec.head_hidden)):
        hidden = dense(x, w[f"head.hidden.{j}.kernel"], w[f"head.hidden.{j}.bias"], r)
        x = r.compute(activation(hidden, spec.head_activation))
    logits = x
    if spec.num_classes:
        logits = dense(x, w["head.out.kernel"], w.get("head.out.bias"), r)
    if spec.distill_token:  # inference: the mean of the class head and the distillation head
        distilled = dense(tokens[:, 1], w["head_dist.out.kernel"], w["head_dist.out.bias"], r)
        logits = r.compute((logits + distilled) / 2)
    taps["logits"] = logits
    return logits


def embed_patches(spec: ModelSpec, w: Tensors, images: np.ndarray, r: Rounding = EXACT) -> np.ndarray:
    """The patch tokens (B, patches, D): the images cut into patches (a patch batch's already are),
    each repeated over the frames of a temporal patch, projected by the patch kernel (a conv with
    kernel = stride, as a matmul), with vit-pytorch's norms before and after where the spec has them."""
    if spec.batching != "fixed":  # each image already patchified at its own grid, padded or packed
        x = r.param(np.asarray(images["patches"], dtype=np.float64))
    else:
        x = patchify(spec, r.param(np.asarray(images, dtype=np.float64)))
    if spec.patch_norm_in:  # vit-pytorch: LayerNorm over each flattened (ph, pw, C) patch
        x = r.param(normalize(spec, w, "patch_norm_in", x, "patch"))
    x = np.tile(x, spec.temporal_patch_size)  # a still image repeated to fill the frames: (T, ph, pw, C)
    kernel = w["patch_embed.kernel"].reshape(-1, spec.dim)
    x = r.param(dense(x, kernel, w.get("patch_embed.bias"), r))  # the conv, then cast to the stream
    if spec.patch_norm_out:
        x = r.param(normalize(spec, w, "patch_norm_out", x, "patch"))
    return x


def merge(spec: ModelSpec, w: Tensors, x: np.ndarray, index: np.ndarray, r: Rounding = EXACT,
          name: str = "merger") -> np.ndarray:
    """Qwen's patch merger: each token normed (the spec's norm, the merger's epsilon), the tokens
    gathered by the batch's merge index (shared/core/batching.py's merge_index) so that each merge
    unit's merge_size^2 patches are consecutive, concatenated (B, tokens / m^2, m^2 * D), then
    fc2(GELU(fc1 x)) with exact GELU (Qwen2-VL, Qwen2.5-VL and Qwen3-VL's nn.GELU()). A deepstack
    merger (`name` deepstack.J) norms each concatenated unit instead (Qwen3-VL's postshuffle norm)."""
    deepstack = name != "merger"
    h = x if deepstack else r.param(normalize(spec, w, "merger.norm", x, "merger"))
    h = np.take_along_axis(h, index[..., None], axis=1)
    h = h.reshape(h.shape[0], -1, spec.derived.merge_unit)
    if deepstack:
        h = r.param(normalize(spec, w, f"{name}.norm", h, "merger"))
    hidden = r.compute(activation(dense(h, w[f"{name}.fc1.kernel"], w[f"{name}.fc1.bias"], r), "gelu"))
    return r.param(dense(hidden, w[f"{name}.fc2.kernel"], w[f"{name}.fc2.bias"], r))


def token_tap(spec: ModelSpec) -> str:
    """The tap `forward` records the final token states in, before pooling (the final norm's, else
    the last block's): what a vision tower that returns only its tokens outputs."""
    return "final_norm" if spec.final_norm == "tokens" else f"block{spec.depth - 1}.out"


def pool(spec: ModelSpec, w: Tensors, x: np.ndarray, taps: Taps | dict, r: Rounding = EXACT,
         mask: np.ndarray | None = None) -> np.ndarray:
    """The token sequence -> one vector per image, as `spec.pooling` says; with a pool `mask`
    (B, images, tokens: shared/core/batching.py's pool_mask), each image's means and attention pool
    read its own tokens only, and the rows are the images, sequence by sequence."""
    if spec.pooling == "cls":
        return x[:, 0]
    if spec.pooling in ("mean", "mean_all") and mask is not None:
        valid = mask[..., None]  # (B, images, tokens, 1)
        means = np.where(valid, x[:, None], 0.0).sum(axis=2) / valid.sum(axis=2)
        return r.param(means.reshape(-1, x.shape[-1]))  # the tokens' width: dim, or the merger's
    if spec.pooling == "mean":
        return r.param(x[:, spec.derived.prefix_tokens:].mean(axis=1))  # patch tokens only
    if spec.pooling == "mean_all":
        return r.param(x.mean(axis=1))  # every token, class token included (keras-hub's gap)
    if spec.pooling == "flatten":
        return x.reshape(x.shape[0], -1)
    # map: a learned probe attends over every token, then x + MLP(LN(x)) (big_vision's MAPHead)
    images = 1 if mask is None else mask.shape[1]  # a probe per image, each over its own tokens
    probe = np.broadcast_to(w["pool.probe"], (x.shape[0], images, spec.dim))
    y = attention(spec, w, "pool.attn.", x, taps, r, queries=probe, mask=mask)
    h = r.param(normalize(spec, w, "pool.norm", y, "pool"))
    return r.param(y + mlp(spec, w, "pool.mlp.", h, r)).reshape(-1, spec.dim)


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean softmax cross-entropy from logits, as every port's training step computes it."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-log_probs[np.arange(len(labels)), labels].mean())
