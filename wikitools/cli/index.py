"""`wiki index`: write INDEX.md (or print it, or check that it is fresh).

When nothing the last run read has changed, its answer is given again from its record
(`index_answer`); otherwise the whole work is done, and the same `give` prints and writes it.
The page machinery is imported inside `run`, so that a warm run never loads it."""

from __future__ import annotations

import os
import sys

from wikitools.cli.common import add_root
from wikitools.index_answer import IndexAnswer, Watch, read_options, recorded

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from wikitools.checks.facts import Facts
    from wikitools.core.diagnostics import Diagnostic

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
    from wikitools.checks.facts import gather
    from wikitools.checks.index import render_entries
    from wikitools.core.config import list_pages, load_config
    from wikitools.core.diagnostics import Severity, sort_diagnostics, summary

    watch = Watch(str(args.root))
    config = load_config(args.root)
    watch.pages(str(config.docs_path), config.index_output)
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
    watch.keep(answer, usable=config.index_generated and not files.problems)
    return give(answer, str(config.root), config.index_output, config.index_generated,
                stdout=args.stdout, check=args.check, diff=args.diff)


def answer_from_record(argv: list[str]) -> int | None:
    """The exit code of `wiki index ARGV` given from the last run's record, or None when the
    record does not hold (then `run` does the whole work)."""
    options = read_options(argv)
    found = recorded(options) if options is not None else None
    if options is None or found is None:
        return None
    answer, root, output = found
    return give(answer, root, output, True, stdout=options.stdout, check=options.check,
                diff=options.diff)


def give(answer: IndexAnswer, root: str, output: str, generated: bool, *, stdout: bool,
         check: bool, diff: bool) -> int:
    """Print the findings, then print, check or write the index; the exit code."""
    target = os.path.join(root, output)
    out = sys.stderr if stdout else sys.stdout
    for line in answer.lines:
        print(line, file=out)
    if stdout:
        sys.stdout.write(answer.text)
        return 1 if answer.failed else 0
    if check or diff:
        current = ""
        if os.path.isfile(target):
            with open(target, encoding="utf-8") as f:
                current = f.read()
        if current == answer.text:
            print(f"{output} is up to date", file=sys.stderr)
            return 0
        print(f"would change: {output}")
        if diff:
            from wikitools.core.fsio import unified_diff

            sys.stdout.write(unified_diff(output, current, answer.text))
        return 1
    if not generated:
        from wikitools.core.errors import UsageError

        raise UsageError(f"{output} is this wiki's own page (wiki.yml: index: "
                         "generate: false); preview with --stdout or --check --diff, then set "
                         "generate: true to let `wiki index` write it")
    from wikitools.core.fsio import write_if_changed

    changed = write_if_changed(target, answer.text)
    state = "wrote" if changed else "unchanged:"
    print(f"{state} {output} ({answer.count} pages)", file=sys.stderr)
    if answer.failed:
        print(answer.summary, file=sys.stderr)
        return 1
    return 0
