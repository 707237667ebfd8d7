"""The state of a runbook run on this host: a lock per runbook and one per port, each naming its
holder; the processes and containers the run started; and a per-run tag in their environment.
Two runs of one runbook (or on one port) cannot clobber each other, and the next run finds and
stops what a run killed with SIGKILL left behind, by the IDs it recorded and only after checking
that each still carries the run's tag."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import secrets
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wikitools.errors import WikiError

TAG_VAR = "WIKI_RUN_TAG"  # in the environment of every process a run starts
LOCKS_DIR = ".artifacts/locks"  # per runbook, under the wiki root


class RunLocked(WikiError):
    """Another run holds the runbook or the port."""

    exit_code = 1


@dataclass(frozen=True, slots=True)
class Leftover:
    """A process of an earlier run that was still alive and was stopped."""

    pid: int
    role: str
    command: str
    how: str  # TERM | KILL | gone

    def describe(self) -> str:
        return f"pid {self.pid} ({self.role}: {self.command})"


def new_tag(run_id: str) -> str:
    return f"{run_id}-{secrets.token_hex(4)}"


# --------------------------------------------------------------------------- /proc


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def has_tag(pid: int, tag: str) -> bool:
    """Whether process `pid` was started with this run's tag: the check made before any kill,
    so that a reused pid is never touched."""
    needle = f"{TAG_VAR}={tag}".encode()
    return needle in _environ(pid).split(b"\0")


def tagged_pids(tag: str) -> list[int]:
    """Every live process (zombies aside) whose environment carries the tag, this one excluded:
    what a run started, including `setsid` grandchildren that left its process groups."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        if has_tag(pid, tag) and _state(pid) not in ("Z", "X", ""):
            found.append(pid)
    return sorted(found)


def _state(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text[text.rfind(")") + 2 :][:1]


def command_of(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    words = [w.decode(errors="replace") for w in raw.split(b"\0") if w]
    text = " ".join(words) or "?"
    return text if len(text) <= 120 else text[:117] + "..."


def stop_tagged(pids: Iterable[int], tag: str, grace: float, role: str = "process",
                ) -> list[Leftover]:
    """TERM each process that still carries `tag`, wait up to `grace` seconds, KILL the rest.
    Processes without the tag (a pid reused by someone else) are never signalled."""
    mine = [(pid, command_of(pid)) for pid in pids if has_tag(pid, tag)]
    for pid, _ in mine:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    alive = {pid for pid, _ in mine}
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if has_tag(pid, tag) and _state(pid) not in ("Z", "")}
        if alive:
            time.sleep(0.05)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return [Leftover(pid, role, cmd, "KILL" if pid in alive else "TERM") for pid, cmd in mine]


def stop_all_tagged(tag: str, grace: float, role: str = "process") -> list[Leftover]:
    """Stop every process that carries the tag (in rounds: a dying parent may start no more)."""
    stopped: list[Leftover] = []
    for _ in range(3):
        pids = tagged_pids(tag)
        if not pids:
            break
        stopped += stop_tagged(pids, tag, grace, role)
    return stopped


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
class RunState:
    """Held for the whole of one run: `acquire()` first (it refuses when another run holds the
    runbook or the port, and stops what a dead run left), `started()` for each process or
    container, `release()` at the end. The state lives in the runbook's lock file, rewritten
    atomically at each change, so it survives the runner being killed."""

    root: Path
    runbook: str
    port: int | None
    run_id: str
    tag: str = ""
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
    """Stop the processes a dead run recorded (or that carry its tag), verified by the tag."""
    tag = data.get("tag")
    if data.get("state") != "running" or not isinstance(tag, str) or not tag:
        return []
    stopped: list[Leftover] = []
    for proc in data.get("processes") or []:
        pid = proc.get("pid") if isinstance(proc, dict) else None
        if isinstance(pid, int) and has_tag(pid, tag):
            stopped += stop_tagged([pid], tag, grace, str(proc.get("role", "process")))
    stopped += stop_all_tagged(tag, grace)
    return stopped


def _load_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()  # loaded here: a forked child must not import or load anything
_PR_SET_PDEATHSIG = 1


def die_with(parent: int) -> Callable[[], None]:
    """A `preexec_fn` for children of process `parent`: the kernel sends the child SIGTERM when
    `parent` dies (Linux PR_SET_PDEATHSIG), and a child whose parent is already gone ends at
    once. So `kill -9` of the runner still takes its server and client down."""

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec
