# The two front-door commands. Each creates .venv (Python 3.11) and installs the pinned set on first use.
#   make compare   verify the default spec in torch, Keras and Flax, then time the ports
#   make test      the whole test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: compare test lint clean-venv

$(STAMP): pyproject.toml constraints/ci.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints/ci.txt -e ".[all,dev]"
	touch $(STAMP)

compare: $(STAMP)
	$(BIN)/python compare.py

test: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/python -m ruff check .

clean-venv:
	rm -rf $(VENV)
