"""Framework start-up noise kept out of what `compare.py` prints.

TensorFlow, XLA and absl write to the process's file descriptor 2 from C++ ("All log messages
before absl::InitializeLog() ...", "oneDNN custom operations are on ...", CPU-feature notices),
whatever TF_CPP_MIN_LOG_LEVEL says, whenever a subcommand imports a framework in its own process
(`compare.py logits --framework keras`). Worker processes are already captured by the launcher.
Here descriptor 2 goes to a temporary file for the whole command while Python's `sys.stderr`
(progress, `error: ...`) keeps the terminal; the captured lines are shown only when the command
fails with something other than a user's mistake (a PortbenchError says what to do in one line).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

from shared.errors import PortbenchError


@contextlib.contextmanager
def native_stderr_captured() -> Iterator[None]:
    if sys.stderr is not sys.__stderr__:  # a caller (pytest's capsys, an embedding host) owns it
        yield
        return
    try:
        sys.stderr.flush()
        terminal = os.dup(2)
    except (OSError, ValueError):  # no real descriptor 2: nothing to capture
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        python_stderr = sys.stderr
        sys.stderr = open(terminal, "w", buffering=1, closefd=False)  # noqa: SIM115 (restored below)
        failed = False
        try:
            yield
        except PortbenchError:
            raise
        except BaseException:
            failed = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(terminal, 2)
            sys.stderr.close()
            sys.stderr = python_stderr
            os.close(terminal)
            captured.seek(0)
            noise = captured.read().decode(errors="replace").strip()
            if failed and noise:
                print("framework output (shown because the command failed):\n" + noise, file=sys.stderr)
