"""The fleet's parts that need no cluster: selection, what each task asks Ray for, the records
written for lost nodes (same keys as the executor's), the summary table, `wiki fleet plan`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fakes.plans import fake_plan
from harness import free_port

from wikitools.cli import main
from wikitools.cli.fleet import summary_table
from wikitools.core.errors import UsageError
from wikitools.fleet import node
from wikitools.fleet.records import LOST_POINT, Progress, lost_record, opening_record
from wikitools.fleet.select import ARCH_SHARE, demand, fits, is_stale, never_run, place, select
from wikitools.runbook.blocks.extract import load_runbooks
from wikitools.runbook.execution import locks
from wikitools.runbook.execution.execute import execute
from wikitools.runbook.execution.planned import Verdict
from wikitools.runbook.records.record import Record, dumps, write_record

TREE = Path(__file__).resolve().parent / "fleet" / "tree"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "wiki-root"
    shutil.copytree(TREE, root)
    return root


def _record(root: Path, runbook_id: str, blocks_hash: str, status: str = "ok",
            when: str = "20261101T100000Z") -> None:
    write_record(root, Record(runbook=runbook_id, page="wiki/x.md", blocks_hash=blocks_hash,
                              run_id=f"{when}-{blocks_hash[7:15]}", status=status,
                              started_at="2026-11-01T10:00:00Z",
                              finished_at="2026-11-01T10:05:00Z"))


# --------------------------------------------------------------------------- selection


def test_select_by_id_page_and_ref_in_wiki_order(tree: Path) -> None:
    runbooks, _, _ = load_runbooks(tree)
    got = select(runbooks, tree, ["fake-sm90", "wiki/fleet-one-gpu.md",
                                  "wiki/fleet-shapes.md#fake-fails"])
    assert [r.id for r in got] == ["fake-sm120-a", "fake-sm120-b", "fake-sm90", "fake-fails"]


def test_select_errors_are_usage_errors(tree: Path) -> None:
    runbooks, _, _ = load_runbooks(tree)
    with pytest.raises(UsageError, match="select runbooks"):
        select(runbooks, tree, [])
    with pytest.raises(UsageError, match=r"unknown runbook 'fake-sm9'; did you mean 'fake-sm90'\?"):
        select(runbooks, tree, ["fake-sm9"])
    with pytest.raises(UsageError, match=re.escape("no runbook on this page; did you mean "
                                                   "wiki/fleet-shapes.md?")):
        select(runbooks, tree, ["fleet-shapes.md"])


def test_stale_and_never_run(tree: Path) -> None:
    runbooks, _, _ = load_runbooks(tree)
    by_id = {r.id: r for r in runbooks}
    _record(tree, "fake-sm90", by_id["fake-sm90"].blocks_hash)  # current
    _record(tree, "fake-fails", "sha256:" + "0" * 64)  # measured with other blocks
    _record(tree, "fake-tp2", "sha256:" + "1" * 64, status="failed")  # never succeeded
    assert is_stale(tree, by_id["fake-fails"]) and not is_stale(tree, by_id["fake-sm90"])
    assert not is_stale(tree, by_id["fake-tp2"])
    assert never_run(tree, by_id["fake-sm120-a"]) and not never_run(tree, by_id["fake-tp2"])
    assert [r.id for r in select(runbooks, tree, stale=True)] == ["fake-fails"]
    unrun = [r.id for r in select(runbooks, tree, unrun=True)]
    assert "fake-sm90" not in unrun and "fake-tp2" not in unrun and "cpu-engine" in unrun
    both = [r.id for r in select(runbooks, tree, ["fake-sm90"], stale=True)]
    assert both == ["fake-sm90", "fake-fails"]
    assert len(select(runbooks, tree, every=True)) == len(runbooks)


# --------------------------------------------------------------------------- placement


def test_demand_gpus_architecture_and_cpu(tree: Path) -> None:
    runbooks, _, _ = load_runbooks(tree)
    by_id = {r.id: r for r in runbooks}
    d = demand(by_id["fake-tp2"])
    assert (d.num_gpus, d.num_cpus, dict(d.resources)) == (2, 0.0, {"sm120": ARCH_SHARE})
    cpu = demand(by_id["cpu-engine"])
    assert (cpu.num_gpus, cpu.num_cpus, dict(cpu.resources)) == (0, 1.0, {})
    node_a = {"GPU": 1.0, "sm120": 1.0, "CPU": 0.0}
    node_b = {"GPU": 2.0, "sm90": 1.0, "CPU": 4.0}
    assert fits(demand(by_id["fake-sm120-a"]), node_a)
    assert not fits(d, node_a)  # one GPU short
    assert not fits(cpu, node_a) and fits(cpu, node_b)
    assert place(by_id["fake-tp2"], [node_a, node_b]) is None
    assert place(by_id["fake-sm90"], [node_a, node_b]) == demand(by_id["fake-sm90"])


def test_place_picks_an_architecture_some_node_has(tree: Path) -> None:
    page = tree / "wiki" / "fleet-shapes.md"
    page.write_text(page.read_text().replace("gpus=1 arch=sm90 ", "gpus=1 arch=sm90,sm120 ", 1))
    runbooks, _, _ = load_runbooks(tree)
    rb = next(r for r in runbooks if r.id == "fake-sm90")
    assert place(rb, [{"GPU": 1.0, "sm120": 1.0}]).resources == {"sm120": ARCH_SHARE}
    assert place(rb, [{"GPU": 1.0, "sm90": 1.0}]).resources == {"sm90": ARCH_SHARE}


# --------------------------------------------------------------------------- records


def shape(value: object) -> object:
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())
                if k not in ("metrics", "markers", "timings", "samples")}
    if isinstance(value, list):
        return [shape(v) for v in value if isinstance(v, dict | list)][:1]
    return None


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, Record]:
    """A real executor run of a fake plan (fake server and client, 2 sweep points)."""
    root = tmp_path_factory.mktemp("exec")
    # A run id of its own: teardown stops every process carrying the run's tag, host-wide.
    plan = fake_plan(port=free_port(), run_id=f"20261130T100000Z-{uuid.uuid4().hex[:8]}")
    verdict = Verdict(checks=(), selected_gpus=(), host={"gpus": [], "gpu_count": 0,
                      "driver": None, "cuda": None, "topology": "none",
                      "hostname_hash": None, "cpu_only": True})
    record = execute(plan, root=root, verdict=verdict, handle_signals=False)
    assert record.ok, record.message
    return root, plan, record


@pytest.mark.xdist_group("fleet-executed")  # one executor run for both
def test_opening_and_lost_records_have_the_executor_record_keys(executed) -> None:
    _root, plan, record = executed
    started = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    opening = opening_record(plan, plan.verdict or Verdict((), (), dict(record.host)),
                             record.run_id, started)
    local = json.loads(dumps(record))
    assert {**shape(json.loads(dumps(opening))), "steps": []} == {**shape(local), "steps": []}
    assert opening.server == {**record.server, "model": None, "run_tag": None}
    progress = Progress()
    for step in ("preflight", "start", "ready", "warmup"):
        progress.started(step)
        progress.ended(step, "ok", 1.0, None)
    progress.started("client:bench[1]")
    progress.ended("client:bench[1]", "ok", 2.0, None)
    progress.started("client:bench[2]")
    lost = lost_record(opening, progress, "node n1 was lost during the run (NodeDiedError)",
                       datetime(2026, 11, 30, 10, 5, tzinfo=UTC))
    data = json.loads(dumps(lost))
    assert shape(data) == shape(local)
    assert (data["status"], data["failed_step"]) == ("failed", "client:bench[2]")
    assert data["finished_at"] == "2026-11-30T10:05:00Z"
    points = data["clients"][0]["points"]
    assert [(p["value"], p["status"]) for p in points] == [("1", "ok"), ("2", "failed")]
    assert points[0]["message"] == LOST_POINT and points[0]["metrics"] == {}
    assert [s["name"] for s in data["steps"]][-2:] == ["client:bench[1]", "client:bench[2]"]


@pytest.mark.xdist_group("fleet-executed")  # one executor run for both
def test_lost_between_steps_and_before_any(executed) -> None:
    _root, plan, record = executed
    started = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    opening = opening_record(plan, Verdict((), (), dict(record.host)), record.run_id, started)
    progress = Progress()
    for step in ("preflight", "start"):
        progress.started(step)
        progress.ended(step, "ok", 0.1, None)
    assert lost_record(opening, progress, "gone", started).failed_step == "ready"
    assert lost_record(opening, Progress(), "gone", started).failed_step == "preflight"


def test_summary_table() -> None:
    runbooks, _, _ = load_runbooks(TREE)
    by_id = {r.id: r for r in runbooks}
    from wikitools.fleet.driver import Outcome

    ok = Record(runbook="fake-sm90", page="p", blocks_hash="h", run_id="r", started_at="s",
                finished_at="f", status="ok", timings={"total_s": 12.25})
    failed = Record(runbook="fake-fails", page="p", blocks_hash="h", run_id="r", started_at="s",
                    finished_at="f", status="failed", failed_step="client:bench[1]",
                    message="client exited with code 1", timings={"total_s": 3.0})
    text = summary_table([
        Outcome(by_id["fake-sm90"], "ok", "worker-b", ok),
        Outcome(by_id["fake-fails"], "failed", "worker-b", failed, failed.message),
        Outcome(by_id["fake-eight"], "no-node", message="no node of the cluster has 8 GPUs"),
    ])
    assert text == (
        "runbook     node      status                     headline  duration\n"
        "fake-sm90   worker-b  ok                         -         12.2 s\n"
        "fake-fails  worker-b  failed at client:bench[1]  -         3.0 s\n"
        "fake-eight  -         no-node                    -         -\n"
        "1/3 ok\n"
        "fake-fails: client exited with code 1\n"
        "fake-eight: no node of the cluster has 8 GPUs\n"
    )


# --------------------------------------------------------------------------- node side


def test_ports_are_held_per_host(tree: Path, monkeypatch: pytest.MonkeyPatch,
                                 tmp_path: Path) -> None:
    monkeypatch.setenv(locks.STATE_ENV, str(tmp_path / "state"))
    folder = tmp_path / "state" / node.PORTS_DIR
    runbooks, _, _ = load_runbooks(tree)
    rb = next(r for r in runbooks if r.id == "fake-sm90")
    with node._port_for(rb, None) as first, node._port_for(rb, None) as second:
        assert first == rb.server.port  # the block's port, when free
        assert second != first  # held by the first run
        assert (folder / str(second)).read_text() == f"{os.getpid()}\n"
    assert list(folder.iterdir()) == []
    with node._port_for(rb, 12345) as asked:
        assert asked == 12345


def test_a_lost_nodes_port_hold_is_removed_from_the_port_folder(
        tree: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A node killed while holding a port leaves its hold file; the next run on the host, and
    the driver's tidy-up after a lost node, remove it (its lock is free: its holder is gone)."""
    monkeypatch.setenv(locks.STATE_ENV, str(tmp_path / "state"))
    runbooks, _, _ = load_runbooks(tree)
    rb = next(r for r in runbooks if r.id == "fake-sm90")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from wikitools.fleet import node\n"
         "held = node._hold(node.ports_dir(), 23456)\n"
         "print('held', flush=True)\n"
         "time.sleep(300)\n"],
        stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert node.remove_stale_holds() == []  # held: kept
    finally:
        holder.kill()  # the node is lost: nothing of it runs any more
        holder.wait()
    assert (node.ports_dir() / "23456").exists()
    assert node.remove_stale_holds() == ["23456"]
    assert list(node.ports_dir().iterdir()) == []
    (node.ports_dir() / "23457").write_text("1\n")
    with node._port_for(rb, None):
        assert not (node.ports_dir() / "23457").exists()


def test_run_job_runs_the_executor_and_sends_progress(tree: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The node side without Ray: the fake engine on PATH, no nvidia-smi (a CPU host)."""
    fakes = Path(__file__).resolve().parent / "fakes"
    monkeypatch.setenv("PATH", f"{fakes / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("WIKI_NVIDIA_SMI", str(tmp_path / "no-nvidia-smi"))
    monkeypatch.setenv(locks.STATE_ENV, str(tmp_path / "state"))
    runbooks, _, _ = load_runbooks(tree)
    rb = next(r for r in runbooks if r.id == "fake-sm90")
    sent: list[dict] = []
    data = node.run_job(node.Job(rb, str(tree), force=True, port=free_port(), submitted=1.0),
                        "n1", sent.append)
    record = Record.from_dict(data)
    assert record.ok, record.message
    assert [m["kind"] for m in sent][:2] == ["begin", "opening"]
    assert sent[-1] == {"runbook": "fake-sm90", "node_id": "n1", "kind": "record",
                        "record": data}
    steps = [(m["event"], m["step"]) for m in sent if m["kind"] == "event"]
    assert ("step-end", "ready") in steps
    # each serving point: an unrecorded warm-up run, then three measured runs
    assert [s for e, s in steps if e == "point-end" and s.startswith("client:bench[1]")] == [
        "client:bench[1] warm-up", "client:bench[1] run 1/3", "client:bench[1] run 2/3",
        "client:bench[1] run 3/3"]
    assert not (tree / "runbooks").exists()  # the node writes no record
    assert (tree / record.artifacts_dir / "server.log").is_file()  # its logs stay there


# --------------------------------------------------------------------------- command


def test_cli_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "plan", "wiki/fleet-one-gpu.md", "cpu-engine", "--root",
                 str(TREE)]) == 0
    assert capsys.readouterr().out == (
        "runbook       page                   asks for\n"
        "cpu-engine    wiki/cpu-engine.md     0 GPUs, 1 CPU\n"
        "fake-sm120-a  wiki/fleet-one-gpu.md  1 GPU, sm120\n"
        "fake-sm120-b  wiki/fleet-one-gpu.md  1 GPU, sm120\n"
    )


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], tree: Path) -> None:
    assert main(["fleet", "run", "--root", str(tree), "--yes"]) == 2
    assert "select runbooks" in capsys.readouterr().err
    assert main(["fleet", "run", "nope", "--root", str(tree), "--yes"]) == 2
    assert "unknown runbook 'nope'" in capsys.readouterr().err
    assert main(["fleet", "run", "--stale", "--root", str(tree), "--yes"]) == 0
    assert "no runbook selected" in capsys.readouterr().err
    assert main(["fleet", "run", "fake-sm90", "--retries", "-1", "--root", str(tree)]) == 2


def test_run_job_refuses_a_checkout_with_other_blocks(tree: Path) -> None:
    runbooks, _, _ = load_runbooks(tree)
    rb = next(r for r in runbooks if r.id == "fake-sm90")
    page = tree / "wiki" / "fleet-shapes.md"
    page.write_text(page.read_text().replace("--delay 0.5", "--delay 0.6", 1))
    sent: list[dict] = []
    with pytest.raises(node.CheckoutDiffers, match="other blocks for runbook 'fake-sm90'"):
        node.run_job(node.Job(rb, str(tree), port=free_port()), "n1", sent.append)
    assert [m["kind"] for m in sent] == ["begin"]


def test_cli_unreachable_cluster_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                   tree: Path) -> None:
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[fleet]'")
    port = free_port()  # nothing listens there
    assert main(["fleet", "run", "fake-sm90", "--address", f"127.0.0.1:{port}", "--yes",
                 "--root", str(tree)]) == 2
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}: Connection refused" in \
        capsys.readouterr().err
    assert main(["fleet", "run", "fake-sm90", "--address", "head-without-port", "--yes",
                 "--root", str(tree)]) == 2
    assert "expected HOST:PORT, ray://HOST:PORT or auto" in capsys.readouterr().err
    assert not (tree / "runbooks").exists()
