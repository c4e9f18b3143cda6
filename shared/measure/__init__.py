"""Fair, phase-separated timing (`compare.py time`, `compare.py report`).

Framework-neutral, like the rest of `shared/`: the frameworks are only imported by
`shared.measure.phases` (the worker's `timing` job kind), in its own process per framework.

- `stats`: warm-up then repeats until a time budget or a count; median, IQR, n.
- `environment`: what a results file records about the machine and the run.
- `schema`: the versioned JSON results file (documented in docs/results-schema.md).
- `guard`: the confound guard (rank only like with like) and the ranking itself.
- `factorial`: spec x framework attribution of a time difference.
- `phases`: the timed phases of one framework, run in the worker process.
- `gate`: the equivalence gate before timing (shared/core/equivalence.py's verdict).
- `backends`: which backend an entry runs on; device names and memory, asked of the port.
- `runner`: one worker per framework through the one launcher, with a timeout; collects rows.
- `output`: terminal table, CSV and the PNG chart.
"""
