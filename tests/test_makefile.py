"""The Makefile's long-running target: `make serve` stops when make is stopped by its PID."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from harness import free_port, wait_until

from wikitools.runbook.execution.processes import children_of, process_state

ROOT = Path(__file__).resolve().parent.parent


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.3):
        return True
    return False


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_serve_stopped_by_pid_leaves_nothing_serving() -> None:
    port = free_port()
    make = subprocess.Popen(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "serve",
         f"SERVE_ADDR=127.0.0.1:{port}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    server: list[int] = []
    try:
        wait_until(lambda: _listening(port) or make.poll() is not None, 120, interval=0.2)
        assert _listening(port), "mkdocs serve did not come up"
        server = children_of(make.pid)
        assert server, "make started the server as its own child"
        os.kill(make.pid, signal.SIGTERM)  # by PID, as a user or a script would
        make.wait(timeout=10)
        assert wait_until(lambda: not _listening(port), 15), (
            "the site is still served after make was stopped")
        assert all(process_state(pid) in ("", "Z") for pid in server)
    finally:
        for pid in server:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if make.poll() is None:
            make.kill()
            make.wait()
