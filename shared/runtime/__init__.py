"""Running a port: the interface every `ports/<fw>/port.py` implements (`contract`), the one
launcher that starts a framework in its own fresh process, and the worker that runs there.

May import `shared.core` and `ports` (the registry); never a framework at module level, and never
a tool package (training, teaching, measure, checkpoints, cli).
"""
