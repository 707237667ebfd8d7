"""`wiki acronyms` (also `python scripts/check-acronyms.py`): first use of every glossary term
expanded on each page; unknown all-caps acronyms reported. See `wikitools.checks.acronyms`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wikitools.checks.baseline import apply_baseline, load_baseline, render_baseline
from wikitools.checks.facts import acronym_context, gather
from wikitools.cli.common import add_root
from wikitools.core.config import WikiConfig, list_pages, load_config
from wikitools.core.diagnostics import Diagnostic, Severity, sort_diagnostics, summary
from wikitools.core.fsio import write_if_changed
from wikitools.pages.glossary import Glossary, load_glossary


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "acronyms",
        help="check that acronyms are expanded on first use and defined in the glossary",
        description="Report the first prose use of each glossary term that is not expanded "
        "(ACR001, error), all-caps acronyms the glossary does not define (ACR002, "
        "error: add a glossary row) and terms expanded a second time on a page (ACR003, "
        "warning). Exit 0 when clean, 1 on errors (or on warnings with --strict), 2 on usage "
        "or configuration errors.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_root(parser)
    parser.add_argument(
        "--glossary",
        type=Path,
        default=None,
        help="glossary page, relative to the root or the working directory (default: wiki.yml, "
        "else <docs_dir>/glossary.md, else GLOSSARY.md)",
    )
    parser.add_argument(
        "--baseline", type=Path, default=None, help="report only findings not recorded in FILE"
    )
    parser.add_argument(
        "--write-baseline",
        type=Path,
        default=None,
        metavar="FILE",
        help="record the current findings in FILE (keyed by path, code and term) and exit 0",
    )
    parser.add_argument(
        "--warnings",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="report warnings: glossary problems and skipped files (default: on)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="warnings also make the exit status 1"
    )


def resolve_glossary(config: WikiConfig, given: Path | None) -> Path:
    """--glossary: absolute, else relative to the root when it exists there, else relative to
    the working directory."""
    if given is None:
        return config.glossary_path
    if given.is_absolute() or not (config.root / given).exists():
        return given
    return config.root / given


def gather_findings(args: argparse.Namespace) -> tuple[Glossary, list[Diagnostic], int]:
    """(glossary, sorted findings, pages checked)."""
    config = load_config(args.root)
    glossary = load_glossary(resolve_glossary(config, args.glossary), config.root)
    files = list_pages(config)
    context = acronym_context(glossary, glossary.path, config.index_output)
    facts = gather(config, files, context, lint=False).facts
    diags = [d for f in facts for d in f.acronyms]
    diags.extend(glossary.problems)
    diags.extend(files.problems)
    if not args.warnings:
        diags = [d for d in diags if d.severity is Severity.ERROR]
    return glossary, sort_diagnostics(diags), len(facts)


def run(args: argparse.Namespace) -> int:
    _glossary, diags, npages = gather_findings(args)
    if args.write_baseline is not None:
        target = args.write_baseline
        kept = load_baseline(target) if target.is_file() else None
        changed = write_if_changed(target, render_baseline(diags, kept))
        state = "wrote" if changed else "unchanged:"
        print(f"{state} {target} ({len(diags)} findings recorded)", file=sys.stderr)
        return 0
    note = ""
    if args.baseline is not None:
        diags, suppressed, gone = apply_baseline(diags, load_baseline(args.baseline))
        note = f"; {suppressed} in the baseline"
        if gone:
            entries = "entries" if gone != 1 else "entry"
            note += f", {gone} baseline {entries} fixed (rewrite it with --write-baseline)"
    for diag in diags:
        print(diag.format())
    print(f"{summary(diags)} ({npages} pages{note})", file=sys.stderr)
    failing = [d for d in diags if args.strict or d.severity is Severity.ERROR]
    return 1 if failing else 0
