"""`wiki fleet run` against a real multi-node Ray cluster in a network namespace made here.

Nodes (one cluster for the whole module, see fakes/ray_cluster.py):
- head: one CPU, the vLLM CPU engine first on PATH (runs the CPU-only runbook);
- worker-a: one GPU labelled sm120, an nvidia-smi replaying an RTX PRO 6000 host;
- worker-b: one GPU labelled sm90, an nvidia-smi replaying an H200 host;
- worker-k (added by the lost-node test): two sm120 GPUs, killed by PID mid-run.
GPUs are Ray's declared GPUs (`ray start --num-gpus`); workers run the fake engine and the fake
benchmark client (tests/fakes/bin/vllm). The driver runs as `ip netns exec … wiki fleet run`.
Every test ends with nothing of a run left: no server (FLEET_TEST_SERVER=1 in its environment),
no client; the module ends with no process of the cluster and no namespace.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fakes.ray_cluster import RayCluster, cmdline, fake_smi, tagged, why_not
from harness import free_port, wait_until

from wikitools.cli import main
from wikitools.runbook.records.record import Record, dumps

REPO = Path(__file__).resolve().parents[1]
TREE = Path(__file__).resolve().parent / "fleet" / "tree"
FAKE_BIN = Path(__file__).resolve().parent / "fakes" / "bin"
CAPTURES = Path(__file__).resolve().parent / "fixtures" / "nvidia-smi"
ENGINE_BIN = Path(os.environ.get("WIKI_ENGINE_VENV", REPO / ".venv-engine")) / "bin"
HAVE_ENGINE = (ENGINE_BIN / "vllm").is_file()

# One cluster for the module: under pytest-xdist every test of it runs on one worker.
pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray-cluster"),
              pytest.mark.skipif(why_not() is not None, reason=str(why_not()))]


# --------------------------------------------------------------------------- the cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path | None) -> Any:
    smi = tmp_path_factory.mktemp("smi")
    c = RayCluster(Path(sys.executable).parent)
    fake_path = f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}"
    head_env = {}
    if tiny_model is not None:
        head_env = {"PATH": f"{ENGINE_BIN}{os.pathsep}{os.environ['PATH']}",
                    "TINY_MODEL": str(tiny_model), "HF_HUB_OFFLINE": "1"}
    c.smi = smi  # type: ignore[attr-defined]
    try:
        c.make_namespace()
        c.start_node("head", head=True, num_cpus=1, env=head_env)
        c.start_nodes([
            {"name": "worker-a", "num_gpus": 1, "resources": {"sm120": 1},
                 "env": {"PATH": fake_path,
                      "WIKI_NVIDIA_SMI": str(fake_smi(smi, "rtxpro6000-x2", CAPTURES))}},
            {"name": "worker-b", "num_gpus": 1, "resources": {"sm90": 1},
                 "env": {"PATH": fake_path,
                      "WIKI_NVIDIA_SMI": str(fake_smi(smi, "h200-x2", CAPTURES))}},
        ])
        yield c
    finally:
        c.stop()
        assert c.pids() == [], "Ray processes left after stopping the cluster"
        assert not c.namespace_exists()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet") / "wiki-root"
    shutil.copytree(TREE, root)
    return root


class Fleet:
    """`wiki fleet run …` as a subprocess inside the namespace; stderr read line by line."""

    def __init__(self, cluster: RayCluster, root: Path, *args: str) -> None:
        argv = [sys.executable, "-m", "wikitools", "fleet", "run", *args, "--yes",
                "--address", cluster.address, "--root", str(root)]
        env = cluster.env("driver")
        self.proc = subprocess.Popen(cluster.netns(*argv), env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[str] = []  # stderr, as it comes
        self.out: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stderr, self.lines),
                                         daemon=True),
                        threading.Thread(target=self._read, args=(self.proc.stdout, self.out),
                                         daemon=True)]
        for t in self.readers:
            t.start()
        self.stdout = ""

    @staticmethod
    def _read(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float) -> None:
        def seen() -> bool:
            return any(re.search(pattern, line) for line in self.lines)

        wait_until(lambda: seen() or self.proc.poll() is not None, timeout)
        if seen():
            return
        self.proc.kill()
        pytest.fail(f"no line matching {pattern!r}\n{self.output}")

    def wait(self, timeout: float) -> int:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"wiki fleet run did not finish in {timeout:g} s\n{self.output}")
        finally:
            for t in self.readers:
                t.join(5)
            self.stdout = "".join(line + "\n" for line in self.out)
        return self.proc.returncode

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    @property
    def output(self) -> str:
        return f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def summary(stdout: str) -> dict[str, list[str]]:
    """Rows of the summary table by runbook id: [node, status, headline, duration]."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("runbook "))
    head = lines[start]
    cols = [head.index(n) for n in ("node", "status", "headline", "duration")]
    rows = {}
    for line in lines[start + 1:]:
        if re.match(r"^\d+/\d+ ok$", line):
            break
        bounds = [0, *cols, len(line) + 1]
        cells = [line[a:b].strip() for a, b in itertools.pairwise(bounds)]
        rows[cells[0]] = cells[1:]
    return rows


def records(root: Path, runbook_id: str) -> list[Path]:
    return sorted((root / "runbooks" / runbook_id).glob("*.json"))


def leftovers(cluster: RayCluster) -> list[str]:
    """Servers and clients a run started that are still alive."""
    pids = set(tagged("FLEET_TEST_SERVER", "1")) & set(cluster.pids())
    pids |= {p for p in cluster.pids() if re.search(r"fake_bench|bench serve", cmdline(p))}
    return [f"{p}: {cmdline(p)[:160]}" for p in sorted(pids)]


def wait_no_leftovers(cluster: RayCluster, timeout: float = 15.0) -> list[str]:
    wait_until(lambda: not leftovers(cluster), timeout, interval=0.2)
    return leftovers(cluster)


# --------------------------------------------------------------------------- one mixed run


MAIN = ["fake-sm120-a", "fake-sm120-b", "fake-sm90", "fake-fails", "fake-eight"]


@pytest.fixture(scope="module")
def main_run(cluster: RayCluster, tree: Path) -> Fleet:
    refs = [*MAIN, "wiki/cpu-engine.md"] if HAVE_ENGINE else MAIN
    run = Fleet(cluster, tree, *refs)
    run.code = run.wait(timeout=400)  # type: ignore[attr-defined]
    return run


def test_runbooks_are_placed_by_gpus_and_architecture(main_run: Fleet, tree: Path) -> None:
    assert main_run.code == 1, main_run.output  # type: ignore[attr-defined]
    rows = summary(main_run.stdout)
    assert rows["fake-sm120-a"][:2] == ["worker-a", "ok"], main_run.output
    assert rows["fake-sm120-b"][:2] == ["worker-a", "ok"]
    assert rows["fake-sm90"][:2] == ["worker-b", "ok"]
    assert rows["fake-fails"][:2] == ["worker-b", "failed at client:bench[1] warm-up"]
    assert rows["fake-eight"][:2] == ["-", "no-node"]
    assert re.fullmatch(r"[\d,.]+ output tok/s", rows["fake-sm120-a"][2])
    assert re.fullmatch(r"\d+\.\d s", rows["fake-sm90"][3])
    assert "fake-eight: no node of the cluster has 8 GPUs and the resource sm120" in \
        main_run.stdout
    assert "fake-fails: client exited with code 1" in main_run.stdout
    assert records(tree, "fake-eight") == []


def test_progress_streams_back_prefixed_by_node(main_run: Fleet) -> None:
    err = main_run.stderr
    for node, rb in (("worker-a", "fake-sm120-a"), ("worker-b", "fake-sm90")):
        assert f"[{node}] {rb}: started (pid " in err
        assert f"[{node}] {rb}: ok ready" in err
        assert f"[{node}] {rb}: ok client:bench[1]" in err
        assert f"[{node}] {rb}: ok teardown" in err
    assert ("[worker-b] fake-fails: failed client:bench[1] warm-up: client exited with code 1"
            in err)
    assert "[driver] fake-eight: no-node" in err


def test_records_come_back_to_the_driver_in_local_form(
    main_run: Fleet, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same runbook run locally, with the host replaying the same capture as worker-a.
    local = tmp_path / "local"
    shutil.copytree(TREE, local)
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("WIKI_NVIDIA_SMI", str(fake_smi(tmp_path, "rtxpro6000-x2", CAPTURES)))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert main(["runbook", "run", "fake-sm120-a", "--root", str(local), "--yes",
                 "--port", str(free_port()), "--no-render"]) == 0
    (local_path,) = records(local, "fake-sm120-a")
    local_rec = json.loads(local_path.read_text(encoding="utf-8"))

    for rb, gpu in (("fake-sm120-a", "RTX PRO 6000"), ("fake-sm90", "H200"),
                    ("fake-fails", "H200")):
        (path,) = records(tree, rb)
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        assert dumps(Record.from_dict(data)) == text  # the writer's own bytes
        assert shape(data) == shape(local_rec), rb
        assert gpu in data["host"]["gpus"][0]["name"]  # the host is the node that ran it
        assert data["host"]["gpu_count"] == 1
    fleet_rec = json.loads(records(tree, "fake-sm120-a")[0].read_text(encoding="utf-8"))
    assert fleet_rec["status"] == "ok"
    assert [s["name"] for s in fleet_rec["steps"]] == [s["name"] for s in local_rec["steps"]]
    assert fleet_rec["server"]["env"] == local_rec["server"]["env"]


def shape(value: Any) -> Any:
    """The keys of a record, recursively (values ignored; list items merged). The receipt's
    `files` list, like metrics and markers, holds what the run happened to touch."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())
                if k not in ("metrics", "markers", "timings", "samples", "files")}
    if isinstance(value, list):
        items = [shape(v) for v in value if isinstance(v, dict | list)]
        return items[:1]
    return None


def test_pages_are_rendered_once_at_the_end(main_run: Fleet, tree: Path) -> None:
    out = main_run.stdout.splitlines()
    rendered = sorted(line for line in out if line.startswith("rendered: "))
    expected = ["rendered: wiki/fleet-one-gpu.md", "rendered: wiki/fleet-shapes.md"]
    if HAVE_ENGINE:
        expected.insert(0, "rendered: wiki/cpu-engine.md")
    assert [line for line in rendered if line.endswith(".md")] == expected
    # the pages' charts, written as files beside them, once each
    charts = [line for line in rendered if not line.endswith(".md")]
    assert charts and len(set(charts)) == len(charts), rendered
    assert all(re.fullmatch(r"rendered: wiki/charts/(cpu-engine|fleet-one-gpu|fleet-shapes)"
                            r"-[0-9a-f]{10}\.svg", line) for line in charts), charts
    tally = next(i for i, line in enumerate(out) if re.fullmatch(r"\d+/\d+ ok", line))
    assert min(out.index(line) for line in rendered) > tally  # after every run ended
    page = (tree / "wiki" / "fleet-one-gpu.md").read_text(encoding="utf-8")
    (rec,) = records(tree, "fake-sm120-a")
    assert f"Record: `runbooks/fake-sm120-a/{rec.name}`" in page
    assert main(["runbook", "render", "--check", "--root", str(tree)]) == 0


@pytest.mark.engine
@pytest.mark.skipif(not HAVE_ENGINE, reason=f"engine environment missing ({ENGINE_BIN.parent})")
def test_real_vllm_cpu_runbook_runs_on_the_node_with_the_engine(main_run: Fleet,
                                                                tree: Path) -> None:
    rows = summary(main_run.stdout)
    assert rows["cpu-engine"][:2] == ["head", "ok"], main_run.output
    (path,) = records(tree, "cpu-engine")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["engine"]["version"].startswith("0.32")
    assert data["host"]["cpu_only"] is True
    (point,) = data["clients"][0]["points"]
    assert point["metrics"]["completed"] == 8 and point["metrics"]["output_throughput"] > 0
    assert "[head] cpu-engine: ok ready" in main_run.stderr


def test_nothing_of_the_runs_is_left(main_run: Fleet, cluster: RayCluster) -> None:
    assert wait_no_leftovers(cluster) == []


# --------------------------------------------------------------------------- faults


def test_ctrl_c_cancels_and_every_node_tears_down(cluster: RayCluster, tree: Path,
                                                  main_run: Fleet) -> None:
    run = Fleet(cluster, tree, "slow-sm120", "slow-sm90", "queued-sm120")
    run.wait_for(r"\[worker-a\] slow-sm120: client:bench\[1\]", 60)
    run.wait_for(r"\[worker-b\] slow-sm90: client:bench\[1\]", 60)
    t = time.monotonic()
    run.proc.send_signal(signal.SIGINT)
    assert run.wait(timeout=60) == 130, run.output
    assert time.monotonic() - t < 30
    assert "interrupted: cancelling" in run.stderr
    rows = summary(run.stdout)
    assert rows["slow-sm120"][:2] == ["worker-a", "failed at client:bench[1] warm-up"], run.output
    assert rows["slow-sm90"][:2] == ["worker-b", "failed at client:bench[1] warm-up"]
    assert rows["queued-sm120"][1] == "cancelled"
    assert records(tree, "queued-sm120") == []
    for rb in ("slow-sm120", "slow-sm90"):
        (path,) = records(tree, rb)
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["message"] == "interrupted by SIGINT"
        teardown = next(s for s in data["steps"] if s["name"] == "teardown")
        assert teardown["status"] == "ok"
    assert wait_no_leftovers(cluster) == []


@pytest.fixture(scope="module")
def lost_run(cluster: RayCluster, tree: Path, main_run: Fleet) -> Fleet:
    """A fleet run whose node (worker-k, started for it) is killed mid-run."""
    smi = fake_smi(cluster.smi, "rtxpro6000-x2", CAPTURES)  # type: ignore[attr-defined]
    cluster.start_node("worker-k", num_gpus=2, resources={"sm120": 1},
                       env={"PATH": f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
                            "WIKI_NVIDIA_SMI": str(smi)})
    run = Fleet(cluster, tree, "fake-tp2")
    run.wait_for(r"\[worker-k\] fake-tp2: client:bench\[1\]", 60)
    cluster.kill_node("worker-k")
    run.code = run.wait(timeout=90)  # type: ignore[attr-defined]
    return run


def test_a_node_lost_mid_run_is_a_recorded_failure(cluster: RayCluster, tree: Path,
                                                   lost_run: Fleet) -> None:
    run = lost_run
    assert run.code == 1, run.output  # type: ignore[attr-defined]
    rows = summary(run.stdout)
    assert rows["fake-tp2"][:2] == ["worker-k", "lost at client:bench[1] warm-up"], run.output
    (path,) = records(tree, "fake-tp2")
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert dumps(Record.from_dict(data)) == text
    assert data["status"] == "failed" and data["failed_step"] == "client:bench[1] warm-up"
    assert data["message"].startswith("node worker-k was lost during the run")
    assert data["host"]["gpu_count"] == 2  # what worker-k's preflight saw
    assert [s["name"] for s in data["steps"]][:4] == ["preflight", "start", "ready", "warmup"]
    assert cluster.node_pids("worker-k") == []
    assert wait_no_leftovers(cluster) == []


def test_a_lost_nodes_port_hold_is_removed_from_the_fleets_port_folder(lost_run: Fleet) -> None:
    folder = Path(os.environ["WIKI_STATE_DIR"]) / "fleet-ports"
    assert sorted(p.name for p in folder.iterdir()) == [], lost_run.output


def test_ray_output_on_stdout_carries_a_node_prefix(main_run: Fleet, lost_run: Fleet) -> None:
    """stdout holds the summary and the pages rendered; anything else a node or Ray says (a
    raylet's crash dump when a node is lost) is a line with its node's name in front."""
    for run in (main_run, lost_run):
        lines = run.stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("runbook "))
        before = lines[:start]
        assert all(re.match(r"^\[[^\]]+\] ", line) for line in before), run.output


def test_progress_hub_lives_on_the_head_node(main_run: Fleet) -> None:
    assert "[driver] -: progress collected on the head node head" in main_run.lines, \
        main_run.output


def test_a_task_that_fails_on_its_node_is_reported_without_a_record(
    cluster: RayCluster, tree: Path, main_run: Fleet
) -> None:
    before = records(tree, "fake-sm90")
    run = Fleet(cluster, tree, "fake-sm90", "--workdir", "/nonexistent-wiki-root")
    assert run.wait(timeout=60) == 1, run.output
    node, status = summary(run.stdout)["fake-sm90"][:2]
    # The node's name travels with its progress messages; when an earlier test's lost node took
    # the message collector with it, the summary cannot name the node ("-").
    assert status == "error" and node in ("worker-b", "-"), run.output
    assert ("fake-sm90: FileNotFoundError: the wiki root /nonexistent-wiki-root does not exist "
            "on this node") in run.stdout, run.output
    assert records(tree, "fake-sm90") == before
