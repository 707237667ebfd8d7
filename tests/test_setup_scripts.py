"""The set-up scripts wait for the apt/dpkg lock that another package manager holds (bounded,
saying so) instead of failing or skipping. A real fcntl lock, as apt and dpkg take it, on a
file of the test's own; a stand-in apt-get that records its arguments."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _apt_get(tmp_path: Path, lock: Path, wait_s: int) -> subprocess.Popen[str]:
    fake = tmp_path / "apt-get"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'ran'}\n")
    fake.chmod(0o755)
    env = {**os.environ, "APT_LOCK_FILES": str(lock), "APT_GET": str(fake),
           "APT_LOCK_WAIT_S": str(wait_s), "APT_LOG_TAG": "setup-test"}
    return subprocess.Popen(
        ["bash", "-c", f"source {SCRIPTS / 'apt-lock.sh'}; apt_get install -y chromium"],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _hold(lock: Path) -> int:
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    return fd


def test_setup_scripts_wait_for_the_apt_lock_and_then_install(tmp_path: Path) -> None:
    lock = tmp_path / "lock-frontend"
    fd = _hold(lock)  # held by "another package manager" (this process)
    proc = _apt_get(tmp_path, lock, 60)
    t = time.monotonic()
    release = threading.Timer(3.0, os.close, args=(fd,))
    release.start()
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert time.monotonic() - t >= 2.5  # it waited for the lock
    assert f"[setup-test] waiting for the apt/dpkg lock {lock} (pid {os.getpid()}), up to 60 s" \
        in err
    assert "[setup-test] the apt/dpkg lock is free after" in err
    assert (tmp_path / "ran").read_text() == "-o DPkg::Lock::Timeout=60 install -y chromium\n"


def test_setup_scripts_give_up_on_the_apt_lock_after_the_bound_with_a_message(
        tmp_path: Path) -> None:
    lock = tmp_path / "lock-frontend"
    fd = _hold(lock)
    try:
        proc = _apt_get(tmp_path, lock, 2)
        _out, err = proc.communicate(timeout=60)
    finally:
        os.close(fd)
    assert proc.returncode == 100
    assert "is still held after 2 s; run this again when the other package manager has " \
        "finished" in err
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("script", ["setup-docker.sh", "setup-browser.sh"])
def test_setup_scripts_install_through_the_lock_waiting_apt_get(script: str) -> None:
    text = (SCRIPTS / script).read_text()
    assert "apt-lock.sh" in text
    calls = [ln for ln in text.splitlines() if "apt-get " in ln and not ln.lstrip().startswith("#")
             and "command -v" not in ln and "unavailable" not in ln and "echo" not in ln]
    assert calls == [], calls
