"""portbench's framework-neutral product code, grouped by concern. Imports run one way:
`cli` -> the tools (`training`, `teaching`, `measure`, `your_model`, `checkpoints`, `report`) ->
`runtime` -> `core`; `your_model` imports `checkpoints` and no other tool (`teaching` and `measure`
import it).

- `core/`: the spec, presets, canonical weights and layouts, the float64 reference, tolerance and
  the equivalence verdict. NumPy only.
- `runtime/`: the port contract, the one launcher of framework processes, the one worker.
- `training/`: the pinned training recipe, schedule, data, loop and parity jobs.
- `teaching/`: the divergence catalogue, trace, diagnose, audit, lessons.
- `measure/`: fair, phase-separated timing and its results files.
- `checkpoints/`: torchvision / timm / Hugging Face / big_vision files <-> canonical weights (the
  only package here that reads framework files, inside functions).
- `your_model/`: a user's own model (`--model FILE.py:NAME`): binding its parameters, the spec
  read from it, the spec check, the worker's jobs that import and run it.
- `report/`: self-contained HTML pages of what the other tools produce.
- `cli/`: `compare.py`'s subcommands: argument parsing and printing only.
- `errors.py`: the one error family every message a user sees comes from.

Framework code lives in `ports/<fw>/`; nothing in `shared/` outside `checkpoints/` imports a
framework. The ports stand on the core alone: they import `core`, `errors` and
`runtime/contract.py`, never a tool. The worker's job kinds are declared where they are
implemented (`runtime/job_kinds.py`), so the runtime imports no tool. `experiments/` beside the
product may import it, never the reverse (but for `compare.py experiment`'s one dispatch in
`cli`). No two modules import each other, even inside functions. `tests/test_layering.py`
checks every rule on the source.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
