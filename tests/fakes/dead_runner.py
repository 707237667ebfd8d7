"""Stands in for `wiki runbook run` in tests of what `kill -9` leaves: takes the run state of a
runbook, starts a process tree like a server's (a child and a `setsid` grandchild), records it,
prints the child's pid and waits to be killed.

With `--container` it starts no process: it prints the run's tag (to label a container with),
reads a container ID from stdin, records it as the run's container, prints "recorded" and
waits to be killed. PORT `-`: the run holds no port.

Usage: dead_runner.py ROOT RUNBOOK PORT PORT_LOCKS_DIR [--no-pdeathsig | --container]"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from wikitools.runbook.execution import runlock
from wikitools.runbook.execution.processes import die_with


def main() -> None:
    root, runbook, port, locks = sys.argv[1:5]
    runlock._port_locks_dir = lambda: Path(locks)  # the test's own folder
    state = runlock.RunLock(Path(root), runbook, None if port == "-" else int(port),
                            "20261130T100000Z-dead")
    state.acquire()
    if "--container" in sys.argv:
        print(state.tag, flush=True)
        state.started("container", container=sys.stdin.readline().strip())
        print("recorded", flush=True)
        time.sleep(300)
        return
    preexec = None if "--no-pdeathsig" in sys.argv else die_with(os.getpid())
    child = subprocess.Popen(
        ["bash", "-c", "setsid sleep 300 & sleep 300; true"],
        env={**os.environ, **state.env()}, start_new_session=True, preexec_fn=preexec,
    )
    state.started("server", child.pid)
    print(child.pid, flush=True)
    time.sleep(300)


if __name__ == "__main__":
    main()
