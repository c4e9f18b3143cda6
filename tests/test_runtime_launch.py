"""The one launcher (shared/runtime/launch.py) and the one worker (shared/runtime/worker.py): the
environment a framework process starts with, a timeout that kills the whole process group, and
one-line errors from a worker that crashes or a job that fails."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from shared import REPO_ROOT
from shared.core import reference
from shared.core.equivalence import check_logits
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.weights import init_weights, save_weights
from shared.errors import PortbenchError
from shared.runtime.job_kinds import DECLARED, Job, JobKind, read_job_file, write_job_file
from shared.runtime.jobs import LOGITS, TAPS
from shared.runtime.launch import PROGRESS_PREFIX, launch, run_worker
from shared.runtime.worker import FAULT_ENV

SHOW_ENV = ("import json, os; print(json.dumps({'env': dict(os.environ), "
            "'affinity': sorted(os.sched_getaffinity(0))}))")


def child_record(framework: str, **options: object) -> dict:
    lines: list[str] = []
    done = launch(["-c", SHOW_ENV], framework, 60, echo=lines.append, **options)
    assert done.error is None, done.tail
    return json.loads(lines[-1])


def test_a_framework_process_gets_the_registry_environment() -> None:
    env = child_record("keras-jax")["env"]
    assert env["KERAS_BACKEND"] == "jax"
    # Transformers would import every installed framework otherwise: only the entry's own runtimes.
    assert (env["USE_TF"], env["USE_FLAX"], env["USE_TORCH"]) == ("0", "1", "0")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO_ROOT)
    assert env["PYTHONUNBUFFERED"] == "1" and "TF_CPP_MIN_LOG_LEVEL" in env
    torch_env = child_record("torch")["env"]
    assert (torch_env["USE_TF"], torch_env["USE_FLAX"], torch_env["USE_TORCH"]) == ("0", "0", "1")
    assert "KERAS_BACKEND" not in torch_env or torch_env["KERAS_BACKEND"] == os.environ.get("KERAS_BACKEND")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity API on this OS")
def test_threads_and_pinning_hold_from_the_first_instruction() -> None:
    before = os.sched_getaffinity(0)
    record = child_record("flax", threads=1, pin=True)
    assert record["env"]["OMP_NUM_THREADS"] == "1" and record["env"]["TF_NUM_INTRAOP_THREADS"] == "1"
    assert "--xla_cpu_multi_thread_eigen=false" in record["env"]["XLA_FLAGS"]
    assert record["affinity"] == sorted(before)[:1]
    assert os.sched_getaffinity(0) == before  # the launching thread is restored
    assert len(child_record("flax")["affinity"]) == len(before)  # no pinning unless asked


def test_progress_lines_are_relayed_and_other_lines_kept() -> None:
    code = (f"import sys; print('{PROGRESS_PREFIX} torch: importing', file=sys.stderr); "
            "print('some warning', file=sys.stderr); sys.exit(3)")
    progress: list[str] = []
    done = launch(["-c", code], "torch", 60, progress=progress.append)
    assert progress == ["  torch: importing"]
    assert done.tail == ["some warning"]
    assert done.returncode == 3 and done.error == "worker exited with status 3: some warning"


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
            f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(600)")
    started = time.perf_counter()
    done = launch(["-c", code], None, 5)
    assert time.perf_counter() - started < 60
    assert done.timed_out and done.error == "timed out after 5 s; worker killed"
    grandchild = int(pid_file.read_text())
    deadline = time.time() + 10
    while time.time() < deadline and _alive(grandchild):
        time.sleep(0.1)
    assert not _alive(grandchild), "the compiler-like grandchild outlived the timeout"


def test_what_a_process_leaves_in_its_temporary_folder_goes_with_it(tmp_path: Path) -> None:
    """A framework leaves files for `atexit` to delete (TensorFlow's autograph), and a worker ends
    with `os._exit`, which skips it: the process's own TMPDIR is removed when it ends."""
    record = tmp_path / "left.txt"
    code = ("import os, tempfile; f = tempfile.NamedTemporaryFile(suffix='.py', delete=False); "
            f"open({str(record)!r}, 'w').write(f.name); os._exit(0)")
    done = launch(["-c", code], None, 60)
    assert done.returncode == 0
    left = Path(record.read_text())
    assert left.parent.parent == Path(tempfile.gettempdir()) and not left.parent.exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")  # a zombie is dead


def test_a_crashing_worker_is_one_line_for_every_job(tmp_path: Path) -> None:
    # SIGSEGV before the framework import; in this worker's environment only, never this process's,
    # where a background task's worker started meanwhile would crash too (tests/background.py)
    jobs = {"a": LOGITS.job(), "b": TAPS.job()}
    result = run_worker("torch", jobs, tmp_path, 120, env={FAULT_ENV: "torch:crash"})
    assert result.process.error == "worker killed by signal SIGSEGV"
    assert result.error("a") == result.error("b") == "worker killed by signal SIGSEGV"


def test_one_worker_runs_every_kind_and_a_failing_job_is_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    spec = get_preset("quadrant")
    tensors, images = init_weights(spec, 0), probe_batch(spec)
    save_weights(tmp_path / "w.safetensors", spec, tensors)
    np.save(tmp_path / "x.npy", images)
    case = {"spec": spec.to_json(), "weights": str(tmp_path / "w.safetensors"),
            "input": str(tmp_path / "x.npy")}
    jobs = {"logits": LOGITS.job(**case), "taps": TAPS.job(**case),
            "unknown": Job("warp", "shared.runtime.jobs:logits", {}),
            "nowhere": Job("warp", "shared.runtime.no_such_module:warp", {}),
            "missing": LOGITS.job(**{**case, "weights": "/nope"})}
    result = run_worker("torch", jobs, tmp_path, 300)
    assert result.process.error is None
    logits = result.arrays["logits"]["logits"]
    assert check_logits(spec, logits, reference.forward(spec, tensors, images),
                        result.reports["logits"]["param_count"]).passed
    np.testing.assert_array_equal(result.arrays["taps"]["logits"], logits)
    assert result.error("unknown") == ("unknown job kind 'warp': shared.runtime.jobs declares no JobKind of "
                                       "that name for 'shared.runtime.jobs:logits'")
    assert result.error("nowhere") == ("job kind 'warp': its handler 'shared.runtime.no_such_module:warp' "
                                       "names no module")
    assert "/nope" in result.error("missing") and "\n" not in result.error("missing")
    assert "traceback" not in result.reports["missing"]  # a user's mistake, not a port bug


def test_an_injected_failure_keeps_the_partial_report(tmp_path: Path) -> None:
    spec = get_preset("quadrant")
    save_weights(tmp_path / "w.safetensors", spec, init_weights(spec, 0))
    np.save(tmp_path / "x.npy", probe_batch(spec))
    job = LOGITS.job(spec=spec.to_json(), weights=str(tmp_path / "w.safetensors"),
                     input=str(tmp_path / "x.npy"))
    result = run_worker("torch", {"one": job}, tmp_path, 300, env={FAULT_ENV: "torch:error"})
    assert result.error("one") == f"RuntimeError: injected failure after the job ran ({FAULT_ENV})"
    assert result.reports["one"]["param_count"] == spec.derived.params  # measured before the failure
    assert "Traceback" in result.reports["one"]["traceback"]


def test_a_job_file_round_trips_and_a_malformed_job_is_one_line(tmp_path: Path) -> None:
    jobs = {"a": LOGITS.job(spec="{}", dtypes=False), "b": TAPS.job()}
    write_job_file(tmp_path / "j.json", "torch", jobs)
    assert read_job_file(tmp_path / "j.json") == ("torch", jobs)
    assert jobs["a"] == Job("logits", "shared.runtime.jobs:logits", {"spec": "{}", "dtypes": False})
    for data, message in [
        ({"kind": "logits"}, "job 'x' lacks the field 'handler'"),
        ({"kind": "logits", "handler": "logits", "fields": {}}, "job 'x'.handler is 'logits', expected "
                                                                 "\"module:function\""),
        ({"kind": 1, "handler": "m:f", "fields": {}}, "job 'x'.kind is 1, expected a string"),
        ({"kind": "k", "handler": "m:f", "fields": []}, "job 'x'.fields is [], expected an object"),
        ({"kind": "k", "handler": "m:f", "fields": {}, "when": 1},
         "job 'x' has the unknown field 'when'; expected some of: kind, handler, fields"),
    ]:
        with pytest.raises(PortbenchError) as refused:
            Job.from_dict(data, "job 'x'", PortbenchError)
        assert str(refused.value) == message
    with pytest.raises(RuntimeError) as twice:
        JobKind("logits", child_record)  # another function under a taken name
    assert str(twice.value) == ("job kind 'logits' declared twice: shared.runtime.jobs:logits and "
                                f"{child_record.__module__}:child_record")
    assert DECLARED["logits"] is LOGITS


def unset_environments(source: str) -> list[int]:
    """The lines of `source` where a process is started for a background task (`start(Popen(...))`)
    without `env=` or without `cwd=`."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "start" and node.args:
            inner = node.args[0]
            if isinstance(inner, ast.Call) and getattr(inner.func, "attr", None) == "Popen" and \
                    not {"env", "cwd"} <= {k.arg for k in inner.keywords}:
                found.append(node.lineno)
    return found


def test_every_process_a_background_task_starts_is_given_its_environment() -> None:
    """A child that inherits its environment execs with the parent's C environ, which an in-process
    test may be changing in the main thread at that instant: a task's first `train` once failed to
    start with EFAULT ("Bad address"). tests/background.py's ENVIRON is passed instead. Its working
    directory likewise: an in-process CLI test chdirs for a moment (tests/adversarial.py run_cli),
    and a task's `python -c` started then imported a `ports.py` a test had left there."""
    assert unset_environments("start(subprocess.Popen(['x'], stdout=1))") == [1]  # the check sees one
    assert unset_environments("start(subprocess.Popen(['x'], env=e))") == [1]  # and one without cwd
    found = {path.name: lines for path in sorted((REPO_ROOT / "tests").glob("*.py"))
             if (lines := unset_environments(path.read_text()))}
    assert found == {}
