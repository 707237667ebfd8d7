"""Print the wiki's own runtime dependencies that a GPU host needs to run runbooks: those of
pyproject.toml's [project] dependencies, less the ones only the site build uses. build.sh
downloads their wheels into .gpu-ENGINE/deps; tests/gpu/run-on-device.sh installs those the
device image lacks."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

# Needed to build the site, never to run a runbook.
SITE_ONLY = {"mkdocs", "mkdocs-material", "pymdown-extensions"}


def requirement_name(spec: str) -> str:
    for i, ch in enumerate(spec):
        if not (ch.isalnum() or ch in "-_."):
            return spec[:i].strip().lower()
    return spec.strip().lower()


def runtime_requirements(pyproject: Path) -> list[str]:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [d for d in deps if requirement_name(d) not in SITE_ONLY]


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2]
    print("\n".join(runtime_requirements(root / "pyproject.toml")))
    sys.exit(0)
