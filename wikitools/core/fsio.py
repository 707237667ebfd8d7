"""File writes that are atomic, LF/UTF-8, and skipped when the bytes are already equal."""

from __future__ import annotations

import difflib
import os
import stat


def normalise(text: str) -> str:
    """LF line endings and exactly one trailing newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.rstrip("\n") + "\n"


def write_if_changed(path: str | os.PathLike[str], text: str) -> bool:
    """Write `text` atomically; return True when the file changed."""
    data = text.encode("utf-8")
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = open_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return True


def open_temp(path: str | os.PathLike[str]) -> tuple[int, str]:
    """A new temporary file beside `path`, open for writing, that will replace it: it has the
    permission bits of the file it replaces, or for a new file the umask's default (a
    temporary file of `tempfile` is 0600, and a rewrite would leave a 0644 page at 0600)."""
    folder, name = os.path.split(os.path.abspath(path))
    while True:
        tmp = os.path.join(folder, f".{name}.{os.urandom(4).hex()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            break
        except FileExistsError:
            continue
    try:
        os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode))
    except FileNotFoundError:
        pass  # a new file: the mode the umask left
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


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
