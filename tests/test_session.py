"""`runbook.session`: one runbook run without the CLI, as a caller on another thread (a fleet
worker) uses it: options as data, progress through a callback, record written, pages rendered."""

from __future__ import annotations

import json
import os
import threading

import pytest
from harness import FAKE_BIN, free_port, make_wiki

from wikitools.core.errors import UsageError
from wikitools.runbook.execution.host import port_free
from wikitools.runbook.session import RunOptions, prepare, run_runbook


@pytest.fixture
def fake_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_SERVER_ARGS", raising=False)
    monkeypatch.delenv("FAKE_BENCH_ARGS", raising=False)


def test_run_runbook_on_a_worker_thread(tmp_path, fake_path):
    port = free_port()
    root = make_wiki(tmp_path, port)
    events = []
    out = {}

    def work():
        out["result"] = run_runbook("fake-rb", root, RunOptions(sweep="C=2"), events.append)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "the run did not finish within 120 s"
    result = out["result"]
    assert result.record.status == "ok", result.record.message
    assert result.record_path.parent == root / "runbooks" / "fake-rb"
    data = json.loads(result.record_path.read_text())
    assert [p["value"] for p in data["clients"][0]["points"]] == ["2"]
    assert result.rendered == ("wiki/fake.md",)
    assert "| 2 |" in (root / "wiki/fake.md").read_text()
    ends = [(e.step, e.status) for e in events if e.kind in ("step-end", "point-end")]
    assert ends[0] == ("preflight", "ok") and ends[-1] == ("teardown", "ok")
    assert port_free(port)


def test_prepare_starts_nothing_and_checks_options(tmp_path):
    port = free_port()
    root = make_wiki(tmp_path, port)
    prepared = prepare("wiki/fake.md#fake-rb", root, RunOptions(render=False))
    assert prepared.runbook.id == "fake-rb"
    assert prepared.plan.artifacts_dir.endswith(prepared.run_id)
    assert not (root / prepared.plan.artifacts_dir).exists()
    with pytest.raises(UsageError, match="sweeps C"):
        prepare("fake-rb", root, RunOptions(sweep="X=1"))
    with pytest.raises(UsageError, match="expected 1-65535"):
        prepare("fake-rb", root, RunOptions(port=70000))
