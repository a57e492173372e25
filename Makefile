# Each target installs what it needs into .venv first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: serve test bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e '.[test]'
	touch $@

serve: $(VENV)/.installed
	$(VENV)/bin/volthub serve --host $(HOST) --port $(PORT)

test: $(VENV)/.installed-test
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.installed
	$(PIP) install --quiet -e '.[bench]'
	$(VENV)/bin/volthub loadtest --help >/dev/null

clean:
	rm -rf $(VENV) var .pytest_cache
