"""`wiki runbook run` under faults, against the fake engine (a `vllm` test double on PATH): two
runs at once, a record that cannot be written, a typo in a client block, a server that leaves a
`setsid` grandchild, and `kill -9` of the runner. Real processes, real ports on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from harness import free_port, make_tree, wait_until

from wikitools.cli import main
from wikitools.runbook.execution import runlock
from wikitools.runbook.execution.processes import (
    has_tag,
    listeners,
    process_state,
    tagged_pids,
)
from wikitools.runbook.execution.runlock import RunLock
from wikitools.runbook.records.record import make_run_id

FAKE_BIN = Path(__file__).parent / "fakes" / "bin"

PAGE = """---
title: Fake model
---

# Fake model

```{{ .bash #fake-rb .runbook-server engine=vllm gpus=0 ready_timeout=30 stop_timeout=3 }}
{prefix}vllm serve fake-model --port {port}
```

```{{ .bash .runbook-client for=fake-rb name=bench {client_attrs}timeout=30 }}
vllm bench serve --model fake-model --num-prompts 4 --max-concurrency 1{client_suffix}
```

<!-- wiki:results runbook=fake-rb view=serving -->
<!-- wiki:end -->
"""


def make_wiki(root: Path, port: int, prefix: str = "", client_attrs: str = "",
              client_suffix: str = "") -> Path:
    return make_tree(root, {"wiki/fake.md": PAGE.format(
        port=port, prefix=prefix, client_attrs=client_attrs, client_suffix=client_suffix)})


@pytest.fixture(autouse=True)
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_SERVER_ARGS", raising=False)
    monkeypatch.delenv("FAKE_BENCH_ARGS", raising=False)
    locks = tmp_path / "port-locks"
    monkeypatch.setattr(runlock, "_port_locks_dir", lambda: locks)


def listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.3):
        return True
    return False


def run(root: Path, *extra: str) -> int:
    return main(["runbook", "run", "wiki/fake.md#fake-rb", "--root", str(root), "--yes", *extra])


def test_run_ids_are_unique_within_one_second() -> None:
    started = datetime(2026, 11, 30, 10, 0, 5, 123456, tzinfo=UTC)
    ids = {make_run_id(started, "sha256:0123456789abcdef") for _ in range(50)}
    assert len(ids) == 50
    assert all(i.startswith("20261130T100005.123Z-01234567-") for i in ids)


def test_second_run_of_one_runbook_is_refused_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    root = make_wiki(tmp_path, port)
    holder = RunLock(root, "fake-rb", port, "20261130T100000.000Z-aaaaaaaa-0000")
    holder.acquire()
    try:
        assert run(root) == 1
        _out, err = capsys.readouterr()
        assert "runbook 'fake-rb' is being run by run 20261130T100000.000Z-aaaaaaaa-0000" in err
        assert f"pid {os.getpid()}" in err
        assert not listening(port)
        assert not (root / "runbooks").exists()
    finally:
        holder.release()


def test_typo_in_a_client_block_stops_the_run_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    root = make_wiki(tmp_path, port, client_attrs="swep=\"C=1,2\" ")
    assert run(root) == 2
    err = capsys.readouterr().err
    assert "wiki/fake.md:" in err and "RB003" in err and "swep" in err
    assert "nothing was started" in err
    assert not (root / "runbooks").exists()
    assert not (root / ".artifacts" / "fake-rb").exists()


def test_unwritable_record_prints_results_keeps_them_and_exits_nonzero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    root = make_wiki(tmp_path, port)
    (root / "runbooks").write_text("a file where the records folder should be")
    before = (root / "wiki" / "fake.md").read_text()
    assert run(root) == 2
    out, err = capsys.readouterr()
    assert "bench: 4/4 ok" in out  # the results are printed
    assert "cannot write the record" in err
    (kept,) = (root / ".artifacts" / "fake-rb").glob("*/record.json")
    data = json.loads(kept.read_text())
    assert data["status"] == "ok" and data["clients"][0]["points"][0]["metrics"]
    assert str(kept.relative_to(root)) in err
    assert "pages not re-rendered" in err
    assert (root / "wiki" / "fake.md").read_text() == before


def test_setsid_grandchild_is_killed_and_named_in_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    root = make_wiki(tmp_path, port, prefix="setsid sleep 300 &\n")
    assert run(root) == 1
    capsys.readouterr()
    (path,) = (root / "runbooks" / "fake-rb").glob("*.json")
    data = json.loads(path.read_text())
    teardown = next(s for s in data["steps"] if s["name"] == "teardown")
    assert teardown["status"] == "failed"
    assert "sleep 300" in teardown["message"] and "left running" in teardown["message"]
    tag = data["server"]["run_tag"]
    assert tagged_pids(tag) == []


def test_kill_9_of_the_runner_leaves_no_server_client_or_temp_file(tmp_path: Path) -> None:
    port = free_port()
    root = make_wiki(tmp_path, port, prefix="setsid sleep 300 &\n",
                     client_suffix=" --sleep 60")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    runner = subprocess.Popen(
        [sys.executable, "-c", "import sys; from fakes.no_port_locks import main; "
         "sys.exit(main())", str(tmp_path / "port-locks"), "runbook", "run",
         "wiki/fake.md#fake-rb", "--root", str(root), "--yes"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=root,
    )
    lock = runlock.lock_path(root, "fake-rb")
    try:
        assert wait_until(lambda: listening(port), 60), "the fake server came up"
        assert wait_until(lambda: any(
            p.get("role", "").startswith("client")
            for p in json.loads(lock.read_text() or "{}").get("processes", [])), 30)
        state = json.loads(lock.read_text())
        tag = state["tag"]
        server = next(p["pid"] for p in state["processes"] if p["role"] == "server")
        assert any(has_tag(pid, tag) for pid in listeners(port))  # the run's server listens
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        # Server and client die with the runner (parent-death signal): the server process goes
        # and no process of the run holds the port any more. (Whether *something* answers on
        # the port is not the question: on a busy machine another suite's server may take the
        # freed port within seconds.)
        assert wait_until(lambda: process_state(server) in ("", "Z"), 15)
        assert wait_until(lambda: not any(has_tag(pid, tag) for pid in listeners(port)), 15)
        # …and what left their process groups is stopped by the next run, by its tag.
        nxt = RunLock(root, "fake-rb", port, "20261130T120000.000Z-bbbbbbbb-0000")
        stopped = nxt.acquire(grace=3.0)
        nxt.release()
        assert tagged_pids(tag) == []
        assert all(s.command for s in stopped)
        assert list(root.rglob("*.tmp")) == []
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        with contextlib.suppress(Exception):
            for pid in tagged_pids(json.loads(lock.read_text())["tag"]):
                os.kill(pid, signal.SIGKILL)


def test_plan_reports_block_errors_with_their_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_wiki(tmp_path, free_port(), client_attrs="swep=\"C=1,2\" ")
    assert main(["runbook", "plan", "fake-rb", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "wiki/fake.md:11:51: RB003 error: unknown attribute 'swep'" in err


def test_plan_without_gpus_prints_the_plan_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "wiki" / "fake.md"
    make_wiki(tmp_path, free_port())
    page.write_text(page.read_text().replace("gpus=0", "gpus=1"))
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}/nonexistent")  # no nvidia-smi
    assert main(["runbook", "plan", "fake-rb", "--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "vllm serve fake-model" in out  # the whole plan, then the refusal


def test_unreadable_earlier_record_is_located_and_the_run_exits_nonzero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_wiki(tmp_path, free_port())
    folder = root / "runbooks" / "fake-rb"
    folder.mkdir(parents=True)
    (folder / "20261130T100000Z-00000000.json").write_text('{"schema_version": 2,\n  oops')
    assert run(root) == 1
    out, err = capsys.readouterr()
    assert "run " in out and ": ok" in out  # the run itself went well and was recorded
    assert len(list(folder.glob("*.json"))) == 2
    assert ("RGN006 error: cannot read records: runbooks/fake-rb/20261130T100000Z-00000000.json"
            ":2:3: not valid JSON") in out
    assert "pages not fully re-rendered" in err


def test_teardown_never_stops_a_process_of_another_run_with_the_same_run_id(
    tmp_path: Path,
) -> None:
    """Run ids repeat (tests, replays of one artifacts folder); tags never do."""
    from fakes.plans import fake_plan

    from wikitools.runbook.execution.execute import execute
    from wikitools.runbook.execution.processes import TAG_VAR

    plan = fake_plan(port=free_port(), sweep=("1",))
    other = subprocess.Popen(["sleep", "60"],
                             env={**os.environ, TAG_VAR: "20261130T100000Z-abcdef12"})
    try:
        record = execute(plan, root=tmp_path, handle_signals=False)
        assert record.ok, record.message
        assert record.server["run_tag"].startswith("20261130T100000Z-abcdef12-")
        assert other.poll() is None, "another run's process was stopped"
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("link", [".artifacts/fake-rb", ".artifacts"])
def test_a_committed_symlink_under_artifacts_is_never_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    port = free_port()
    root = make_wiki(tmp_path / "checkout", port)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(outside, target_is_directory=True)
    assert run(root) == 2
    err = capsys.readouterr().err
    assert f"{link}: a symlink where" in err and "Traceback" not in err
    assert list(outside.iterdir()) == []  # no server log, no script copy, no lock
    assert not listening(port)
    assert not (root / "runbooks").exists()


@pytest.mark.parametrize(("line", "marker"), [
    ("Maximum concurrency for 2,048 tokens per request: .x", "max_concurrency"),
    ("GPU KV cache size: " + "9" * 5000 + " tokens", "kv_cache_tokens"),
], ids=["concurrency-dot", "kv-size-5000-digits"])
def test_unreadable_capacity_log_line_fails_the_ready_step_and_keeps_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, marker: str
) -> None:
    port = free_port()
    root = make_wiki(tmp_path, port, prefix=f"echo '{line}'\n")
    assert run(root) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (path,) = (root / "runbooks" / "fake-rb").glob("*.json")
    data = json.loads(path.read_text())
    assert data["failed_step"] == "ready"
    ready = next(s for s in data["steps"] if s["name"] == "ready")
    assert ready["status"] == "failed"
    log = next(s for s in data["steps"] if s["name"] == "start")  # the server log's path
    assert ready["message"].startswith(".artifacts/fake-rb/"), ready["message"]
    assert f"/server.log:1: cannot read {marker} from the engine's log line" in ready["message"]
    assert len(ready["message"]) < 400  # 5,000 digits are not copied into the record
    assert log["status"] == "ok"
    assert next(s for s in data["steps"] if s["name"] == "teardown")["status"] == "ok"
    assert not listening(port)
