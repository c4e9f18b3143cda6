"""`compare.py verify`: every installed port against the float64 reference and against each
other (shared/runtime/verify.py runs them, each framework in its own fresh process; the verdict
is shared/core/equivalence.py's). Exit status 1 when any port fails."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from ports import installed
from shared.cli._common import (
    REFERENCE_ALONE,
    add_json_arg,
    add_spec_args,
    add_user_model_args,
    check_model_options,
    check_outputs,
    init_seed,
    installed_ports,
    resolve_model,
    user_options,
    user_spec,
    write_json,
)
from shared.cli._lists import parse_frameworks
from shared.cli._options import (
    BATCH,
    DEVICE,
    FRAMEWORKS,
    TIMEOUT,
    WITH_REFERENCE,
    add_precision,
    refuse_unread,
)
from shared.cli._verdicts import print_verdicts, tally
from shared.core.budget import Estimate, check_fits
from shared.core.equivalence import PortVerdict
from shared.core.files import check_output
from shared.core.inputs import probe_batch
from shared.core.memory import USABLE_FRACTION, available_bytes
from shared.core.precision import Precision, from_args
from shared.core.presets import PRESETS, get_preset
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable, InputError
from shared.runtime.verify import VerifyCase, verify

ORDER = 40
HELP = "check every port's logits against the float64 reference"
SCHEMA = "portbench.verify/2"  # 2: entries are PortVerdict.to_dict (max_abs_err, atol, reason)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("verify", help=HELP)
    add_spec_args(parser, model=True)
    FRAMEWORKS.add(parser, note=WITH_REFERENCE)
    parser.add_argument("--all-presets", action="store_true", help="verify every preset")
    BATCH.add(parser, "probe batch size", default=4)
    DEVICE.add(parser)
    add_precision(parser)
    TIMEOUT.add(parser, default=900.0)
    add_json_arg(parser, "the results (one entry per spec and framework)")
    add_user_model_args(parser)
    parser.set_defaults(run=run)


def write_verdicts(path: str, verdicts: list[PortVerdict], pairwise: list[dict[str, Any]],
                   force: bool = False, **extra: Any) -> None:
    """The verdicts in their one JSON form (`PortVerdict.to_dict`), the pairwise gaps, and `extra`."""
    write_json(path, {"schema": SCHEMA, "entries": [v.to_dict() for v in verdicts], "pairwise": pairwise,
                      **extra}, force)


def run_cases(groups: Iterable[list[VerifyCase]], frameworks: list[str], device: str, timeout: float,
              json_path: str | None, force: bool = False) -> int:
    """Verify each group of cases in turn (one group but for --all-presets), then print and write
    every verdict."""
    if json_path:
        check_output(json_path, force)  # before minutes of work, not after
    cases: list[VerifyCase] = []
    verdicts: list[PortVerdict] = []
    pairwise: list[dict[str, Any]] = []
    for group in groups:
        found, gaps = verify(group, frameworks, device, timeout)
        verdicts += found
        pairwise += gaps
        # the table reads a case's spec, images and note: its weights go before the next group's
        cases += [replace(case, tensors={}, reference=None, reference_outputs={}, emulated_outputs=None)
                  for case in group]
    print_verdicts(cases, verdicts, pairwise)
    if json_path:
        write_verdicts(json_path, verdicts, pairwise, force)
    if all(v.unavailable for v in verdicts):
        raise FrameworkUnavailable(f"no framework could run here: {verdicts[0].reason}" if verdicts
                                   else "no framework to verify")
    line, failed = tally(verdicts, pairwise)
    print(f"\n{line}")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    check_model_options(args)
    check_outputs(args)
    if args.model:
        return run_user_model(args)
    frameworks = parse_frameworks(args.frameworks, installed_ports(), reference=True)
    if frameworks == ["reference"]:
        raise InputError(REFERENCE_ALONE)
    if args.frameworks:
        for name in frameworks:
            reason = installed().get(name)  # None for the reference, which is always here
            if reason:
                raise FrameworkUnavailable(reason)
    precision = from_args(args)
    if args.all_presets:
        groups = preset_groups(args, precision)
    else:
        model = resolve_model(args)
        groups = iter([[VerifyCase(model.spec, model.tensors, probe_batch(model.spec, args.batch), model.note,
                                   precision)]])
    return run_cases(groups, frameworks, args.device, args.timeout, args.json, args.force)


def preset_groups(args: argparse.Namespace, precision: Precision) -> Iterator[list[VerifyCase]]:
    """--all-presets: every preset at its canonical weights, a group at a time (`fitting_groups`),
    each group's weights made only when its turn comes."""
    refuse_unread(args, ("spec", "set", "weights"), "with --all-presets, which verifies every preset at "
                  "its canonical weights")
    seed = init_seed(args)
    for group in fitting_groups(list(PRESETS), args.batch):
        yield [VerifyCase(s, init_weights(s, seed), probe_batch(s, args.batch), precision=precision)
               for s in map(get_preset, group)]


def fitting_groups(names: list[str], batch: int) -> list[list[str]]:
    """The presets `names` in order, in groups that fit the memory available (all 41 at once are 2.2
    billion parameters): a group's weights are held together, the reference's activations one case
    at a time (`budget.estimate`). One that cannot fit alone is refused."""
    sizes = {name: check_fits(get_preset(name), batch, "verify") for name in names}
    available = available_bytes()
    room = USABLE_FRACTION * available if available is not None else float("inf")
    groups: list[list[str]] = []
    for name in names:
        if groups and group_bytes([sizes[n] for n in [*groups[-1], name]]) <= room:
            groups[-1].append(name)
        else:
            groups.append([name])
    return groups


def group_bytes(sizes: list[Estimate]) -> int:
    """What verifying these cases together holds at most: every case's weights, one's activations."""
    return sum(e.weight_bytes for e in sizes) + max(e.activation_bytes for e in sizes)


def run_user_model(args: argparse.Namespace) -> int:
    """`verify --model`: the user's model as a row beside the reference (and our ports with
    --frameworks); spec contradictions first; on a gap, diagnose's finding."""
    from shared.teaching.user_check import check_user

    spec = user_spec(args)
    frameworks = [f for f in parse_frameworks(args.frameworks, (), reference=True)
                  if f != "reference"]  # only if named
    images = probe_batch(spec, args.batch)
    result = check_user(args.model, spec, images, frameworks=frameworks, timeout=args.timeout,
                        unread=getattr(args, "unread", ()), **user_options(args))
    run = result.run
    if run.framework_note:
        print(run.framework_note)
    for line in run.report.get("notes", []):  # how it was run: a layout found by trying, a mode keyword
        print(line)
    if args.show_binding:
        print("\n".join(run.binding_lines()))
    for line in run.inert_lines():
        print(line)
    for c in run.contradictions:
        print(f"spec check: {c.line()}")
    how = ("--weights loaded into your model" if args.weights else "portbench's canonical weights (your "
           "own move its logits too little to judge by), bound" if run.report.get("canonical_weights")
           else "your model's own parameters, bound")
    case = VerifyCase(run.spec, run.tensors, images, f"weights: {how} by {run.binding['rule']}")  # fitted
    print_verdicts([case], [result.entry, *result.ports], result.pairwise)
    if result.diagnosis is not None:
        print("diagnose: " + "\n  ".join(result.diagnosis.lines()))
    if args.json:
        write_verdicts(args.json, [result.entry, *result.ports], result.pairwise, args.force,
                       binding=run.binding, contradictions=[c.line() for c in run.contradictions],
                       diagnosis=result.diagnosis.to_dict() if result.diagnosis else None)
    failed = [v for v in [result.entry, *result.ports] if not v.passed and not v.unavailable]
    ok = result.passed and not failed
    verdict = result.explanation() if ok else f"NOT equivalent: {result.explanation()}"
    print(f"\n{verdict}")
    return 0 if ok else 1
