"""The archive's research, beside the product: each `compare.py experiment NAME` asks one question
of the ports and prints what it measured (experiments/README.md: the questions, how to run them,
what they found). `cli` (the subcommand), `training_runs` (`compare.py train` per framework),
`positions`, `attention`, `quadrant` (the experiments), `plateau/` (the plateau's machinery).

Imports run one way: experiments -> the product (`shared/`, `ports/`); nothing in the product
imports this package (tests/test_experiments.py checks it). compare.py registers `cli` beside
shared/cli's subcommands, and the worker's `plateau` job kind names `experiments.plateau.runs` by
string, resolved only when a plateau run asks for it.
"""
