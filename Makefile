# Two entry points on a fresh machine: `make demo` (the main job) and `make test` (every test).
# Both create .venv when it is missing and install what they need into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_DEV := $(VENV)/.installed-dev
STAMP_RUN := $(VENV)/.installed-run

.PHONY: test demo venv clean bench

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP_RUN): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[dev]"
	touch $@ $(STAMP_RUN)

venv: $(STAMP_DEV)

test: $(STAMP_DEV)
	$(PY) -m pytest -q

demo: $(STAMP_RUN)
	$(VENV)/bin/invkin demo

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
