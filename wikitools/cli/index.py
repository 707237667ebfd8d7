"""`wiki index`: write INDEX.md (or print it, or check that it is fresh)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wikitools.checks.facts import Facts, gather
from wikitools.checks.index import render_entries
from wikitools.cli.common import add_root
from wikitools.core.config import list_pages, load_config
from wikitools.core.diagnostics import Diagnostic, Severity, sort_diagnostics, summary
from wikitools.core.errors import UsageError
from wikitools.core.fsio import unified_diff, write_if_changed

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


@dataclass(frozen=True, slots=True)
class IndexAnswer:
    """What `wiki index` answers: the index text, the findings as printed, whether one is an
    error, the summary line and the number of pages."""

    text: str
    lines: tuple[str, ...]
    failed: bool
    summary: str
    count: int


def index_findings(facts: tuple[Facts, ...]) -> list[Diagnostic]:
    """IDX001 for untitled pages and the problems met while reading pages."""
    out = [f.untitled for f in facts if f.untitled]
    out += [d for f in facts for d in f.problems if d.code in READ_PROBLEMS]
    return out


def run(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    files = list_pages(config)
    facts = gather(config, files, lint=False).facts
    diags = sort_diagnostics([*files.problems, *index_findings(facts)])
    answer = IndexAnswer(
        render_entries(config, [f.entry for f in facts]),
        tuple(d.format() for d in diags),
        any(d.severity is Severity.ERROR for d in diags),
        summary(diags),
        len(facts),
    )
    return give(answer, config.root, config.index_output, config.index_generated,
                stdout=args.stdout, check=args.check, diff=args.diff)


def give(answer: IndexAnswer, root: Path, output: str, generated: bool, *, stdout: bool,
         check: bool, diff: bool) -> int:
    """Print the findings, then print, check or write the index; the exit code."""
    target = root / output
    out = sys.stderr if stdout else sys.stdout
    for line in answer.lines:
        print(line, file=out)
    if stdout:
        sys.stdout.write(answer.text)
        return 1 if answer.failed else 0
    if check or diff:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if not generated:  # the maintainers' own page: nothing is stale, a diff is a preview
            if diff and current != answer.text:
                sys.stdout.write(unified_diff(output, current, answer.text))
            return 1 if answer.failed else 0
        if current == answer.text:
            print(f"{output} is up to date", file=sys.stderr)
            return 0
        print(f"would change: {output}")
        if diff:
            sys.stdout.write(unified_diff(output, current, answer.text))
        return 1
    if not generated:
        raise UsageError(f"{output} is this wiki's own page (wiki.yml: index: "
                         "generate: false); preview with --stdout or --diff, then set "
                         "generate: true to let `wiki index` write it")
    changed = write_if_changed(target, answer.text)
    state = "wrote" if changed else "unchanged:"
    print(f"{state} {output} ({answer.count} pages)", file=sys.stderr)
    if answer.failed:
        print(answer.summary, file=sys.stderr)
        return 1
    return 0
