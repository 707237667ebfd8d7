#!/usr/bin/env python3
"""Rewrite Material containers in Markdown pages as syntax GitHub renders: admonitions as
GitHub alerts, collapsible admonitions as <details> blocks, content tabs as labelled sections
(wikitools/github_syntax.py says how). The site draws them as before.

    python scripts/github-syntax.py wiki/            # rewrite every page under wiki/
    python scripts/github-syntax.py --check wiki/    # write nothing; exit 1 on a change
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wikitools.core.fsio import write_if_changed
from wikitools.pages.github_syntax import convert


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="pages or folders of pages")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on change")
    args = parser.parse_args(argv)
    files = sorted({f for p in args.paths for f in ([p] if p.is_file() else p.rglob("*.md"))})
    changed = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        new = convert(text)
        if new != text:
            changed.append(path)
            if not args.check:
                write_if_changed(path, new)
    for path in changed:
        print(f"{path.as_posix()}: {'would change' if args.check else 'rewritten'}")
    print(f"{len(changed)} of {len(files)} pages {'to rewrite' if args.check else 'rewritten'}",
          file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
