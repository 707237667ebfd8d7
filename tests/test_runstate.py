"""The run state: one run per runbook and per port, holders named, leftovers of a killed run
found by their tag and stopped, children that die with the runner. Real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wikitools.runbook.execution import runstate
from wikitools.runbook.execution.processes import has_tag, process_state, tagged_pids
from wikitools.runbook.execution.runstate import RunLock, RunLocked

RUNNER = Path(__file__).parent / "fakes" / "dead_runner.py"


@pytest.fixture(autouse=True)
def port_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "port-locks"
    monkeypatch.setattr(runstate, "_port_locks_dir", lambda: folder)
    return folder


def wait_for(cond, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def alive(pid: int) -> bool:
    return process_state(pid) not in ("", "Z", "X")


def test_second_run_of_a_runbook_is_refused_naming_the_holder(tmp_path: Path) -> None:
    first = RunLock(tmp_path, "rb", 18001, "20261130T100000Z-aaaa")
    assert first.acquire() == []
    second = RunLock(tmp_path, "rb", 18002, "20261130T100001Z-bbbb")
    with pytest.raises(RunLocked) as exc:
        second.acquire()
    message = str(exc.value)
    assert f"pid {os.getpid()}" in message and "run 20261130T100000Z-aaaa" in message
    assert "runbook 'rb' is being run by" in message and "started 20" in message
    first.release()
    assert second.acquire() == []
    second.release()


def test_second_run_on_the_same_port_is_refused_naming_the_holder(tmp_path: Path) -> None:
    first = RunLock(tmp_path, "rb-a", 18003, "20261130T100000Z-aaaa")
    first.acquire()
    other = RunLock(tmp_path, "rb-b", 18003, "20261130T100001Z-bbbb")
    with pytest.raises(RunLocked, match=r"port 18003 is held by run 20261130T100000Z-aaaa of "
                       r"runbook 'rb-a'"):
        other.acquire()
    first.release()
    # The refused run let its runbook lock go.
    again = RunLock(tmp_path, "rb-b", 18004, "20261130T100002Z-cccc")
    again.acquire()
    again.release()


def _start_runner(tmp_path: Path, port_locks: Path, *flags: str) -> tuple[subprocess.Popen, int]:
    runner = subprocess.Popen(
        [sys.executable, str(RUNNER), str(tmp_path), "rb", "18005", str(port_locks), *flags],
        stdout=subprocess.PIPE, text=True,
    )
    child = int(runner.stdout.readline())
    return runner, child


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _term_pending(pid: int) -> bool:
    """SIGTERM queued for the process and not yet delivered (SigPnd/ShdPnd of /proc status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    masks = [int(line.split()[1], 16) for line in status.splitlines()
             if line.startswith(("SigPnd:", "ShdPnd:"))]
    return any(m & (1 << (signal.SIGTERM - 1)) for m in masks)


def _tag(tmp_path: Path) -> str:
    return json.loads((tmp_path / runstate.LOCKS_DIR / "rb.json").read_text())["tag"]


def test_children_die_with_the_runner_and_leftovers_are_stopped_by_the_next_run(
    tmp_path: Path, port_locks: Path
) -> None:
    runner, child = _start_runner(tmp_path, port_locks)
    tag = _tag(tmp_path)
    assert wait_for(lambda: len(tagged_pids(tag)) >= 3)  # bash, sleep, setsid sleep
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    # The direct child gets SIGTERM from the kernel when the runner dies.
    assert wait_for(lambda: not alive(child))
    # The setsid grandchild left every process group: the next run finds it by its tag.
    survivors = tagged_pids(tag)
    assert survivors, "the setsid grandchild outlives its parent"
    nxt = RunLock(tmp_path, "rb", 18005, "20261130T110000Z-next")
    stopped = nxt.acquire(grace=3.0)
    assert {s.pid for s in stopped} >= set(survivors)
    assert all("sleep 300" in s.command for s in stopped if s.pid in survivors)
    assert wait_for(lambda: not any(alive(p) for p in survivors))
    assert tagged_pids(tag) == []
    nxt.release()


def test_without_parent_death_signal_the_next_run_stops_the_recorded_server(
    tmp_path: Path, port_locks: Path
) -> None:
    runner, child = _start_runner(tmp_path, port_locks, "--no-pdeathsig")
    tag = _tag(tmp_path)
    assert wait_for(lambda: len(tagged_pids(tag)) >= 3)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    # Once the child has a new parent, the runner's death has been dealt with (a parent-death
    # signal would have been sent then): the child is still alive and no SIGTERM waits for it.
    assert wait_for(lambda: _ppid(child) not in (runner.pid, None))
    assert alive(child) and not _term_pending(child)
    stopped = RunLock(tmp_path, "rb", 18005, "20261130T110000Z-next").acquire(grace=3.0)
    assert child in {s.pid for s in stopped}
    assert wait_for(lambda: tagged_pids(tag) == [])


def test_a_pid_reused_by_another_process_is_never_signalled(tmp_path: Path) -> None:
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        lock = tmp_path / runstate.LOCKS_DIR / "rb.json"
        lock.parent.mkdir(parents=True)
        lock.write_text(json.dumps({"state": "running", "tag": "20261130T000000Z-gone-1234",
                                    "processes": [{"role": "server", "pid": stranger.pid}]}))
        assert not has_tag(stranger.pid, "20261130T000000Z-gone-1234")
        state = RunLock(tmp_path, "rb", None, "20261130T110000Z-next")
        assert state.acquire(grace=1.0) == []
        assert stranger.poll() is None
        state.release()
        assert json.loads(lock.read_text())["state"] == "finished"
    finally:
        stranger.kill()
        stranger.wait()
