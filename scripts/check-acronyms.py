#!/usr/bin/env python3
"""Check that every glossary acronym is expanded on first use in each wiki page.

Same as `wiki acronyms`; run `python scripts/check-acronyms.py --help` for the options.
Without --root it checks the repository this script belongs to.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

try:
    from wikitools.cli import main
except ModuleNotFoundError:  # not installed: use the checkout this script lives in
    sys.path.insert(0, str(REPO))
    from wikitools.cli import main


def run(argv: list[str]) -> int:
    if not any(a == "--root" or a.startswith("--root=") for a in argv):
        argv = ["--root", str(REPO), *argv]
    return main(["acronyms", *argv])


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
