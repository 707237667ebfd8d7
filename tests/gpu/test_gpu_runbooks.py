"""Runbooks against a real GPU vLLM: preflight on the real nvidia-smi, readiness, backend markers
from the real CUDA log, a parsed `vllm bench serve` sweep, the rendered region, teardown with GPU
memory returned, and faults (server killed mid-benchmark, out of memory at start-up, TP=2).

Skipped where there is no NVIDIA GPU or no `vllm` command. On a GPU host whose calls are limited
in time, `bash tests/gpu/run-on-device.sh suite` runs this suite without its TP=2 test, and the
modes `tp1`, `tp2` and `sglang` run the reference runbooks, one mode per call (see that script).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from harness import make_tree, wait_until

from wikitools.cli import main
from wikitools.runbook.execution.host import gather_host

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU (nvidia-smi)"),
    pytest.mark.skipif(shutil.which("vllm") is None, reason="no vllm command on PATH"),
]

MODEL = "/tmp/wiki-gpu-tests/model"
SERVE = (
    "vllm serve {model} --load-format dummy --served-model-name tiny-gpu "
    "--enforce-eager --max-model-len 2048 --gpu-memory-utilization {util} "
    "--tensor-parallel-size {tp} --host 127.0.0.1 --port {port}"
)
BENCH = (
    "vllm bench serve --model tiny-gpu --tokenizer {model} --dataset-name random "
    "--random-input-len 128 --random-output-len 32 --num-prompts 16 --ignore-eos "
    '--max-concurrency "${{CONCURRENCY:-1}}"'
)


def _page(rid: str, *, arch: str, gpus: int, tp: int, port: int, util: float = 0.3) -> str:
    serve = SERVE.format(model=MODEL, util=util, tp=tp, port=port)
    bench = BENCH.format(model=MODEL)
    return (
        f"# {rid}\n\n"
        f"```bash {{ #{rid} .runbook-server engine=vllm gpus={gpus} arch={arch} "
        f"ready_timeout=300 }}\n{serve}\n```\n\n"
        f'```bash {{ .runbook-client for={rid} name=throughput sweep="CONCURRENCY=1,4" '
        f"timeout=300 }}\n{bench}\n```\n\n"
        f"<!-- wiki:results runbook={rid} view=serving client=throughput -->\n"
        "<!-- wiki:end -->\n"
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gpu-wiki")
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make-dummy-model.py"), MODEL], check=True
    )
    return make_tree(root, {
        "wiki/sm90.md": _page("gpu-sm90", arch="sm90", gpus=1, tp=1, port=8301),
        "wiki/sm120.md": _page("gpu-sm120", arch="sm120", gpus=1, tp=1, port=8302),
        "wiki/kill.md": _page("gpu-kill", arch="sm90", gpus=1, tp=1, port=8303),
        "wiki/oom.md": _page("gpu-oom", arch="sm90", gpus=1, tp=1, port=8304, util=0.02),
    })


def _memory_used() -> dict[int, int]:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {int(i): int(m) for i, m in (line.split(",") for line in out.strip().splitlines())}


def _records(root: Path, rid: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / "runbooks" / rid).glob("*.json"))]


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _assert_clean(before: dict[int, int], port: int) -> None:
    assert _port_free(port), f"port {port} still answers"

    def returned() -> bool:
        after = _memory_used()
        return all(after[i] <= before[i] + 256 for i in before)

    assert wait_until(returned, 30, interval=1), (
        f"GPU memory not returned: before {before}, after {_memory_used()}")


def test_preflight_reads_the_real_nvidia_smi() -> None:
    facts = gather_host()
    assert facts.smi_found and facts.smi_error is None
    assert facts.gpus, "no GPU parsed"
    gpu = facts.gpus[0]
    assert "H200" in gpu.name
    assert gpu.compute_capability == "9.0" and gpu.arch == "sm90"
    assert gpu.memory_total_mib > 100_000
    assert facts.driver and facts.driver[0].isdigit()
    assert facts.cuda and facts.cuda[0].isdigit()


def test_sm120_runbook_is_refused_on_sm90(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused = main(["runbook", "plan", "wiki/sm120.md#gpu-sm120", "--root", str(tree)])
    out = capsys.readouterr()
    assert refused == 1
    assert "sm120" in (out.out + out.err)
    assert main(["runbook", "plan", "wiki/sm120.md#gpu-sm120", "--force", "--root", str(tree)]) == 0
    assert main(["runbook", "plan", "wiki/sm90.md#gpu-sm90", "--root", str(tree)]) == 0


def test_run_records_markers_sweep_and_renders(tree: Path) -> None:
    before = _memory_used()
    rc = main(["runbook", "run", "wiki/sm90.md#gpu-sm90", "--yes", "--root", str(tree)])
    assert rc == 0
    (record,) = _records(tree, "gpu-sm90")
    assert record["status"] == "ok", record.get("message")
    assert record["host"]["gpus"][0]["compute_capability"] == "9.0"
    markers = record["markers"]
    assert markers["attention_backend"] == "FLASH_ATTN"
    assert markers.get("flash_attn_version") == 3 or "3" in str(markers.get("flash_attn_version"))
    assert markers["kv_cache_tokens"] > 0
    (client,) = record["clients"]
    assert [p["value"] for p in client["points"]] == ["1", "4"]
    for point in client["points"]:
        own = json.loads((tree / point["result_file"]).read_text())
        for key in (
            "completed",
            "request_throughput",
            "output_throughput",
            "median_ttft_ms",
            "p99_tpot_ms",
            "median_itl_ms",
        ):
            assert point["metrics"][key] == own[key]
    page = (tree / "wiki" / "sm90.md").read_text()
    assert "Not yet measured" not in page and "| 4 |" in page
    _assert_clean(before, 8301)


def test_server_killed_during_the_benchmark(tree: Path) -> None:
    before = _memory_used()
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wikitools",
            "runbook",
            "run",
            "wiki/kill.md#gpu-kill",
            "--yes",
            "--root",
            str(tree),
        ],
        env=env,
        start_new_session=True,
    )
    try:
        victim = _wait_for_client_then_gpu_pid(tree, "gpu-kill", proc)
        os.kill(victim, signal.SIGKILL)
        assert proc.wait(timeout=240) == 1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    (record,) = _records(tree, "gpu-kill")
    assert record["status"] == "failed"
    assert record["failed_step"].startswith("client:throughput")
    assert record["server"]["log_tail"], "no log tail recorded"
    _assert_clean(before, 8303)


def _wait_for_client_then_gpu_pid(tree: Path, rid: str, proc: subprocess.Popen) -> int:
    """Wait until the client step has started, then return the PID of the GPU process."""

    def client_started() -> bool:
        assert proc.poll() is None, "the run ended before the client started"
        return any("throughput" in p.name for p in (tree / ".artifacts" / rid).glob("*/*"))

    def gpu_pids() -> list[str]:
        return subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
            capture_output=True, text=True, check=True,
        ).stdout.split()

    assert wait_until(client_started, 300, interval=0.5), "client never started"
    assert wait_until(gpu_pids, 30, interval=0.5), "no GPU process found while the server runs"
    return int(gpu_pids()[0])


def test_out_of_memory_at_start_up_is_recorded(tree: Path) -> None:
    before = _memory_used()
    rc = main(["runbook", "run", "wiki/oom.md#gpu-oom", "--yes", "--root", str(tree)])
    assert rc == 1
    (record,) = _records(tree, "gpu-oom")
    assert record["status"] == "failed"
    assert record["failed_step"] in ("start", "ready")
    # The engine's own line, e.g. "Available KV cache memory: -0.25 GiB", names the cause.
    assert "memory" in record["message"].lower()
    assert record["server"]["log_tail"], "no log tail recorded"
    _assert_clean(before, 8304)


@pytest.mark.skipif(len(gather_host().gpus) < 2, reason="needs two GPUs")
def test_tensor_parallel_two_gpus(tmp_path: Path) -> None:
    """The published TP=2 reference runbook itself, run on a copy of its page. With
    WIKI_GPU_RECORDS_OUT set, the record is copied there to be committed."""
    page = Path("wiki/reference/sm90-h200.md")
    for rel in (page, Path("scripts/make-dummy-model.py")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    before = _memory_used()
    rc = main(
        ["runbook", "run", f"{page}#sm90-llama1b-shape-tp2", "--yes", "--root", str(tmp_path)]
    )
    out = os.environ.get("WIKI_GPU_RECORDS_OUT")
    if out:
        shutil.copytree(tmp_path / "runbooks", Path(out) / "runbooks", dirs_exist_ok=True)
        shutil.copytree(tmp_path / ".artifacts", Path(out) / "artifacts", dirs_exist_ok=True)
    assert rc == 0
    (record,) = _records(tmp_path, "sm90-llama1b-shape-tp2")
    assert record["status"] == "ok", record.get("message")
    assert record["host"]["gpu_count"] == 2 and len(record["host"]["gpus"]) == 2
    visible = record["server"]["env"].get("CUDA_VISIBLE_DEVICES", "")
    assert len(visible.split(",")) == 2
    assert record["markers"]["kv_cache_tokens"] > 0
    assert "| 32 |" in (tmp_path / page).read_text()
    _assert_clean(before, 8000)
