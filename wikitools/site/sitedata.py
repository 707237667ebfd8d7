"""What the site extension reads from the wiki, once per build: the glossary's abbreviation
lines, the status texts, each page's body and front matter, and (when a page needs them) the
runbooks and their records."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import yaml

from wikitools.core.config import WikiConfig, find_root, iter_pages, load_config
from wikitools.pages.glossary import abbreviations, load_glossary
from wikitools.site.chips import DEFAULT_STATUS_TEXT
from wikitools.core.yamlload import load_yaml


def body_key(text: str) -> str:
    """A page's body as the builders hand it over (front matter off), whitespace-trimmed."""
    return text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff").strip()


def split_front_matter(text: str) -> tuple[str, dict[str, Any]]:
    """(body, front matter) of a page's text: a leading `---` YAML block, as MkDocs reads it."""
    plain = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")
    lines = plain.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return plain, {}
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        return plain, {}
    try:
        meta = load_yaml("\n".join(lines[1:end])) or {}
    except yaml.YAMLError:
        return plain, {}
    return "\n".join(lines[end + 1:]), meta if isinstance(meta, dict) else {}


def status_texts(root: Path, config: WikiConfig) -> dict[str, str]:
    """The chip texts: mkdocs.yml's `extra.status`, else the defaults for the wiki's statuses."""
    path = root / "mkdocs.yml"
    if path.is_file():

        class _Loader(yaml.SafeLoader):
            """mkdocs.yml may hold `!ENV` and `!!python/name:` tags; only `extra` is read."""

        _Loader.add_multi_constructor("", lambda _loader, _suffix, _node: None)
        try:
            data = load_yaml(path.read_text(encoding="utf-8"), _Loader)
        except (yaml.YAMLError, UnicodeDecodeError, OSError):
            data = None
        extra = data.get("extra") if isinstance(data, dict) else None
        given = extra.get("status") if isinstance(extra, dict) else None
        if isinstance(given, dict):
            return {str(k): str(v) for k, v in given.items()}
    return {s: DEFAULT_STATUS_TEXT.get(s, s.capitalize()) for s in config.statuses}


class SiteData:
    def __init__(self, root: Path) -> None:
        self.config = load_config(root)
        self.root = self.config.root
        glossary = self.config.glossary_path
        self.glossary_mtime = glossary.stat().st_mtime_ns if glossary.is_file() else None
        self.abbr = (abbreviations(load_glossary(glossary, self.root))
                     if glossary.is_file() else {})
        self.status_texts = status_texts(self.root, self.config)
        self.pages: dict[str, tuple[str, dict[str, Any]]] = {}
        for path in iter_pages(self.config):
            try:
                text = path.read_bytes().decode("utf-8", errors="replace")
            except OSError:
                continue
            body, meta = split_front_matter(text)
            rel = path.relative_to(self.root).as_posix()
            self.pages.setdefault(body_key(body), (rel, meta))
        self.missed: set[str] = set()  # texts of no page (read again once for each)
        self._runbooks: Any = None
        self._records: Any = None
        self._measured: dict[str, Any] | None = None

    def fresh(self) -> bool:
        glossary = self.config.glossary_path
        return self.glossary_mtime == (glossary.stat().st_mtime_ns if glossary.is_file()
                                       else None)

    def find(self, text: str) -> tuple[str, dict[str, Any]] | None:
        return self.pages.get(body_key(text))

    def runbooks(self) -> Any:
        if self._runbooks is None:
            from wikitools.pages.load import load_pages
            from wikitools.runbook.blocks.extract import extract_runbooks

            self._runbooks, _diags = extract_runbooks(load_pages(self.config), self.root)
        return self._runbooks

    def measured(self, text: str, rel: str) -> Any:
        """The "measured on" evidence of the page's own runbooks (read from `text` alone)."""
        from wikitools.pages.parse import parse_page
        from wikitools.runbook.blocks.extract import extract_runbooks
        from wikitools.runbook.rendering.measured import measurements

        own, _diags = extract_runbooks([parse_page(text, rel)], self.root)
        store = self.records()
        return measurements(own, self.root, lambda _root, rid: store.get(rid)).get(rel)

    def records(self) -> Any:
        """The run records, each runbook's folder read once per build."""
        if self._records is None:
            from wikitools.runbook.rendering.render import RecordStore

            self._records = RecordStore(self.root)
        return self._records

    def render_results(self, text: str, rel: str) -> str:
        """`text` with its results regions rendered from the records, as `wiki runbook render`
        would write them but for the charts: inline SVG, which the site draws in its own
        colours and with a tooltip on each point."""
        from wikitools.pages.parse import parse_page
        from wikitools.runbook.rendering.render import render_pages

        if self._as_written(text):
            return text
        page = parse_page(text, rel)
        changes, _diags = render_pages([page], self.root, runbooks=self._runbooks_for(page),
                                       inline_charts=True, store=self.records())
        return next((c.new for c in changes if c.path == rel and c.new is not None), text)


    def _runbooks_for(self, page: Any) -> Any:
        """The runbooks a page's regions name: its own when they are all on it, else every
        page's (a region may compare with, or show, a runbook of another page)."""
        from wikitools.runbook.blocks.extract import extract_runbooks

        own, _diags = extract_runbooks([page], self.root)
        ids = {r.id for r in own}
        for attrs in _START.findall(page.text):
            found = dict(_ATTR.findall(attrs))
            if "with" in found or found.get("runbook") not in ids:
                return self.runbooks()
        return own

    def _as_written(self, text: str) -> bool:
        """True when rendering could only give the page's text back: no runbook its regions
        name has a record, and every region is closed with the checksum of a rendered body
        (a region never rendered, or edited, is rendered or reported as usual)."""
        names = {n for attrs in _START.findall(text) for key, value in _ATTR.findall(attrs)
                 if key in ("runbook", "with") for n in value.split(",")}
        if not names or len(_SUMMED.findall(text)) != len(_START.findall(text)):
            return False
        return not any((self.root / "runbooks" / n).is_dir() for n in names if n)


_START = re.compile(r"<!--\s*wiki:results\b([^>]*)-->")
_ATTR = re.compile(r"\b(\w+)=([\w.,-]+)")
_SUMMED = re.compile(r"<!--\s*wiki:end\s+sum=\w+\s*-->")
_LOCK = threading.Lock()
_LOADED: dict[str, SiteData] = {}


def site_data(root: str, text: str | None = None) -> SiteData:
    """The wiki's data for this build, read again when the glossary changed or `text` (a page
    body being rendered) matches no page read so far."""
    with _LOCK:
        data = _LOADED.get(root)
        missed = data is not None and text is not None and data.find(text) is None
        if missed and data is not None and body_key(text or "") in data.missed:
            return data
        if data is None or not data.fresh() or missed:
            old = data
            data = SiteData(Path(root) if root else find_root(Path.cwd()))
            if old is not None:
                data.missed = old.missed
            if text is not None and data.find(text) is None:
                data.missed.add(body_key(text))
            _LOADED[root] = data
        return data
