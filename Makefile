# Two entry points on a fresh machine: `make demo` (the main job) and `make test` (every test).
# Both create .venv when it is missing and install what they need into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_DEV := $(VENV)/.installed-dev
STAMP_RUN := $(VENV)/.installed-run

.PHONY: test test-fast lint demo venv chromium clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP_RUN): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[viewer]"
	touch $@

$(STAMP_DEV): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[dev]"
	touch $@ $(STAMP_RUN)

venv: $(STAMP_DEV)

# The browser tests drive Debian's Chromium (never a downloaded browser build).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; the browser tests will be skipped"; \
	  else echo "warning: chromium missing and apt-get unavailable; the browser tests will be skipped"; fi; }

# The lint gate: ruff with the bug-finding rule set of pyproject.toml ([tool.ruff]).
lint: $(STAMP_DEV)
	$(VENV)/bin/ruff check .

# Everything, as CI runs it (.ci/run): lint, then every test, the slow ones included.
test: lint $(STAMP_DEV) chromium
	$(PY) -m pytest -q

# Developer inner loop: the library tests only (no viewer, CLI subprocess, Dask, bench or example
# runs: those carry @pytest.mark.slow).
test-fast: $(STAMP_DEV)
	$(PY) -m pytest -q -m "not slow"

demo: $(STAMP_RUN)
	$(VENV)/bin/invkin demo

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache artifacts
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
