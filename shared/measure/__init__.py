"""Fair, phase-separated timing (`compare.py time`, `sweep`, `peers`, `report`, the main job).

Framework-neutral, like the rest of `shared/`: the frameworks are only imported in worker
processes, by the port modules that the worker's `timing` (`phases`) and `peers` (`peer_timing`) job
kinds load, one process per framework.

- `stats`: warm-up then repeats until a time budget or a count; median, IQR, n.
- `environment`: what a results file records about the machine and the run.
- `schema`: the versioned JSON results file (documented in docs/results-schema.md).
- `guard`: the confound guard (rank only like with like) and the ranking itself.
- `factorial`: spec x framework attribution of a time difference.
- `flops`: the spec's matrix products: analytic FLOPs and the roofline's GEMM shapes.
- `roofline`: each framework's GEMM rate (in the run's compute dtype) and a row's share of it.
- `phases`: the timed phases of one framework, run in the worker process.
- `gate`: the equivalence gate before timing (shared/core/equivalence.py's verdict), also as
  `compare.py verify`'s entries for the main job.
- `backends`: which backend an entry runs on; device names and memory, asked of the port.
- `runner`: one worker per framework through the one launcher, with a timeout; collects rows.
- `sweep`: every (batch, image size) point through the runner, and the log-log slope fits.
- `contention`: other processes' CPU use on a worker's CPUs, per phase, span and GEMM measurement.
- `rounds`: the rule deciding, from interleaved rounds of workers, whether a ratio or a rank is
  printed (no round contended, the rounds agree) and which GEMM rate is the ceiling.
- `peer_timing`: each port against the public implementations (ports/public_models.py builds them).
- `output`: the terminal table (100 columns, or `wide`); `exports`: the CSV and the PNG chart;
  `phase_record`: how the worker records each phase.
"""
