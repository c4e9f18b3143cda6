"""Fair, phase-separated timing (`compare.py time`, `compare.py report`).

Framework-neutral, like the rest of `shared/`: the frameworks are only imported inside
`shared.measure.worker`, which runs as its own subprocess per framework.

- `stats`: warm-up then repeats until a time budget or a count; median, IQR, n.
- `environment`: what a results file records about the machine and the run.
- `schema`: the versioned JSON results file (documented in docs/results-schema.md).
- `guard`: the confound guard (rank only like with like) and the ranking itself.
- `factorial`: spec x framework attribution of a time difference.
- `runner`: launches one worker subprocess per framework, with a timeout, and collects rows.
- `output`: terminal table, CSV and the PNG chart.
"""
