"""The run state: one run per runbook and per port, holders named, leftovers of a killed run
found by their tag and stopped, children that die with the runner. Real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from harness import wait_until

from wikitools.runbook.execution import locks, runlock
from wikitools.runbook.execution.processes import TAG_VAR, has_tag, process_state, tagged_pids
from wikitools.runbook.execution.runlock import RunLock, RunLocked

RUNNER = Path(__file__).parent / "fakes" / "dead_runner.py"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's lock folder of this test alone (its runners inherit it)."""
    folder = tmp_path / "state"
    monkeypatch.setenv(locks.STATE_ENV, str(folder))
    return folder


@pytest.fixture(autouse=True)
def port_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "port-locks"
    monkeypatch.setattr(runlock, "_port_locks_dir", lambda: folder)
    return folder


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


def _tag(tmp_path: Path) -> str:
    return json.loads(runlock.lock_path(tmp_path, "rb").read_text())["tag"]


def test_children_die_with_the_runner_and_leftovers_are_stopped_by_the_next_run(
    tmp_path: Path, port_locks: Path
) -> None:
    runner, child = _start_runner(tmp_path, port_locks)
    tag = _tag(tmp_path)
    assert wait_until(lambda: len(tagged_pids(tag)) >= 3, 10.0)  # bash, sleep, setsid sleep
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    # The direct child gets SIGTERM from the kernel when the runner dies.
    assert wait_until(lambda: not alive(child), 10.0)
    # The setsid grandchild left every process group: the next run finds it by its tag.
    survivors = tagged_pids(tag)
    assert survivors, "the setsid grandchild outlives its parent"
    nxt = RunLock(tmp_path, "rb", 18005, "20261130T110000Z-next")
    stopped = nxt.acquire(grace=3.0)
    assert {s.pid for s in stopped} >= set(survivors)
    assert all("sleep 300" in s.command for s in stopped if s.pid in survivors)
    assert wait_until(lambda: not any(alive(p) for p in survivors), 10.0)
    assert tagged_pids(tag) == []
    nxt.release()


def test_without_parent_death_signal_the_next_run_stops_the_recorded_server(
    tmp_path: Path, port_locks: Path
) -> None:
    runner, child = _start_runner(tmp_path, port_locks, "--no-pdeathsig")
    tag = _tag(tmp_path)
    assert wait_until(lambda: len(tagged_pids(tag)) >= 3, 10.0)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    # The runner is reaped: a parent-death signal would have been sent by now. The child is
    # alive, and is still alive when the next run finds it (it is among those stopped).
    assert alive(child)
    stopped = RunLock(tmp_path, "rb", 18005, "20261130T110000Z-next").acquire(grace=3.0)
    assert child in {s.pid for s in stopped}
    assert wait_until(lambda: tagged_pids(tag) == [], 10.0)


def test_a_pid_reused_by_another_process_is_never_signalled(tmp_path: Path) -> None:
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        lock = runlock.lock_path(tmp_path, "rb")
        lock.parent.mkdir(mode=0o700, parents=True)
        lock.write_text(json.dumps({"state": "running", "tag": "20261130T000000Z-gone-1234",
                                    "checkout": str(tmp_path.resolve()),
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


def test_copied_checkout_never_stops_the_originals_live_server(tmp_path: Path,
                                                              port_locks: Path) -> None:
    """`cp -a` of a checkout while a run is live copies its lock file: a run in the copy must
    not take the copied state for its own and stop the original's processes."""
    original = tmp_path / "original"
    original.mkdir()
    runner, child = _start_runner(original, port_locks)
    try:
        tag = _tag(original)
        assert wait_until(lambda: len(tagged_pids(tag)) >= 3, 10.0)
        copy = tmp_path / "copy"
        subprocess.run(["cp", "-a", str(original), str(copy)], check=True)
        other = RunLock(copy, "rb", 18006, "20261130T110000Z-copy")
        assert other.acquire(grace=1.0) == []
        other.release()
        assert alive(child) and len(tagged_pids(tag)) >= 3
    finally:
        runner.kill()
        runner.wait()
        RunLock(original, "rb", 18005, "20261130T120000Z-tidy").acquire(grace=1.0)


def test_symlinked_lock_file_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    lock = runlock.lock_path(tmp_path, "rb")
    lock.parent.mkdir(mode=0o700, parents=True)
    lock.symlink_to(target)
    with pytest.raises(locks.LockPathError, match=r"rb@[0-9a-f]{16}\.json: a symlink where a "
                       r"lock file belongs; lock files are never followed through links: "
                       r"remove it"):
        RunLock(tmp_path, "rb", None, "20261201T000000Z-a").acquire()
    assert target.read_text() == "keep me\n"


def test_symlinked_port_lock_planted_by_another_user_is_never_written_through(
        tmp_path: Path, port_locks: Path) -> None:
    target = tmp_path / "victim-file"
    target.write_text("keep me\n")
    port_locks.mkdir(mode=0o700)
    (port_locks / "port-18007.json").symlink_to(target)
    with pytest.raises(locks.LockPathError, match="a symlink where a lock file belongs"):
        RunLock(tmp_path, "rb", 18007, "20261201T000000Z-a").acquire()
    assert target.read_text() == "keep me\n"
    # The runbook's own lock was let go: nothing is left held.
    assert not locks.is_held(runlock.lock_path(tmp_path, "rb"))


def test_lock_folder_writable_by_others_or_not_ours_is_refused(tmp_path: Path,
                                                               port_locks: Path) -> None:
    port_locks.mkdir()
    port_locks.chmod(0o777)
    with pytest.raises(locks.LockPathError, match=r"port-locks: the lock folder is writable by "
                       r"others \(mode 777\); it is never used"):
        RunLock(tmp_path, "rb", 18008, "20261201T000000Z-a").acquire()


@pytest.mark.parametrize("where", ["state", "state/runbooks"])
def test_file_where_a_lock_folder_belongs_is_a_located_error(tmp_path: Path, where: str) -> None:
    (tmp_path / where).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    (tmp_path / where).write_text("not a folder\n")
    with pytest.raises(locks.LockPathError) as exc:
        RunLock(tmp_path, "rb", None, "20261201T000000Z-a").acquire()
    assert str(exc.value) == f"{tmp_path / where}: a file where a lock folder belongs; move it away"


def test_folder_where_a_lock_file_belongs_is_a_located_error(tmp_path: Path) -> None:
    runlock.lock_path(tmp_path, "rb").mkdir(parents=True)
    with pytest.raises(locks.LockPathError, match=r"rb@[0-9a-f]{16}\.json: a folder where a lock "
                       "file belongs; move it away"):
        RunLock(tmp_path, "rb", None, "20261201T000000Z-a").acquire()


def test_port_locks_live_in_a_private_folder_of_the_user(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    monkeypatch.delenv(locks.STATE_ENV, raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = locks.user_state_dir()
    assert folder.is_relative_to(tmp_path) and not folder.is_relative_to("/tmp/wiki")
    assert (folder.stat().st_mode & 0o777) == 0o700


def test_runbook_locks_live_in_the_users_folder_never_in_the_checkout(tmp_path: Path,
                                                                       state: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    run = RunLock(checkout, "rb", None, "20261201T000000Z-a")
    run.acquire()
    assert run.lock_path.parent == state / "runbooks"
    assert (state.stat().st_mode & 0o777) == 0o700
    assert (run.lock_path.parent.stat().st_mode & 0o777) == 0o700
    assert (run.lock_path.stat().st_mode & 0o777) == 0o600
    assert json.loads(run.lock_path.read_text())["checkout"] == str(checkout.resolve())
    run.release()
    assert list(checkout.iterdir()) == []


def test_lock_file_committed_in_a_checkout_is_never_read(tmp_path: Path) -> None:
    """A lock file inside the checkout (committed, crafted) naming the tag of a live process:
    the run reads its lock from the user's folder and stops nothing."""
    tag = "20261130T000000Z-planted-1234"
    planted = subprocess.Popen(["sleep", "30"], env={**os.environ, TAG_VAR: tag})
    try:
        assert wait_until(lambda: has_tag(planted.pid, tag), 10.0)
        crafted = tmp_path / ".artifacts" / "locks" / "rb.json"
        crafted.parent.mkdir(parents=True)
        crafted.write_text(json.dumps({"state": "running", "tag": tag, "docker": False,
                                       "checkout": str(tmp_path.resolve()), "processes": []}))
        run = RunLock(tmp_path, "rb", None, "20261201T000000Z-next")
        assert run.acquire(grace=1.0) == []
        run.release()
        assert planted.poll() is None
    finally:
        planted.kill()
        planted.wait()


@pytest.mark.parametrize("data", [b"\x00\xffnot json{", b"[1, 2]", b"", b'{"state": "running"}'])
def test_damaged_lock_file_is_stale_and_taken_over(tmp_path: Path, data: bytes) -> None:
    lock = runlock.lock_path(tmp_path, "rb")
    lock.parent.mkdir(mode=0o700, parents=True)
    lock.write_bytes(data)
    run = RunLock(tmp_path, "rb", None, "20261201T000000Z-a")
    assert run.acquire(grace=1.0) == []
    assert json.loads(lock.read_text())["state"] == "running"
    run.release()


def test_dead_run_of_another_checkout_on_the_same_port_is_left_to_its_own_checkout(
        tmp_path: Path, port_locks: Path) -> None:
    """A port lock is shared by every checkout of the user: what a dead run left is stopped by
    the next run of its own checkout only."""
    original = tmp_path / "original"
    original.mkdir()
    runner, child = _start_runner(original, port_locks)
    tag = _tag(original)
    assert wait_until(lambda: len(tagged_pids(tag)) >= 3, 10.0)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    assert wait_until(lambda: not alive(child), 10.0)
    survivors = set(tagged_pids(tag))
    assert survivors, "the setsid grandchild outlives its parent"
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = RunLock(other, "rb", 18005, "20261130T110000Z-other")
    assert elsewhere.acquire(grace=1.0) == []
    elsewhere.release()
    assert set(tagged_pids(tag)) == survivors
    stopped = RunLock(original, "rb", 18005, "20261130T120000Z-tidy").acquire(grace=3.0)
    assert {s.pid for s in stopped} >= survivors
    assert wait_until(lambda: tagged_pids(tag) == [], 10.0)


@pytest.mark.parametrize("mode", [0o720, 0o702, 0o777])
def test_lock_folder_writable_by_group_or_world_is_refused(tmp_path: Path, state: Path,
                                                           mode: int) -> None:
    (state / "runbooks").mkdir(mode=0o700, parents=True)
    (state / "runbooks").chmod(mode)
    with pytest.raises(locks.LockPathError) as exc:
        RunLock(tmp_path, "rb", None, "20261201T000000Z-a").acquire()
    assert str(exc.value) == (f"{state / 'runbooks'}: the lock folder is writable by others "
                              f"(mode {mode:o}); it is never used")


def test_lock_file_writable_by_others_is_refused(tmp_path: Path) -> None:
    lock = runlock.lock_path(tmp_path, "rb")
    lock.parent.mkdir(mode=0o700, parents=True)
    lock.write_text("{}")
    lock.chmod(0o666)
    with pytest.raises(locks.LockPathError, match=r"\.json: the lock file is writable by others "
                       r"\(mode 666\); it is never used"):
        RunLock(tmp_path, "rb", None, "20261201T000000Z-a").acquire()


def test_lock_folder_of_another_user_is_refused(tmp_path: Path, state: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    state.mkdir(mode=0o700)
    owner = state.stat().st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)  # this user is not the folder's owner
    with pytest.raises(locks.LockPathError) as exc:
        RunLock(tmp_path, "rb", None, "20261201T000000Z-a").acquire()
    assert str(exc.value) == (f"{state}: the lock folder belongs to uid {owner}, not to this "
                              f"user (uid {owner + 1}); it is never used")


def test_symlinked_lock_folder_is_refused_and_its_target_left_alone(tmp_path: Path,
                                                                    state: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    state.mkdir(mode=0o700)
    (state / "runbooks").symlink_to(target)
    with pytest.raises(locks.LockPathError) as exc:
        RunLock(tmp_path, "rb", None, "20261201T000000Z-a").acquire()
    assert str(exc.value) == (f"{state / 'runbooks'}: a symlink where a lock folder belongs; "
                              "lock folders are never followed through links: remove it")
    assert list(target.iterdir()) == []
