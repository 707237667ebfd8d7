"""File writes that are atomic, LF/UTF-8, and skipped when the bytes are already equal."""

from __future__ import annotations

import os


def normalise(text: str) -> str:
    """LF line endings and exactly one trailing newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.rstrip("\n") + "\n"


def write_if_changed(path: str | os.PathLike[str], text: str) -> bool:
    """Write `text` atomically; return True when the file changed. (os.path, not pathlib: a
    warm `wiki index` imports this module and nothing of pathlib.)"""
    data = text.encode("utf-8")
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    import tempfile  # only when writing: start-up time matters to the read-only checks

    folder, name = os.path.split(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return True


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff of `old` -> `new`, headed with the path."""
    import difflib

    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"current/{path}",
            tofile=f"generated/{path}",
        )
    )
