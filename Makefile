# Two entry points for a fresh machine: `make site` and `make test` (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: site test setup engine check serve clean browser-check

site: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test: setup engine
	$(BIN)/ruff check wikitools tests scripts benchmarks
	$(BIN)/wiki check
	$(BIN)/pytest -q
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,fleet]'
	touch $(STAMP)

# The real vLLM (CPU build) used by the end-to-end runbook tests, in its own environment.
engine:
	bash scripts/setup-engine-env.sh .venv-engine

check: setup
	$(BIN)/wiki check

# `exec`: the server's parent is make itself, so stopping make (by its PID too) stops the server.
SERVE_ADDR ?= 127.0.0.1:8000
serve: setup
	exec $(BIN)/python scripts/serve.py $(SERVE_ADDR)

# Search and phone layout in a real browser (needs Chromium: apt-get install -y chromium). Not in
# `make test`: CI machines have no Chromium and cannot install system packages.
browser-check: setup
	$(BIN)/pip install -q -e '.[browser]'
	$(BIN)/python scripts/check-browser.py

clean:
	rm -rf site .artifacts
