"""`plugins: [wiki]` for MkDocs: glossary tooltips, status chips, "measured on" badges, results
regions and charts rendered from the run records, and navigation helpers. Everything is read at
build time from the wiki's files; nothing generated needs to be kept in the tree."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page as MkPage

from wikitools.core.config import WikiConfig, find_root, load_config
from wikitools.core.errors import WikiError
from wikitools.pages.glossary import abbreviation_lines, load_glossary
from wikitools.site import nav as navigation
from wikitools.site.chips import DEFAULT_STATUS_TEXT, measured_line, status_chip

log = logging.getLogger("mkdocs.plugins.wiki")
STYLESHEET = "assets/stylesheets/wikitools.css"
# What the plugin's own output and the runbook fences need: `bash { #id … }` headers
# (superfences, attr_list), results regions (md_in_html, admonition and details for "All
# metrics"), and tooltips (abbr). Added to a site's list when missing.
EXTENSIONS = ("abbr", "admonition", "attr_list", "md_in_html", "pymdownx.details",
              "pymdownx.highlight", "pymdownx.superfences")
# Set where the site's own mkdocs.yml does not: code blocks carry `language-bash` (as GitHub and
# CommonMark renderers give them) besides Pygments' `highlight`, for styles and scripts that
# look for it; a malformed fence header still renders as code.
EXTENSION_DEFAULTS = {"pymdownx.highlight": {"pygments_lang_class": True},
                      "pymdownx.superfences": {"relaxed_headers": True}}
_ASSET = Path(__file__).parent / "assets" / "wikitools.css"


def after_title(html: str, insert: str) -> str:
    """`insert` right after the page's leading `<h1>`, else first. The search index splits a
    page at its headings and files what comes before the first one as the page itself: a chip
    placed above the title would stand in for the page's opening text, and a query matching
    that text would no longer find the page."""
    start = html.lstrip()
    end = start.find("</h1>") if start.startswith("<h1") else -1
    if end < 0:
        return insert + html
    end += len("</h1>")
    return start[:end] + insert + start[end:]


class WikiPluginConfig(base.Config):
    glossary = c.Type(bool, default=True)  # tooltips for every glossary term (abbr)
    status = c.Type(bool, default=True)  # chip for front matter `status:`, "measured on" badge
    results = c.Type(bool, default=True)  # results regions rendered from runbooks/ records
    stylesheet = c.Type(bool, default=True)  # the styles of chips, badges and charts
    section_titles = c.Type(bool, default=True)  # a section is named after its index page
    nav_first = c.ListOfItems(c.Type(str), default=[])  # top-level entries to put first
    nav_last = c.ListOfItems(c.Type(str), default=[])  # ... and last


class WikiPlugin(BasePlugin[WikiPluginConfig]):
    def __init__(self) -> None:
        self.wiki: WikiConfig | None = None
        self.abbr = ""
        self._runbooks: Any = None
        self._measured: dict[str, Any] | None = None

    # ------------------------------------------------------------------ configuration

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        try:
            self.wiki = load_config(find_root(Path(config.docs_dir)))
        except WikiError as exc:
            raise PluginError(f"wiki: {exc}") from None
        self._runbooks, self._measured = None, None
        self.abbr = ""
        if self.config.glossary and self.wiki.glossary_path.is_file():
            glossary = load_glossary(self.wiki.glossary_path, self.wiki.root)
            self.abbr = abbreviation_lines(glossary)
        for name in EXTENSIONS:
            if name not in config.markdown_extensions:
                config.markdown_extensions.append(name)
        for name, options in EXTENSION_DEFAULTS.items():
            given = config.mdx_configs.setdefault(name, {})
            for key, value in options.items():
                given.setdefault(key, value)
        if self.config.status and not isinstance(config.extra.get("status"), dict):
            config.extra["status"] = {s: DEFAULT_STATUS_TEXT.get(s, s.capitalize())
                                      for s in self.wiki.statuses}
        if self.config.stylesheet and STYLESHEET not in config.extra_css:
            config.extra_css.append(STYLESHEET)
        return config

    def on_files(self, files: Files, *, config: MkDocsConfig) -> Files:
        if self.config.stylesheet:
            files.append(File.generated(config, STYLESHEET, abs_src_path=str(_ASSET)))
        return files

    def on_serve(self, server: Any, *, config: MkDocsConfig, builder: Any) -> Any:
        if self.wiki is not None:
            for path in (self.wiki.glossary_path, self.wiki.root / "runbooks"):
                if path.exists():
                    server.watch(str(path))
        return server

    def on_nav(self, nav: Navigation, *, config: MkDocsConfig, files: Files) -> Navigation:
        if self.config.section_titles:
            navigation.retitle(nav.items)
        navigation.reorder(nav, self.config.nav_first, self.config.nav_last)
        return nav

    # ------------------------------------------------------------------ pages

    def on_page_read_source(self, *, page: MkPage, config: MkDocsConfig) -> str | None:
        """A page with bytes that are not UTF-8 builds with U+FFFD in their place and a warning
        (an error under --strict), as `wiki check` reports it (PG002), instead of stopping
        the whole build with a traceback."""
        path = page.file.abs_src_path
        if path is None:
            return None
        data = Path(path).read_bytes()
        try:
            data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            log.warning(f"wiki: {page.file.src_uri}:{line}: byte 0x{data[exc.start]:02x} is not "
                        "valid UTF-8; read as U+FFFD (PG002)")
            return data.decode("utf-8-sig", errors="replace")
        return None

    def _rel(self, page: MkPage) -> str:
        """The page's path relative to the wiki root, as the wiki tools name it."""
        assert self.wiki is not None
        docs = self.wiki.docs_dir
        return page.file.src_uri if docs in ("", ".") else f"{docs}/{page.file.src_uri}"

    def _runbook_set(self) -> Any:
        if self._runbooks is None:
            from wikitools.pages.load import load_pages
            from wikitools.runbook.blocks.extract import extract_runbooks

            assert self.wiki is not None
            self._runbooks, _diags = extract_runbooks(load_pages(self.wiki), self.wiki.root)
        return self._runbooks

    def _measurements(self) -> dict[str, Any]:
        if self._measured is None:
            from wikitools.runbook.rendering.measured import measurements

            assert self.wiki is not None
            self._measured = measurements(self._runbook_set(), self.wiki.root)
        return self._measured

    def on_page_markdown(self, markdown: str, *, page: MkPage, config: MkDocsConfig,
                         files: Files) -> str:
        if self.config.results and "wiki:results" in markdown:
            markdown = self._render_results(markdown, page)
        if self.abbr:
            markdown = markdown.rstrip("\n") + "\n\n" + self.abbr
        return markdown

    def _render_results(self, markdown: str, page: MkPage) -> str:
        from wikitools.pages.parse import parse_page
        from wikitools.runbook.rendering.render import render_pages

        assert self.wiki is not None
        parsed = parse_page(markdown, self._rel(page))
        changes, _diags = render_pages([parsed], self.wiki.root, runbooks=self._runbook_set())
        return next((c.new for c in changes if c.path == parsed.path), markdown)

    def on_page_content(self, html: str, *, page: MkPage, config: MkDocsConfig,
                        files: Files) -> str:
        if not self.config.status:
            return html
        texts = config.extra.get("status") or {}
        chip = status_chip(page.meta, texts)
        badge = ""
        if "runbook-server" in html:
            badge = measured_line(self._measurements().get(self._rel(page)))
        return after_title(html, chip + badge)
