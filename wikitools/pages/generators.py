"""The link rule of each site generator a docs tree may be written for (which one a tree is,
`core/config.py` tells from its configuration files): MkDocs (and Zensical, which reads
mkdocs.yml) link to a page by its file name, `.md` included; Sphinx with MyST and Docusaurus
also link to a document by its name without the suffix (`[X](transfer-engine)`), and
Docusaurus to a folder by its index page."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Generator:
    name: str
    # suffixes a link without one may mean (Sphinx: its source suffixes; Docusaurus: its docs)
    doc_suffixes: tuple[str, ...] = ()
    folder_pages: tuple[str, ...] = ("index.md",)  # the page a link to a folder means


# the same names, in the same order, as core/config.py's GENERATOR_NAMES
GENERATORS: dict[str, Generator] = {g.name: g for g in (
    Generator("mkdocs"),
    Generator("sphinx", (".md", ".rst", ".ipynb")),
    Generator("docusaurus", (".md", ".mdx"), ("index.md", "index.mdx", "README.md")),
)}


def link_candidates(resolved: str, generator: str) -> list[str]:
    """The files a resolved relative link may mean under the generator's rule, in order."""
    rule = GENERATORS.get(generator, GENERATORS["mkdocs"])
    if not rule.doc_suffixes or resolved.endswith((*rule.doc_suffixes, ".md")):
        return [resolved]
    return [resolved, *(resolved + s for s in rule.doc_suffixes),
            *(f"{resolved}/{page}" for page in rule.folder_pages)]


__all__ = ["GENERATORS", "Generator", "link_candidates"]
