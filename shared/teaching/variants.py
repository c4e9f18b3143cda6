"""The catalogue's alternative settings as runnable cases: what a port that took a framework
default (or made a classic porting slip) computes, expressed as the NumPy reference run on a
changed (spec, canonical weights, images) triple.

Used three ways: the catalogue's demonstrations (pinned vs unpinned gap), `compare.py diagnose`
(which alternative, alone or in a pair, reproduces a user's logits) and the mutation tests.

Some alternatives are spec fields (epsilon, GELU form, norm placement, pooling, remainder);
others have no field because the spec fixes a convention (patch flatten order, kernel layouts,
which rows of a larger position table are used), so they are written as the equivalent change
to the canonical weights or to the images (`shared.teaching.transforms`). Each is declared in its
catalogue entry's row (`shared.teaching.divergences`); this module reads them from there.
"""

from __future__ import annotations

from itertools import combinations

from shared.teaching.divergences import CATALOGUE, EPSILON_SOURCES
from shared.teaching.transforms import Case, Variant

__all__ = ["EPSILON_SOURCES", "Case", "Variant", "all_variants", "applicable", "applicable_pairs", "variant"]


def all_variants() -> list[Variant]:
    """Every entry's own alternatives, in the order `diagnose` tries them (the entries by their
    `tried`, then the rest in catalogue order). Which apply depends on the case."""
    entries = sorted(CATALOGUE, key=lambda e: (e.tried == 0, e.tried))
    return [v for e in entries for v in e.alternatives]


def variant(key: str) -> Variant:
    for v in all_variants():
        if v.key == key:
            return v
    raise KeyError(key)


def applicable(case: Case) -> list[tuple[Variant, Case]]:
    out = []
    for v in all_variants():
        changed = v.apply(case)
        if changed is not None:
            out.append((v, changed))
    return out


def applicable_pairs(case: Case, singles: list[Variant]) -> list[tuple[tuple[Variant, Variant], Case]]:
    """Every pair of `singles` on different knobs, applied one after the other (the caller has
    dropped the alternatives that do not change this case's function)."""
    out = []
    for a, b in combinations(singles, 2):
        if a.group == b.group:
            continue
        first = a.apply(case)
        second = b.apply(first) if first is not None else None
        if second is not None:
            out.append(((a, b), second))
    return out
