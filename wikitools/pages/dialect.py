"""Which Markdown a wiki's renderer reads, found from the files at its root, so that what the
tools write into its pages (results regions, notes) shows as intended there and never as
literal text:

- `github`: GitHub alerts (`> [!NOTE]`) and `<details>` blocks. Plain GitHub, and an MkDocs or
  Zensical site that draws alerts (this project's extension, or markdown-callouts'
  `github-callouts`), or that has no admonition extension at all.
- `material`: `!!! note` admonitions, for an MkDocs or Zensical site with `admonition` and no
  alert extension.
- `docusaurus`: `:::note[Title]` admonitions.
- `myst`: MyST directives (```` ```{note} ````), for Sphinx with myst-parser and for MyST's own
  builder."""

from __future__ import annotations

import re
from pathlib import Path

DIALECTS = ("github", "material", "docusaurus", "myst")
# GitHub's five alert types, and the Material admonition each is drawn as.
KINDS = {"NOTE": "note", "TIP": "tip", "IMPORTANT": "info", "WARNING": "warning",
         "CAUTION": "danger"}
# Material's admonition types, and the GitHub alert each is written as.
ALERT_OF = {
    "note": "NOTE", "abstract": "NOTE", "summary": "NOTE", "tldr": "NOTE", "info": "NOTE",
    "todo": "NOTE", "question": "NOTE", "help": "NOTE", "faq": "NOTE", "example": "NOTE",
    "quote": "NOTE", "cite": "NOTE", "tip": "TIP", "hint": "TIP", "success": "TIP",
    "check": "TIP", "done": "TIP", "important": "IMPORTANT", "warning": "WARNING",
    "caution": "WARNING", "attention": "WARNING", "danger": "CAUTION", "error": "CAUTION",
    "failure": "CAUTION", "fail": "CAUTION", "missing": "CAUTION", "bug": "CAUTION",
}


def alert_type(kind: str) -> str:
    """The GitHub alert type for a Material admonition type (NOTE for one it does not know)."""
    return ALERT_OF.get(kind.lower(), "NOTE")


_ALERTS = re.compile(r"^\s*-\s*['\"]?(?:wikitools\.site\.extension|wikitools|github-callouts|"
                     r"markdown_callouts\.github_callouts)['\"]?\s*:?\s*$", re.MULTILINE)
_ADMONITION = re.compile(r"^\s*-\s*['\"]?admonition['\"]?\s*:?\s*$", re.MULTILINE)
_DOCUSAURUS = ("docusaurus.config.js", "docusaurus.config.ts", "docusaurus.config.mjs",
               "docusaurus.config.cjs")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _sphinx_conf(root: Path) -> Path | None:
    for conf in (root / "conf.py", root / "docs" / "conf.py", root / "docs" / "source" / "conf.py",
                 root / "source" / "conf.py"):
        if conf.is_file():
            return conf
    return None


def detect_dialect(root: Path) -> str:
    """The dialect of the wiki at `root` (see the module's docstring)."""
    if any((root / name).is_file() for name in _DOCUSAURUS):
        return "docusaurus"
    if (root / "myst.yml").is_file():
        return "myst"
    conf = _sphinx_conf(root)
    if conf is not None and "myst_parser" in _read(conf):
        return "myst"
    for name in ("mkdocs.yml", "mkdocs.yaml"):
        text = _read(root / name)
        if text:
            if _ALERTS.search(text) or not _ADMONITION.search(text):
                return "github"
            return "material"
    toml = _read(root / "zensical.toml")
    if toml and "admonition" in toml and "callouts" not in toml:
        return "material"
    return "github"
