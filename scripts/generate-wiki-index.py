#!/usr/bin/env python3
"""Write INDEX.md, the catalog of every wiki page (same as `wiki index`).

Usage: python scripts/generate-wiki-index.py [--check [--diff]] [--stdout] [--root DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import wikitools  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wikitools.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["index", *sys.argv[1:]]))
