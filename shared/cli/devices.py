"""`compare.py devices [--frameworks ...] [--json FILE]`: which device classes (cpu, cuda, metal)
each installed port can use on this machine, and for each one it cannot, why, in one line.

Each framework runs the worker's `devices` job (shared/runtime/devices.py) in its own fresh
process, started by the one launcher; this module only parses and prints.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from typing import Any

from shared.cli._common import add_json_arg, check_outputs, installed_ports, write_json
from shared.cli._options import FRAMEWORKS, TIMEOUT
from shared.core.terminal import format_table
from shared.runtime.devices import DEVICE_CLASSES

ORDER = 45
HELP = "which devices each installed port can use here, and why not"
SCHEMA = "portbench.devices/1"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("devices", help=HELP)
    FRAMEWORKS.add(parser, note="default: every installed one")
    TIMEOUT.add(parser, default=300.0)
    add_json_arg(parser, "the table")
    parser.set_defaults(run=run)


def launch_probe(framework: str, timeout: float) -> list[dict[str, Any]]:
    """The `devices` job in one fresh worker for `framework`; a failed worker is one row per
    device with its reason."""
    from ports import PORTS
    from shared.measure.backends import backend_of
    from shared.runtime.devices import DEVICES
    from shared.runtime.launch import run_worker

    backend = backend_of(framework, PORTS[framework].env) or framework
    with tempfile.TemporaryDirectory(prefix="portbench-devices-") as tmp:
        result = run_worker(framework, {"devices": DEVICES.job(backend=backend)}, tmp, timeout)
    error = result.error("devices")
    if error is None:
        return result.reports["devices"]["rows"]
    return [{"framework": framework, "device": d, "usable": False, "reason": f"probe failed: {error}"}
            for d in DEVICE_CLASSES]


def run(args: argparse.Namespace) -> int:
    from ports import installed
    from shared.cli._lists import parse_frameworks

    check_outputs(args)  # before the probes, not after
    available = installed()
    rows: list[dict[str, Any]] = []
    for framework in parse_frameworks(args.frameworks, installed_ports()):
        if available[framework]:
            rows += [{"framework": framework, "device": d, "usable": False, "reason": available[framework]}
                     for d in DEVICE_CLASSES]
            continue
        print(f"  probing {framework} ...", file=sys.stderr, flush=True)
        rows += launch_probe(framework, args.timeout)
    print(f"devices on this machine ({platform.system()} {platform.machine()}):")
    table = [[r["framework"], r["device"], "yes" if r["usable"] else "no",
              r.get("note") or "" if r["usable"] else f"{r['framework']}: {r['reason']}"] for r in rows]
    print(format_table(["framework", "device", "usable", "why not / note"], table))
    if args.json:
        document = {"schema": SCHEMA, "platform": platform.platform(), "entries": rows}
        write_json(args.json, document, args.force)
    return 0
