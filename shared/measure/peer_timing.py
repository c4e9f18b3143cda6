"""Each port against the public implementation a user would pick instead (`compare.py peers`): timm eager and
compiled, Transformers' class in PyTorch (its ViT in TensorFlow / Flax, 4.x's), keras-hub's class, each
random-initialised (nothing downloaded) on the model the spec describes (each library's plug-in builds it and
says what it cannot build; ports/public_models.py times it), on the same
seeded images, batch, threads and CPU pinning. Every implementation runs in its own fresh worker (the
`peers` job kind), each port next to its peers, and the whole sequence runs in several rounds (a b c a b c),
so a burst of load cannot land on one implementation only. Ratios are port / peer medians, with the range
the quartiles allow (q1/q3 .. q3/q1), printed only where shared/measure/rounds.py's rule allows (no round
contended, the per-round ratios within its spread); a printed ratio above 1.05 with its range above 1 says
what differs. Framework-neutral: the frameworks are imported only in the workers.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

import ports
from shared.checkpoints import format_module
from shared.core.inputs import probe_batch
from shared.core.spec import ModelSpec
from shared.core.weights import init_weights
from shared.errors import SpecError
from shared.measure import flops, gate, modes, roofline
from shared.measure import rounds as rounds_rule
from shared.measure.contention import ForeignCpu, pinned_cpus
from shared.measure.runner import compile_cache_env
from shared.measure.stats import Budget, repeat, summarise, synced, time_once
from shared.runtime.job_kinds import JobKind, Output
from shared.runtime.launch import run_worker
from shared.runtime.process_env import TRANSFORMERS4_NEEDED, cpu_record, transformers4_env
from shared.runtime.worker import one_line

INSTALL = ("pip install -e '.[peers]' && pip install --no-deps keras-hub==0.32.0 tf_keras==2.21.0")


@dataclass(frozen=True)
class Impl:
    name: str  # "port:torch:compiled" or "<peer family>:<mode>"
    entry: str  # the registry entry whose launch environment it gets
    requires: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    transformers4: bool = False  # Transformers 4.x's class only (TF, Flax): process_env.transformers4_env


# Each port mode and the peers it is compared with, in running order (a port next to its peers).
PLAN: dict[str, list[Impl]] = {
    "port:torch:eager": [Impl("timm:eager", "torch", ("timm",)),
                         Impl("hf-torch:eager", "torch", ("transformers",))],
    "port:torch:compiled": [Impl("timm:compiled", "torch", ("timm",))],
    "port:flax:compiled": [Impl("hf-flax:jit", "flax", ("transformers",), transformers4=True)],
    "port:keras:compiled": [Impl("keras-hub:predict", "keras", ("keras_hub",)),
                            Impl("keras-hub:graph", "keras", ("keras_hub",)),
                            Impl("hf-tf:graph", "keras", ("transformers", "tf_keras"),
                                 {"TF_USE_LEGACY_KERAS": "1"}, transformers4=True)],
}


def refusal(family: str, spec: ModelSpec) -> str | None:
    """Why one peer family cannot build `spec` (None: it can): its library's plug-in says
    (`check_buildable`, with the options `build_model` gets: timm's, Transformers' PyTorch class
    and keras-hub's are the classes their exporters write; Transformers' TF and Flax classes are
    its ViT's only)."""
    if spec.batching != "fixed":  # every peer runner times an NHWC batch: a patch batch is the ports' only
        return f"batching={spec.batching!r} (peers run NHWC images of one size)"
    fmt, options = PEER_MODELS[family]
    try:
        format_module(fmt).check_buildable(spec, **options)
    except SpecError as exc:
        return str(exc).removeprefix("cannot export to ")
    return None


def check_expressible(spec: ModelSpec) -> None:
    """Refuse a spec that no peer can build, naming the field each peer refuses."""
    families: dict[str, list[str]] = {}  # each reason once, with the peers that give it
    for family in PEER_MODELS:
        if (reason := refusal(family, spec)) is None:
            return
        families.setdefault(reason, []).append(family)
    raise SpecError(f"spec {spec.name!r} is a model no peer can build: "
                    + "; ".join(f"{', '.join(names)}: {reason}" for reason, names in families.items()))


def plan(frameworks: list[str], modes: tuple[str, ...],
         spec: ModelSpec) -> tuple[list[Impl], list[str], list[str]]:
    """(implementations to run, one line per peer that is not installed, one per peer that
    cannot build `spec`)."""
    impls: list[Impl] = []
    missing: list[str] = []
    refused: list[str] = []
    for port_impl, peers in PLAN.items():
        _, name, mode = port_impl.split(":")
        if name not in frameworks or ("eager" if mode == "eager" else "compiled") not in modes:
            continue
        impls.append(Impl(port_impl, name))
        for peer in peers:
            absent = [m for m in peer.requires if importlib.util.find_spec(m) is None]
            why = refusal(peer.name.split(":")[0], spec)
            if absent or (side := transformers4_env() if peer.transformers4 else {}) is None:
                missing.append(f"{peer.name} needs {', '.join(absent) or TRANSFORMERS4_NEEDED}")
            elif why:
                refused.append(f"{peer.name} ({why})")
            else:
                impls.append(replace(peer, env={**peer.env, **side}))
    return impls, missing, refused


# Every implementation runs on the CPU, the port included: a peer is built where its library puts a
# new model, and TensorFlow and JAX put one on any GPU they can see, so no worker is shown one.
CPU_ONLY = {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}


def run_peers(spec: ModelSpec, impls: list[Impl], job: dict[str, Any], rounds: int, timeout: float,
              progress: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """impl name -> its report (rounds pooled), every implementation in its own worker, the whole
    sequence `rounds` times (a b c, a b c)."""
    results: dict[str, list[dict[str, Any]]] = {i.name: [] for i in impls}
    with tempfile.TemporaryDirectory(prefix="portbench-peers-") as workdir:
        # the gate's reference for the ports' mode choice: the same weights (seed 0) and images
        job = {**job, "reference_npz": os.path.join(workdir, "reference.npz")}
        gate.write_reference(job["reference_npz"], spec, job["batch"], job["seed"], 0)
        for rep in range(rounds):
            for k, impl in enumerate(impls, 1):
                progress(f"[{k}/{len(impls)}] {impl.name}: fresh worker process"
                         + (f" (round {rep + 1}/{rounds})" if rounds > 1 else ""))
                folder = os.path.join(workdir, impl.name.replace(":", "_"))
                env = {**compile_cache_env(folder, "warm"), **CPU_ONLY, **impl.env}
                jobs = {"peer": PEERS.job(**job, impl=impl.name, spec=spec.to_dict())}
                done = run_worker(impl.entry, jobs, folder, timeout, threads=job["threads"], pin=True,
                                  progress=progress, env=env)
                report = done.reports.get("peer") or {}
                error = done.error("peer")
                results[impl.name].append({**report, "error": error, "stderr_tail": done.process.tail[-8:]}
                                          if error else report)
    return {name: pooled(reports) for name, reports in results.items()}


def pooled(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One implementation's rounds: samples pooled, each round's median, foreign CPU and GEMM
    rate kept in `rounds`, the GEMM ceiling chosen by `rounds.ceiling`."""
    records = [{"round": k, "median": r.get("median"), "foreign_cpu": r.get("foreign_cpu"),
                "gemm_gflops": (r.get("gemm") or {}).get("gflops"),
                "gemm_foreign_cpu": (r.get("gemm") or {}).get("foreign_cpu"), "error": r.get("error")}
               for k, r in enumerate(reports, 1)]
    failed = [r for r in reports if r.get("error")]
    if failed:
        return {**failed[0], "rounds": records}
    samples = [x for r in reports for x in r["samples"]]
    spans = [r["foreign_cpu"] for r in reports if r.get("foreign_cpu") is not None]
    out = {**reports[0], "samples": samples, **summarise(samples), "foreign_cpu": max(spans, default=None),
           "process_medians": [r["median"] for r in reports], "rounds": records}
    if "gemm" in reports[0]:
        out["gemm"] = rounds_rule.ceiling([r["gemm"] for r in reports])
    return out


# What was measured to explain a port / peer gap, keyed by (port, peer): the A/B finding in one
# line, with the benchmark and commits that showed it. Only measured claims: empty until an A/B
# run (benchmarks/ab_interleaved.py) has found a cause (docs/timing.md).
FINDINGS: dict[tuple[str, str], str] = {}
DIFFERS_ABOVE = 1.05  # a ratio above this, with its whole quartile range above 1, is explained


def ratios(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every port mode / each of its peers: the ratio of pooled medians, the quartiles' range,
    the rounds' decision (shared/measure/rounds.py: `comparable`, and `why` when not) and, for a
    printed ratio above DIFFERS_ABOVE whose range is above 1, what differs between the two."""
    out = []
    for port_impl, peers in PLAN.items():
        mine = results.get(port_impl)
        for peer in peers:
            other = results.get(peer.name)
            if not mine or not other:
                continue
            decision = rounds_rule.ratio_decision(port_impl, mine.get("rounds") or [], peer.name,
                                                  other.get("rounds") or [])
            record: dict[str, Any] = {"port": port_impl, "peer": peer.name, **decision}
            if not mine.get("error") and not other.get("error"):
                record.update(ratio=mine["median"] / other["median"], low=mine["q1"] / other["q3"],
                              high=mine["q3"] / other["q1"])
                if decision["comparable"] and record["ratio"] > DIFFERS_ABOVE and record["low"] > 1:
                    record["differs"] = differs(port_impl, mine, peer.name, other)
            out.append(record)
    return out


def differs(port: str, mine: dict[str, Any], peer: str, other: dict[str, Any]) -> dict[str, Any]:
    """The mode each side ran and the threads each read back in its worker, and the A/B finding
    for the pair where one is known (None: none measured)."""
    return {"port": {"runs_as": mine.get("runs_as"), "threads_used": mine.get("threads_used")},
            "peer": {"runs_as": other.get("runs_as"), "threads_used": other.get("threads_used")},
            "finding": FINDINGS.get((port, peer))}


# Each peer's model, built by its checkpoint library's plug-in (`build_model`: the plug-in's keys
# drive it), with the options of this peer: family -> (the plug-in's format, options).
PEER_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "timm": ("timm", {}), "hf-torch": ("hf", {}), "hf-flax": ("hf", {"framework": "flax", "seed": 0}),
    "hf-tf": ("hf", {"framework": "tf"}), "keras-hub": ("keras_hub", {}),
}


def peer_call(family: str, mode: str, spec: ModelSpec, images: np.ndarray,
              threads: int) -> tuple[Callable[[], Any], dict[str, Any]]:
    """`family`'s timed call on `images` and its facts (ports/public_models.py), in the worker that
    times it. Its parameter count leaves out those its library's table says the forward never
    reads (Transformers' DINOv2 and DINOv3 mask_token, read only with bool_masked_pos), as the
    spec's count does: equal counts say the peer is the same model."""
    fmt, options = PEER_MODELS[family]
    public = importlib.import_module("ports.public_models")
    built: list[Any] = []

    def make() -> Any:
        built.append(format_module(fmt).build_model(spec, **options))
        return built[-1]

    call, facts = public.BUILDERS[family](spec, images, mode, threads, make)
    unread = public.parameter_sizes(built[0], format_module(fmt).table(fmt, spec).inert)
    if unread:
        facts |= {"params": facts["params"] - sum(unread.values()), "unread": sorted(unread)}
    return call, facts


# ---- the worker side: the `peers` job kind (`PEERS`, declared below) ------------------------------
def run(framework: str, job: dict[str, Any], out: Output) -> None:
    """Build one implementation, then time its forward: first call, warm-up, repeats."""
    spec = ModelSpec.from_dict(job["spec"])
    threads, impl = int(job["threads"]), str(job["impl"])
    images = probe_batch(spec, batch=int(job["batch"]), seed=int(job["seed"]))
    out.report.update({"impl": impl, "threads_applied": cpu_record(threads)})
    if impl.startswith("port:"):
        call, facts = _port_call(impl, spec, images, job)
    else:
        family, _, mode = impl.partition(":")
        call, facts = peer_call(family, mode, spec, images, threads)
    out.report.update(facts)
    out.report["runs_as"] = runs_as(impl, facts)
    first, _ = time_once(call)
    with ForeignCpu(pinned_cpus()) as span:  # the worker's timed span: what the rounds' rule reads
        samples = repeat(call, Budget(**job["budget"]))
    stats = summarise(samples)
    out.report.update({"first_call_s": first, "samples": samples, **stats, "foreign_cpu": span.value,
                       "gflops": flops.forward_flops(spec, images.shape[0]) / stats["median"] / 1e9})
    if impl.startswith("port:"):  # after the forward, as the timing job measures it, in its mode
        module = ports.load_port_module(impl.split(":")[1])
        out.report["gemm"] = roofline.gemm_rate(module, spec, images.shape[0], job["device"],
                                                mode=facts["mode_choice"].get("chosen"))
    out.report["threads_used"] = threads_used(framework, threads)


# How each implementation runs its forward, for "what differs" (the port's compiled mode is read
# back from what its compiled_forward returned: `_port_call`).
RUNS_AS = {"port:torch:eager": "torch eager", "port:torch:compiled": "torch.compile (inductor)",
           "port:flax:compiled": "jax.jit (XLA)", "timm:eager": "torch eager",
           "timm:compiled": "torch.compile (inductor)", "hf-torch:eager": "torch eager",
           "hf-flax:jit": "jax.jit (XLA)", "keras-hub:predict": "predict_on_batch",
           "keras-hub:graph": "tf.function, XLA off", "hf-tf:graph": "tf.function, jit_compile unset"}


# a tf.function's jit_compile, as "what differs" says it
XLA_STATES = {True: "on", False: "off", None: "unset (off unless auto-clustering)"}


def runs_as(impl: str, facts: dict[str, Any]) -> str:
    """RUNS_AS's line, with what the worker read back (attention kind, jit_compile, XLA)."""
    text = facts.get("runs_as") or RUNS_AS.get(impl, impl.partition(":")[2])
    extra = [f"{k} {facts[k]}" for k in ("attention", "jit_compile") if facts.get(k) is not None]
    return ", ".join([text, *extra])


def threads_used(framework: str, threads: int) -> dict[str, Any]:
    """The threads the framework reports after the timing (its port module's `set_threads`, which
    reads back what holds once the runtime has started) and the CPUs the process ran on."""
    record: dict[str, Any] = {"affinity": pinned_cpus()}
    try:
        record.update(ports.load_port_module(framework).set_threads(threads))
    except Exception as exc:  # a report, not a reason to lose the timing
        record["error"] = one_line(exc)
    return record


PEERS = JobKind("peers", run)


def _port_call(impl: str, spec: ModelSpec, images: Any,
               job: dict[str, Any]) -> tuple[Callable[[], Any], dict[str, Any]]:
    _, name, mode = impl.split(":")
    module = ports.load_port_module(name)
    module.pin_precision()
    module.set_threads(int(job["threads"]))
    port = module.Port(spec, device=job["device"])
    port.load(init_weights(spec, seed=0))
    prepared = port.prepare(images)
    port.sync(prepared)
    # The port runs the mode `time` chose for this machine and spec shape (measured now if none was)
    choice, forward = modes.choose_for(name, module, port, prepared, mode, images.shape[0],
                                       int(job["threads"]), job["reference_npz"])
    # A tf.function says whether XLA compiles it (read back, not assumed: the choice is the port's).
    xla = getattr(forward, "_jit_compile", "unknown")
    facts: dict[str, Any] = {"params": port.param_count(), "mode": mode, "mode_choice": choice}
    if name == "keras" and mode == "compiled":
        facts["runs_as"] = f"tf.function, XLA {XLA_STATES.get(xla, 'unknown')}"
    return synced(port, lambda: forward(prepared)), facts


def job_config(batch: int, threads: int, device: str, budget: Budget, seed: int = 1234) -> dict[str, Any]:
    return {"batch": batch, "threads": threads, "device": device, "budget": asdict(budget), "seed": seed}
