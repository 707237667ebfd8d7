"""One home for each runtime mechanism: processes are read by one module (psutil), locks are
taken by one primitive, signal handlers are swapped by one helper, pages are rendered and
plans made through the session for `run`, `render` and fleet alike. The source is read as text:
a second reader or lock added anywhere fails here, naming the file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "wikitools").rglob("*.py"), *(ROOT / "tests").rglob("*.py")])
PROCESSES = "wikitools/runbook/execution/processes.py"
LOCKS = "wikitools/runbook/execution/locks.py"
ME = "tests/test_runtime_homes.py"


def _uses(pattern: str) -> set[str]:
    rx = re.compile(pattern)
    return {p.relative_to(ROOT).as_posix() for p in SOURCES if rx.search(p.read_text())} - {ME}


def test_processes_are_read_by_one_module_in_code_and_tests() -> None:
    # /proc/<pid>/… or a walk over /proc; the kernel's boot id is not a process
    assert _uses(r"""/proc/\{|/proc/["']?\s*\)|Path\(["']/proc["']\)|/proc/\[0-9\]|/proc/\d""") \
        == set()
    assert _uses(r"\bimport psutil\b") == {PROCESSES}


def test_locks_are_taken_by_one_primitive() -> None:
    assert _uses(r"fcntl\.(?:flock|lockf)\(") - {"tests/test_setup_scripts.py"} == {LOCKS}
    # and exclusive creation only for the atomic writer's temporary file
    assert _uses(r"O_EXCL") == {"wikitools/core/fsio.py"}


def test_signal_handlers_are_swapped_by_one_helper() -> None:
    assert _uses(r"signal\.signal\(") - {"tests/fakes/fake_openai_server.py"} == {PROCESSES}
    assert "swapped_handlers" in (ROOT / "wikitools/fleet/driver.py").read_text()


def test_fleet_plans_and_renders_through_the_session() -> None:
    assert {p for p in _uses(r"\bmake_plan\(") if p.startswith("wikitools/")} == {
        "wikitools/runbook/execution/plan.py", "wikitools/runbook/session.py"}
    # `run`, `render` and fleet write pages through the session's one renderer (the site's
    # build-time plugin renders in memory and writes nothing).
    callers = {p for p in _uses(r"\brender_pages\(") if p.startswith("wikitools/")}
    assert not {p for p in callers if p.startswith(("wikitools/cli/", "wikitools/fleet/"))}
    assert "wikitools/runbook/session.py" in callers


def test_tests_wait_through_the_one_polling_helper() -> None:
    # A test waits for something with harness.wait_until, never a sleep of its own; the
    # fakes' sleeps are what they stand in for (a slow server, a runner waiting to be killed),
    # and test_fleet.py's is in the text of a child that waits to be killed.
    sleepers = {p for p in _uses(r"\btime\.sleep\(")
                if p.startswith("tests/") and not p.startswith("tests/fakes/")}
    assert sleepers == {"tests/harness.py", "tests/test_fleet.py"}


def test_no_test_module_imports_another() -> None:
    # What tests share lives in tests/harness.py (or tests/fakes/), never in a test module.
    assert _uses(r"(?m)^\s*(?:from|import)\s+(?:tests\.)?test_\w+") == set()
