#!/usr/bin/env bash
# The browser `make test` checks the built site with: Debian's Chromium (installed when missing,
# as root) and Playwright, the Python package that drives it (the `browser` extra).
#
# Usage: scripts/setup-browser.sh            (`make test` runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache
# apt_get: apt-get once the apt/dpkg lock is free (waits, bounded, saying so on stderr)
APT_LOG_TAG=setup-browser
source scripts/apt-lock.sh
if ! command -v chromium >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  echo "[setup-browser] installing Debian's chromium"
  APT_LOG=.cache/apt-chromium.log
  : >"$APT_LOG"
  apt_get install -y -q chromium || { apt_get update -q && apt_get install -y -q chromium; } ||
    { echo "[setup-browser] apt-get failed; see .cache/apt-chromium.log" >&2; exit 1; }
fi
# The `browser` extra (Playwright) once: reinstalling the checkout on every run costs seconds.
# uv where `make setup` installed it (faster), pip otherwise.
if ! .venv/bin/python -c 'import playwright.sync_api' 2>/dev/null; then
  if [[ -x .venv/bin/uv ]]; then
    .venv/bin/uv pip install -q --python .venv/bin/python --compile-bytecode -e '.[browser]'
  else
    .venv/bin/pip install -q -e '.[browser]'
  fi
fi
echo "[setup-browser] $(chromium --version 2>/dev/null | head -n 1)"
