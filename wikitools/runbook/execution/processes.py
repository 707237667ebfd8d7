"""Processes the executor starts: `bash -c` in its own process group, stopped by that group
(TERM, then KILL), and signal handling for the duration of a run (containers are `containers`'
job, by the IDs the run observed). Every process a run starts carries the run's tag in its
environment and gets SIGTERM from the kernel if the runner dies; what escaped its group (a
`setsid` grandchild) is found by that tag. Nothing is ever stopped by program name, and nothing is
signalled without checking its tag first."""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while the run was in progress."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def spawn(
    command: str, env: Mapping[str, str], log_path: Path, cwd: Path
) -> subprocess.Popen[bytes]:
    """`bash -c command` in its own session (so its own process group), output to log_path;
    it gets SIGTERM if this process dies (so `kill -9` of the runner does not leave it)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    full_env.update(env)
    with log_path.open("wb") as log:
        return subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=die_with(os.getpid()),  # loads nothing in the child: safe after fork
        )


def group_alive(pgid: int) -> bool:
    """True while any live process of the group exists. Zombies do not count: they hold no
    port or GPU memory, and an orphan waits for init to reap it (slowly in some containers)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return bool(group_members(pgid))


def stop_group(proc: subprocess.Popen[bytes], grace: float) -> tuple[bool, str | None]:
    """TERM the process group, wait `grace` for all of it to go, then KILL. Returns
    (clean, note) where clean means it went on TERM alone."""
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()
        if proc.returncode is not None and not group_alive(pgid):
            return True, None
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    end = time.monotonic() + 5
    while group_alive(pgid) and time.monotonic() < end:
        time.sleep(0.05)
    if group_alive(pgid):
        return False, f"process group {pgid} survived SIGKILL"
    return False, f"process group {pgid} needed SIGKILL after {grace:g} s"


def wait_until(cond: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


@contextlib.contextmanager
def signals_raise(enabled: bool) -> Iterator[None]:
    """SIGINT/SIGTERM raise Interrupted in the main thread for the duration of the run."""

    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)

    with swapped_handlers(handler, enabled):
        yield


@contextlib.contextmanager
def signals_ignored(enabled: bool) -> Iterator[None]:
    """Teardown must finish: a second Ctrl-C while cleaning up is ignored."""
    with swapped_handlers(signal.SIG_IGN, enabled):
        yield


_RUN_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def swapped_handlers(handler: Any, enabled: bool = True) -> Iterator[None]:
    """The one way handlers are swapped (the executor's and the fleet driver's): install
    `handler` for SIGINT and SIGTERM (main thread only) and put the old ones back,
    also when a signal's handler raises while they are being swapped: the two signals are
    blocked during each swap, and whatever was installed is restored."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    old: dict[signal.Signals, Any] = {}
    try:
        with _blocked():
            for s in _RUN_SIGNALS:
                old[s] = signal.signal(s, handler)
        yield
    finally:
        with _blocked():
            for s, h in old.items():
                signal.signal(s, h)


@contextlib.contextmanager
def _blocked() -> Iterator[None]:
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _RUN_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


# --------------------------------------------------------------------------- a run's processes

TAG_VAR = "WIKI_RUN_TAG"  # in the environment of every process a run starts


def new_tag(run_id: str) -> str:
    """A tag no other run has: the run id and 64 random bits. (A run id alone can repeat: tests
    and replays reuse an artifacts folder, and then the tag would match someone else's run.)"""
    return f"{run_id}-{secrets.token_hex(8)}"


@dataclass(frozen=True, slots=True)
class Leftover:
    """A process of a run that was still alive when nothing of the run should be (left by a
    killed runner, or outside the process groups at teardown), and was stopped."""

    pid: int
    role: str
    command: str
    how: str  # TERM | KILL | gone

    def describe(self) -> str:
        if self.role == "container":
            return f"container {self.command}"
        role = "" if self.role == "process" else f"{self.role}: "
        return f"pid {self.pid} ({role}{self.command})"


# --------------------------------------------------------------------------- reading processes
# The one reader of other processes (psutil): the executor, the fleet and the tests ask here.

_LETTER = {psutil.STATUS_RUNNING: "R", psutil.STATUS_SLEEPING: "S",
           psutil.STATUS_DISK_SLEEP: "D", psutil.STATUS_STOPPED: "T",
           psutil.STATUS_TRACING_STOP: "t", psutil.STATUS_ZOMBIE: "Z", psutil.STATUS_DEAD: "X",
           psutil.STATUS_IDLE: "I", psutil.STATUS_PARKED: "P"}
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError)


def environ_of(pid: int) -> dict[str, str]:
    """The environment process `pid` was started with (empty when gone or not readable)."""
    try:
        return dict(psutil.Process(pid).environ())
    except _GONE:
        return {}


def process_state(pid: int) -> str:
    """The state letter of a process (R, S, Z, …); empty when it is gone."""
    try:
        return _LETTER.get(psutil.Process(pid).status(), "?")
    except _GONE:
        return ""


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    return process_state(pid) not in ("", "Z", "X")


def command_of(pid: int, limit: int = 120) -> str:
    """The command line of `pid` ("?" when gone), cut to `limit` characters."""
    try:
        words = psutil.Process(pid).cmdline()
    except _GONE:
        return "?"
    text = " ".join(words) or "?"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def children_of(pid: int) -> list[int]:
    """The direct children of `pid`."""
    try:
        return sorted(c.pid for c in psutil.Process(pid).children())
    except _GONE:
        return []


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group `pgid`."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(*_GONE):
            if os.getpgid(proc.pid) == pgid and alive(proc.pid):
                found.append(proc.pid)
    return sorted(found)


def listeners(port: int) -> list[int]:
    """The processes with a TCP socket listening on `port` (any address) that this user may
    see: who holds a port, where "something answers" could be anyone's server."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return []
    return sorted({c.pid for c in conns if c.pid and c.status == psutil.CONN_LISTEN
                   and c.laddr and c.laddr.port == port})


def with_env(var: str, value: str) -> list[int]:
    """Every live process (zombies aside) whose environment holds var=value, this one
    excluded."""
    me = os.getpid()
    return sorted(pid for pid in psutil.pids()
                  if pid != me and environ_of(pid).get(var) == value and alive(pid))


def has_tag(pid: int, tag: str) -> bool:
    """Whether process `pid` was started with this run's tag: the check made before any kill,
    so that a reused pid is never touched."""
    return environ_of(pid).get(TAG_VAR) == tag


def tagged_pids(tag: str) -> list[int]:
    """Every live process whose environment carries the run's tag, this one excluded: what a
    run started, including `setsid` grandchildren that left its process groups."""
    return with_env(TAG_VAR, tag)


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
        alive = {pid for pid in alive if has_tag(pid, tag) and process_state(pid) not in ("Z", "")}
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
