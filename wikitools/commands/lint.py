"""`wiki lint`: front matter values, parser problems, titles and broken internal links."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wikitools.config import list_pages, load_config
from wikitools.diagnostics import Diagnostic, Severity, sort_diagnostics, summary
from wikitools.facts import Facts, gather


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "lint",
        help="check front matter, titles, code fences and internal links",
        description="Check every page: front matter status values, malformed front matter, "
        "unclosed code fences, missing titles and links to pages that do not exist.",
    )
    parser.add_argument("--root", type=Path, default=None,
                        help="wiki root (default: the wiki around the working directory)")
    parser.set_defaults(handler=run)


def lint_findings(config: Any, facts: tuple[Facts, ...]) -> list[Diagnostic]:
    from wikitools.lint import link_findings

    out = [d for f in facts for d in f.findings]
    out += link_findings(config, {f.path: f.links for f in facts})
    return out


def run(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    files = list_pages(config)
    facts = gather(config, files).facts
    diags = sort_diagnostics([*files.problems, *lint_findings(config, facts)])
    for diag in diags:
        print(diag.format())
    print(f"{summary(diags)} ({len(facts)} pages)", file=sys.stderr)
    return 1 if any(d.severity is Severity.ERROR for d in diags) else 0
