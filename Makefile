# Two entry points for a fresh machine: `make site` and `make test` (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: site test test-fast static site-check setup engine docker browser check serve clean \
	browser-check publish

site: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# pytest runs on TEST_WORKERS processes (pytest-xdist); tests that share one fixture that must
# not be made twice (the Ray cluster) carry an xdist_group mark and stay on one worker.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup
# The bytecode of our own code (an editable install is not compiled by the installer): where
# PYTHONDONTWRITEBYTECODE is set, each of the hundreds of `wiki` processes the tests start would
# otherwise compile it again. Up-to-date files are skipped, so this takes a second or two.
COMPILE := $(BIN)/python -m compileall -q wikitools tests

# Before pytest, side by side: the engine environment (mostly downloads and bytecode
# compilation; it needs nothing of .venv, not even its uv), Docker, and, once .venv is set up,
# the static checks and the strict site build checked in the browser. -Oline keeps each line
# whole; when one of them fails, make lets the others finish and then fails.
test:
	$(MAKE) --no-print-directory -j4 -Oline engine docker static site-check
	$(PYTEST)

static: setup
	$(BIN)/ruff check wikitools tests scripts benchmarks
	$(BIN)/wiki check
	$(BIN)/mypy
	$(COMPILE)

site-check: browser
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
	$(BIN)/python scripts/check-browser.py --site site

# The edit loop: lint, types and the tests that need no engine, Docker daemon, Ray cluster or
# browser. `make test` runs everything.
test-fast: setup
	$(BIN)/ruff check wikitools tests scripts benchmarks
	$(BIN)/mypy
	$(COMPILE)
	$(PYTEST) -m "not engine and not docker and not gpu and not ray"

setup: $(STAMP)

# uv installs (parallel downloads, fast unpacking); pip only brings uv itself. Bytecode is
# compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set, every `wiki` command
# would otherwise compile its imports again.
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q 'uv>=0.13,<0.14'
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode -e '.[test,fleet]'
	touch $(STAMP)

# The real vLLM (CPU build) used by the end-to-end runbook tests, in its own environment.
engine:
	bash scripts/setup-engine-env.sh .venv-engine

# A Docker daemon (started when none answers) and the local images of the container runbook tests.
docker:
	bash scripts/setup-docker.sh

check: setup
	$(BIN)/wiki check

# Publish the site to the gh-pages branch of PUBLISH_REMOTE: the checks, then `mkdocs gh-deploy`
# (a strict build, committed on top of the branch and pushed). The branch is first brought up to
# date from the remote, so every publish is a fast-forward, also from a fresh clone; nothing is
# ever force-pushed.
PUBLISH_REMOTE ?= origin
publish: setup
	$(BIN)/wiki check
	if git ls-remote --exit-code --heads $(PUBLISH_REMOTE) gh-pages >/dev/null; then \
	  git fetch $(PUBLISH_REMOTE) gh-pages:gh-pages; fi
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs gh-deploy --strict --remote-name $(PUBLISH_REMOTE) \
	  --remote-branch gh-pages

# `exec`: the server's parent is make itself, so stopping make (by its PID too) stops the server.
SERVE_ADDR ?= 127.0.0.1:8000
serve: setup
	exec $(BIN)/python scripts/serve.py $(SERVE_ADDR)

# Search and phone layout in a real browser: Debian's Chromium driven by Playwright. `make test`
# installs both and checks the site it has just built.
browser: setup
	bash scripts/setup-browser.sh

browser-check: browser
	$(BIN)/python scripts/check-browser.py

clean:
	rm -rf site .artifacts
