"""The state of a runbook run on this host: a lock per runbook and one per port, each naming its
holder; the processes and containers the run started; and a per-run tag in their environment.
Two runs of one runbook (or on one port) cannot clobber each other, and the next run finds and
stops what a run killed with SIGKILL left behind: processes that carry the dead run's tag in
their environment, containers that carry its label. The lock files live in the user's own
folder (`locks`), the runbook's named by the checkout's real path, so a lock file in a checkout,
committed or copied with it, is never read; a pid read from a file is never acted on."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wikitools.core.errors import WikiError
from wikitools.runbook.execution import locks
from wikitools.runbook.execution.processes import (
    TAG_VAR,
    Leftover,
    new_tag,
    stop_all_tagged,
)

RUNBOOKS_DIR = "runbooks"  # in the user's lock folder: one lock per checkout and runbook
PORTS_DIR = "ports"


class RunLocked(WikiError):
    """Another run holds the runbook or the port."""

    exit_code = 1


def _runbook_locks_dir() -> Path:
    return locks.user_state_dir() / RUNBOOKS_DIR


def _port_locks_dir() -> Path:
    return locks.user_state_dir() / PORTS_DIR


def lock_path(root: Path, runbook: str) -> Path:
    """The lock file of `runbook` in the checkout at `root`: in the user's own folder, named by
    the checkout's real path (a copy of the checkout is another checkout, with its own lock)."""
    checkout = hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:16]
    return _runbook_locks_dir() / f"{runbook}@{checkout}.json"


def _holder_text(data: dict[str, Any] | None) -> str:
    h = (data or {}).get("holder") or {}
    if not isinstance(h, dict) or not h:
        return "another run"
    return (f"run {h.get('run_id', '?')} of runbook '{h.get('runbook', '?')}' (pid "
            f"{h.get('pid', '?')} on {h.get('host', '?')}, started {h.get('started_at', '?')})")


# --------------------------------------------------------------------------- the run state


@dataclass
class RunLock:
    """Held for the whole of one run: `acquire()` first (it refuses when another run holds the
    runbook or the port, and stops what a dead run left), `started()` for each process or
    container, `release()` at the end. The state lives in the lock files, rewritten in place at
    each change, so it survives the runner being killed."""

    root: Path
    runbook: str
    port: int | None
    run_id: str
    tag: str = ""  # unique to this run: new_tag(run_id) unless given
    processes: list[dict[str, Any]] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)  # for the holder's name only
    projects: list[str] = field(default_factory=list)  # the run's own Compose projects
    docker: bool = False  # the run starts containers (labelled with its tag)
    _locks: list[locks.Lock] = field(default_factory=list)
    _started_at: str = ""

    def __post_init__(self) -> None:
        self.tag = self.tag or new_tag(self.run_id)
        self._started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def lock_path(self) -> Path:
        return lock_path(self.root, self.runbook)

    @property
    def port_lock_path(self) -> Path | None:
        return None if self.port is None else _port_locks_dir() / f"port-{self.port}.json"

    def acquire(self, grace: float = 10.0) -> list[Leftover]:
        """Take both locks or raise RunLocked naming the holder; then stop the leftovers of a
        run that died holding them. Returns what had to be stopped."""
        locks.private_dir(self.lock_path.parent)
        lock = locks.try_lock(self.lock_path)
        if lock is None:
            raise RunLocked(f"runbook '{self.runbook}' is being run by "
                            f"{_holder_text(locks.peek(self.lock_path))}; wait for it to finish")
        self._locks.append(lock)
        leftovers = stop_leftovers(self._ours(lock), grace, self.root)
        if self.port_lock_path is not None:
            try:
                locks.private_dir(self.port_lock_path.parent)
                port_lock = locks.try_lock(self.port_lock_path)
            except BaseException:
                self.release()
                raise
            if port_lock is None:
                self.release()
                raise RunLocked(f"port {self.port} is held by "
                                f"{_holder_text(locks.peek(self.port_lock_path))}; wait for it, "
                                "or pass --port with a free port")
            self._locks.append(port_lock)
            leftovers += stop_leftovers(self._ours(port_lock), grace, self.root)
        self._write("running")
        return leftovers

    def _ours(self, lock: locks.Lock) -> dict[str, Any] | None:
        """What a lock file says when a run of this checkout wrote it (a port lock may be a
        run's of another checkout: never acted on from here); else None."""
        data = locks.content(lock.read())
        return data if data and data.get("checkout") == str(self.root.resolve()) else None

    def env(self) -> dict[str, str]:
        """The variable that marks every process of this run."""
        return {TAG_VAR: self.tag}

    def started(self, role: str, pid: int | None = None, container: str | None = None,
                project: str | None = None, docker: bool = False) -> None:
        self.docker = self.docker or docker or bool(container or project)
        if pid is not None:
            self.processes.append({"role": role, "pid": pid, "pgid": pid})
        if container:
            self.containers.append(container)
        if project and project not in self.projects:
            self.projects.append(project)
        self._write("running")

    def release(self) -> None:
        """Mark the run finished and let the locks go."""
        if self._locks:
            self._write("finished")
        for lock in self._locks:
            lock.release()
        self._locks.clear()

    def _write(self, state: str) -> None:
        data = {
            "state": state,
            "holder": {"pid": os.getpid(), "host": socket.gethostname(), "run_id": self.run_id,
                       "runbook": self.runbook, "started_at": self._started_at},
            "tag": self.tag,
            "processes": self.processes,
            "containers": self.containers,
            "projects": self.projects,
            "docker": self.docker,
            "checkout": str(self.root.resolve()),
        }
        text = (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
        for lock in self._locks:
            lock.write(text)


def stop_leftovers(data: dict[str, Any] | None, grace: float, root: Path) -> list[Leftover]:
    """Stop what a dead run of this checkout left: every process that carries its tag, every
    container that carries its label, and the containers of its own Compose projects created in
    its artifacts folder. `data` is what the lock file says (None: nothing, nothing is done)."""
    if data is None:
        return []
    tag = data.get("tag")
    if data.get("state") != "running" or not isinstance(tag, str) or not tag:
        return []
    stopped = stop_all_tagged(tag, grace)
    from wikitools.runbook.execution.containers import (  # docker only when the run used it
        stop_labelled,
    )

    projects = [p for p in data.get("projects") or [] if isinstance(p, str)]
    if data.get("docker") is True or data.get("containers") or projects:
        for name in stop_labelled(tag, projects, root, grace):
            stopped.append(Leftover(0, "container", name, "docker stop"))
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
