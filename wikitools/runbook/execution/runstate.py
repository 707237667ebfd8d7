"""The state of a runbook run on this host: a lock per runbook and one per port, each naming its
holder; the processes and containers the run started; and a per-run tag in their environment.
Two runs of one runbook (or on one port) cannot clobber each other, and the next run finds and
stops what a run killed with SIGKILL left behind, by the IDs it recorded and only after checking
that each still carries the run's tag."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wikitools.errors import WikiError
from wikitools.runbook.execution.processes import (
    TAG_VAR,
    Leftover,
    has_tag,
    new_tag,
    stop_all_tagged,
    stop_tagged,
)

LOCKS_DIR = ".artifacts/locks"  # per runbook, under the wiki root


class RunLocked(WikiError):
    """Another run holds the runbook or the port."""

    exit_code = 1


# --------------------------------------------------------------------------- locks


@dataclass
class _Lock:
    path: Path
    fd: int


def _port_locks_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"wiki-runbook-ports-{os.getuid()}"


def _try_lock(path: Path) -> _Lock | None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return _Lock(path, fd)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _holder_text(data: dict[str, Any]) -> str:
    h = data.get("holder") or {}
    if not h:
        return "another run"
    return (f"run {h.get('run_id', '?')} of runbook '{h.get('runbook', '?')}' (pid "
            f"{h.get('pid', '?')} on {h.get('host', '?')}, started {h.get('started_at', '?')})")


# --------------------------------------------------------------------------- the run state


@dataclass
class RunLock:
    """Held for the whole of one run: `acquire()` first (it refuses when another run holds the
    runbook or the port, and stops what a dead run left), `started()` for each process or
    container, `release()` at the end. The state lives in the runbook's lock file, rewritten
    atomically at each change, so it survives the runner being killed."""

    root: Path
    runbook: str
    port: int | None
    run_id: str
    tag: str = ""  # unique to this run: new_tag(run_id) unless given
    processes: list[dict[str, Any]] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)
    _locks: list[_Lock] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tag = self.tag or new_tag(self.run_id)

    @property
    def lock_path(self) -> Path:
        return self.root / LOCKS_DIR / f"{self.runbook}.json"

    @property
    def port_lock_path(self) -> Path | None:
        return None if self.port is None else _port_locks_dir() / f"port-{self.port}.json"

    def acquire(self, grace: float = 10.0) -> list[Leftover]:
        """Take both locks or raise RunLocked naming the holder; then stop the leftovers of a
        run that died holding them. Returns what had to be stopped."""
        lock = _try_lock(self.lock_path)
        if lock is None:
            raise RunLocked(f"runbook '{self.runbook}' is being run by "
                            f"{_holder_text(_read(self.lock_path))}; wait for it to finish")
        self._locks.append(lock)
        leftovers = stop_leftovers(_read(self.lock_path), grace)
        if self.port_lock_path is not None:
            port_lock = _try_lock(self.port_lock_path)
            if port_lock is None:
                self.release()
                raise RunLocked(f"port {self.port} is held by "
                                f"{_holder_text(_read(self.port_lock_path))}; wait for it, or "
                                "pass --port with a free port")
            self._locks.append(port_lock)
            leftovers += stop_leftovers(_read(self.port_lock_path), grace)
        self._write("running")
        return leftovers

    def env(self) -> dict[str, str]:
        """The variable that marks every process of this run."""
        return {TAG_VAR: self.tag}

    def started(self, role: str, pid: int | None = None, container: str | None = None) -> None:
        if pid is not None:
            self.processes.append({"role": role, "pid": pid, "pgid": pid})
        if container:
            self.containers.append(container)
        self._write("running")

    def release(self) -> None:
        """Mark the run finished and let the locks go."""
        if self._locks:
            self._write("finished")
        for lock in self._locks:
            with contextlib.suppress(OSError):
                os.close(lock.fd)
        self._locks.clear()

    def _write(self, state: str) -> None:
        data = {
            "state": state,
            "holder": {"pid": os.getpid(), "host": socket.gethostname(), "run_id": self.run_id,
                       "runbook": self.runbook,
                       "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
            "tag": self.tag,
            "processes": self.processes,
            "containers": self.containers,
        }
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        for lock in self._locks:
            # The lock is held on this open file: rewrite it in place, never by rename.
            os.lseek(lock.fd, 0, os.SEEK_SET)
            os.ftruncate(lock.fd, 0)
            os.write(lock.fd, text.encode())
            os.fsync(lock.fd)


def stop_leftovers(data: dict[str, Any], grace: float) -> list[Leftover]:
    """Stop the processes a dead run recorded (or that carry its tag), verified by the tag, and
    the containers it recorded by their full IDs."""
    tag = data.get("tag")
    if data.get("state") != "running" or not isinstance(tag, str) or not tag:
        return []
    stopped: list[Leftover] = []
    for proc in data.get("processes") or []:
        pid = proc.get("pid") if isinstance(proc, dict) else None
        if isinstance(pid, int) and has_tag(pid, tag):
            stopped += stop_tagged([pid], tag, grace, str(proc.get("role", "process")))
    stopped += stop_all_tagged(tag, grace)
    from wikitools.runbook.execution.containers import (  # docker only when recorded
        short,
        stop_recorded,
    )

    for cid in data.get("containers") or []:
        if isinstance(cid, str) and stop_recorded(cid, grace):
            stopped.append(Leftover(0, "container", short(cid), "docker stop"))
    return stopped


def remove_temp_files(root: Path, targets: Iterable[Path]) -> list[str]:
    """Remove the half-written files that an atomic write of a target left when it was killed
    (`.NAME.*.tmp` beside NAME; a folder target: every `.*.tmp` in it); return their paths
    relative to `root`, for the report."""
    removed = []
    for target in sorted(set(targets)):
        folder, pattern = (target, ".*.tmp") if target.is_dir() else (
            target.parent, f".{target.name}.*.tmp")
        for path in sorted(folder.glob(pattern)) if folder.is_dir() else ():
            if path.is_file() and not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed.append(path.relative_to(root).as_posix()
                                   if path.is_relative_to(root) else path.as_posix())
    return removed
