"""`wiki lint`: front matter values, parser problems, titles and broken internal links."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from wikitools.checks.facts import Gathered, gather
from wikitools.cli.common import add_root
from wikitools.core.config import list_pages, load_config
from wikitools.core.diagnostics import Diagnostic, Severity, sort_diagnostics, summary

if TYPE_CHECKING:
    from wikitools.runbook.blocks.declared import RunbookSet


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "lint",
        help="check front matter, titles, code fences and internal links",
        description="Check every page: front matter status values, malformed front matter, "
        "unclosed code fences, missing titles and links to pages that do not exist.",
    )
    add_root(parser)
    parser.set_defaults(handler=run)


def lint_findings(config: Any, gathered: Gathered, runbooks: RunbookSet | None = None,
                  ) -> list[Diagnostic]:
    """Every lint finding, from the facts (and the pages that hold runbooks, for FM006, with
    their runbooks when the caller has read them)."""
    from wikitools.checks.anchors import check_anchors
    from wikitools.checks.lint import link_findings, status_findings

    facts = gathered.facts
    links = {f.path: f.links for f in facts}
    out = [d for f in facts for d in f.findings]
    out += link_findings(config, links)
    out += check_anchors(links, {f.path: f.anchors for f in facts})
    out += status_findings(config, [f.entry for f in facts], gathered.runbook_pages, runbooks)
    return out


def run(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    files = list_pages(config)
    gathered = gather(config, files, runbook_pages=True)
    diags = sort_diagnostics([*files.problems, *lint_findings(config, gathered)])
    for diag in diags:
        print(diag.format())
    print(f"{summary(diags)} ({len(gathered.facts)} pages)", file=sys.stderr)
    return 1 if any(d.severity is Severity.ERROR for d in diags) else 0
