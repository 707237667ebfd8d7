"""Lock files, the one primitive for "one at a time" on this host: an exclusive `flock` on a file
opened without following symlinks, in the user's own folder on this host (never a checkout,
never a shared, world-writable /tmp). The folder and every lock file in it must belong to the
user and be writable by nobody else, so what a lock file says was written by this user's runs:
no other user can plant one, and none can be committed or copied along with a checkout."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wikitools.core.errors import InputError

STATE_ENV = "WIKI_STATE_DIR"  # overrides where the per-user lock folder lives


class LockPathError(InputError):
    """A lock path that is not what it must be (a symlink, a file where a folder belongs, owned
    by another user, writable by others). The message starts with the path."""


# --------------------------------------------------------------------------- folders


def user_state_dir() -> Path:
    """The user's own folder for lock state on this host, created 0700 when missing:
    $WIKI_STATE_DIR, else $XDG_RUNTIME_DIR/wikitools (a per-user tmpfs: gone at reboot), else
    ~/.cache/wikitools/HOST (a home shared between hosts keeps each host apart)."""
    given = os.environ.get(STATE_ENV)
    if given:
        return private_dir(Path(given))
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _owned_private(Path(runtime)):
        return private_dir(Path(runtime) / "wikitools")
    return private_dir(Path.home() / ".cache" / "wikitools" / socket.gethostname())


def _owned_private(path: Path) -> bool:
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def private_dir(path: Path) -> Path:
    """`path` as a folder only this user can write (made 0700 when missing); a located error
    when it is a symlink, a file, another user's or writable by others."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        pass  # a file in the way: said below
    except NotADirectoryError:
        raise LockPathError(f"{_first_not_dir(path)}: a file where a lock folder belongs; "
                            "move it away") from None
    except OSError as exc:
        raise LockPathError(f"{path}: cannot create the lock folder: {exc.strerror}") from None
    try:
        st = path.lstat()
    except OSError as exc:
        raise LockPathError(f"{path}: cannot read the lock folder: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise LockPathError(f"{path}: a symlink where a lock folder belongs; lock folders are "
                            "never followed through links: remove it")
    if not stat.S_ISDIR(st.st_mode):
        raise LockPathError(f"{path}: a file where a lock folder belongs; move it away")
    _owner_and_mode(path, st, "lock folder")
    return path


def _first_not_dir(path: Path) -> Path:
    for parent in [*reversed(path.parents), path]:
        if parent.exists() and not parent.is_dir():
            return parent
    return path


def _owner_and_mode(path: Path, st: os.stat_result, what: str) -> None:
    if st.st_uid != os.getuid():
        raise LockPathError(f"{path}: the {what} belongs to uid {st.st_uid}, not to this user "
                            f"(uid {os.getuid()}); it is never used")
    if st.st_mode & 0o022:
        raise LockPathError(f"{path}: the {what} is writable by others (mode "
                            f"{stat.S_IMODE(st.st_mode):o}); it is never used")


# --------------------------------------------------------------------------- the lock


@dataclass
class Lock:
    """An exclusive `flock` held on an open file: released when closed or when the process
    dies (so a killed holder never blocks the next one)."""

    path: Path
    fd: int

    def read(self) -> bytes:
        """The file's bytes, from the locked descriptor (the path is not opened again)."""
        os.lseek(self.fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(self.fd, 65536):
            chunks.append(chunk)
            if sum(map(len, chunks)) > 1 << 20:  # a lock file is small; a huge one is not ours
                return b""
        return b"".join(chunks)

    def write(self, data: bytes) -> None:
        """Rewrite the file in place (never by rename: the lock is held on this open file)."""
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, data)
        os.fsync(self.fd)

    def release(self, remove: bool = False) -> None:
        if self.fd < 0:
            return
        if remove:  # unlinked while still locked: a waiting locker finds the new file
            with contextlib.suppress(OSError):
                self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1


def try_lock(path: Path) -> Lock | None:
    """Take the lock at `path` (creating the file 0600), or None when another holds it. The file
    is opened with O_NOFOLLOW and must be a regular file of this user that nobody else can write
    to; anything else is a located LockPathError, never followed."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if path.is_symlink():
            raise LockPathError(f"{path}: a symlink where a lock file belongs; lock files are "
                                "never followed through links: remove it") from None
        if path.is_dir():
            raise LockPathError(f"{path}: a folder where a lock file belongs; move it "
                                "away") from None
        raise LockPathError(f"{path}: cannot open the lock file: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LockPathError(f"{path}: not a regular file where a lock file belongs; move it "
                                "away")
        _owner_and_mode(path, st, "lock file")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return Lock(path, fd)


def is_held(path: Path) -> bool:
    """Whether some process holds the lock at `path` (False when there is no such file)."""
    try:
        lock = try_lock(path)
    except LockPathError:
        return True  # not ours to judge: leave it
    if lock is None:
        return True
    lock.release()
    return False


def remove_stale(folder: Path, pattern: str = "*") -> list[Path]:
    """Remove the lock files in `folder` that nobody holds (their holder died, or its node was
    lost): a fresh holder re-creates its file. Returns what was removed."""
    removed = []
    for path in sorted(folder.glob(pattern)) if folder.is_dir() else ():
        try:
            lock = try_lock(path)
        except LockPathError:
            continue
        if lock is not None:
            lock.release(remove=True)
            removed.append(path)
    return removed


# --------------------------------------------------------------------------- the content


def content(data: bytes) -> dict[str, Any] | None:
    """What a lock file says (a JSON object), or None for anything else: empty, unreadable or
    damaged content is a stale lock that names nothing."""
    try:
        body = json.loads(data.decode("utf-8") or "null")
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def peek(path: Path) -> dict[str, Any] | None:
    """The content of a lock file someone else holds (to name the holder), read without
    following a symlink; None when it is not a regular file or says nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, 1 << 20)
    finally:
        os.close(fd)
    return content(data)
