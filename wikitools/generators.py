"""Which site generator a docs tree is written for, told by its configuration file, and the
link rule that follows: MkDocs (and Zensical, which reads mkdocs.yml) link to a page by its
file name, `.md` included; Sphinx with MyST and Docusaurus also link to a document by its name
without the suffix (`[X](transfer-engine)`), and Docusaurus to a folder by its index page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from wikitools.locate import OTHER_CONFIGS, mkdocs_file


@dataclass(frozen=True, slots=True)
class Generator:
    name: str
    # suffixes a link without one may mean (Sphinx: its source suffixes; Docusaurus: its docs)
    doc_suffixes: tuple[str, ...] = ()
    folder_pages: tuple[str, ...] = ("index.md",)  # the page a link to a folder means


GENERATORS: dict[str, Generator] = {g.name: g for g in (
    Generator("mkdocs"),
    Generator("sphinx", (".md", ".rst", ".ipynb")),
    Generator("docusaurus", (".md", ".mdx"), ("index.md", "index.mdx", "README.md")),
)}
_DOCUSAURUS = tuple(n for n in OTHER_CONFIGS if n.startswith("docusaurus."))


def detect_generator(root: Path, docs_dir: str) -> str:
    """The generator a tree is configured for: mkdocs.yml/mkdocs.yaml, a Docusaurus config at
    the top, a Sphinx `conf.py` in the docs folder (or its `source/`); else MkDocs' rules."""
    if mkdocs_file(str(root)):
        return "mkdocs"
    if any((root / name).is_file() for name in _DOCUSAURUS):
        return "docusaurus"
    docs = root / docs_dir
    if any((folder / "conf.py").is_file() for folder in (docs, docs / "source", root)):
        return "sphinx"
    return "mkdocs"


def link_candidates(resolved: str, generator: str) -> list[str]:
    """The files a resolved relative link may mean under the generator's rule, in order."""
    rule = GENERATORS.get(generator, GENERATORS["mkdocs"])
    if not rule.doc_suffixes or resolved.endswith((*rule.doc_suffixes, ".md")):
        return [resolved]
    return [resolved, *(resolved + s for s in rule.doc_suffixes),
            *(f"{resolved}/{page}" for page in rule.folder_pages)]


__all__ = ["GENERATORS", "Generator", "detect_generator", "link_candidates"]
