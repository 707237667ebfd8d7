"""Page lint: front matter values, parser problems, titles, and links to pages that do not exist.

Codes: FM003 unknown status value, FM004 front matter key of the wrong type, FM005 value cut
short by a YAML comment (warning), PG003 more than one
level-1 heading, LNK001 link to a file that does not exist, LNK002 page that no chain of links
from the home page reaches (warning), LNK003 link to an anchor the page does not have
(wikitools.checks.anchors), IDX001 page without a title (shared with the index),
FM006 status that claims more than the records prove (`measured` without successful records
on the target architecture or without runbooks, `reviewed` on a page with runbooks), FM007
`reviewed` without a valid `reviewed:` date, FM008 hub whose status is not derived from its
pages, PG007 line that Python-Markdown would turn into a heading (`#31782.` at a line
start), PG009 what GitHub would show wrong (wikitools.github_view, warnings, in a wiki read on
GitHub: Material syntax as text, an indented body as code, dropped SVG, broken tables), RB013
container block that a runbook could not run (warning: a compose file
without an engine launcher, `docker compose up` without its file, a `docker exec` server).
FM001/FM002/PG001/PG002 come from the parser.
"""

from __future__ import annotations

import bisect
import datetime
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from wikitools.checks.anchors import LinkFact, check_anchors, page_anchors
from wikitools.checks.index import Entry, front_matter_position, make_entry, title_of
from wikitools.checks.statuses import RETIRED, REVIEWED, entry_findings
from wikitools.core.config import WikiConfig
from wikitools.core.diagnostics import Diagnostic, Severity, closest, did_you_mean
from wikitools.pages.generators import link_candidates

if TYPE_CHECKING:
    from wikitools.pages.parse import Page
    from wikitools.runbook.blocks.declared import RunbookSet

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_LIST_KEYS = ("tags",)
_STRING_KEYS = ("title", "description", "status", "family")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def lint_pages(config: WikiConfig, pages: list[Page]) -> list[Diagnostic]:
    """All lint findings for `pages` (unsorted)."""
    out: list[Diagnostic] = []
    for page in pages:
        out.extend(page_findings(config, page))
    links = {page.path: page_links(page) for page in pages}
    out.extend(link_findings(config, links))
    out.extend(check_anchors(links, {page.path: page_anchors(page) for page in pages}))
    out.extend(status_findings(config, [make_entry(page)[0] for page in pages], pages))
    return out


def status_findings(
    config: WikiConfig, entries: Iterable[Entry], runbook_pages: Iterable[Page],
    runbooks: RunbookSet | None = None,
) -> list[Diagnostic]:
    """What each page's status may claim (FM006, FM008): the records of the pages that hold
    runbooks (callers may pass just those pages, and their runbooks when they have read
    them), and every page's entry for the hubs."""
    from wikitools.runbook.blocks.extract import extract_runbooks
    from wikitools.runbook.rendering.measured import check_runbook_claims

    pages = list(runbook_pages)
    if runbooks is None:
        runbooks, _ = extract_runbooks(pages, config.root)
    with_runbooks = {rb.page for rb in runbooks}
    return [*check_runbook_claims(pages, runbooks, config.root, _fm_position),
            *entry_findings(entries, with_runbooks)]


def page_findings(config: WikiConfig, page: Page) -> list[Diagnostic]:
    """The findings that need only the page itself: parser problems, front matter, headings,
    container blocks that could not become runbooks."""
    from wikitools.runbook.blocks.container_warnings import container_findings

    return [*page.problems, *check_front_matter(config, page), *check_headings(page),
            *container_findings(page), *github_problems(config, page)]


def github_problems(config: WikiConfig, page: Page) -> list[Diagnostic]:
    """PG009 for a wiki whose pages are written for GitHub (wikitools.dialect); a site written
    in Material's own syntax reads it as intended."""
    from wikitools.pages.dialect import detect_dialect

    if detect_dialect(config.root) != "github":
        return []
    from wikitools.checks.github_view import github_findings

    return github_findings(page.text, page.path)


def page_links(page: Page) -> tuple[LinkFact, ...]:
    """The page's links and images, all that the link checks need of it."""
    return tuple(
        (link.kind, link.target, link.line, link.col)
        for link in page.links
        if link.kind in ("link", "image")
    )


def link_findings(config: WikiConfig, links: dict[str, tuple[LinkFact, ...]]) -> list[Diagnostic]:
    """LNK001 and LNK002 for every page, given each page's links (keyed by page path)."""
    known = frozenset(links)
    exists = _Exists(config.root, known)
    out: list[Diagnostic] = []
    for path in sorted(links):
        out.extend(check_links(path, links[path], known, exists, config.generator))
    out.extend(check_reachable(config, links))
    return out


class _Exists:
    """Cached file-system lookups of paths relative to the root."""

    def __init__(self, root: Path, known: frozenset[str]) -> None:
        self.root = root
        self.cache: dict[str, bool] = dict.fromkeys(known, True)

    def __call__(self, rel: str) -> bool:
        if rel not in self.cache:
            self.cache[rel] = (self.root / rel).exists()
        return self.cache[rel]


_fm_position = front_matter_position


# Only free-text keys: there a ` #` is almost surely part of the text (`PR #31089`), while
# after `status: current` it is a real comment.
_COMMENT_CUT = re.compile(r"""^(title|description):[ \t]+(?!["'\[{|>&*!])[^#\n]*?\S[ \t]+#""")


def check_front_matter(config: WikiConfig, page: Page) -> Iterator[Diagnostic]:
    fm = page.front_matter
    for number, line in enumerate(page.lines[1 : page.front_matter_end - 1], start=2):
        m = _COMMENT_CUT.match(line)
        if m:
            yield Diagnostic(
                page.path,
                number,
                m.end(),
                "FM005",
                f"front matter '{m.group(1)}' is cut short at ' #' (YAML reads the rest as a "
                "comment); put the value in quotes",
                Severity.WARNING,
            )
    for key in _STRING_KEYS:
        if key in fm and not isinstance(fm[key], str):
            row, col = _fm_position(page, key)
            yield Diagnostic(page.path, row, col, "FM004", f"front matter '{key}' must be text")
    for key in _LIST_KEYS:
        if key in fm and not isinstance(fm[key], list):
            row, col = _fm_position(page, key)
            yield Diagnostic(page.path, row, col, "FM004", f"front matter '{key}' must be a list")
    if "hub" in fm and not isinstance(fm["hub"], bool):
        row, col = _fm_position(page, "hub")
        yield Diagnostic(page.path, row, col, "FM004", "front matter 'hub' must be true or false")
    status = fm.get("status")
    if isinstance(status, str) and status not in config.statuses:
        row, col = _fm_position(page, "status")
        allowed = ", ".join(config.statuses)
        retired = RETIRED.get(status.strip().lower())
        suffix = f"; {retired}" if retired else did_you_mean(status.strip().lower(),
                                                             config.statuses)
        yield Diagnostic(
            page.path, row, col, "FM003", f"unknown status {status!r} (allowed: {allowed}){suffix}"
        )
    yield from check_reviewed(page, status)


def check_reviewed(page: Page, status: object) -> Iterator[Diagnostic]:
    """FM007: `reviewed` needs the date of the review (`reviewed: YYYY-MM-DD`), and a date
    needs to be one."""
    value = page.front_matter.get("reviewed")
    if value is None:
        if status == REVIEWED:
            line, col = _fm_position(page, "status")
            yield Diagnostic(page.path, line, col, "FM007",
                             "status 'reviewed' needs the date of the review: add "
                             "'reviewed: YYYY-MM-DD' (the day the prose was checked against "
                             "its sources)")
        return
    text = value.isoformat() if isinstance(value, datetime.date) else value
    if not isinstance(text, str) or not _ISO_DATE.fullmatch(text):
        line, col = _fm_position(page, "reviewed")
        yield Diagnostic(page.path, line, col, "FM007",
                         f"front matter 'reviewed' must be a date as YYYY-MM-DD, not {value!r}")


# Python-Markdown (the site's renderer) reads `#` + text at the start of any line of a block as
# a heading, space or not; CommonMark (GitHub, our parser) needs the space. A wrapped "issue
# #31782." became a level-1 heading on the site that way.
_HASH_LINE = re.compile(r"^( *)(#{1,6})(?=[^\s#])")
_FENCE_LINE = re.compile(r"^ *(`{3,}|~{3,})")
_HASH_OR_FENCE = frozenset("#`~")  # how the lines the two patterns above match start


def hash_lines(page: Page) -> Iterator[tuple[int, int]]:
    """(line, col) of each line outside code fences (admonition bodies included) that starts
    with `#` and no space: a heading on the site, plain text on GitHub."""
    fence: str | None = None
    for number, line in enumerate(page.lines, start=1):
        if number <= page.front_matter_end or line.lstrip(" ")[:1] not in _HASH_OR_FENCE:
            continue
        m = _FENCE_LINE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence) and not line.strip()[len(mark):]:
                fence = None
            continue
        if fence is None:
            h = _HASH_LINE.match(line)
            if h:
                yield number, len(h.group(1)) + 1


def check_headings(page: Page) -> Iterator[Diagnostic]:
    _, missing = title_of(page)
    if missing:
        yield missing
    for line, col in hash_lines(page):
        yield Diagnostic(
            page.path, line, col, "PG007",
            "line starts with '#' and no space: the site renders it as a heading (GitHub does "
            "not); rewrap the sentence so the '#' is not first on its line",
        )
    h1s = [h for h in page.headings if h.level == 1]
    for extra in h1s[1:]:
        yield Diagnostic(
            page.path,
            extra.line,
            extra.col,
            "PG003",
            f"second level-1 heading {extra.text!r}; the title is the one on line {h1s[0].line}",
            Severity.WARNING,
        )


def _local_target(target: str) -> str | None:
    """The file part of a relative link target, or None for external and in-page links."""
    if not target or target.startswith(("#", "/", "//")) or _SCHEME.match(target):
        return None
    path = target.split("#", 1)[0].split("?", 1)[0]
    return unquote(path) or None


_SUGGEST_LIMIT = 2000


def _stem(path: str) -> str:
    return posixpath.splitext(posixpath.basename(path))[0].casefold()


def _related(missing: str, candidate: str) -> bool:
    """One name starts, ends or contains the other (`kv-cache` and `kv-cache-sessions`)."""
    if len(missing) > len(candidate):
        missing, candidate = candidate, missing
    return len(missing) >= 3 and missing in candidate


class _Names:
    """Every known page by name, for suggestions: stems in one string (so that the pages
    whose name contains a missing name are found by `str.find`) and by value (so that the
    pages whose name is part of it are found by looking up its substrings)."""

    def __init__(self, known: frozenset[str]) -> None:
        self.paths = sorted(known)
        self.stems = [_stem(k) for k in self.paths]
        self.joined = "\n".join(self.stems)
        self.starts: list[int] = []
        offset = 0
        for stem in self.stems:
            self.starts.append(offset)
            offset += len(stem) + 1
        self.by_stem: dict[str, list[int]] = {}
        for i, stem in enumerate(self.stems):
            self.by_stem.setdefault(stem, []).append(i)
        self.exts = [posixpath.splitext(k)[1] for k in self.paths]
        self.folders = [posixpath.dirname(k) for k in self.paths]
        self.by_ext: dict[str, list[int]] = {}
        for i, ext in enumerate(self.exts):
            self.by_ext.setdefault(ext, []).append(i)

    def related(self, stem: str) -> set[int]:
        """Indexes of the pages whose stem contains `stem` or is part of it (3+ letters)."""
        found: set[int] = set()
        if len(stem) >= 3:
            at = self.joined.find(stem)
            while at >= 0:
                found.add(bisect.bisect_right(self.starts, at) - 1)
                at = self.joined.find(stem, at + 1)
        for i in range(len(stem)):
            for j in range(i + 3, len(stem) + 1):
                found.update(self.by_stem.get(stem[i:j], ()))
        return found


@lru_cache(maxsize=4)
def _names(known: frozenset[str]) -> _Names:
    return _Names(known)


def suggest(resolved: str, known: frozenset[str]) -> str | None:
    """The page a broken link most likely meant: a page whose name contains the missing name
    (or is contained in it), else the closest name by difflib; the link's own folder first,
    then the whole wiki."""
    return _suggest_cached(resolved, known)


@lru_cache(maxsize=4096)
def _suggest_cached(resolved: str, known: frozenset[str]) -> str | None:
    folder = posixpath.dirname(resolved)
    ext = posixpath.splitext(resolved)[1]
    stem = _stem(resolved)
    names = _names(known)
    related = [i for i in names.related(stem) if names.exts[i] == ext]
    near = [i for i in related if names.folders[i] == folder]
    for pool in (near, related):
        if pool:
            best = min(pool, key=lambda i: (abs(len(names.stems[i]) - len(stem)), names.paths[i]))
            return names.paths[best]
    same_kind = names.by_ext.get(ext, [])
    for pool in ([i for i in same_kind if names.folders[i] == folder], same_kind):
        by_name: dict[str, str] = {}
        for i in pool[:_SUGGEST_LIMIT]:
            by_name.setdefault(posixpath.basename(names.paths[i]), names.paths[i])
        hint = closest(posixpath.basename(resolved), by_name, cutoff=0.75)
        if hint is not None:
            return by_name[hint]
    return None


def _relative(path: str, start: str) -> str:
    """`posixpath.relpath` for two root-relative paths, without asking for the working
    directory (thousands of hints made that a noticeable cost)."""
    to, base = path.split("/"), [p for p in start.split("/") if p and p != "."]
    common = 0
    while common < min(len(to) - 1, len(base)) and to[common] == base[common]:
        common += 1
    return "/".join([".."] * (len(base) - common) + to[common:])


def check_links(
    path: str, links: tuple[LinkFact, ...], known: frozenset[str], exists: Callable[[str], bool],
    generator: str = "mkdocs",
) -> Iterator[Diagnostic]:
    folder = posixpath.dirname(path)
    for kind, raw, line, col in links:
        target = _local_target(raw)
        if target is None:
            continue
        resolved = posixpath.normpath(posixpath.join(folder, target))
        if resolved.startswith("../") or resolved == "..":
            continue  # outside the tree: not ours to judge
        if any(exists(c) for c in link_candidates(resolved, generator)):
            continue
        hint = suggest(resolved, known)
        suffix = f"; did you mean '{_relative(hint, folder)}'?" if hint else ""
        what = "image" if kind == "image" else "page"
        yield Diagnostic(path, line, col, "LNK001", f"link to missing {what} '{target}'{suffix}")


def _link_targets(path: str, links: tuple[LinkFact, ...], generator: str = "mkdocs",
                  ) -> Iterator[str]:
    """Pages that a page links to, as root-relative POSIX paths (folders mean their index.md;
    under Sphinx and Docusaurus a name without its suffix means the document)."""
    folder = posixpath.dirname(path)
    for kind, raw, _line, _col in links:
        target = _local_target(raw) if kind == "link" else None
        if target is None:
            continue
        resolved = posixpath.normpath(posixpath.join(folder, target))
        if generator != "mkdocs":
            yield from link_candidates(resolved, generator)
            continue
        if target.endswith("/") or not resolved.endswith(".md"):
            resolved = posixpath.join(resolved, "index.md")
        yield resolved


def check_reachable(
    config: WikiConfig, links: dict[str, tuple[LinkFact, ...]]
) -> Iterator[Diagnostic]:
    """LNK002 for each page under docs_dir that no chain of links from its home page
    (`index.md` or `README.md` at the top of docs_dir) reaches. Silent without a home page."""
    docs = "" if config.docs_dir in ("", ".") else config.docs_dir.rstrip("/") + "/"
    in_docs = {path: page_links for path, page_links in links.items() if path.startswith(docs)}
    home = next((docs + n for n in ("index.md", "README.md") if docs + n in in_docs), None)
    if home is None:
        return
    seen: set[str] = set()
    todo = [home]
    while todo:
        path = todo.pop()
        if path in seen or path not in in_docs:
            continue
        seen.add(path)
        todo.extend(_link_targets(path, in_docs[path], config.generator))
    for path in sorted(set(in_docs) - seen):
        yield Diagnostic(
            path, 1, 1, "LNK002",
            f"no chain of links from {home} reaches this page; link it from a hub or section index",
            Severity.WARNING,
        )
