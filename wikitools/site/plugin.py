"""`plugins: [wiki]` for MkDocs: what only MkDocs offers a site, section titles and the top
level's reading order, plus the stylesheet and a located warning for a page that is not UTF-8.
The page features (tooltips, chips, results regions, alerts) are the Markdown extension
`wikitools.site.extension`, which Zensical runs as well; the plugin adds it to a site that does
not list it."""

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
from wikitools.site import nav as navigation

log = logging.getLogger("mkdocs.plugins.wiki")
STYLESHEET = "assets/stylesheets/wikitools.css"
# What the extension's output and the runbook fences need: `bash { #id … }` headers
# (superfences, attr_list), results regions (md_in_html, admonition for alerts, details for
# "All metrics"), and tooltips (abbr). Added to a site's list when missing, the extension last.
EXTENSION = "wikitools.site.extension"
EXTENSIONS = ("abbr", "admonition", "attr_list", "md_in_html", "pymdownx.details",
              "pymdownx.highlight", "pymdownx.superfences")
# Set where the site's own mkdocs.yml does not: code blocks carry `language-bash` (as GitHub and
# CommonMark renderers give them) besides Pygments' `highlight`, for styles and scripts that
# look for it; a malformed fence header still renders as code.
EXTENSION_DEFAULTS = {"pymdownx.highlight": {"pygments_lang_class": True},
                      "pymdownx.superfences": {"relaxed_headers": True}}
_ASSET = Path(__file__).parent / "assets" / "wikitools.css"


class WikiPluginConfig(base.Config):
    stylesheet = c.Type(bool, default=True)  # the styles of chips, badges and charts
    section_titles = c.Type(bool, default=True)  # a section is named after its index page
    nav_first = c.ListOfItems(c.Type(str), default=[])  # top-level entries to put first
    nav_last = c.ListOfItems(c.Type(str), default=[])  # ... and last


class WikiPlugin(BasePlugin[WikiPluginConfig]):
    def __init__(self) -> None:
        self.wiki: WikiConfig | None = None

    # ------------------------------------------------------------------ configuration

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        try:
            self.wiki = load_config(find_root(Path(config.docs_dir)))
        except WikiError as exc:
            raise PluginError(f"wiki: {exc}") from None
        for name in (*EXTENSIONS, EXTENSION):
            if name not in config.markdown_extensions:
                config.markdown_extensions.append(name)
        config.mdx_configs.setdefault(EXTENSION, {}).setdefault("root", str(self.wiki.root))
        for name, options in EXTENSION_DEFAULTS.items():
            given = config.mdx_configs.setdefault(name, {})
            for key, value in options.items():
                given.setdefault(key, value)
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
