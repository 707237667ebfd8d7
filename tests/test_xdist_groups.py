"""`make test` runs pytest with `--dist loadgroup`: every test of one xdist_group runs on one
worker (the Ray cluster and the Docker tests count on it). pytest 9.2 with pytest-xdist 3.8
silently stopped honouring the groups (pytest-dev/pytest-xdist#1386); this guards the pin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GROUPED = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("{group}")

@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    with open("workers.txt", "a") as out:
        out.write("{group} " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''

LOOSE = '''
import os
import pytest

@pytest.mark.parametrize("i", range(4))
def test_loose(i):
    with open("workers.txt", "a") as out:
        out.write("loose " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''


def test_each_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text(GROUPED.format(group="alpha"))
    (tmp_path / "test_b.py").write_text(GROUPED.format(group="beta"))
    (tmp_path / "test_c.py").write_text(LOOSE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    seen: dict[str, set[str]] = {}
    for line in (tmp_path / "workers.txt").read_text().splitlines():
        group, worker = line.split()
        seen.setdefault(group, set()).add(worker)
    assert sum(len(w) for w in seen.values()) >= 3, seen  # both workers ran something
    assert len(seen["alpha"]) == 1 and len(seen["beta"]) == 1, seen
