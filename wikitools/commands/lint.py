"""`wiki lint`: front matter values, parser problems, titles and broken internal links."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wikitools.config import load_config, load_pages
from wikitools.diagnostics import Severity, sort_diagnostics, summary
from wikitools.lint import lint_pages


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "lint",
        help="check front matter, titles, code fences and internal links",
        description="Check every page: front matter status values, malformed front matter, "
        "unclosed code fences, missing titles and links to pages that do not exist.",
    )
    parser.add_argument("--root", type=Path, default=Path(), help="wiki root (default: .)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    pages = load_pages(config)
    diags = sort_diagnostics(lint_pages(config, pages))
    for diag in diags:
        print(diag.format())
    print(f"{summary(diags)} ({len(pages)} pages)", file=sys.stderr)
    return 1 if any(d.severity is Severity.ERROR for d in diags) else 0
