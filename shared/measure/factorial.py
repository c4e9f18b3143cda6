"""`--factorial SPEC_A SPEC_B`: run spec x framework and split a time difference into a spec
effect and a framework effect.

For frameworks f, g and specs A, B with median times t(spec, framework), the gap between "A on f"
and "B on g" (e.g. archive-torch in torch vs archive-keras in Keras) is split symmetrically
(the Shapley split of a 2 x 2 design, so neither factor is favoured by the order it is added in):

    spec effect      = ½[(t(B,f) − t(A,f)) + (t(B,g) − t(A,g))]
    framework effect = ½[(t(A,g) − t(A,f)) + (t(B,g) − t(B,f))]
    spec + framework = t(B,g) − t(A,f)              (exactly)
    interaction      = (t(B,g) − t(A,g)) − (t(B,f) − t(A,f))   (how much the spec effect depends
                                                                 on the framework)
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from shared.errors import InputError, SpecError
from shared.measure.guard import metric_value


def check_design(names: list[str], specs: list[Any], frameworks: list[str]) -> None:
    """The 2 x 2 design, before anything is timed: two different specs (`names` as given), and at
    least two frameworks that run here (the framework effect is a difference between two)."""
    if specs[0].spec_hash == specs[1].spec_hash:
        raise SpecError(f"--factorial {names[0]} {names[1]}: both name one spec ({specs[0].spec_hash}); "
                        "the split needs two different specs")
    if len(frameworks) < 2:
        raise InputError(f"--factorial needs at least two frameworks that run here; got "
                         f"{', '.join(frameworks) or 'none'}")


def decompose(t_af: float, t_ag: float, t_bf: float, t_bg: float) -> dict[str, float]:
    spec_effect = 0.5 * ((t_bf - t_af) + (t_bg - t_ag))
    framework_effect = 0.5 * ((t_ag - t_af) + (t_bg - t_bf))
    return {
        "gap": t_bg - t_af,
        "spec_effect": spec_effect,
        "framework_effect": framework_effect,
        "interaction": (t_bg - t_ag) - (t_bf - t_af),
    }


def attribute(rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]],
              metric: str) -> list[dict[str, Any]]:
    """One decomposition per framework pair, from rows of spec A and spec B (valid rows only)."""
    def times(rows: list[dict[str, Any]]) -> dict[str, float]:
        out = {}
        for r in rows:
            found = metric_value(r, metric)
            if found is not None:
                out[r["framework"]] = found[0]
        return out

    ta, tb = times(rows_a), times(rows_b)
    common = [f for f in ta if f in tb]
    results = []
    for f, g in combinations(common, 2):
        parts = decompose(ta[f], ta[g], tb[f], tb[g])
        results.append({"framework_f": f, "framework_g": g, "metric": metric,
                        "t_A_f": ta[f], "t_A_g": ta[g], "t_B_f": tb[f], "t_B_g": tb[g], **parts})
    return results


def describe(spec_a: str, spec_b: str, parts: list[dict[str, Any]]) -> str:
    from shared.measure.output import fmt_seconds  # output imports guard, as this module does

    if not parts:
        return "factorial: needs at least two frameworks with valid times for both specs"
    lines = [f"factorial attribution of {parts[0]['metric']} (A = {spec_a}, B = {spec_b}):"]
    for p in parts:
        f, g = p["framework_f"], p["framework_g"]
        sign = lambda v: ("+" if v >= 0 else "-") + fmt_seconds(abs(v))  # noqa: E731
        lines.append(
            f"  {spec_a} on {f} ({fmt_seconds(p['t_A_f'])}) -> {spec_b} on {g} ({fmt_seconds(p['t_B_g'])}): "
            f"gap {sign(p['gap'])} = spec effect {sign(p['spec_effect'])} + framework effect "
            f"{sign(p['framework_effect'])}; interaction {sign(p['interaction'])} "
            f"[{spec_b} on {f} {fmt_seconds(p['t_B_f'])}, {spec_a} on {g} {fmt_seconds(p['t_A_g'])}]")
    return "\n".join(lines)
