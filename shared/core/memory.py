"""The memory this process may use now, and the refusal of a size that cannot fit, before it is
allocated. Kept apart from `budget.py` (what a spec needs) because the file readers (`files`,
`containers`) refuse by it, and a spec is itself read through them: were it in `budget.py`, the
chain files -> budget -> spec -> record -> documents -> files would close into a circle.
"""

from __future__ import annotations

import os

from shared.errors import PortbenchError, SpecError

# What one refusal may take of the memory available now: leave room for the frameworks.
USABLE_FRACTION = 0.8


def available_bytes() -> int | None:
    """Memory available to this process now (Linux: MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.3g} MiB"


def check_bytes_fit(size: int, what: str, error: type[PortbenchError] = SpecError) -> None:
    """Refuse, before allocating, `size` bytes (a file's, or what its header declares) that the
    memory available now cannot hold; the message reads "<what> N GiB, more than ..."."""
    available = available_bytes()
    if available is not None and size > USABLE_FRACTION * available:
        raise error(f"{what} {gib(size)}, more than the {gib(int(USABLE_FRACTION * available))} "
                    "of memory usable now; refused before reading it")
