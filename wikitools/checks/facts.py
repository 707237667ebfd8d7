"""What the page commands need to know about each page, worked out in one pass over the
pages: the index entry, the problems met reading it, its links, its own lint findings and its
acronym findings (these two only when a command asks for them), and whether it holds runbook
blocks or results markers (only those parsed pages are kept, for the runbook checks)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from wikitools.checks import expansions
from wikitools.checks.acronyms import Matcher, check_page, find_uses, is_checked
from wikitools.checks.anchors import LinkFact, page_anchors
from wikitools.checks.index import Entry, make_entry
from wikitools.checks.lint import page_findings, page_links
from wikitools.core.config import PageFiles, WikiConfig
from wikitools.core.diagnostics import Diagnostic
from wikitools.pages.glossary import Glossary
from wikitools.pages.parse import Page, read_page


@dataclass(frozen=True, slots=True)
class Facts:
    """The facts of one page."""

    entry: Entry
    untitled: Diagnostic | None  # IDX001 when the index falls back to the file name
    problems: tuple[Diagnostic, ...]  # met while reading the page (bytes, front matter, fences)
    # the findings of the page itself (front matter, headings, container blocks) and the ids a
    # link may name after `#`; None when not worked out
    lint: tuple[tuple[Diagnostic, ...], tuple[str, ...]] | None
    links: tuple[LinkFact, ...]  # (): none, or not worked out (without `lint`)
    acronyms: tuple[Diagnostic, ...]  # (): none, or not worked out (no glossary)
    runbooks: bool  # runbook blocks or results markers: the runbook checks need the page

    @property
    def path(self) -> str:
        return self.entry.path

    @property
    def findings(self) -> tuple[Diagnostic, ...]:
        """The problems and the page's own lint findings (these when worked out)."""
        return (*self.problems, *(self.lint[0] if self.lint else ()))

    @property
    def anchors(self) -> tuple[str, ...]:
        """The ids a link may name after `#` (gathered with `lint`)."""
        assert self.lint is not None, "the lint facts of this page were not worked out"
        return self.lint[1]


@dataclass(frozen=True, slots=True)
class AcronymContext:
    """What the acronym findings of a page depend on besides the page."""

    glossary: Glossary
    glossary_path: str  # as named in messages
    index_output: str  # never checked
    matcher: Matcher


def acronym_context(glossary: Glossary, glossary_path: str, index_output: str) -> AcronymContext:
    return AcronymContext(glossary, glossary_path, index_output, Matcher(glossary))


def has_runbook_parts(page: Page) -> bool:
    return any(block.attrs.brace for block in page.code_blocks) or any(
        comment.text.startswith("wiki:") for comment in page.comments
    )


def facts_of(
    page: Page, config: WikiConfig, acronyms: AcronymContext | None, lint: bool = True
) -> Facts:
    entry, untitled = make_entry(page)
    return Facts(
        entry=entry,
        untitled=untitled,
        problems=tuple(page.problems),
        lint=(tuple(page_findings(config, page)), page_anchors(page)) if lint else None,
        links=page_links(page) if lint else (),
        acronyms=tuple(_acronym_findings(page, acronyms)) if acronyms is not None else (),
        runbooks=has_runbook_parts(page),
    )


def _acronym_findings(page: Page, context: AcronymContext) -> list[Diagnostic]:
    if page.path == context.index_output or not is_checked(page, context.glossary_path):
        return []
    uses = list(find_uses(page, context.matcher))  # one scan serves both rules
    return [
        *check_page(page, context.matcher, context.glossary_path, uses),
        *expansions.check_page(page, context.matcher, uses),
    ]


@dataclass(frozen=True, slots=True)
class Gathered:
    """Facts of every page in path order, and the parsed pages that hold runbook parts
    (when asked for)."""

    facts: tuple[Facts, ...]
    runbook_pages: tuple[Page, ...]


def gather(
    config: WikiConfig,
    files: PageFiles,
    acronyms: AcronymContext | None = None,
    *,
    lint: bool = True,
    runbook_pages: bool = False,
) -> Gathered:
    """The facts of every page in `files`, with the acronym findings with `acronyms` and the
    page's own lint findings with `lint`. Each page is read and parsed once; only the pages
    with runbook parts are kept (with `runbook_pages`)."""
    facts: list[Facts] = []
    kept: list[Page] = []
    for path in files.paths:
        page = read_page(path, config.root)
        found = facts_of(page, config, acronyms, lint)
        facts.append(found)
        if runbook_pages and found.runbooks:
            kept.append(page)
    return Gathered(tuple(facts), tuple(kept))


def entries(gathered: Iterable[Facts]) -> list[Entry]:
    return [f.entry for f in gathered]
