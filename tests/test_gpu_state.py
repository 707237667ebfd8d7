"""GPU state in the record: parsed from real and synthetic nvidia-smi output (missing fields
read as null, never an error), and taken before and after a real `wiki runbook run` of the
fake engine on a host whose nvidia-smi is a replay of captured output."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from harness import free_port

from wikitools.cli import main
from wikitools.runbook.execution.host import (
    STATE_FIELDS,
    gpu_state,
    parse_compute_apps,
    parse_compute_apps_named,
    parse_gpu_state,
)
from wikitools.runbook.records.gpustate import describe_state

HERE = Path(__file__).parent
H200 = HERE / "fixtures" / "gpu" / "h200-x1"
SMI = HERE / "fixtures" / "nvidia-smi"
FAKE_BIN = HERE / "fakes" / "bin"


def test_real_h200_capture():
    (gpu,) = parse_gpu_state((H200 / "gpu-state.csv").read_text())
    assert gpu == {
        "index": 0, "uuid": "GPU-82892677-e28c-3f88-e45f-9292ef4ce99b",
        "clocks_sm_mhz": 465, "clocks_max_sm_mhz": 1980, "clocks_mem_mhz": 3201,
        "clocks_max_mem_mhz": 3201, "power_draw_w": 117.08, "power_limit_w": 700.0,
        "pstate": "P0", "persistence_mode": True, "temperature_c": 36,
        "utilization_gpu_pct": 0, "utilization_memory_pct": 0, "memory_used_mib": 0,
        "ecc_mode": True, "pcie_link_gen": 5, "pcie_link_gen_max": 5, "pcie_link_width": 16,
        "pcie_link_width_max": 16, "clocks_event_reasons": "0x0000000000000001",
        "fan_pct": None, "driver": "580.159.04",
    }
    # the capture with units in a header: the same fields in the same order, units stripped
    header, row = (H200 / "gpu-state-header.csv").read_text().splitlines()
    assert [h.split(" [")[0] for h in header.split(", ")][2:4] == [
        "clocks.current.sm", "clocks.max.sm"]
    assert len(header.split(", ")) == len(STATE_FIELDS)
    (with_units,) = parse_gpu_state(row)
    assert with_units["clocks_sm_mhz"] == 465 and with_units["power_draw_w"] == 115.31


def test_missing_fields_are_null_and_odd_lines_skipped():
    text = (SMI / "rtxpro6000-x2.synthetic.state.csv").read_text()
    gpus = parse_gpu_state(text + "garbage line\n\n")
    assert [g["index"] for g in gpus] == [0, 1]
    slow = gpus[1]
    assert (slow["ecc_mode"], slow["clocks_event_reasons"], slow["persistence_mode"]) == (
        None, None, False)
    assert (slow["pcie_link_gen"], slow["pcie_link_width"]) == (4, 8)
    line = ", ".join(["0", "GPU-x"] + ["[Not Supported]"] * (len(STATE_FIELDS) - 2))
    assert len(line.split(", ")) == len(STATE_FIELDS)
    (empty,) = parse_gpu_state(line)
    assert all(v is None for k, v in empty.items() if k not in ("index", "uuid"))


def test_compute_apps_with_and_without_names():
    named = (SMI / "rtxpro6000-x2.synthetic.apps-named.csv").read_text()
    assert parse_compute_apps_named(named) == [
        (41733, 521, "GPU-5d3a8e2c-1f47-4b8e-9c21-7e0f6a4b9d11", "/usr/lib/xorg/Xorg")]
    assert parse_compute_apps(named) == [(41733, 521, "GPU-5d3a8e2c-1f47-4b8e-9c21-7e0f6a4b9d11")]
    old = (H200 / "compute-apps-busy.csv").read_text()
    assert parse_compute_apps_named(old)[0][3] is None


def fake_smi(tmp_path: Path, host: str = "rtxpro6000-x2") -> Path:
    """nvidia-smi replaying captures; the GPU-state query gets its own file."""
    base = SMI / f"{host}.synthetic"
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=index,uuid,*) cat '{base}.state.csv' ;;\n"
        f"  --query-gpu=*) cat '{base}.query.csv' ;;\n"
        f"  --query-compute-apps=*) cat '{base}.apps-named.csv' ;;\n"
        f"  topo) cat '{base}.topo.txt' ;;\n"
        f"  *) cat '{base}.smi.txt' ;;\n"
        "esac\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_gpu_state_reads_the_run_gpus_and_their_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("WIKI_NVIDIA_SMI", str(fake_smi(tmp_path)))
    state = gpu_state((0,))
    assert [g["index"] for g in state["gpus"]] == [0]
    assert state["processes"] == [{"pid": 41733, "name": "/usr/lib/xorg/Xorg",
                                   "used_mib": 521, "gpu": 0}]
    assert gpu_state((1,))["processes"] == []
    text = describe_state(gpu_state(None), "before the run")
    assert ("GPU 1: SM clock 2430/3090 MHz, memory clock 14001/14001 MHz, 87 W of a 450 W "
            "limit, P2, persistence off, 44 °C, 3 % busy, PCIe gen 4 ×8 (card max gen 5 ×16)"
            in text)
    assert "Other processes on these GPUs: /usr/lib/xorg/Xorg on GPU 0 (521 MiB)." in text
    monkeypatch.setenv("WIKI_NVIDIA_SMI", str(tmp_path / "missing"))
    assert gpu_state() == {"error": "nvidia-smi not found"}


PAGE = """---
title: Fake on one GPU
---

# Fake

```{{ .bash #fake-gpu .runbook-server engine=vllm gpus=1 arch=sm120 ready_timeout=30 }}
vllm serve fake-model --port {port}
```

```{{ .bash .runbook-client for=fake-gpu name=bench sweep="C=1,2" timeout=30 }}
vllm bench serve --model fake-model --num-prompts 4 --max-concurrency "${{C:-1}}"
```

<!-- wiki:results runbook=fake-gpu view=serving -->
<!-- wiki:end -->
"""


@pytest.fixture
def fake_gpu_host(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("WIKI_NVIDIA_SMI", str(fake_smi(tmp_path)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for name in ("FAKE_SERVER_ARGS", "FAKE_BENCH_ARGS"):
        monkeypatch.delenv(name, raising=False)


def test_run_records_gpu_state_before_and_after(tmp_path, capsys, fake_gpu_host):
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "fake.md").write_text(PAGE.format(port=free_port()))
    assert main(["runbook", "run", "fake-gpu", "--root", str(tmp_path), "--yes",
                 "--repeats", "2"]) == 0, capsys.readouterr()
    (path,) = (tmp_path / "runbooks" / "fake-gpu").glob("*.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 2
    before, after = data["gpu_state"]["before"], data["gpu_state"]["after"]
    # preflight chose GPU 1 (the one with more free memory); only its state is kept
    assert data["server"]["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert [g["index"] for g in before["gpus"]] == [1] == [g["index"] for g in after["gpus"]]
    assert (before["gpus"][0]["pcie_link_gen"], before["gpus"][0]["pcie_link_width"]) == (4, 8)
    assert before["processes"] == []  # Xorg is on GPU 0
    text = (tmp_path / "wiki" / "fake.md").read_text()
    assert "GPU state before the run: GPU 1: SM clock 2430/3090 MHz" in text
    assert "PCIe gen 4 ×8 (card max gen 5 ×16). No other process was on these GPUs." in text
    assert "GPU state after the clients: GPU 1:" in text


def test_engine_facts_from_real_h200_logs():
    from wikitools.runbook.engines.markers import scan_markers
    compiled = scan_markers((H200 / "vllm-server-cudagraphs.log").read_text().splitlines())
    eager = scan_markers((H200 / "vllm-server.log").read_text().splitlines())
    assert (compiled["compiled"], compiled["compile_s"], compiled["cuda_graphs"]) == (
        True, 14.84, True)
    assert (eager["compiled"], eager["cuda_graphs"]) == (False, False)
    assert "compile_s" not in eager
