"""The tokens and the position table read from a model's free parameters (`proposal_structure.py`'s
last step): parameters no layer owns, told apart by their size and their names as binding by
structure tells them (`TOKEN_HINTS`): a class token of one row of the width (empty: vit-pytorch's
`pool='mean'` class token, which holds nothing), a distillation token, registers, and the position
table, whose rows less the class row (and the registers' rows, where they have them) make a square
patch grid: the image is that grid times the patch the patch layer read."""

from __future__ import annotations

import math
import re

from shared.checkpoints.live import Fact
from shared.your_model.structure import TOKEN_HINTS
from shared.your_model.structure_parts import Unit


def token_facts(free: list[Unit], dim: int, out: dict[str, Fact]) -> None:
    """The class, distillation and register tokens, and the position table giving the image size."""
    params = [(n, s) for u in free for n, s in u.params.items()]

    def named(hint: str, rows: int | None) -> tuple[str, tuple[int, ...]] | None:
        hits = [(n, s) for n, s in params if re.search(hint, n.lower()) and math.prod(s) and
                math.prod(s) % dim == 0 and (rows is None or math.prod(s) == rows * dim)]
        return hits[0] if len(hits) == 1 else None

    empty = [n for n, s in params if not math.prod(s) and re.search(TOKEN_HINTS["cls_token"], n.lower())]
    cls = named(TOKEN_HINTS["cls_token"], 1)
    if cls is None and not empty:
        alone = [(n, s) for n, s in params if math.prod(s) == dim
                 and not re.search(rf"mask|dist|reg|{TOKEN_HINTS['pool.probe']}", n.lower())]
        cls = alone[0] if len(alone) == 1 else None
    if cls is not None:
        out["class_token"] = (True, f"the class token {cls[0]} {cls[1]}")
    elif empty:
        out["class_token"] = (False, f"the class token {empty[0]} is empty (nothing of it reaches the "
                                     "logits)")
    elif params:  # a class token is a learned row: no free parameter is one (I-JEPA, SigLIP)
        out["class_token"] = (False, f"no free parameter is one row of the width {dim}: no class token")
    dist = named(TOKEN_HINTS["dist_token"], 1)
    out["distill_token"] = (dist is not None, f"the distillation token {dist[0]}" if dist else
                            "no parameter named as a distillation token")
    registers = named(TOKEN_HINTS["reg_tokens"], None)
    out["registers"] = (math.prod(registers[1]) // dim if registers else 0,
                        f"{registers[0]} {registers[1]}" if registers else "no parameter named as registers")
    table = named(TOKEN_HINTS["pos_embed"], None)
    if table is None:
        return
    name, shape = table
    rows = math.prod(shape) // dim
    ph, pw = out.get("patch_height", (None,))[0], out.get("patch_width", (None,))[0]
    where = f"position table {name} {shape}: {rows} rows"
    count = out["registers"][0]
    grid: tuple[int, int] | None = None
    class_row, register_rows = False, 0
    if len(shape) >= 3 and shape[-2] != rows and math.prod(shape[-3:-1]) == rows:  # (1, rows, cols, dim)
        grid = (shape[-3], shape[-2])
    else:  # the rows left a square grid, a class row first (and the registers' rows) where they do
        leads = [(c, r) for c in ((1, 0) if cls is not None else (0,))
                 for r in ((0, count) if count else (0,))]
        lead = next(((c, r) for c, r in leads if _square(rows - c - r)), None)
        if lead is not None:
            (class_row, register_rows), side = (bool(lead[0]), lead[1]), math.isqrt(rows - sum(lead))
            grid = (side, side)
    out["pos_embed"] = ("learned", where)
    out["pos_rows"] = (None, f"{where}, one per token: a built model's table has the image's own grid")
    if cls is not None:
        out["pos_embed_class_row"] = (class_row, f"{where}, {'one' if class_row else 'no'} class row")
    if count and grid is not None:
        out["pos_embed_register_rows"] = (bool(register_rows),
                                          f"{where}, {register_rows or 'no'} register rows")
    if grid is None or ph is None or pw is None:
        return
    lead_text = ("1 class row + " if class_row else "") + \
        (f"{register_rows} register rows + " if register_rows else "")
    grid_text = f"{where} = {lead_text}a {grid[0]}x{grid[1]} patch grid " \
                f"(square assumed for a flat table) x {ph}x{pw} patches"
    out["image_height"] = (grid[0] * ph, grid_text)
    out["image_width"] = (grid[1] * pw, grid_text)


def _square(n: int) -> bool:
    return n > 0 and math.isqrt(n) ** 2 == n
