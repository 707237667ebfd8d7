"""Executor lifecycle against the fake OpenAI-compatible server: readiness, markers, clients,
failures at every stage, Ctrl-C, and that nothing is left running afterwards."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.plans import fake_plan
from harness import free_port, wait_until

from wikitools.runbook.engines import markers
from wikitools.runbook.execution import execute as ex
from wikitools.runbook.execution import host, processes
from wikitools.runbook.records.record import read_record

FAKES = Path(__file__).resolve().parent / "fakes"


def pgids(log: Path) -> list[int]:
    """Process groups the fake server/client reported in their logs."""
    text = log.read_text() if log.exists() else ""
    return [int(m) for m in re.findall(r"FAKE_PID \d+ PGID (\d+)", text)]


def assert_gone(root: Path, record) -> None:
    art = root / record.artifacts_dir
    groups = [g for log in art.glob("*.log") for g in pgids(log)]
    for g in groups:
        assert not processes.group_alive(g), f"process group {g} still alive"
    assert host.port_free(record.server["port"])


def run(tmp_path: Path, **kw):
    events = []

    def on_event(e):
        events.append((time.time(), e))

    plan = fake_plan(port=free_port(), **kw)
    record = ex.execute(plan, root=tmp_path, on_event=on_event)
    return record, events


def test_happy_path_record(tmp_path):
    record, _events = run(tmp_path, server_args="--spec --delay 0.4 --unhealthy 0.4")
    assert record.status == "ok", record.message
    assert record.failed_step is None
    names = [s.name for s in record.steps]
    assert names == ["preflight", "start", "ready", "warmup", "client:bench[1]",
                     "client:bench[2]", "teardown"]
    assert all(s.status == "ok" for s in record.steps)
    (client,) = record.clients
    assert client.sweep_var == "C"
    assert [p.value for p in client.points] == ["1", "2"]
    for point in client.points:
        raw = json.loads((tmp_path / point.result_file).read_text())
        for key in ("completed", "request_throughput", "output_throughput", "median_ttft_ms",
                    "p99_itl_ms", "total_token_throughput"):
            assert point.metrics[key] == raw[key]
        # 2 accepted of 3 drafted per token (fake counters), measured as deltas around the point.
        assert point.metrics["spec_decode_acceptance"] == pytest.approx(2 / 3)
    assert record.markers["kv_cache_tokens"] == 123456
    assert record.markers["attention_backend"] == "FLASH_ATTN"
    assert record.markers["max_concurrency"] == 60.28
    assert record.markers["kv_cache_gib"] == 1.5
    assert record.markers["flash_attn_version"] == 2
    assert record.engine["version"] == "0.0.0+fake"
    assert record.server["model"] == "fake-model"
    assert record.server["log_tail"] == []
    assert record.timings["ready_s"] >= record.timings["health_s"]
    assert_gone(tmp_path, record)


def test_readiness_is_declared_at_the_first_healthy_answer(tmp_path):
    record, _events = run(tmp_path, server_args="--delay 0.6 --unhealthy 0.6 --log-requests",
                          sweep=("1",))
    assert record.status == "ok", record.message
    log = (tmp_path / record.artifacts_dir / "server.log").read_text()
    before, after = log.split("READY_AT", 1)
    answers = re.findall(r"REQUEST (\S+ \S+ \d+)", before)
    assert answers and set(answers) == {"GET /health 503"}  # polled while it was starting
    # The first poll after the server turned healthy ends the wait: the tiny completion (the
    # model list, then a completion) comes next, never a second poll. The wait after turning
    # healthy is one poll interval at most.
    later = re.findall(r"REQUEST (\S+ \S+ \d+)", after)
    completion = next(i for i, a in enumerate(later) if a.startswith("POST "))
    assert later[:completion + 1] == ["GET /health 200", "GET /v1/models 200",
                                      "POST /v1/completions 200"], later
    assert ex.POLL_S <= 0.5


def test_server_exits_during_startup(tmp_path):
    record, _ = run(tmp_path, server_args="--exit-code 3")
    assert record.status == "failed"
    assert record.failed_step == "ready"
    assert "exited with code 3" in record.message
    assert any("ValueError: fake start-up failure" in line for line in record.server["log_tail"])
    assert all(p.status == "skipped" for p in record.clients[0].points)
    assert record.steps[-1].name == "teardown"
    assert_gone(tmp_path, record)


def test_never_ready_times_out(tmp_path):
    record, _ = run(tmp_path, server_args="--never-ready --delay 0.1", ready_timeout=1.5)
    assert record.failed_step == "ready"
    ready = next(s for s in record.steps if s.name == "ready")
    assert ready.status == "timeout"
    assert "not ready after 1.5 s" in record.message
    assert "HTTP 503" in record.message
    assert_gone(tmp_path, record)


def test_fatal_log_line_fails_fast(tmp_path, monkeypatch):
    monkeypatch.setattr(ex, "FATAL_GRACE_S", 0.3)
    record, _ = run(tmp_path, server_args="--fatal", ready_timeout=60)
    assert record.failed_step == "ready"
    # Ended by the log line, not by the 60 s timeout.
    assert next(s for s in record.steps if s.name == "ready").status == "failed"
    assert "fatal log line" in record.message
    assert "torch.OutOfMemoryError: CUDA out of memory" in record.message
    assert any("CUDA out of memory" in line for line in record.server["log_tail"])
    assert_gone(tmp_path, record)


def test_client_fails(tmp_path):
    record, _ = run(tmp_path, bench_args="--fail")
    assert record.failed_step == "client:bench[1]"
    assert "exited with code 1" in record.message
    points = record.clients[0].points
    assert [p.status for p in points] == ["failed", "skipped"]
    assert any("fake client failure" in line for line in record.server["log_tail"])
    assert_gone(tmp_path, record)


def test_client_writes_no_result(tmp_path):
    record, _ = run(tmp_path, bench_args="--no-result", sweep=("1",))
    assert record.failed_step == "client:bench[1]"
    assert "was not written" in record.message


def test_client_timeout(tmp_path):
    record, _ = run(tmp_path, bench_args="--sleep 30", client_timeout=1.0, sweep=("1",))
    assert record.failed_step == "client:bench[1]"
    assert record.clients[0].points[0].status == "timeout"
    assert_gone(tmp_path, record)


def test_port_already_in_use(tmp_path):
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        record = ex.execute(fake_plan(port=port), root=tmp_path)
        assert record.failed_step == "preflight"
        assert f"port {port} is already in use" in record.message
        teardown = record.steps[-1]
        assert (teardown.name, teardown.status) == ("teardown", "skipped")
        assert not (tmp_path / record.artifacts_dir / "server.log").exists()
        # The process holding the port was left alone.
        assert not host.port_free(port)


def test_server_ignoring_term_is_killed_with_its_children(tmp_path):
    record, _ = run(tmp_path, server_args="--ignore-term --child", stop_timeout=0.5,
                    sweep=("1",))
    assert record.status == "ok", record.message
    teardown = record.steps[-1]
    assert "needed SIGKILL" in teardown.message
    assert record.timings["teardown_s"] < 10
    assert_gone(tmp_path, record)


def test_sigint_during_client_records_and_cleans_up(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(FAKES / "run_plan.py"), str(tmp_path), str(port), "--",
         "--sleep", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    art = tmp_path / ".artifacts/fake-rb/20261130T100000Z-abcdef12"
    log = art / "bench-1.log"
    if not wait_until(lambda: log.exists() and "Starting main benchmark run" in log.read_text(),
                      20, interval=0.05):
        proc.kill()
        pytest.fail("client never started")
    client_groups = pgids(art / "bench-1.log")
    server_groups = pgids(art / "server.log")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    record = read_record(Path(out.strip()))
    assert record.status == "failed"
    assert record.failed_step == "client:bench[1]"
    assert record.message == "interrupted by SIGINT"
    assert record.clients[0].points[0].status == "failed"
    assert record.steps[-1].name == "teardown" and record.steps[-1].status == "ok"
    for g in client_groups + server_groups:
        assert not processes.group_alive(g)
    assert host.port_free(port)


def test_scan_markers_on_vllm_032_merged_line():
    lines = [
        "INFO 11-30 08:00:00 [kv_cache_utils.py:1] CPU KV cache size: 2,097,152 tokens, "
        "Maximum concurrency for 1,024 tokens per request: 2048.00x",
        "INFO Using AttentionBackendEnum.TRITON_ATTN backend.",
    ]
    m = markers.scan_markers(lines)
    assert m["kv_cache_tokens"] == 2097152
    assert m["kv_cache_device"] == "CPU"
    assert m["max_concurrency"] == 2048.0
    assert m["max_concurrency_tokens"] == 1024
    assert m["attention_backend"] == "TRITON_ATTN"


def test_spec_acceptance_from_counter_deltas():
    before = markers.spec_counters(
        'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 100.0\n'
        'vllm:spec_decode_num_draft_tokens_total{engine="0"} 200.0\n'
        'vllm:spec_decode_num_drafts_total{engine="0"} 70.0\n'
    )
    after = markers.spec_counters(
        'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 834.0\n'
        'vllm:spec_decode_num_draft_tokens_total{engine="0"} 979.0\n'
        'vllm:spec_decode_num_drafts_total{engine="0"} 340.0\n'
    )
    got = markers.spec_acceptance(before, after)
    assert got["spec_decode_acceptance"] == 734 / 779
    assert got["spec_decode_acceptance_length"] == 1 + 734 / 270
    assert markers.spec_acceptance({}, {}) == {}


# Before any test runs. Not always default_int_handler: a shell starts background jobs with
# SIGINT ignored, and Python then keeps it ignored.
SIGINT_AT_START = signal.getsignal(signal.SIGINT)
PGID_AT_START = os.getpgid(0)


def test_no_leftover_environment_change():
    assert signal.getsignal(signal.SIGINT) is SIGINT_AT_START
    assert os.getpgid(0) == PGID_AT_START  # no run moved this process into another group


FIX = Path(__file__).parent / "fixtures"


def test_markers_from_real_vllm_logs_and_metrics():
    cpu = markers.scan_markers((FIX / "engines" / "vllm-cpu-server.log").read_text().splitlines())
    assert cpu["kv_cache_device"] == "CPU"
    assert cpu["kv_cache_tokens"] == 2097152
    assert cpu["engine_version"] == "0.32.0"
    gpu_log = (FIX / "gpu" / "h200-x1" / "vllm-server.log").read_text()
    gpu = markers.scan_markers(gpu_log.splitlines())
    assert gpu["attention_backend"] == "FLASH_ATTN"
    assert gpu["flash_attn_version"] == 3
    assert gpu["kv_cache_tokens"] == 1274576
    assert gpu["kv_cache_gib"] == 38.9
    assert gpu["max_concurrency"] == 622.35
    assert gpu["cuda_graphs"] is False  # --enforce-eager
    metrics = markers.metrics_markers((FIX / "gpu" / "h200-x1" / "metrics-after.txt").read_text())
    assert metrics["metrics_kv_cache_tokens"] == 1274576
    assert metrics["cache_config"]["kv_cache_max_concurrency"] == "622.3515625"
    assert markers.spec_counters((FIX / "engines" / "vllm-metrics.txt").read_text()) is not None


def test_metrics_with_a_nan_block_count_give_no_block_count():
    text = "vllm:num_gpu_blocks NaN\nvllm:num_gpu_blocks +Inf\n"
    assert "num_gpu_blocks" not in markers.metrics_markers(text)
