"""Processes the executor starts: `bash -c` in its own process group, stopped by that group
(TERM, then KILL), docker containers stopped by the name the plan gave them, and signal handling
for the duration of a run. Nothing is ever stopped by program name."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while the run was in progress."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def spawn(
    command: str, env: Mapping[str, str], log_path: Path, cwd: Path
) -> subprocess.Popen[bytes]:
    """`bash -c command` in its own session (so its own process group), output to log_path."""
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
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


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



def container_name(command: str) -> str | None:
    """The `--name` a docker run command gives its container (the plan names it wiki-<run-id>)."""
    m = re.search(r"--name[= ]+([\w.-]+)", command)
    return m.group(1) if m else None


def docker_stop(name: str, grace: float) -> str | None:
    try:
        out = subprocess.run(
            ["docker", "stop", "--time", str(int(grace)), name],
            capture_output=True, text=True, timeout=grace + 30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker stop {name} failed: {exc}"
    if out.returncode != 0 and "No such container" not in out.stderr:
        return f"docker stop {name} failed: {out.stderr.strip()[:200]}"
    return None


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
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_ignored(enabled: bool) -> Iterator[None]:
    """Teardown must finish: a second Ctrl-C while cleaning up is ignored."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)

