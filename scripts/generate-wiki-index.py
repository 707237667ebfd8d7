#!/usr/bin/env python3
"""Write INDEX.md, the catalog of every wiki page (same as `wiki index`).

Usage: python scripts/generate-wiki-index.py [--check [--diff]] [--stdout] [--root DIR]
Without --root it works on the wiki around the current directory (the nearest folder with
wiki.yml or mkdocs.yml, else the git top), as `wiki` does.
"""

import sys

from _entry import run

if __name__ == "__main__":
    raise SystemExit(run("index", sys.argv[1:]))
