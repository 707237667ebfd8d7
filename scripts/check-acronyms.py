#!/usr/bin/env python3
"""Check that every glossary acronym is expanded on first use in each wiki page.

Same as `wiki acronyms`; run `python scripts/check-acronyms.py --help` for the options.
Without --root it works on the wiki around the current directory (the nearest folder with
wiki.yml or mkdocs.yml, else the git top), as `wiki` does.
"""

import sys

from _entry import run

if __name__ == "__main__":
    raise SystemExit(run("acronyms", sys.argv[1:]))
