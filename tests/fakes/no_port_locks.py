"""Runs the `wiki` command with the port locks in a folder of the test's own (argv[1]), so that a
test running `wiki runbook run` in a child process does not share them with other tests."""

from __future__ import annotations

import sys
from pathlib import Path

from wikitools import cli
from wikitools.runbook.execution import runlock


def main() -> int:
    folder = Path(sys.argv[1])
    runlock._port_locks_dir = lambda: folder
    return cli.main(sys.argv[2:])
