"""`wiki index`: write INDEX.md (or print it, or check that it is fresh)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from wikitools.commands import add_root
from wikitools.config import list_pages, load_config
from wikitools.diagnostics import Diagnostic, Severity, sort_diagnostics, summary
from wikitools.errors import UsageError
from wikitools.facts import Facts, gather
from wikitools.fsio import unified_diff, write_if_changed
from wikitools.index import render_entries

# Problems reading a page that the index reports: the page is still listed (or, when it
# cannot be read at all, left out), so the reader of the output must hear about it.
READ_PROBLEMS = frozenset({"PG002", "PG004", "PG005", "PG006"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_root(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--stdout", action="store_true", help="print the index instead of writing it")
    mode.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the index would change"
    )
    parser.add_argument("--diff", action="store_true", help="with --check: show a unified diff")


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "index",
        help="generate INDEX.md, the catalog of every page",
        description="Generate INDEX.md from every page's title, status and description.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)


def index_findings(facts: tuple[Facts, ...]) -> list[Diagnostic]:
    """IDX001 for untitled pages and the problems met while reading pages."""
    out = [f.untitled for f in facts if f.untitled]
    out += [d for f in facts for d in f.problems if d.code in READ_PROBLEMS]
    return out


def run(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    files = list_pages(config)
    facts = gather(config, files, lint=False).facts
    text = render_entries(config, [f.entry for f in facts])
    diags = sort_diagnostics([*files.problems, *index_findings(facts)])
    target = config.index_path
    out = sys.stderr if args.stdout else sys.stdout
    for diag in diags:
        print(diag.format(), file=out)
    failed = any(d.severity is Severity.ERROR for d in diags)
    if args.stdout:
        sys.stdout.write(text)
        return 1 if failed else 0
    if args.check or args.diff:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current == text:
            print(f"{config.index_output} is up to date", file=sys.stderr)
            return 0
        print(f"would change: {config.index_output}")
        if args.diff:
            sys.stdout.write(unified_diff(config.index_output, current, text))
        return 1
    if not config.index_generated:
        raise UsageError(f"{config.index_output} is this wiki's own page (wiki.yml: index: "
                         "generate: false); preview with --stdout or --check --diff, then set "
                         "generate: true to let `wiki index` write it")
    changed = write_if_changed(target, text)
    state = "wrote" if changed else "unchanged:"
    print(f"{state} {config.index_output} ({len(facts)} pages)", file=sys.stderr)
    if failed:
        print(summary(diags), file=sys.stderr)
        return 1
    return 0
