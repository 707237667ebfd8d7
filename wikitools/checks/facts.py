"""What the page commands need to know about each page, computed once per page content and
cached: the index entry, the problems met reading it, its links, its own lint findings and its
acronym findings (these two only when a command asks for them), and whether it holds runbook
blocks or results markers (only those pages are parsed again for the runbook checks). A warm
run reads and hashes the files and loads a few hundred kilobytes; a cold run parses in worker
processes that send back these facts, never whole pages.

The cache lives in $WIKI_CACHE_DIR, else ~/.cache/wikitools; WIKI_CACHE_DIR=off disables it.
"""

from __future__ import annotations

import gc
import importlib.util
import marshal
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wikitools.checks.index import Entry
from wikitools.core.config import PageFiles, WikiConfig, blake2b, cache_file
from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.pages.load import workers_for

if TYPE_CHECKING:
    from wikitools.checks.lint import LinkFact
    from wikitools.pages.glossary import Glossary
    from wikitools.pages.parse import Page

MAX_WORKERS = 4  # each worker holds the parser (~40 MB): keeps a cold run under 300 MB
# Modules whose code decides the facts: a change to any of them empties the cache.
_SOURCES = (
    "pages/parse", "pages/page", "pages/source", "pages/fences", "checks/facts", "checks/index",
    "checks/lint", "checks/acronyms", "checks/expansions", "pages/glossary", "checks/anchors",
    "runbook/blocks/regions", "checks/github_view", "pages/dialect",
)


@dataclass(frozen=True, slots=True)
class Facts:
    """The facts of one page. Findings are kept as plain tuples and made Diagnostics when
    asked for, so that a command that does not need them pays nothing for them."""

    entry: Entry
    untitled: Diagnostic | None  # IDX001 when the index falls back to the file name
    raw_problems: tuple[tuple[Any, ...], ...]  # met while reading the page
    # None when not worked out, else (the findings of the page itself: front matter, headings,
    # container blocks; the ids a link may name after `#`)
    raw_lint: tuple[tuple[tuple[Any, ...], ...], tuple[str, ...]] | None
    links: tuple[LinkFact, ...]
    # None when not worked out (no glossary), else (glossary key, findings)
    raw_acronyms: tuple[str, tuple[tuple[Any, ...], ...]] | None
    runbooks: bool  # runbook blocks or results markers: the runbook checks need the page

    @property
    def path(self) -> str:
        return self.entry.path

    @property
    def problems(self) -> tuple[Diagnostic, ...]:
        """What reading the page met (bytes, front matter syntax, fences)."""
        return tuple(_diag_in(d) for d in self.raw_problems)

    @property
    def findings(self) -> tuple[Diagnostic, ...]:
        """The problems and the page's own lint findings (these when worked out)."""
        lint = self.raw_lint[0] if self.raw_lint else ()
        return tuple(_diag_in(d) for d in (*self.raw_problems, *lint))

    @property
    def anchors(self) -> tuple[str, ...]:
        """The ids a link may name after `#` (gathered with `lint`)."""
        assert self.raw_lint is not None, "the lint facts of this page were not worked out"
        return self.raw_lint[1]

    @property
    def acronyms(self) -> tuple[Diagnostic, ...]:
        """The acronym findings ((): none, or not worked out)."""
        return tuple(_diag_in(d) for d in self.raw_acronyms[1]) if self.raw_acronyms else ()

    def acronyms_for(self, key: str) -> bool:
        return self.raw_acronyms is not None and self.raw_acronyms[0] == key


@dataclass(frozen=True, slots=True)
class AcronymContext:
    """What the acronym findings of a page depend on besides the page; `key` names it."""

    glossary: Glossary
    glossary_path: str  # as named in messages
    index_output: str  # never checked
    key: str


def acronym_context(glossary: Glossary, glossary_path: str, index_output: str) -> AcronymContext:
    entries = [(e.term, e.expansion, e.name) for e in glossary.entries]
    data = repr((entries, glossary_path, index_output)).encode()
    key = blake2b(data, digest_size=12).hexdigest()
    return AcronymContext(glossary, glossary_path, index_output, key)


# --------------------------------------------------------------------------- computing


def has_runbook_parts(page: Page) -> bool:
    return any(block.attrs.brace for block in page.code_blocks) or any(
        comment.text.startswith("wiki:") for comment in page.comments
    )


def facts_of(
    page: Page, config: WikiConfig, acronyms: AcronymContext | None, lint: bool = True
) -> Facts:
    from wikitools.checks.index import make_entry
    from wikitools.checks.lint import page_links

    entry, untitled = make_entry(page)
    found = None
    if acronyms is not None:
        found = (acronyms.key, tuple(_diag_out(d) for d in _acronym_findings(page, acronyms)))
    return Facts(
        entry=entry,
        untitled=untitled,
        raw_problems=tuple(_diag_out(d) for d in page.problems),
        raw_lint=_lint_of(page, config) if lint else None,
        links=page_links(page),
        raw_acronyms=found,
        runbooks=has_runbook_parts(page),
    )


def _lint_of(page: Page, config: WikiConfig) -> tuple[tuple[tuple[Any, ...], ...], tuple[str, ...]]:
    from wikitools.checks.anchors import page_anchors
    from wikitools.checks.lint import page_findings

    return tuple(_diag_out(d) for d in page_findings(config, page)), page_anchors(page)


_MATCHERS: dict[str, Any] = {}


def _matcher(context: AcronymContext) -> Any:
    from wikitools.checks.acronyms import Matcher

    if context.key not in _MATCHERS:
        _MATCHERS[context.key] = Matcher(context.glossary)
    return _MATCHERS[context.key]


def _acronym_findings(page: Page, context: AcronymContext) -> list[Diagnostic]:
    from wikitools.checks import expansions
    from wikitools.checks.acronyms import check_page, find_uses, is_checked

    if page.path == context.index_output or not is_checked(page, context.glossary_path):
        return []
    matcher = _matcher(context)
    uses = list(find_uses(page, matcher))  # one scan serves both rules
    return [
        *check_page(page, matcher, context.glossary_path, uses),
        *expansions.check_page(page, matcher, uses),
    ]


def _warm(acronyms: AcronymContext | None) -> None:
    """Import what `_work` needs and build the acronym matcher here, before the workers
    start: forked workers then share them instead of each importing and building its own."""
    import wikitools.checks.expansions
    import wikitools.checks.lint
    import wikitools.pages.parse
    import wikitools.runbook.blocks.scan  # noqa: F401

    if acronyms is not None:
        matcher = _matcher(acronyms)
        for entry in acronyms.glossary.entries:  # each worker would compile most of them
            if not entry.name:
                matcher.expansion_patterns(entry)


@dataclass(frozen=True, slots=True)
class _Wanted:
    """What a run works out for each page it parses."""

    config: WikiConfig
    acronyms: AcronymContext | None
    lint: bool
    keep: bool  # send back the parsed page when it holds runbook parts


# Set in each worker process by _start_worker.
_WORKER: _Wanted | None = None


def _start_worker(wanted: _Wanted) -> None:
    global _WORKER
    _WORKER = wanted


def _work(path: Path) -> tuple[Facts, Page | None]:
    from wikitools.pages.parse import read_page

    assert _WORKER is not None
    w = _WORKER
    page = read_page(path, w.config.root)
    facts = facts_of(page, w.config, w.acronyms, w.lint)
    return facts, (page if w.keep and facts.runbooks else None)


def _compute(wanted: _Wanted, paths: list[Path]) -> list[tuple[Facts, Page | None]]:
    """Facts of each path, with the parsed page when asked and it holds runbook parts
    (other pages are never sent back from a worker)."""
    workers = min(workers_for(paths), MAX_WORKERS)
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        _warm(wanted.acronyms)
        # What the workers inherit is never garbage: frozen, their collections skip it
        # instead of walking it (and copying every page of it on write).
        gc.freeze()
        try:
            with ProcessPoolExecutor(
                max_workers=workers, initializer=_start_worker, initargs=(wanted,)
            ) as pool:
                chunk = max(1, len(paths) // (workers * 8))
                return list(pool.map(_work, paths, chunksize=chunk))
        finally:
            gc.unfreeze()
    _start_worker(wanted)
    return [_work(p) for p in paths]


# --------------------------------------------------------------------------- the cache


def _source_key() -> str:
    """Changes with the code that computes facts, with the parser's version and with Python."""
    digest = blake2b(sys.version.encode(), digest_size=12)
    package = Path(__file__).parent.parent
    for name in _SOURCES:
        digest.update((package / f"{name}.py").read_bytes())
    spec = importlib.util.find_spec("markdown_it_pyrs")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        # the installed version, named by its dist-info folder beside the package
        digest.update(" ".join(sorted(
            name for name in os.listdir(Path(folder).parent)  # noqa: PTH208 (names only)
            if name.startswith("markdown_it_pyrs-") and name.endswith(".dist-info"))).encode())
    return digest.hexdigest()


def _cache_file(config: WikiConfig) -> Path | None:
    return cache_file(config.root, "facts")


def _diag_out(d: Diagnostic) -> tuple[Any, ...]:
    return (d.path, d.line, d.col, d.code, d.message, int(d.severity))


_SEVERITY = {int(s): s for s in Severity}  # a lookup, not an enum call per finding


def _diag_in(t: tuple[Any, ...]) -> Diagnostic:
    return Diagnostic(t[0], t[1], t[2], t[3], t[4], _SEVERITY[t[5]])


def _facts_out(f: Facts) -> tuple[Any, ...]:
    e = f.entry
    return (
        (e.path, e.title, e.status, e.description, e.first, e.family, e.hub,
         e.status_at),
        _diag_out(f.untitled) if f.untitled else None,
        f.raw_problems,
        f.raw_lint,
        f.links,
        f.raw_acronyms,
        f.runbooks,
    )


def _facts_in(t: tuple[Any, ...]) -> Facts:
    entry, untitled, problems, lint, links, acronyms, runbooks = t
    path, title, status, description, first, family, hub, at = entry
    # marshal keeps the (line, col) tuple; be explicit about it
    return Facts(Entry(path, title, status, description, first, family, hub, tuple(at)),
                 _diag_in(untitled) if untitled else None, problems, lint, links, acronyms,
                 runbooks)


def _context(config: WikiConfig) -> tuple[Any, ...]:
    from wikitools.pages.dialect import detect_dialect  # PG009 depends on it

    return (_source_key(), str(config.root), config.statuses, detect_dialect(config.root))


def _load(path: Path, context: tuple[Any, ...]) -> dict[str, tuple[bytes, tuple[Any, ...]]]:
    try:
        data = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(data, tuple) or len(data) != 2 or data[0] != context:
        return {}
    return data[1] if isinstance(data[1], dict) else {}


def _save(path: Path, context: tuple[Any, ...], entries: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps((context, entries)))
        tmp.replace(path)
    except OSError:
        pass  # a cache that cannot be written only costs time


# --------------------------------------------------------------------------- gathering


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
    """The facts of every page in `files`: from the cache where the page's bytes are
    unchanged and it holds what is asked for (the acronym findings with `acronyms`, the
    page's own lint findings with `lint`), else by parsing (in worker processes when there
    are many)."""
    rels = list(files.rels)
    cache_file = _cache_file(config)
    context = _context(config) if cache_file else ()
    cached = _load(cache_file, context) if cache_file else {}
    key = acronyms.key if acronyms else None
    digests: list[bytes] = []
    found: dict[str, Facts] = {}
    missing: list[int] = []
    for i, (path, rel) in enumerate(zip(files.paths, rels, strict=True)):
        digest = blake2b(path.read_bytes(), digest_size=16).digest() if cache_file else b""
        digests.append(digest)
        hit = cached.get(rel)
        if hit is not None and hit[0] == digest:
            facts = _facts_in(hit[1])
            if (key is None or facts.acronyms_for(key)) and (not lint or facts.raw_lint
                                                              is not None):
                found[rel] = facts
                continue
        missing.append(i)
    pages: dict[str, Page] = {}
    wanted = _Wanted(config, acronyms, lint, runbook_pages)
    for facts, page in _compute(wanted, [files.paths[i] for i in missing]):
        found[facts.path] = facts
        if page is not None:
            pages[facts.path] = page
    if cache_file and (missing or len(cached) != len(rels)):
        entries = {
            rel: (digest, _facts_out(_keep_earlier(found[rel], cached.get(rel), digest)))
            for rel, digest in zip(rels, digests, strict=True)
        }
        _save(cache_file, context, entries)
    ordered = tuple(found[rel] for rel in rels)
    kept: list[Page] = []
    if runbook_pages:
        from wikitools.pages.parse import read_page

        for path, facts in zip(files.paths, ordered, strict=True):
            if facts.runbooks:
                kept.append(pages.get(facts.path) or read_page(path, config.root))
    return Gathered(ordered, tuple(kept))


def _keep_earlier(facts: Facts, old: tuple[bytes, Any] | None, digest: bytes) -> Facts:
    """A run that did not work out the acronym or lint findings of an unchanged page keeps
    those an earlier run cached."""
    if old is None or old[0] != digest or (
            facts.raw_acronyms is not None and facts.raw_lint is not None):
        return facts
    previous = _facts_in(old[1])
    return Facts(facts.entry, facts.untitled, facts.raw_problems,
                 facts.raw_lint if facts.raw_lint is not None else previous.raw_lint,
                 facts.links,
                 facts.raw_acronyms if facts.raw_acronyms is not None else previous.raw_acronyms,
                 facts.runbooks)


def entries(gathered: Iterable[Facts]) -> list[Entry]:
    return [f.entry for f in gathered]
