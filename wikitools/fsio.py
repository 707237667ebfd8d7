"""File writes that are atomic, LF/UTF-8, and skipped when the bytes are already equal."""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path


def normalise(text: str) -> str:
    """LF line endings and exactly one trailing newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.rstrip("\n") + "\n"


def write_if_changed(path: str | os.PathLike[str], text: str) -> bool:
    """Write `text` atomically; return True when the file changed."""
    data = text.encode("utf-8")
    target = Path(path).absolute()
    if target.exists() and target.read_bytes() == data:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        Path(tmp).replace(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff of `old` -> `new`, headed with the path."""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"current/{path}",
            tofile=f"generated/{path}",
        )
    )
