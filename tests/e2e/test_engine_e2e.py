"""End-to-end runbooks against a real vLLM (CPU build) serving a tiny model with dummy weights.

`wiki runbook run` is run as a subprocess on a copy of tests/e2e/tree, with the engine
environment's bin directory first on PATH (that is how the executor finds `vllm` and `python`
for the clients) and TINY_MODEL naming a freshly generated tiny model. Every test ends by checking
that nothing is left: no process carrying this test's marker variable in its environment, the
server's process group gone, and the port free.

Needs `.venv-engine` from `scripts/setup-engine-env.sh`; skipped with that reason otherwise.
The real server is started three times (success, failing client, Ctrl-C); the never-ready test
gives up after 5 s and the other faults never get a server up.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import (
    BAD_MODEL,
    ENGINE_BIN,
    MAKE_MODEL,
    Run,
    assert_failed,
    describe,
    free_port,
    needs_engine,
    port_free,
    step,
    tagged_pids,
)

from wikitools.runbook.execution.processes import group_members

TREE = Path(__file__).resolve().parent / "tree"

pytestmark = list(needs_engine)

SERVING_KEYS = (
    "completed",
    "request_throughput",
    "output_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
)


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "wiki-root"
    shutil.copytree(TREE, root)
    return root


class EngineRun(Run):
    """A run of the engine tree: its own free port; two measured runs per point and no warm-up
    run (the defaults are three and one) keep the suite short on 2 cores; the fake-engine tests
    run the defaults."""

    def __init__(self, root: Path, runbook: str, tiny_model: Path) -> None:
        port = free_port()
        super().__init__(root, runbook, port=port, model=tiny_model,
                         args=["--port", str(port), "--repeats", "2", "--no-warmup"])

    def server_pgid(self) -> int | None:
        """The server's process group: the API server's pid as vLLM logs it (bash execs the
        single command, so that pid leads the group the executor created)."""
        log = self.artifacts() / "server.log"
        if not log.is_file():
            return None
        m = re.search(r"\(APIServer pid=(\d+)\)", log.read_text(errors="replace"))
        return int(m[1]) if m else None

    def leftovers(self) -> list[str]:
        pgid = self.server_pgid()
        pids = sorted(set(tagged_pids(self.tag)) | set(group_members(pgid) if pgid else ()))
        return [f"process {line}" for line in describe(pids).splitlines()]


@pytest.fixture
def make_run(tree: Path, tiny_model: Path) -> Iterator[Callable[[str], EngineRun]]:
    runs: list[EngineRun] = []

    def make(runbook: str) -> EngineRun:
        run = EngineRun(tree, runbook, tiny_model)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.cleanup()


def region(page_text: str, client: str) -> str:
    m = re.search(
        rf"<!-- wiki:results runbook=cpu-smoke view=serving client={re.escape(client)} -->\n"
        r"(.*?)<!-- wiki:end[^>]*-->",
        page_text, re.S,
    )
    assert m, f"no results region for client {client}"
    return m[1]


def table(body: str) -> tuple[list[str], list[list[str]]]:
    """The region's full table (every metric, one click away under "All metrics")."""
    folded = body.split("All metrics</summary>", 1)
    assert len(folded) == 2, f"no folded full table in region:\n{body}"
    rows = [line.strip() for line in folded[1].split("</details>", 1)[0].splitlines()
            if line.startswith("|")]
    assert len(rows) >= 3, f"no table in region:\n{body}"

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    return cells(rows[0]), [cells(r) for r in rows[2:]]


def column_key(header: str) -> str | None:
    h = header.lower()
    if "each run" in h:
        return None
    for metric in ("ttft", "tpot", "itl"):
        if metric in h:
            # Tables show medians unless the header names another statistic.
            stat = "p99" if "p99" in h else "mean" if "mean" in h else "median"
            return f"{stat}_{metric}_ms"
    if "req/s" in h or "request" in h:
        return "request_throughput"
    if "output" in h and "tok" in h:
        return "output_throughput"
    if "total" in h and "tok" in h:
        return "total_token_throughput"
    if "ok" in h or "success" in h:
        return "ok/total"
    return None


def assert_cell(cell: str, value: float, where: str) -> None:
    """The cell shows `value` rounded to the cell's own number of decimals."""
    text = cell.replace(",", "")
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    shown = float(text)
    assert math.isclose(shown, value, abs_tol=0.5 * 10**-decimals + 1e-9), (
        f"{where}: table shows {cell}, record has {value}"
    )


# --------------------------------------------------------------------------- success


def _assert_serving_points(run, rec: dict, tp: dict) -> None:
    # vllm bench serve, two sweep points: the record holds the client's own numbers.
    assert tp["kind"] == "serving" and tp["sweep_var"] == "CONCURRENCY"
    assert [p["value"] for p in tp["points"]] == ["1", "2"]
    assert (tp["repeats"], tp["warmup"]) == (2, False)
    for point in tp["points"]:
        assert point["status"] == "ok", point
        assert point["result_file"].startswith(rec["artifacts_dir"] + "/")
        assert len(point["samples"]) == 2
        for sample in point["samples"]:
            own = json.loads((run.root / sample["result_file"]).read_text())
            assert own["max_concurrency"] == int(point["value"])  # the sweep reached the client
            assert own["completed"] == own["num_prompts"] == 8 and own["failed"] == 0
            for key in (*SERVING_KEYS, "num_prompts", "total_token_throughput"):
                assert sample["metrics"][key] == own[key], (point["value"], key)
        for key in (*SERVING_KEYS, "total_token_throughput"):  # the point: their median
            both = [s["metrics"][key] for s in point["samples"]]
            assert math.isclose(point["metrics"][key], sum(both) / 2), (point["value"], key)
        assert point["metrics"]["spec_decode_acceptance"] is None


def _assert_sglang_point(run, sg: dict) -> None:
    # SGLang's benchmark client (JSONL, last line) against the same server.
    (point,) = sg["points"]
    assert point["status"] == "ok", point
    for sample in point["samples"]:
        lines = (run.root / sample["result_file"]).read_text().splitlines()
        own = json.loads(lines[-1])
        assert own["backend"] == "vllm" and own["completed"] == 8
        for key in SERVING_KEYS:
            assert sample["metrics"][key] == own[key], key
        assert sample["metrics"]["total_token_throughput"] == own["total_throughput"]


def test_cpu_smoke_runbook_end_to_end(make_run) -> None:
    run = make_run("cpu-smoke")
    page = run.root / "wiki/cpu-smoke.md"
    before = page.read_text()
    rc = run(timeout=1200)
    assert rc == 0, run.output
    rec = run.record()

    assert rec["schema_version"] == 2
    assert rec["runbook"] == "cpu-smoke"
    assert rec["page"] == "wiki/cpu-smoke.md"
    assert rec["status"] == "ok" and rec["failed_step"] is None and rec["message"] is None
    assert run.record_path().stem == rec["run_id"]
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{8}-[0-9a-f]{8}", rec["run_id"])
    assert rec["run_id"].split("-")[1] == rec["blocks_hash"].removeprefix("sha256:")[:8]
    assert rec["engine"]["name"] == "vllm"
    assert rec["engine"]["version"].startswith("0.32.0")
    assert rec["host"]["cpu_only"] is True and rec["host"]["gpu_count"] == 0
    assert rec["server"]["port"] == run.port
    assert f"--port {run.port}" in rec["server"]["command"]
    assert rec["server"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert rec["server"]["log_tail"] == []
    # 1 GiB of KV cache / (2 layers x 1 KV head x 64 dims x K and V x 2 bytes) = 2,097,152 tokens,
    # read from the real log line "CPU KV cache size: 2,097,152 tokens, ...".
    assert rec["markers"]["kv_cache_tokens"] == 2_097_152
    names = [s["name"] for s in rec["steps"]]
    for expected in ("preflight", "start", "ready", "client:throughput[1] run 1/2",
                     "client:throughput[1] run 2/2", "client:throughput[2] run 2/2",
                     "client:sglang-client run 1/2", "client:sglang-client run 2/2", "teardown"):
        assert expected in names, names
    assert all(s["status"] == "ok" for s in rec["steps"]), rec["steps"]
    assert 0 < rec["timings"]["ready_s"] < 600
    assert rec["timings"]["teardown_s"] < 10

    clients = {c["name"]: c for c in rec["clients"]}
    assert set(clients) == {"throughput", "sglang-client"}

    tp, sg = clients["throughput"], clients["sglang-client"]
    _assert_serving_points(run, rec, tp)
    _assert_sglang_point(run, sg)

    # The page's tables were regenerated from the record, one row per point.
    after = page.read_text()
    assert after != before
    for client, points in (("throughput", tp["points"]), ("sglang-client", sg["points"])):
        body = region(after, client)
        assert rec["run_id"] in body, body
        header, rows = table(body)
        assert len(rows) == len(points)
        for row, point in zip(rows, points, strict=True):
            m = point["metrics"]
            if point["value"] is not None:
                assert row[0] == point["value"]
            checked = 0
            where = f"{client}[{point['value']}]"
            for head, cell in zip(header, row, strict=True):
                key = column_key(head)
                if head == "runs":
                    assert cell == str(len(point["samples"]))
                    checked += 1
                elif "each run" in head:
                    parts = cell.split(", ")
                    assert len(parts) == len(point["samples"]), cell
                    for part, sample in zip(parts, point["samples"], strict=True):
                        assert_cell(part, sample["metrics"]["output_throughput"], where)
                    checked += 1
                elif key == "ok/total":
                    assert cell == f"{m['completed']}/{m['num_prompts']}"
                    checked += 1
                elif key is not None and key in m:
                    assert_cell(cell, m[key], f"{where} {head}")
                    checked += 1
            assert checked == len(header) - 1, header  # every column after the point's name
    # The committed tables now match the records: render --check is clean.
    check = subprocess.run(
        [sys.executable, "-m", "wikitools", "runbook", "render", "--check"],
        cwd=run.root, env=run.env, capture_output=True, text=True, timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr

    run.assert_nothing_left()


# --------------------------------------------------------------------------- faults


def test_server_exits_during_startup(make_run) -> None:
    run = make_run("cpu-bad-model")
    rc = run(timeout=600)
    # Starting is only spawning the command; the executor notices the dead process while it
    # waits for readiness.
    rec = assert_failed(run, rc, "ready")
    tail = "\n".join(rec["server"]["log_tail"])
    assert "/nonexistent/tiny-model" in tail, tail
    # The one-line message says why (the log's own error line), not just that a traceback
    # started. It opens with the exit when vLLM exits within FATAL_GRACE_S of that line, and
    # with the line itself when its shutdown takes longer (as on a loaded host).
    assert rec["message"] in (f"server exited with code 1 during start-up: {BAD_MODEL}",
                              f"fatal log line: {BAD_MODEL}"), rec["message"]
    # No client ran: its points are absent or recorded as skipped.
    assert all(p["status"] == "skipped" for c in rec["clients"] for p in c["points"])


def test_server_never_ready_times_out(make_run) -> None:
    run = make_run("cpu-never-ready")
    rc = run(timeout=300)
    rec = assert_failed(run, rc, "ready")
    ready = step(rec, "ready")
    assert ready["status"] == "timeout", ready
    assert "not ready after 5 s" in rec["message"], rec["message"]
    # Gave up after 5 s and stopped a server that was still starting: far below a full start-up.
    assert rec["timings"]["total_s"] < 5 + 20 + 15, rec["timings"]
    # vLLM has printed little or nothing after 5 s; the log file exists all the same.
    assert (run.artifacts() / "server.log").is_file()


def test_client_fails(make_run) -> None:
    run = make_run("cpu-bad-client")
    rc = run(timeout=1200)
    rec = assert_failed(run, rc, "client:bad-flag run 1/2")
    assert step(rec, "ready")["status"] == "ok"
    assert "exited with code 2" in rec["message"], rec["message"]
    (client,) = rec["clients"]
    (point,) = client["points"]
    assert point["status"] == "failed" and point["metrics"] == {}
    tail = "\n".join(rec["server"]["log_tail"])
    assert "unrecognized arguments: --no-such-flag" in tail, tail


def test_port_already_in_use(make_run) -> None:
    run = make_run("cpu-smoke")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", run.port))
        busy.listen()
        rc = run(timeout=120)
        rec = run.record()
        assert rc == 1, run.output
        assert rec["status"] == "failed" and rec["failed_step"] == "preflight"
        assert f"port {run.port}" in rec["message"] and "in use" in rec["message"]
        assert step(rec, "preflight")["status"] == "failed"
        assert "start" not in [s["name"] for s in rec["steps"]]
        assert not (run.artifacts() / "server.log").exists()
        assert not tagged_pids(run.tag)
        # The executor left the port's owner alone.
        assert not port_free(run.port)
    # A refused run changes no results region.
    assert (run.root / "wiki/cpu-smoke.md").read_text() == (TREE / "wiki/cpu-smoke.md").read_text()


def test_tiny_model_is_deterministic(tmp_path: Path, tiny_model: Path) -> None:
    again = tmp_path / "again"
    script = str(MAKE_MODEL)
    subprocess.run([str(ENGINE_BIN / "python"), script, str(again), "--preset", "tiny"],
                   check=True, capture_output=True, timeout=120)
    names = sorted(p.name for p in tiny_model.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    for name in names:
        assert (tiny_model / name).read_bytes() == (again / name).read_bytes(), name
    config = json.loads((tiny_model / "config.json").read_text())
    vocab = json.loads((tiny_model / "tokenizer.json").read_text())["model"]["vocab"]
    assert config["head_dim"] == 64 and config["vocab_size"] == len(vocab)
    check = subprocess.run([str(ENGINE_BIN / "python"), script, str(again), "--preset", "tiny",
                            "--check"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout
