"""Rounds: `peers` and `time` run every implementation in several interleaved rounds of fresh
workers (a b c, a b c, ...), and this module holds the one rule that decides, from the rounds,
whether a comparison between two of them may be printed (docs/timing.md, "When a ratio or a
rank is printed").

A burst of load that lands on one worker makes that worker slow and nothing else: one process
each, one after another, turned a 1.08x into a tight 2.16x on a busy 2-core machine. So:

- a worker is CONTENDED when other processes used more than `contention.CONTENDED` cores of its
  pinned CPUs over its whole timed span (`foreign_cpu` of the round);
- a port / peer ratio is printed only when no round of either side was contended and the
  per-round ratios (round k's port median over round k's peer median) agree: largest / smallest
  - 1 at most SPREAD. One round cannot disagree: its ratio is printed marked "not checked".
  Where no round was contended and the rounds disagree but every per-round ratio lies strictly on
  one side of 1, the range of the per-round ratios is printed marked as such (`one_side_text`),
  never a median: the rounds disagree on how much, not on which is faster;
- a `time` rank is printed for a row only when no round of its worker was contended and its
  position among the uncontended rows is the same in every round;
- a GEMM rate (the roofline's ceiling) measured while contended is used only with a warning.
Framework-neutral: these functions read the records the workers wrote.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from shared.measure.contention import is_contended

# Per-round port / peer ratios may differ by at most 10% (largest / smallest - 1). On a quiet
# machine the vit-b16 quartile ranges put a ratio within about +-7% of itself (torch eager
# / timm 0.99-1.14 around 1.03); the busy run that printed 2.16x for a 1.08x was 100% off.
SPREAD = 0.10


def contended_rounds(name: str, rounds: Sequence[dict[str, Any]]) -> list[str]:
    """'NAME round K (X CPUs)' for every round whose worker was contended."""
    return [f"{name} round {r['round']} ({r['foreign_cpu']:.2f} CPUs)" for r in rounds
            if is_contended(r.get("foreign_cpu"))]


def ratio_decision(port: str, port_rounds: Sequence[dict[str, Any]], peer: str,
                   peer_rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Whether port / peer may be printed. Each round record holds `round`, `median` (None when
    that worker failed) and `foreign_cpu` (the worker's timed span). Returns `comparable`,
    `checked` (False for one round), `why` (None when comparable), `per_round` ratios, `spread`
    and `side`: "faster" or "slower" where uncontended rounds disagree but the port is that in
    every round (`one_side_text` prints it), else None."""
    out: dict[str, Any] = {"comparable": False, "checked": False, "why": None, "per_round": [],
                           "spread": None, "rounds": len(port_rounds), "side": None}
    if len(port_rounds) != len(peer_rounds) or not port_rounds:
        out["why"] = f"{port} has {len(port_rounds)} round(s), {peer} {len(peer_rounds)}"
        return out
    failed = [f"{name} round {r['round']}" for name, rounds in ((port, port_rounds), (peer, peer_rounds))
              for r in rounds if not r.get("median")]
    if failed:
        out["why"] = f"no time from {', '.join(failed)}"
        return out
    per_round = [p["median"] / q["median"] for p, q in zip(port_rounds, peer_rounds, strict=True)]
    out["per_round"] = per_round
    out["spread"] = max(per_round) / min(per_round) - 1
    busy = contended_rounds(port, port_rounds) + contended_rounds(peer, peer_rounds)
    if busy:
        out["why"] = "contended: " + ", ".join(busy)
    elif out["spread"] > SPREAD:
        shown = ", ".join(f"{r:.2f}" for r in per_round)
        out["why"] = f"rounds disagree: per-round ratios {shown} differ by {out['spread']:.0%} > {SPREAD:.0%}"
        if max(per_round) < 1 or min(per_round) > 1:  # strictly: a round at 1.00 says neither
            out["side"] = "faster" if max(per_round) < 1 else "slower"
    else:
        out.update(comparable=True, checked=len(per_round) > 1)
    return out


def one_side_text(decision: dict[str, Any]) -> str | None:
    """'0.54-0.72x, faster in every round; rounds disagree by 33%' for a `ratio_decision` whose
    rounds disagree on one side of 1 (its `side`), else None: the per-round range, no median."""
    if not decision.get("side"):
        return None
    per_round = decision["per_round"]
    return (f"{min(per_round):.2f}-{max(per_round):.2f}x, {decision['side']} in every round; "
            f"rounds disagree by {decision['spread']:.0%}")


def rank_decisions(entries: Sequence[tuple[Hashable, str, Sequence[float], Sequence[float | None], float]],
                   ) -> dict[Hashable, tuple[int | None, str | None]]:
    """key -> (rank, None) or (None, why). Each entry: (key, label, the ranked phase's median in
    each round, the worker's foreign CPU in each round, its pooled median). Contended rows are left
    out; the rest are ordered in every round, and a row keeps its position only where it is the
    same in all."""
    out: dict[Hashable, tuple[int | None, str | None]] = {}
    calm = []
    for key, name, medians, foreign, pooled in entries:
        busy = contended_rounds(name, [{"round": k, "foreign_cpu": f} for k, f in enumerate(foreign, 1)])
        if busy:
            out[key] = (None, "contended: " + ", ".join(busy))
        else:
            calm.append((key, list(medians), pooled))
    counts = {len(medians) for _, medians, _ in calm}
    # e.g. merged files with different rounds: only the pooled order is known, the one shown
    calm = [(key, [pooled] if len(counts) > 1 else medians) for key, medians, pooled in calm]
    rounds = len(calm[0][1]) if calm else 0
    positions: dict[Hashable, list[int]] = {key: [] for key, _ in calm}
    for k in range(rounds):
        for place, (key, _) in enumerate(sorted(calm, key=lambda item: item[1][k]), 1):
            positions[key].append(place)
    for key, places in positions.items():
        if len(set(places)) == 1:
            out[key] = (places[0], None)
        else:
            out[key] = (None, "rank differs between rounds (" +
                        ", ".join(f"round {k}: {p}" for k, p in enumerate(places, 1)) + ")")
    return out


def ceiling(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One GEMM rate from each round's record (`roofline.gemm_rate`): the fastest uncontended one
    (a ceiling is what the library can do), or, when every round was contended, the fastest with
    its `foreign_cpu` kept so the reader warns. Adds `rounds_gflops` (every round's rate) and
    `rounds_disagree` (uncontended rates more than SPREAD apart)."""
    ok = [r for r in records if r.get("status") == "ok" and r.get("gflops")]
    if not ok:
        return dict(records[0]) if records else {"status": "n/a", "reason": "not measured"}
    calm = [r for r in ok if not is_contended(r.get("foreign_cpu"))]
    chosen = dict(max(calm or ok, key=lambda r: r["gflops"]))
    rates = [r["gflops"] for r in calm]
    chosen["rounds_gflops"] = [r.get("gflops") for r in records]
    chosen["rounds_disagree"] = bool(rates) and max(rates) / min(rates) - 1 > SPREAD
    return chosen


def gemm_warning(name: str, gemm: dict[str, Any]) -> str | None:
    """The line a reader needs before dividing by this GEMM rate, or None."""
    if is_contended(gemm.get("foreign_cpu")):
        return (f"{name}: roof: its GEMM rate {gemm['gflops']:.3g} GFLOP/s was measured while other "
                f"processes used {gemm['foreign_cpu']:.2f} of its CPUs (contended): the share is not "
                "a fair one")
    if gemm.get("rounds_disagree"):
        shown = ", ".join("-" if g is None else f"{g:.3g}" for g in gemm["rounds_gflops"])
        return (f"{name}: roof: GEMM rate differs between rounds ({shown} GFLOP/s, more than "
                f"{SPREAD:.0%} apart): the fastest is the ceiling")
    return None
