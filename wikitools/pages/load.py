"""Every page of a wiki read and parsed once, in path order."""

from __future__ import annotations

from pathlib import Path

from wikitools.core.config import WikiConfig, iter_pages
from wikitools.pages.parse import Page, read_page


def load_pages(config: WikiConfig, paths: list[Path] | None = None) -> list[Page]:
    """Read and parse each page once, in path order."""
    return [read_page(p, config.root) for p in (iter_pages(config) if paths is None else paths)]
