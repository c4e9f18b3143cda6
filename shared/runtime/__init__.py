"""Running a port: the interface every `ports/<fw>/port.py` implements (`contract`), the one
launcher that starts a framework in its own fresh process (`launch`, with the environment and
CPUs of `process_env`), the one worker that runs there (`worker`), the typed jobs it runs and
JOB.json (`job_kinds`: each kind is declared beside its function, in whichever package implements
it; the worker imports that module only when a job names it), the port-running kinds (`jobs`:
logits, taps; `devices`: which device classes a port can use here, and why not) and verification
against the reference (`verify`). A user's own model's kinds are `shared/your_model/`'s.

May import `shared.core` and `ports` (the registry); never a framework at module level, and never
a tool package (training, teaching, measure, checkpoints, your_model, cli).
"""
