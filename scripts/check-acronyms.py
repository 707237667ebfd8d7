#!/usr/bin/env python3
"""Check that every glossary acronym is expanded on first use in each wiki page.

Same as `wiki acronyms`; run `python scripts/check-acronyms.py --help` for the options.
Without --root it checks the repository this script belongs to.
"""

import sys

from _entry import run

if __name__ == "__main__":
    raise SystemExit(run("acronyms", sys.argv[1:]))
