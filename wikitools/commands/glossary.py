"""`wiki glossary`: write the site's abbreviations include file from the glossary page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wikitools.commands import add_root
from wikitools.commands.acronyms import resolve_glossary
from wikitools.config import load_config
from wikitools.diagnostics import sort_diagnostics
from wikitools.fsio import unified_diff, write_if_changed
from wikitools.glossary import ABBREVIATIONS_PATH, load_glossary, render_abbreviations


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "glossary",
        help=f"write {ABBREVIATIONS_PATH} (site tooltips) from the glossary",
        description=f"Generate {ABBREVIATIONS_PATH}, one `*[TERM]: Expansion` line per "
        "glossary term, appended to every page by pymdownx.snippets so that acronyms get "
        "tooltips. Exit 0 when written or unchanged, 1 when --check finds drift, 2 on "
        "configuration errors.",
    )
    add_root(parser)
    parser.add_argument("--glossary", type=Path, default=None, help="glossary page to read")
    parser.add_argument(
        "--output",
        default=ABBREVIATIONS_PATH,
        help=f"file to write, relative to the root (default: {ABBREVIATIONS_PATH})",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and show the diff if it would change",
    )
    mode.add_argument("--stdout", action="store_true", help="print the file instead of writing it")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    glossary = load_glossary(resolve_glossary(config, args.glossary), config.root)
    for diag in sort_diagnostics(glossary.problems):
        print(diag.format(), file=sys.stderr)
    text = render_abbreviations(glossary)
    if args.stdout:
        sys.stdout.write(text)
        return 0
    target = config.root / args.output
    terms = len(text.splitlines()) - 1
    if args.check:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current == text:
            print(f"{args.output} is up to date ({terms} abbreviations)", file=sys.stderr)
            return 0
        sys.stdout.write(unified_diff(args.output, current, text))
        print(
            f"would change: {args.output} (run `wiki glossary` to regenerate it)", file=sys.stderr
        )
        return 1
    changed = write_if_changed(target, text)
    state = "wrote" if changed else "unchanged:"
    print(f"{state} {args.output} ({terms} abbreviations from {glossary.path})", file=sys.stderr)
    return 0
