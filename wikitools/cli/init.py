"""`wiki init`: adopt an existing tree of Markdown pages. Writes wiki.yml (from what it finds)
and a baseline of today's acronym findings, each only when it is not there yet; leaves every
page, INDEX.md and any generated file alone; prints the next steps."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from wikitools.checks.baseline import DEFAULT_BASELINE, PAGE_CODES, render_baseline
from wikitools.checks.facts import acronym_context, gather
from wikitools.cli.common import add_root
from wikitools.cli.lint import lint_findings
from wikitools.core.config import CONFIG_NAME, WikiConfig, list_pages, load_config
from wikitools.core.errors import ConfigError
from wikitools.core.fsio import write_if_changed
from wikitools.pages.glossary import load_glossary
from wikitools.pages.layout import (
    Layout,
    exclude_patterns,
    find_layout,
    render_wiki_yml,
    require_utf8,
)


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "init",
        help="adopt an existing wiki: write wiki.yml and a baseline of today's findings",
        description="Adopt an existing tree of Markdown pages: write wiki.yml (the docs folder, "
        "folders of attachments left out, index sections from the folder layout, the glossary) "
        f"and {DEFAULT_BASELINE} (today's acronym findings, which `wiki check` then leaves out), "
        "each only when it is missing. Pages, INDEX.md and generated files are left alone. "
        "--check writes nothing and exits 1 when init would write a file.",
    )
    add_root(parser)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a file would be written")
    parser.set_defaults(handler=run)


def _planned_config(base: WikiConfig, layout: Layout) -> WikiConfig:
    """The configuration the wiki.yml about to be written gives (for --check)."""
    return replace(base, docs_dir=layout.docs_dir, glossary=layout.glossary or base.glossary,
                   exclude=tuple(exclude_patterns(layout)), index_generated=False)


def _baseline(config: WikiConfig) -> tuple[str, int, int]:
    """The baseline text, its number of acronym findings and of page findings (lines the site
    takes for headings, anchors spelled the GitHub way); no acronyms without a glossary."""
    context = None
    if config.glossary_path.is_file():
        glossary = load_glossary(config.glossary_path, config.root)
        context = acronym_context(glossary, config.glossary, config.index_output)
    gathered = gather(config, list_pages(config), context)
    acronyms = [d for f in gathered.facts for d in f.acronyms]
    findings = [d for d in lint_findings(config, gathered) if d.code in PAGE_CODES]
    return render_baseline([*acronyms, *findings]), len(acronyms), len(findings)


def _writable(path: Path) -> bool:
    """True when `path` is missing (init writes it), False when it is a file (kept); anything
    else in its place (a folder, a FIFO, a broken link) is an error before anything is written:
    opening a FIFO would wait forever."""
    if not os.path.lexists(path):
        return True
    if path.is_file():
        return False
    raise ConfigError(f"{path.name}: not a regular file (a folder, FIFO, device or broken "
                      "link); remove it or move it away, then run wiki init again")


def _check_names(config: WikiConfig) -> None:
    """Every page name is written into the baseline as text: refuse one that is not UTF-8
    before anything is written."""
    for rel in list_pages(config).rels:
        require_utf8(rel, "file")


def _adopt_config(root: Path, layout: Layout, check: bool, verb: str) -> WikiConfig:
    """Write wiki.yml from `layout` (not under --check) and give the configuration it makes."""
    if check:
        config = _planned_config(load_config(root), layout)
    else:
        write_if_changed(root / CONFIG_NAME, render_wiki_yml(layout))
        config = load_config(root)
    left_out = " ".join(layout.excluded) or "nothing"
    glossary = layout.glossary or "none found"
    print(f"{verb} {CONFIG_NAME}: pages in {layout.docs_dir} ({layout.pages} pages, "
          f"{len(layout.sections)} index sections); glossary: {glossary}; "
          f"left out: {left_out}", file=sys.stderr)
    return config


def _adopt_baseline(config: WikiConfig, check: bool, verb: str) -> bool:
    """Write the baseline of today's findings (not under --check); True when there is one."""
    text, count, page_count = _baseline(config)
    if not config.glossary_path.is_file():
        print(f"no glossary ({config.glossary}): no acronym findings", file=sys.stderr)
    if not (count or page_count):
        return False
    if not check:
        write_if_changed(config.root / DEFAULT_BASELINE, text)
    print(f"{verb} {DEFAULT_BASELINE}: {count} acronym findings and {page_count} "
          f"page findings ({', '.join(PAGE_CODES)}: the site and GitHub render them "
          "differently) of today, which `wiki check` leaves out from now on",
          file=sys.stderr)
    return True


def run(args: argparse.Namespace) -> int:
    root = args.root
    write_yml = _writable(root / CONFIG_NAME)
    write_baseline = _writable(root / DEFAULT_BASELINE)
    layout = find_layout(root)
    if write_baseline:
        _check_names(_planned_config(load_config(root), layout) if write_yml
                     else load_config(root))
    wrote: list[str] = []
    verb = "would write" if args.check else "wrote"
    if write_yml:
        config = _adopt_config(root, layout, args.check, verb)
        wrote.append(CONFIG_NAME)
    else:
        print(f"kept: {CONFIG_NAME} (already there)", file=sys.stderr)
        config = load_config(root)
    if not write_baseline:
        print(f"kept: {DEFAULT_BASELINE} (already there)", file=sys.stderr)
    elif _adopt_baseline(config, args.check, verb):
        wrote.append(DEFAULT_BASELINE)
    if not config.index_generated:
        print(f"left alone: {config.index_output} (index.generate: false in {CONFIG_NAME})",
              file=sys.stderr)
    if args.check:
        return 1 if wrote else 0
    print(_NEXT, end="")
    return 0


_NEXT = f"""
Next steps:
  1. wiki check              what is left: real page errors (unreadable bytes, malformed front
                             matter, links to missing files), nothing from the baseline
  2. wiki runbook scan       launch commands that could become runbooks; --write marks them
  3. mkdocs.yml: add `- wiki` under `plugins:` for glossary tooltips, status chips and
     measured results on the site
  4. when ready, set `index: generate: true` in {CONFIG_NAME} and run `wiki index`
  5. shrink the baseline: fix acronyms page by page, then
     wiki acronyms --write-baseline {DEFAULT_BASELINE}
"""
