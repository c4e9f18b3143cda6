"""The contract every port and tool shares: what the model is, what its weights are, and what
"the same function" means.

- `spec`: `ModelSpec`, every field that changes the function, and what is derived from it once.
- `presets`: named specs with their sources' exact parameter counts.
- `record`: the one base of `ModelSpec` and `TrainSpec`: dict / JSON / TOML / file round trips,
  typed `FIELD=VALUE` overrides, the stable hash.
- `documents`: decoding what a user hands over (spec, recipe and config files), one line per
  problem.
- `weights`: the canonical safetensors file, its tensor layouts and the layout transforms.
- `mapping`: weight-name tables (canonical <-> a port's or a library's names) and the one
  engine that derives both directions from a table.
- `layer`: one layer of a built model as each `ports/<fw>/user.py` reports it (binding it to the
  canonical tensors is `shared/your_model/`'s).
- `train_spec`: `TrainSpec`, the training recipe every port's `train.py` reads (AdamW pinned,
  schedule, data, initial weights), its presets, and the rungs training is offered at.
- `probes`: the framework-neutral helpers of each port's `defaults.py` (signature and source
  defaults, GELU form by probing, the audit's `Finding`).
- `timm_names`: timm's VisionTransformer parameter names as a mapping table (the torch port's
  names, and the `timm` checkpoint format's).
- `inputs`, `positions`, `taps`: seeded probe batches, fixed position tables, tap names.
- `reference`: the float64 NumPy oracle; `activations`: the spec's activation forms it computes
  (and a built model's layers are probed against).
- `tolerance`: the project's logit tolerance.
- `equivalence`: the one verdict (vs the reference, pairwise, parameter count, finiteness).
- `budget`: the memory a spec needs, refused before anything is allocated; `memory`: the memory
  available now and the refusal of a size (a file's) that cannot fit.
- `files`: atomic, exclusive writes of what a user asked for; the one checked opener every read
  of a user's file goes through (a directory, FIFO or device is named, never read).
- `containers`: `.npy` / `.npz` / safetensors read without trusting their headers' sizes.
- `terminal`: user text made printable (control characters escaped).
- `summary`: the spec's layer table and plain-text tables.

Imports only NumPy, the standard library and `shared.errors`; nothing here knows a framework,
a subprocess or a command line.
"""
