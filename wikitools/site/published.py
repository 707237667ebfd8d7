"""Secrets in what the site publishes: every file of the docs folder that MkDocs copies into
the site (a page, a `logs/server.log`, a `notes.env`; not names that start with a dot) read for
a token, key or password with the patterns that mask records and logs. `wiki check` reports
them, and `make publish` runs `wiki check` before it deploys."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from wikitools.core.config import WikiConfig
from wikitools.core.diagnostics import Diagnostic
from wikitools.runbook.engines.secrets import secret_spans

CODE = "SEC001"
PIECE = 1 << 20  # a line longer than this is read in pieces: memory stays bounded
PAGE_SUFFIXES = (".md", ".markdown")  # prose: only values whose format makes them secrets


def published_files(config: WikiConfig) -> Iterator[Path]:
    """Every file MkDocs copies from the docs folder, sorted; none when the wiki has no site
    (no mkdocs.yml)."""
    docs = config.docs_path
    if not (config.root / "mkdocs.yml").is_file() or not docs.is_dir():
        return
    for folder, dirs, names in os.walk(docs):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder) / name
            rel = path.relative_to(config.root).as_posix()
            if not name.startswith(".") and not config.exclude_spec.match_file(rel) and \
                    path.is_file():
                yield path


def secret_findings(config: WikiConfig) -> list[Diagnostic]:
    """SEC001 at each secret value in a published file, located; the value is not shown."""
    out = []
    for path in published_files(config):
        rel = path.relative_to(config.root).as_posix()
        prose = path.suffix.lower() in PAGE_SUFFIXES
        try:
            found = list(_secrets(path, prose))
        except OSError as exc:
            out.append(Diagnostic(rel, 1, 1, CODE, f"cannot read a file the site publishes: "
                                  f"{exc.strerror or exc}"))
            continue
        out += [Diagnostic(rel, line, col, CODE, "a secret (a token, key or password) in a "
                           "file the site publishes: remove the file from the docs folder or "
                           "the value from the file") for line, col in found]
    return out


def _secrets(path: Path, prose: bool) -> Iterator[tuple[int, int]]:
    """(line, column) of each secret value in the file, read as Latin-1 (any bytes read; the
    tokens are ASCII) in batches of whole lines, a line longer than PIECE in pieces: memory
    stays bounded whatever the file."""
    line, col = 1, 1  # where the batch starts
    with path.open("rb") as f:
        while True:
            pieces: list[bytes] = []
            size = 0
            while size < PIECE and (piece := f.readline(PIECE)):
                pieces.append(piece)
                size += len(piece)
            if not pieces:
                return
            text = b"".join(pieces).decode("latin-1")
            for start, _end in secret_spans(text, formats_only=prose):
                before = text.count("\n", 0, start)
                yield (line + before, (col if before == 0 else 1)
                       + start - (text.rfind("\n", 0, start) + 1))
            newlines = text.count("\n")
            col = (col if newlines == 0 else 1) + len(text) - (text.rfind("\n") + 1)
            line += newlines


__all__ = ["CODE", "published_files", "secret_findings"]
