"""A user's own model (`--model FILE.py:NAME`, `portbench.check`): a torch, Keras, Flax or MLX
model portbench did not write, where our ports stand.

- `run`: the parent's side: the `--model` argument checked without importing it, the worker
  started (`run_user`, `propose_user_spec`) and its report in canonical terms (`UserRun`).
- `jobs`: the worker's job kinds, `user` and `propose`: what the parent imports to name a job.
- `evaluate`: the `user` job's work in the worker: the model bound, run, its taps captured (and
  `UserPort`, the model behind the timing harness's port interface); `taps`: which layer gives each
  tap, and their outputs as the reference's tokens (through a library's caller too).
- `framework`: which framework a model object is, and its `ports/<fw>/user.py` (`user_port`).
- `guard`: the user's code imported and called in the worker, whatever it does a one-line error.
- `binding`: a model's parameters bound to the canonical tensors (by a naming convention: the
  port's table and each checkpoint library's, read by the worker from the plug-ins itself), both
  ways; `structure`, `structure_blocks`, `structure_parts`: binding by the layers' structure
  when no convention fits; `rules`: the user's `--map rules.toml`.
- `spec_check`: the one comparison of a model's layers with a spec (also `compare.py audit`'s).
- `proposal`: the spec read from a built model (`spec --from-model`; the worker's `propose` job
  kind), from its library's configuration, its checkpoint format's names (`proposal_search`) and
  its layers' settings (`proposal_layers`).

The layers each framework reports are `shared.core.layer.Layer` (the ports import only the core).
A tool: imported by `cli` (and by `teaching`, whose `user_check` is the verdict with diagnose and
trace, `measure`, whose timing runs `UserPort`); imports `checkpoints`, `runtime` and `core` only.
"""
