"""Position tables: which rows of the table each token receives, computed once for every port."""

from __future__ import annotations

import numpy as np

from shared.core.spec import ModelSpec

SINCOS_TEMPERATURE = 10_000.0


def sincos_2d(rows: int, cols: int, dim: int, temperature: float = SINCOS_TEMPERATURE) -> np.ndarray:
    """big_vision's `posemb_sincos_2d`: [sin x, cos x, sin y, cos y] over a row-major grid."""
    quarter = dim // 4
    omega = np.arange(quarter, dtype=np.float64) / max(quarter - 1, 1)
    omega = 1.0 / temperature**omega
    y, x = np.mgrid[:rows, :cols]
    x_angles = np.einsum("m,d->md", x.reshape(-1).astype(np.float64), omega)
    y_angles = np.einsum("m,d->md", y.reshape(-1).astype(np.float64), omega)
    return np.concatenate(
        [np.sin(x_angles), np.cos(x_angles), np.sin(y_angles), np.cos(y_angles)], axis=1
    )


def fixed_table(spec: ModelSpec) -> np.ndarray | None:
    """The non-trainable table a `sincos` spec adds (rows = pos_rows_used), else None.
    With a class row, the class token's row is zero (it carries no grid position)."""
    if spec.pos_embed != "sincos":
        return None
    d = spec.derived
    table = sincos_2d(d.grid_rows, d.grid_cols, spec.dim)
    if spec.class_token and spec.pos_embed_class_row:
        table = np.concatenate([np.zeros((1, spec.dim)), table])
    return table
