"""Page lint: front matter values, parser problems, titles, and links to pages that do not exist.

Codes: FM003 unknown status value, FM004 front matter key of the wrong type, FM005 value cut
short by a YAML comment (warning), PG003 more than one
level-1 heading, LNK001 link to a file that does not exist, LNK002 page that no chain of links
from the home page reaches (warning), IDX001 page without a title (shared with the index),
FM006 page marked `current` whose runbooks have no successful record on their target
architecture.
FM001/FM002/PG001/PG002 come from the parser.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

from wikitools.config import WikiConfig
from wikitools.diagnostics import Diagnostic, Severity
from wikitools.index import title_of
from wikitools.pages import Page
from wikitools.runbook.extract import extract_runbooks
from wikitools.runbook.scan import container_findings
from wikitools.runbook.status import check_current_pages

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_LIST_KEYS = ("tags",)
_STRING_KEYS = ("title", "description", "status", "family")


def lint_pages(config: WikiConfig, pages: list[Page]) -> list[Diagnostic]:
    """All lint findings for `pages` (unsorted)."""
    known = frozenset(p.path for p in pages)
    exists = _Exists(config.root, known)
    out: list[Diagnostic] = []
    for page in pages:
        out.extend(page.problems)
        out.extend(check_front_matter(config, page))
        out.extend(check_headings(page))
        out.extend(check_links(page, known, exists))
        out.extend(container_findings(page))
    out.extend(check_reachable(config, pages))
    runbooks, _ = extract_runbooks(pages)
    out.extend(check_current_pages(pages, runbooks, config.root, _fm_position))
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


def _fm_position(page: Page, key: str) -> tuple[int, int]:
    """Line and column of the value of top-level front matter `key` (1, 1 if not found)."""
    pattern = re.compile(rf"^{re.escape(key)}\s*:\s*")
    for number, line in enumerate(page.lines[1 : page.front_matter_end], start=2):
        m = pattern.match(line)
        if m:
            return number, m.end() + 1
    return 1, 1


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
            line, col = _fm_position(page, key)
            yield Diagnostic(page.path, line, col, "FM004", f"front matter '{key}' must be text")
    for key in _LIST_KEYS:
        if key in fm and not isinstance(fm[key], list):
            line, col = _fm_position(page, key)
            yield Diagnostic(page.path, line, col, "FM004", f"front matter '{key}' must be a list")
    if "hub" in fm and not isinstance(fm["hub"], bool):
        line, col = _fm_position(page, "hub")
        yield Diagnostic(page.path, line, col, "FM004", "front matter 'hub' must be true or false")
    status = fm.get("status")
    if isinstance(status, str) and status not in config.statuses:
        line, col = _fm_position(page, "status")
        allowed = ", ".join(config.statuses)
        hint = difflib.get_close_matches(status.strip().lower(), config.statuses, n=1, cutoff=0.6)
        suffix = f"; did you mean '{hint[0]}'?" if hint else ""
        yield Diagnostic(
            page.path, line, col, "FM003", f"unknown status {status!r} (allowed: {allowed}){suffix}"
        )


def check_headings(page: Page) -> Iterator[Diagnostic]:
    _, missing = title_of(page)
    if missing:
        yield missing
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


_SUGGEST_LIMIT = 400


@lru_cache(maxsize=4096)
def _suggest_cached(resolved: str, known: frozenset[str]) -> str | None:
    # Look in the target's own folder first; the whole wiki only when it is small, since
    # difflib is quadratic in spirit and a big wiki has many stale links.
    folder = posixpath.dirname(resolved)
    near = {posixpath.basename(k): k for k in known if posixpath.dirname(k) == folder}
    if near:
        names = sorted(near)[:_SUGGEST_LIMIT]
        hint = difflib.get_close_matches(posixpath.basename(resolved), names, n=1, cutoff=0.75)
        return near[hint[0]] if hint else None
    if len(known) > _SUGGEST_LIMIT:
        return None
    hint = difflib.get_close_matches(resolved, sorted(known), n=1, cutoff=0.75)
    return hint[0] if hint else None


def check_links(
    page: Page, known: frozenset[str], exists: Callable[[str], bool]
) -> Iterator[Diagnostic]:
    folder = posixpath.dirname(page.path)
    for link in page.links:
        if link.kind not in ("link", "image"):
            continue
        target = _local_target(link.target)
        if target is None:
            continue
        resolved = posixpath.normpath(posixpath.join(folder, target))
        if resolved.startswith("../") or resolved == "..":
            continue  # outside the tree: not ours to judge
        if exists(resolved):
            continue
        hint = _suggest_cached(resolved, known)
        suffix = f"; did you mean '{posixpath.relpath(hint, folder or '.')}'?" if hint else ""
        what = "image" if link.kind == "image" else "page"
        yield Diagnostic(
            page.path, link.line, link.col, "LNK001", f"link to missing {what} '{target}'{suffix}"
        )


def _link_targets(page: Page) -> Iterator[str]:
    """Pages that `page` links to, as root-relative POSIX paths (folders mean their index.md)."""
    folder = posixpath.dirname(page.path)
    for link in page.links:
        target = _local_target(link.target) if link.kind == "link" else None
        if target is None:
            continue
        resolved = posixpath.normpath(posixpath.join(folder, target))
        if target.endswith("/") or not resolved.endswith(".md"):
            resolved = posixpath.join(resolved, "index.md")
        yield resolved


def check_reachable(config: WikiConfig, pages: list[Page]) -> Iterator[Diagnostic]:
    """LNK002 for each page under docs_dir that no chain of links from its home page
    (`index.md` or `README.md` at the top of docs_dir) reaches. Silent without a home page."""
    docs = "" if config.docs_dir in ("", ".") else config.docs_dir.rstrip("/") + "/"
    in_docs = {p.path: p for p in pages if p.path.startswith(docs)}
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
        todo.extend(_link_targets(in_docs[path]))
    for path in sorted(set(in_docs) - seen):
        yield Diagnostic(
            path, 1, 1, "LNK002",
            f"no chain of links from {home} reaches this page; link it from a hub or section index",
            Severity.WARNING,
        )
