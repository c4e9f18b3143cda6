#!/usr/bin/env bash
# Prints the Python that `make` builds .venv with: the newest 3.12 found (JAX 0.12 and Flax 0.12.9+
# need 3.12; every framework portbench runs has 3.12 wheels), else `python3` when it is 3.11 or
# newer (the pinned set then takes JAX 0.10 and Flax 0.12.8: constraints/ci.txt's markers).
# A pyenv install is looked into as well, since its `python3.12` shim answers only when 3.12 is
# the selected version. `make PY=/path/to/python` overrides all of this.
set -euo pipefail

works() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))' >/dev/null 2>&1; }

for candidate in python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && works "$candidate"; then command -v "$candidate"; exit 0; fi
done
if command -v pyenv >/dev/null 2>&1; then
    version=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12\.[0-9]+$' | sort -t. -k3 -n | tail -n 1 || true)
    if [ -n "$version" ] && works "$(pyenv root)/versions/$version/bin/python3.12"; then
        echo "$(pyenv root)/versions/$version/bin/python3.12"; exit 0
    fi
fi
if command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))'; then
    echo "tools/python.sh: no Python 3.12 found; using $(python3 --version) (JAX 0.10, Flax 0.12.8)" >&2
    command -v python3; exit 0
fi
echo "tools/python.sh: portbench needs Python 3.12 (or 3.11); install one, or run make PY=/path/to/python" >&2
exit 1
