"""Declared servers against the real vLLM CPU engine: a run of a server block that declares
what it serves checks the ready server (`/v1/models`, its start-up log) and fails the
`declared` step with "declared X, the server serves Y" when they differ, then still tears down.

Needs `.venv-engine` (scripts/setup-engine-env.sh); skipped with that reason otherwise."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness import Run, assert_failed, free_port, needs_engine, step

TREE = Path(__file__).resolve().parent / "tree"

pytestmark = list(needs_engine)


def _run(tmp_path: Path, runbook: str, tiny_model: Path) -> Run:
    root = tmp_path / "wiki-root"
    shutil.copytree(TREE, root)
    port = free_port()
    return Run(root, runbook, port=port, model=tiny_model, args=["--port", str(port)])


def test_a_right_declaration_is_checked_and_passes(tmp_path: Path, tiny_model: Path) -> None:
    run = _run(tmp_path, "cpu-declared", tiny_model)
    try:
        rc = run(timeout=1200)
        assert rc == 0, run.output
        rec = run.record()
        declared = step(rec, "declared")
        assert declared["status"] == "ok", declared
        names = [s["name"] for s in rec["steps"]]
        assert names.index("ready") < names.index("declared") < names.index("teardown")
        run.assert_nothing_left()
    finally:
        run.cleanup()


def test_a_wrong_declaration_fails_the_declared_step(tmp_path: Path, tiny_model: Path) -> None:
    run = _run(tmp_path, "cpu-declared-wrong", tiny_model)
    try:
        rc = run(timeout=1200)
        rec = assert_failed(run, rc, "declared")
        message = step(rec, "declared")["message"]
        assert "declared model=tiny-chat, the server serves tiny" in message
        assert "declared tp=2, the server serves tp=1" in message
        assert "declared engine" not in message  # it is vLLM, as declared
        assert step(rec, "teardown")["status"] == "ok"
        run.assert_nothing_left()
    finally:
        run.cleanup()
