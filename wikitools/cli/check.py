"""`wiki check`: every check in one process, each page parsed once (or not at all when its
cached facts are fresh): index fresh, acronyms (with baseline), lint,
runbook blocks, runbook result regions, and secrets in the files the site publishes."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wikitools.checks.baseline import DEFAULT_BASELINE, apply_baseline, baselined, load_baseline
from wikitools.checks.facts import Facts, acronym_context, gather
from wikitools.checks.index import render_entries
from wikitools.cli.common import add_root
from wikitools.cli.index import index_findings
from wikitools.cli.lint import lint_findings
from wikitools.core.config import WikiConfig, list_pages, load_config
from wikitools.core.diagnostics import Diagnostic, Severity, sort_diagnostics, summary
from wikitools.core.errors import WikiError
from wikitools.pages.glossary import load_glossary
from wikitools.pages.parse import Page

if TYPE_CHECKING:
    from wikitools.runbook.blocks.declared import RunbookSet


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "check",
        help="run every check (index, acronyms, lint, runbooks, result regions)",
        description="Run every check in one process, parsing each page once. Exit 0 when "
        "clean, 1 on findings or drift, 2 on usage or configuration errors.",
    )
    add_root(parser)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help=f"acronym baseline file (default: {DEFAULT_BASELINE} at the root, if present)",
    )
    parser.add_argument("--timings", action="store_true", help="print per-check seconds on stderr")
    parser.set_defaults(handler=run)


def check_index(config: WikiConfig, facts: tuple[Facts, ...]) -> list[Diagnostic]:
    diags = index_findings(facts)
    if not config.index_generated:  # the maintainers' own index page: no rewrite demanded
        return diags
    text = render_entries(config, [f.entry for f in facts])
    current = config.index_path.read_text(encoding="utf-8") if config.index_path.is_file() else ""
    if current != text:
        message = f"would change: {config.index_output} (run `wiki index` to regenerate it)"
        diags = [*diags, Diagnostic(config.index_output, 1, 1, "IDX100", message)]
    return diags


def without_baseline(config: WikiConfig, diags: list[Diagnostic], baseline: Path | None
                     ) -> list[Diagnostic]:
    """`diags` less the acronym and page findings recorded in the baseline (the root's
    .acronyms-baseline.json when there is one; an explicit --baseline must exist)."""
    default = config.root / DEFAULT_BASELINE
    if baseline is None and default.is_file():
        baseline = default
    if baseline is None:
        return diags
    fresh, _suppressed, _gone = apply_baseline([d for d in diags if baselined(d)],
                                               load_baseline(baseline))
    return [*(d for d in diags if not baselined(d)), *fresh]


def check_runbooks(config: WikiConfig, pages: tuple[Page, ...],
                   extracted: tuple[RunbookSet, list[Diagnostic]]) -> list[Diagnostic]:
    """RB findings on runbook blocks, then result regions rendered against the records. Only
    pages with runbook blocks or results markers can have either."""
    from wikitools.runbook.rendering.render import check_regions

    runbooks, diags = extracted
    return [*diags, *check_regions(pages, config.root, runbooks)]


def check_records(root: Path) -> list[Diagnostic]:
    """RGN006 for each record under runbooks/ that does not fit the record schema."""
    from wikitools.runbook.records.validate import check_records as records_findings

    return records_findings(root)


def published_secrets(config: WikiConfig) -> list[Diagnostic]:
    """SEC001 for each secret in a file of the docs folder, which the site would publish."""
    from wikitools.site.published import secret_findings

    return secret_findings(config)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    timings: list[tuple[str, float]] = []
    diags: list[Diagnostic] = []
    started = time.perf_counter()
    glossary = None
    if config.glossary_path.is_file():
        glossary = load_glossary(config.glossary_path, config.root)
        diags.extend(glossary.problems)
    else:
        note = f"note: glossary {config.glossary} not found; acronym checks skipped"
        print(note, file=sys.stderr)
    files = list_pages(config)
    diags.extend(files.problems)
    context = acronym_context(glossary, config.glossary, config.index_output) if glossary else None
    gathered = gather(config, files, context, runbook_pages=True)
    facts = gathered.facts
    timings.append(("parse", time.perf_counter() - started))

    def step(name: str, func: Callable[[], list[Diagnostic]]) -> None:
        t0 = time.perf_counter()
        try:
            diags.extend(func())
        except WikiError as exc:
            raise type(exc)(f"{name}: {exc}") from None
        timings.append((name, time.perf_counter() - t0))

    step("index", lambda: check_index(config, facts))
    if glossary is not None:
        step("acronyms", lambda: [d for f in facts for d in f.acronyms])
    from wikitools.runbook.blocks.extract import extract_runbooks

    t0 = time.perf_counter()  # read once: the status lint and the runbook checks share them
    try:
        extracted = extract_runbooks(gathered.runbook_pages, config.root)
    except WikiError as exc:
        raise type(exc)(f"runbooks: {exc}") from None
    timings.append(("read runbooks", time.perf_counter() - t0))
    step("lint", lambda: lint_findings(config, gathered, extracted[0]))
    diags = without_baseline(config, diags, args.baseline)
    step("runbooks", lambda: check_runbooks(config, gathered.runbook_pages, extracted))
    step("records", lambda: check_records(config.root))
    step("published files", lambda: published_secrets(config))

    diags = sort_diagnostics(diags)
    for diag in diags:
        print(diag.format())
    if args.timings:
        for name, seconds in timings:
            print(f"{name}: {seconds:.3f} s", file=sys.stderr)
    print(f"{summary(diags)} ({len(facts)} pages)", file=sys.stderr)
    return 1 if any(d.severity is Severity.ERROR for d in diags) else 0
