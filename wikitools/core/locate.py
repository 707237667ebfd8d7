"""Where things are: the wiki around a folder and the Markdown files under a docs folder
(`config` builds on these)."""

from __future__ import annotations

import os

CONFIG_NAME = "wiki.yml"
MKDOCS_NAME = "mkdocs.yml"
# The names MkDocs itself tries, in its order (mkdocs/config/base.py): vLLM's docs use the second.
MKDOCS_NAMES = (MKDOCS_NAME, "mkdocs.yaml")
DEFAULT_DOCS = "wiki"  # the pages folder of a wiki without a configuration file
# Folders never walked, whatever the configuration says (tool state, virtual environments).
SKIP_DIRS = frozenset({".git", ".venv", ".venv-engine", "node_modules", "__pycache__", "site"})


def mkdocs_file(folder: str) -> str | None:
    """The MkDocs configuration file of `folder` (mkdocs.yml, else mkdocs.yaml), if any."""
    return next((os.path.join(folder, n) for n in MKDOCS_NAMES
                 if os.path.isfile(os.path.join(folder, n))), None)


def find_root(start: str) -> str | None:
    """The wiki that `start` lies in (a real path): the nearest folder at or above it that holds
    wiki.yml or mkdocs.yml, else the top of its git repository; None outside any of these."""
    folder = os.path.realpath(start)
    folders = [folder]
    while (parent := os.path.dirname(folder)) != folder:
        folders.append(parent)
        folder = parent
    for folder in folders:
        if os.path.isfile(os.path.join(folder, CONFIG_NAME)) or mkdocs_file(folder):
            return folder
    for folder in folders:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
    return None


# Other generators' configuration files that mark a docs tree's top folder (Docusaurus at the
# top, Sphinx in docs/ or docs/source/).
OTHER_CONFIGS = ("docusaurus.config.js", "docusaurus.config.ts", "docusaurus.config.mjs",
                 "docusaurus.config.cjs", os.path.join("docs", "conf.py"),
                 os.path.join("docs", "source", "conf.py"))


def is_wiki(folder: str) -> bool:
    """A wiki's top folder: it holds wiki.yml or mkdocs.yml (or another generator's
    configuration), or (a wiki without a configuration file) a `wiki/` folder of pages or,
    as the community wiki has, a GLOSSARY.md at the top."""
    return (os.path.isfile(os.path.join(folder, CONFIG_NAME))
            or mkdocs_file(folder) is not None
            or any(os.path.isfile(os.path.join(folder, n)) for n in OTHER_CONFIGS)
            or os.path.isdir(os.path.join(folder, DEFAULT_DOCS))
            or os.path.isfile(os.path.join(folder, "GLOSSARY.md")))


def markdown_files(docs: str, top: str) -> list[tuple[str, str]]:
    """(path, path relative to `top` in POSIX form) of every `.md` entry under `docs`, in walk
    order: folders in SKIP_DIRS and folders whose name starts with a dot are not entered."""
    found: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(docs):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        rel_dir = os.path.relpath(dirpath, top).replace(os.sep, "/")
        for name in filenames:
            if name.endswith(".md"):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                found.append((os.path.join(dirpath, name), rel))
    return found
