"""What the page commands need to know about each page, computed once per page content and
cached: the index entry, the page's own lint findings, its links, its acronym findings, and
whether it holds runbook blocks or results markers (only those pages are parsed again for the
runbook checks). A warm run reads and hashes the files and loads a few hundred kilobytes; a
cold run parses in worker processes that send back these facts, never whole pages.

The cache lives in $WIKI_CACHE_DIR, else ~/.cache/wikitools; WIKI_CACHE_DIR=off disables it.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wikitools.config import PageFiles, WikiConfig, blake2b, cache_file, workers_for
from wikitools.diagnostics import Diagnostic, Severity
from wikitools.index import Entry

if TYPE_CHECKING:
    from wikitools.glossary import Glossary
    from wikitools.lint import LinkFact
    from wikitools.pages import Page

MAX_WORKERS = 4  # each worker holds the parser (~40 MB): keeps a cold run under 300 MB
# Modules whose code decides the facts: a change to any of them empties the cache.
_SOURCES = (
    "pages", "page_model", "page_source", "fences", "facts", "index", "lint", "acronyms",
    "expansions", "glossary", "anchors", "runbook/blocks/regions",
)


@dataclass(frozen=True, slots=True)
class Facts:
    """The facts of one page. Findings are kept as plain tuples and made Diagnostics when
    asked for, so that a command that does not need them pays nothing for them."""

    entry: Entry
    untitled: Diagnostic | None  # IDX001 when the index falls back to the file name
    raw_findings: tuple[tuple[Any, ...], ...]  # parser problems, front matter, headings
    links: tuple[LinkFact, ...]
    # None when not worked out (no glossary), else (glossary key, findings)
    raw_acronyms: tuple[str, tuple[tuple[Any, ...], ...]] | None
    runbooks: bool  # runbook blocks or results markers: the runbook checks need the page
    anchors: tuple[str, ...] = ()  # ids a link may name after `#`

    @property
    def path(self) -> str:
        return self.entry.path

    @property
    def findings(self) -> tuple[Diagnostic, ...]:
        return tuple(_diag_in(d) for d in self.raw_findings)

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


def facts_of(page: Page, config: WikiConfig, acronyms: AcronymContext | None) -> Facts:
    from wikitools.anchors import page_anchors
    from wikitools.index import make_entry
    from wikitools.lint import page_findings, page_links

    entry, untitled = make_entry(page)
    found = None
    if acronyms is not None:
        found = (acronyms.key, tuple(_diag_out(d) for d in _acronym_findings(page, acronyms)))
    return Facts(
        entry=entry,
        untitled=untitled,
        raw_findings=tuple(_diag_out(d) for d in page_findings(config, page)),
        links=page_links(page),
        raw_acronyms=found,
        runbooks=has_runbook_parts(page),
        anchors=page_anchors(page),
    )


_MATCHERS: dict[str, Any] = {}


def _matcher(context: AcronymContext) -> Any:
    from wikitools.acronyms import Matcher

    if context.key not in _MATCHERS:
        _MATCHERS[context.key] = Matcher(context.glossary)
    return _MATCHERS[context.key]


def _acronym_findings(page: Page, context: AcronymContext) -> list[Diagnostic]:
    from wikitools import expansions
    from wikitools.acronyms import check_page, find_uses, is_checked

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
    import wikitools.expansions
    import wikitools.lint
    import wikitools.pages
    import wikitools.runbook.blocks.scan  # noqa: F401

    if acronyms is not None:
        matcher = _matcher(acronyms)
        for entry in acronyms.glossary.entries:  # each worker would compile most of them
            if not entry.name:
                matcher.expansion_patterns(entry)


# Set in each worker process by _start_worker.
_WORKER: tuple[WikiConfig, AcronymContext | None, bool] | None = None


def _start_worker(config: WikiConfig, acronyms: AcronymContext | None, keep: bool) -> None:
    global _WORKER
    _WORKER = (config, acronyms, keep)


def _work(path: Path) -> tuple[Facts, Page | None]:
    from wikitools.pages import read_page

    assert _WORKER is not None
    config, acronyms, keep = _WORKER
    page = read_page(path, config.root)
    facts = facts_of(page, config, acronyms)
    return facts, (page if keep and facts.runbooks else None)


def _compute(
    config: WikiConfig, paths: list[Path], acronyms: AcronymContext | None, keep: bool
) -> list[tuple[Facts, Page | None]]:
    """Facts of each path, with the parsed page when `keep` and it holds runbook parts
    (other pages are never sent back from a worker)."""
    workers = min(workers_for(paths), MAX_WORKERS)
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        _warm(acronyms)

        with ProcessPoolExecutor(
            max_workers=workers, initializer=_start_worker, initargs=(config, acronyms, keep)
        ) as pool:
            chunk = max(1, len(paths) // (workers * 8))
            return list(pool.map(_work, paths, chunksize=chunk))
    _start_worker(config, acronyms, keep)
    return [_work(p) for p in paths]


# --------------------------------------------------------------------------- the cache


def _source_key() -> str:
    """Changes with the code that computes facts, with the parser's version and with Python."""
    digest = blake2b(sys.version.encode(), digest_size=12)
    package = Path(__file__).parent
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


def _diag_in(t: tuple[Any, ...]) -> Diagnostic:
    return Diagnostic(t[0], t[1], t[2], t[3], t[4], Severity(t[5]))


def _facts_out(f: Facts) -> tuple[Any, ...]:
    e = f.entry
    return (
        (e.path, e.title, e.status, e.description, e.first, e.family, e.hub,
         e.status_at),
        _diag_out(f.untitled) if f.untitled else None,
        f.raw_findings,
        f.links,
        f.raw_acronyms,
        f.runbooks,
        f.anchors,
    )


def _facts_in(t: tuple[Any, ...]) -> Facts:
    entry, untitled, findings, links, acronyms, runbooks, anchors = t
    path, title, status, description, first, family, hub, at = entry
    # marshal keeps the (line, col) tuple; be explicit about it
    return Facts(Entry(path, title, status, description, first, family, hub, tuple(at)),
                 _diag_in(untitled) if untitled else None, findings, links, acronyms, runbooks,
                 anchors)


def _context(config: WikiConfig) -> tuple[Any, ...]:
    return (_source_key(), str(config.root), config.statuses)


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
    runbook_pages: bool = False,
) -> Gathered:
    """The facts of every page in `files`: from the cache where the page's bytes are
    unchanged, else by parsing (in worker processes when there are many)."""
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
            if key is None or facts.acronyms_for(key):
                found[rel] = facts
                continue
        missing.append(i)
    pages: dict[str, Page] = {}
    for facts, page in _compute(config, [files.paths[i] for i in missing], acronyms,
                                  runbook_pages):
        found[facts.path] = facts
        if page is not None:
            pages[facts.path] = page
    if cache_file and (missing or len(cached) != len(rels)):
        entries = {
            rel: (digest, _facts_out(_keep_acronyms(found[rel], cached.get(rel), digest)))
            for rel, digest in zip(rels, digests, strict=True)
        }
        _save(cache_file, context, entries)
    ordered = tuple(found[rel] for rel in rels)
    wanted: list[Page] = []
    if runbook_pages:
        from wikitools.pages import read_page

        for path, facts in zip(files.paths, ordered, strict=True):
            if facts.runbooks:
                wanted.append(pages.get(facts.path) or read_page(path, config.root))
    return Gathered(ordered, tuple(wanted))


def _keep_acronyms(facts: Facts, old: tuple[bytes, Any] | None, digest: bytes) -> Facts:
    """A run without a glossary keeps the acronym findings an earlier run cached."""
    if facts.raw_acronyms is not None or old is None or old[0] != digest:
        return facts
    previous = _facts_in(old[1]).raw_acronyms
    if previous is None:
        return facts
    return Facts(facts.entry, facts.untitled, facts.raw_findings, facts.links, previous,
                 facts.runbooks, facts.anchors)


def entries(gathered: Iterable[Facts]) -> list[Entry]:
    return [f.entry for f in gathered]
