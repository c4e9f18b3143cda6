# The front-door commands. Each creates .venv (Python 3.12, found by tools/python.sh; 3.11 where
# no 3.12 is found) and installs the pinned set on first use.
#   make compare   verify the default spec in torch, Keras, Flax and MLX, then time the ports
#   make test      ruff and the whole test suite (what CI runs); finds or installs headless Chromium
#   make check     the fast tier for iteration: ruff, the core units and one preset in each port
PY ?= $(shell tools/python.sh)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: compare test check lint clean-venv

$(STAMP): pyproject.toml constraints/ci.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints/ci.txt -e ".[all,dev]"
	# keras-hub and tf_keras (Transformers' TF models) pin Keras and TensorFlow versions of their own;
	# installed without dependencies they sit beside Keras 3 and share its TensorFlow.
	$(BIN)/python -m pip install --quiet --no-deps -c constraints/ci.txt keras-hub tf_keras
	# Transformers 4.x (pure Python) beside 5: its TF and Flax classes, for the processes that need them,
	# in the side directory shared/runtime/process_env.py names, pinned by constraints/ci.txt's
	# `#transformers4` lines.
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target \
		"$$($(BIN)/python -c 'from shared.runtime.process_env import TRANSFORMERS4; print(TRANSFORMERS4)')" \
		$$(sed -n 's/^#transformers4 //p' constraints/ci.txt)
	touch $(STAMP)

compare: $(STAMP)
	$(BIN)/python compare.py

# tools/chromium.sh prints a headless browser's path (installing Debian's chromium as root when
# none is found) or stops with one line naming the command to run; the HTML tests use that path.
test: $(STAMP)
	$(BIN)/python -m ruff check .
	browser="$$(tools/chromium.sh)" && PORTBENCH_CHROMIUM="$$browser" $(BIN)/python -m pytest -q

check: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m pytest -q -m fast

lint: $(STAMP)
	$(BIN)/python -m ruff check .

clean-venv:
	rm -rf $(VENV)
