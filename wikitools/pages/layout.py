"""What `wiki init` finds in an existing tree of Markdown pages (where the pages are, which
folders hold no pages, the index sections, the glossary) and the wiki.yml it writes from that."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from wikitools.core.config import DEFAULT_EXCLUDE, folder_title, mkdocs_docs_dir
from wikitools.core.errors import ConfigError

# Folders that hold attachments, not pages, whatever a stray Markdown file in them says.
ASSET_FOLDERS = frozenset({"assets", "attachments", "data", "datasets", "images", "img", "imgs",
                           "logs", "media", "static"})
_SKIP = frozenset({".git", ".venv", "node_modules", "site", "__pycache__"})
_GLOSSARY_NAMES = ("glossary.md", "GLOSSARY.md", "Glossary.md")
_INDEX_NAMES = ("INDEX.md", "index.md")
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.M)


@dataclass(frozen=True, slots=True)
class Layout:
    docs_dir: str  # POSIX, relative to the root; "." for the root itself
    pages: int  # Markdown files under docs_dir that stay pages
    excluded: tuple[str, ...]  # folders left out (POSIX, relative to docs_dir, trailing "/")
    sections: tuple[tuple[str, str], ...]  # (folder, title), "." first
    glossary: str | None  # relative to the root
    index_file: str | None  # an existing catalog page at the top (INDEX.md), left as it is


def _md_count(folder: Path) -> tuple[int, int]:
    """(Markdown files, all files) below `folder`, hidden and tool folders skipped."""
    md = files = 0
    for _dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in _SKIP and not d.startswith(".")]
        files += len(filenames)
        md += sum(name.endswith(".md") for name in filenames)
    return md, files


def _docs_dir(root: Path) -> str:
    """mkdocs.yml's docs_dir; else docs/ or wiki/ when it holds most of the pages; else the
    root itself (a wiki whose pages sit at the top of the repository)."""
    named = mkdocs_docs_dir(root)
    if named:
        return named
    total, _ = _md_count(root)
    for name in ("docs", "wiki"):
        if (root / name).is_dir() and 2 * _md_count(root / name)[0] > total:
            return name
    return "."


def _title(folder: Path) -> str | None:
    for name in ("index.md", "README.md"):
        path = folder / name
        if path.is_file():
            try:
                m = _H1.search(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                return None
            return m.group(1).strip() if m else None
    return None


def _glossary(root: Path, docs: Path) -> str | None:
    for folder in dict.fromkeys([docs, root, root / "docs", root / "wiki"]):
        for name in _GLOSSARY_NAMES:
            if (folder / name).is_file():
                return (folder / name).relative_to(root).as_posix()
    return None


def shown_name(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 as `\\xff` escapes."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def require_utf8(rel: str, what: str) -> None:
    """wiki.yml and the baseline name folders and pages as UTF-8 text: a name that is not
    UTF-8 cannot be written there, so it is a configuration error naming what to rename."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{shown_name(rel)}: {what} name is not valid UTF-8, so wiki init "
                          "cannot write it down; rename it") from None


def find_layout(root: Path) -> Layout:
    docs_dir = _docs_dir(root)
    docs = root / docs_dir
    excluded: list[str] = []
    sections: list[tuple[str, str]] = [(".", _title(docs) or "Overview")]
    pages = sum(1 for p in docs.iterdir() if p.is_file() and p.name.endswith(".md"))
    for folder in sorted(p for p in docs.iterdir() if p.is_dir()):
        if folder.name in _SKIP or folder.name.startswith("."):
            continue
        require_utf8(folder.relative_to(root).as_posix(), "folder")
        md, _files = _md_count(folder)
        if folder.name.lower() in ASSET_FOLDERS or md == 0:
            excluded.append(folder.name + "/")
            continue
        pages += md
        sections.append((folder.name, _title(folder) or folder_title(folder.name)))
    index = next((n for n in _INDEX_NAMES[:1] if (docs / n).is_file()), None)
    return Layout(docs_dir, pages, tuple(excluded), tuple(sections), _glossary(root, docs),
                  index)


def _quote(text: str) -> str:
    """A YAML scalar: plain when that reads back as the same string, else double-quoted."""
    plain = re.fullmatch(r"[A-Za-z0-9][\w ./()+-]*", text) and not text.endswith(" ")
    if plain and text.lower() not in ("yes", "no", "true", "false", "null", "on", "off"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exclude_patterns(layout: Layout) -> list[str]:
    keep = [p for p in DEFAULT_EXCLUDE if p != "INDEX.md" or layout.index_file is None]
    return [*keep, *layout.excluded]


def render_wiki_yml(layout: Layout) -> str:
    lines = [
        "# Configuration for the wiki tools (`wiki check`, `wiki index`, `wiki acronyms`,",
        "# `wiki lint`, `wiki runbook`), written by `wiki init` from the tree as it was found.",
        f"docs_dir: {_quote(layout.docs_dir)}",
    ]
    if layout.glossary:
        lines.append(f"glossary: {_quote(layout.glossary)}")
    lines += [
        "",
        "index:",
        "  output: INDEX.md",
        "  # false: INDEX.md is left as it is, and is read as an ordinary page. Set true to let",
        "  # `wiki index` write it and `wiki check` keep it fresh (IDX100).",
        "  generate: false",
        "  sections:",
    ]
    for path, title in layout.sections:
        lines += [f"    - path: {_quote(path)}", f"      title: {_quote(title)}"]
    lines += ["", "# Left out of the pages: generated files and folders of attachments.",
              "exclude:"]
    lines += [f'  - "{p}"' for p in exclude_patterns(layout)]
    return "\n".join(lines) + "\n"
