"""The worker's job kinds, the typed job a tool hands the launcher, and JOB.json.

A package declares each job kind it implements beside the function that runs it:

    def steps(framework: str, job: dict[str, Any], out: Output) -> None: ...
    STEPS = JobKind("steps", steps)

and hands the launcher `STEPS.job(spec=..., ...)`: a `Job` naming its kind and its handler
("shared.training.parity:steps"). The worker (`shared/runtime/worker.py`) imports the handler's
module, which declares its kinds as it is imported, and runs the declared function. So the
runtime imports no tool, yet every target of the job table is a `JobKind(...)` line that
`tests/test_layering.py` reads and checks: the handler is a function of the declaring module,
names are unique, and the declaring module follows the import rules of its package (the
runtime's own kinds, the tools', an `experiments/` package's).

JOB.json is written (`write_job_file`) and read back (`read_job_file`) here only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from shared.core.data_record import DataRecord
from shared.errors import PortbenchError


@dataclass
class Output:
    """What a job fills as it goes, so a failure part-way keeps what was done: its report (JSON)
    and its arrays (NumPy)."""

    report: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, Any] = field(default_factory=dict)


# function(framework, the job's fields, out): reads its fields, imports the port, fills `out`.
Handler = Callable[[str, dict[str, Any], Output], None]
# kind name -> its declaration, filled as the declaring modules are imported.
DECLARED: dict[str, JobKind] = {}


@dataclass(frozen=True)
class JobKind:
    """A job kind: its name and the module-level function that runs it."""

    name: str
    function: Handler

    def __post_init__(self) -> None:
        known = DECLARED.get(self.name)
        if known is not None and known.handler != self.handler:  # a programming error, not input
            raise RuntimeError(f"job kind {self.name!r} declared twice: {known.handler} and {self.handler}")
        DECLARED[self.name] = self

    @property
    def handler(self) -> str:
        """"module:function", what JOB.json names and the worker imports."""
        return f"{self.function.__module__}:{self.function.__name__}"

    def job(self, **fields: Any) -> Job:
        """One job of this kind; `fields` are what its handler reads (JSON values)."""
        return Job(self.name, self.handler, fields)


@dataclass(frozen=True)
class Job(DataRecord):
    """One request to the worker: its kind, the handler that runs it and the handler's fields
    (JSON values). JOB.json holds each as its `to_dict`; `from_dict` refuses anything else in one
    line naming the job and the field."""

    KIND: ClassVar[str] = "job"

    kind: str
    handler: str  # "module:function"
    fields: dict[str, Any]

    def validate(self) -> None:
        if ":" not in self.handler:
            self.refuse(f".handler is {self.handler!r:.40}, expected \"module:function\"")


def write_job_file(path: Path, framework: str, jobs: Mapping[str, Job]) -> None:
    """JOB.json: the registry entry the worker runs as, and each named job."""
    path.write_text(json.dumps({"framework": framework,
                                "jobs": {name: job.to_dict() for name, job in jobs.items()}}))


def read_job_file(path: Path) -> tuple[str, dict[str, Job]]:
    """(framework, name -> job) from a JOB.json `write_job_file` wrote."""
    request = json.loads(path.read_text())
    return request["framework"], {name: Job.from_dict(data, f"job {name!r}", PortbenchError)
                                  for name, data in request["jobs"].items()}
