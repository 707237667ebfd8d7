"""Preflight: nvidia-smi parsing on captured outputs, GPU selection and every check."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.execution.containers import DockerFacts
from wikitools.runbook.execution.host import (
    HostFacts,
    parse_compute_apps,
    parse_gpu_query,
    parse_smi_header,
    parse_topology,
    summarise_topology,
)
from wikitools.runbook.execution.host import port_free as port_is_free
from wikitools.runbook.execution.preflight import NO_DRIVER, preflight, required_gpus

SMI = Path(__file__).parent / "fixtures" / "nvidia-smi"


def outputs(name: str) -> tuple[str, str, str, str]:
    """(query csv, banner, topo -m, compute apps) of a fixture host. Real captures are named
    <host>.<part>; synthetic ones <host>.synthetic.<part>."""
    parts = ("query.csv", "smi.txt", "topo.txt", "apps.csv")
    out = []
    for part in parts:
        real = SMI / f"{name}.{part}"
        out.append((real if real.exists() else SMI / f"{name}.synthetic.{part}").read_text())
    return out[0], out[1], out[2], out[3]


def facts(name: str, docker: bool = True) -> HostFacts:
    return HostFacts.from_outputs(*outputs(name), docker_found=docker)


def runbook(attrs: str = "gpus=2 arch=sm120", command: str = "vllm serve m --tp 2") -> Runbook:
    page = parse_page(f"```{{ .bash #r .runbook-server {attrs} }}\n{command}\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert diags == []
    return runbooks.get("r")


def free(_port: int) -> bool:
    return True


# A Docker daemon with the NVIDIA runtime and no containers (preflight asks no real daemon).
NVIDIA_DOCKER = DockerFacts(runtimes=("io.containerd.runc.v2", "nvidia", "runc"))


def check(verdict, name: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    found = [c for c in verdict.checks if c.name == name]
    assert found, f"no {name} check in {verdict.checks}"
    return found[0].status, found[0].message


# --------------------------------------------------------------------------- parsing


def test_parse_gpu_query_rtx_pro_6000() -> None:
    gpus = parse_gpu_query(outputs("rtxpro6000-x2")[0])
    assert [(g.index, g.compute_capability, g.arch, g.memory_total_mib) for g in gpus] == [
        (0, "12.0", "sm120", 97887), (1, "12.0", "sm120", 97887)]
    g = gpus[0]
    assert g.name == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert (g.memory_used_mib, g.memory_free_mib, g.driver, g.pci_bus_id) == (
        531, 96844, "580.95.05", "00000000:01:00.0")
    assert g.uuid.startswith("GPU-5d3a8e2c")


def test_parse_gpu_query_h200_and_na_values() -> None:
    gpus = parse_gpu_query(outputs("h200-x2")[0])
    assert [(g.name, g.arch, g.memory_total_mib) for g in gpus] == [
        ("NVIDIA H200", "sm90", 143771)] * 2
    odd = parse_gpu_query("0, NVIDIA X, 8.9, [N/A], [N/A], [N/A], 1.0, 0:1, GPU-1\n")
    assert (odd[0].memory_total_mib, odd[0].arch) == (0, "sm89")
    with pytest.raises(ValueError, match="unexpected"):
        parse_gpu_query("garbage\n")


def test_parse_banner() -> None:
    assert parse_smi_header(outputs("rtxpro6000-x2")[1]) == {
        "driver": "580.95.05", "cuda": "13.0", "smi": "580.95.05"}
    assert parse_smi_header(outputs("h200-x2")[1])["cuda"] == "12.8"
    assert parse_smi_header("nothing") == {"driver": None, "cuda": None, "smi": None}


def test_parse_topology_and_summary() -> None:
    x4 = parse_topology(outputs("rtxpro6000-x4")[2])
    assert x4[(0, 1)] == "NODE" and x4[(0, 2)] == "SYS" and (0, 0) not in x4
    assert summarise_topology(x4, (0, 1)) == "NODE"
    assert summarise_topology(x4, (0, 1, 2)) == "SYS"
    assert summarise_topology(x4, (3,)) == "none"
    h200 = parse_topology(outputs("h200-x2")[2])  # NIC columns are ignored
    assert h200 == {(0, 1): "NV18", (1, 0): "NV18"}
    assert summarise_topology(h200, (0, 1)) == "NV18"
    assert summarise_topology({}, (0, 1)) == "none"
    ansi = "\x1b[4m\tGPU0\tGPU1\x1b[0m\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n"
    assert summarise_topology(parse_topology(ansi), (0, 1)) == "PIX"


def test_parse_compute_apps() -> None:
    assert parse_compute_apps(outputs("rtxpro6000-x4")[3]) == [
        (48211, 81224, "GPU-2c85e1f6-7d03-49ba-8e3f-c4a6d0b19e72")]
    assert parse_compute_apps("") == []
    assert parse_compute_apps("No running processes found\n") == []


# --------------------------------------------------------------------------- verdicts


def test_rtx_x2_accepts_sm120_runbook_and_fills_host_record() -> None:
    v = preflight(runbook("gpus=2 arch=sm120 min_mem_gib=90"), facts=facts("rtxpro6000-x2"),
                  port_checker=free, environ={})
    assert v.ok and v.message is None
    assert v.selected_gpus == (0, 1)
    assert v.host == {
        "gpus": [
            {"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
             "compute_capability": "12.0", "memory_total_mib": 97887, "memory_free_mib": 96844,
             "pci_bus_id": "00000000:01:00.0"},
            {"index": 1, "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
             "compute_capability": "12.0", "memory_total_mib": 97887, "memory_free_mib": 97371,
             "pci_bus_id": "00000000:C1:00.0"},
        ],
        "gpu_count": 2, "driver": "580.95.05", "cuda": "13.0", "topology": "SYS",
        "hostname_hash": None, "cpu_only": False,
    }
    assert [c.name for c in v.checks] == ["nvidia-smi", "gpu-count", "arch", "busy", "memory",
                                          "port"]


def test_rtx_x4_skips_the_busy_gpu() -> None:
    v = preflight(runbook("gpus=3 arch=sm120"), facts=facts("rtxpro6000-x4"), port_checker=free,
                  environ={})
    assert v.ok and v.selected_gpus == (0, 1, 3)
    assert v.host["topology"] == "SYS"


def test_busy_gpus_refused_unless_forced() -> None:
    rb = runbook("gpus=4 arch=sm120")
    v = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=free, environ={})
    assert not v.ok
    assert check(v, "busy") == ("fail", "GPUs busy: GPU 2: pid 48211 uses 81224 MiB "
                                "(--force to run anyway)")
    forced = preflight(rb, force=True, facts=facts("rtxpro6000-x4"), port_checker=free,
                       environ={})
    assert forced.ok and forced.forced and check(forced, "busy")[0] == "warn"
    assert forced.selected_gpus == (0, 1, 2, 3)


def test_memory_in_use_without_process_counts_as_busy() -> None:
    f = facts("rtxpro6000-x4")
    f.apps = []
    v = preflight(runbook("gpus=4"), facts=f, port_checker=free, environ={})
    assert check(v, "busy")[1].startswith("GPUs busy: GPU 2: 81234 MiB in use")


def test_block_cuda_visible_devices_pins_the_gpus() -> None:
    rb = runbook("gpus=2", "CUDA_VISIBLE_DEVICES=2,3 vllm serve m --tp 2")
    v = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=free, environ={})
    assert v.selected_gpus == (2, 3)
    assert check(v, "visible") == ("ok", "CUDA_VISIBLE_DEVICES in the block=2,3: GPUs 2,3")
    assert check(v, "busy")[0] == "fail"


def test_outer_cuda_visible_devices_limits_candidates() -> None:
    rb = runbook("gpus=2")
    v = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=free,
                  environ={"CUDA_VISIBLE_DEVICES": "1,2,3"})
    assert v.ok and v.selected_gpus == (1, 3)


def test_docker_gpus_device_list() -> None:
    rb = runbook("gpus=2", "docker run --gpus '\"device=0,1\"' img vllm serve m --tp 2")
    v = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=free, environ={},
                  docker=NVIDIA_DOCKER)
    assert v.ok and v.selected_gpus == (0, 1)
    assert check(v, "docker") == ("ok", "docker present for image img")
    missing = preflight(rb, facts=facts("rtxpro6000-x4", docker=False), port_checker=free,
                        environ={})
    assert check(missing, "docker") == ("fail", "docker not found, needed for image img")


def test_container_cuda_visible_devices_with_all_gpus_picks_those_gpus() -> None:
    # `--gpus all -e CUDA_VISIBLE_DEVICES=2,3`: the container sees every GPU and its engine
    # uses 2 and 3, which are the GPUs preflight must check (GPU 2 is the busy one here)
    rb = runbook("gpus=2", "docker run -d --gpus all -e CUDA_VISIBLE_DEVICES=2,3 "
                 "vllm/vllm-openai:latest --model m --tp 2")
    v = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=free, environ={},
                  docker=NVIDIA_DOCKER)
    assert v.selected_gpus == (2, 3)
    assert [c.message for c in v.checks if c.name == "visible"] == [
        "docker --gpus=all: GPUs 0,1,2,3",
        "CUDA_VISIBLE_DEVICES in the container=2,3: GPUs 2,3"]
    assert check(v, "busy")[0] == "fail"


def test_container_cuda_visible_devices_counts_the_gpus_it_was_given() -> None:
    rb = runbook("gpus=1", "docker run -d --gpus '\"device=2,3\"' -e CUDA_VISIBLE_DEVICES=1 "
                 "vllm/vllm-openai:latest --model m")
    v = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=free, environ={},
                  docker=NVIDIA_DOCKER)
    assert v.selected_gpus == (3,)


def test_a_gpu_count_is_no_gpu_index() -> None:
    rb = runbook("gpus=2", "docker run -d --gpus 2 vllm/vllm-openai:latest --model m --tp 2")
    v = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=free, environ={},
                  docker=NVIDIA_DOCKER)
    assert check(v, "visible") == ("ok", "docker --gpus 2: 2 GPUs the runtime chooses")
    assert check(v, "gpu-count") == ("ok", "needs 2, 4 available")


def test_a_host_cuda_visible_devices_does_not_reach_a_container() -> None:
    rb = runbook("gpus=1", "CUDA_VISIBLE_DEVICES=3 docker run -d --gpus all "
                 "vllm/vllm-openai:latest --model m")
    v = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=free, environ={},
                  docker=NVIDIA_DOCKER)
    assert v.selected_gpus != (3,)


def test_h200_refuses_sm120_and_accepts_sm90() -> None:
    v = preflight(runbook("gpus=2 arch=sm120"), facts=facts("h200-x2"), port_checker=free,
                  environ={})
    assert not v.ok
    assert v.message == ("runbook requires sm120; this host has NVIDIA H200 (sm90) "
                         "(--force to run anyway)")
    forced = preflight(runbook("gpus=2 arch=sm120"), force=True, facts=facts("h200-x2"),
                       port_checker=free, environ={})
    assert forced.ok and check(forced, "arch")[0] == "warn"
    ok = preflight(runbook("gpus=2 arch=sm90,sm120"), facts=facts("h200-x2"),
                   port_checker=free, environ={})
    assert ok.ok and ok.selected_gpus == (0, 1) and ok.host["topology"] == "NV18"


def test_gpu_count_from_parallel_sizes() -> None:
    rb = runbook("arch=sm120", "vllm serve m --tp 2 --pp 2")
    assert required_gpus(rb.server) == 4
    v = preflight(rb, facts=facts("rtxpro6000-x2"), port_checker=free, environ={})
    assert check(v, "gpu-count") == ("fail", "runbook needs 4 GPUs; 2 available (0,1)")


def test_min_memory() -> None:
    v = preflight(runbook("gpus=1 min_mem_gib=120", "vllm serve m"), facts=facts("rtxpro6000-x2"),
                  port_checker=free, environ={})
    assert check(v, "memory") == ("fail", "needs 120 GiB free per GPU; GPU 0 has 94.6 GiB "
                                  "(--force to run anyway)")


def test_missing_nvidia_smi() -> None:
    v = preflight(runbook("gpus=2"), facts=HostFacts(smi_found=False), port_checker=free,
                  environ={})
    assert not v.ok
    assert v.message == f"{NO_DRIVER}; runbook needs 2 GPUs"
    assert v.host["gpus"] == [] and v.host["topology"] == "none"
    cpu = preflight(runbook("gpus=0", "vllm serve m"), facts=HostFacts(smi_found=False),
                    port_checker=free, environ={})
    assert cpu.ok and cpu.host["cpu_only"] is True and cpu.selected_gpus == ()
    assert check(cpu, "nvidia-smi") == ("ok", f"{NO_DRIVER} (CPU run: gpus=0)")


def test_nvidia_smi_failing() -> None:
    f = HostFacts(smi_error="Failed to initialize NVML: Driver/library version mismatch")
    v = preflight(runbook("gpus=1", "vllm serve m"), facts=f, port_checker=free, environ={})
    assert v.message == ("nvidia-smi failed: Failed to initialize NVML: Driver/library version "
                         "mismatch; runbook needs 1 GPU")


@pytest.mark.parametrize("command", [
    "NCCL_GRAPH_FILE= vllm serve m --tp 2",
    "export NCCL_GRAPH_FILE=\"\"\nvllm serve m --tp 2",
    "docker run -e NCCL_GRAPH_FILE= img vllm serve m --tp 2",
])
def test_empty_nccl_graph_file_is_refused_even_when_forced(command: str) -> None:
    v = preflight(runbook("gpus=2", command), force=True, facts=facts("rtxpro6000-x2"),
                  port_checker=free, environ={}, docker=NVIDIA_DOCKER)
    assert check(v, "env") == ("fail", "NCCL_GRAPH_FILE is set to an empty string; unset it "
                               "instead (`unset NCCL_GRAPH_FILE`)")
    assert not v.ok


def test_empty_nccl_graph_file_in_env_attribute() -> None:
    v = preflight(runbook('gpus=2 env="NCCL_GRAPH_FILE="'), facts=facts("rtxpro6000-x2"),
                  port_checker=free, environ={})
    assert check(v, "env")[0] == "fail"


def test_port_in_use_is_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        assert not port_is_free(busy)
        v = preflight(runbook("gpus=1", "vllm serve m"), port=busy, facts=facts("rtxpro6000-x2"),
                      environ={})
        assert check(v, "port") == ("fail", f"port {busy} is in use (stop what listens there "
                                    "or use --port)")
    assert port_is_free(busy)


# --------------------------------------------------------------------------- real captures

REAL = Path(__file__).parent / "fixtures" / "gpu" / "h200-x1"


def real_facts(query: str = "query-gpu.csv", apps: str = "compute-apps-idle.csv") -> HostFacts:
    return HostFacts.from_outputs((REAL / query).read_text(), (REAL / "nvidia-smi.txt").read_text(),
                                  (REAL / "topo.txt").read_text(), (REAL / apps).read_text())


def test_real_h200_capture_parses() -> None:
    f = real_facts()
    assert [(g.index, g.name, g.arch, g.memory_total_mib) for g in f.gpus] == [
        (0, "NVIDIA H200", "sm90", 143771)]
    assert (f.driver, f.cuda, f.topology, f.apps) == ("580.159.04", "13.0", {}, [])
    busy = real_facts("query-gpu-busy.csv", "compute-apps-busy.csv")
    assert busy.apps == [(1589, 44362, "GPU-3496cfb8-a9f6-9ca9-2eea-5eec3668e053")]


def test_real_h200_verdicts() -> None:
    refused = preflight(runbook("gpus=1 arch=sm120", "vllm serve m"), facts=real_facts(),
                        port_checker=free, environ={})
    assert refused.message == ("runbook requires sm120; this host has NVIDIA H200 (sm90) "
                               "(--force to run anyway)")
    ok = preflight(runbook("gpus=1 arch=sm90", "vllm serve m"), facts=real_facts(),
                   port_checker=free, environ={})
    assert ok.ok and ok.selected_gpus == (0,) and ok.host["topology"] == "none"
    assert ok.host["gpus"][0]["pci_bus_id"] == "00000000:00:06.0"
    busy = preflight(runbook("gpus=1 arch=sm90", "vllm serve m"),
                     facts=real_facts("query-gpu-busy.csv", "compute-apps-busy.csv"),
                     port_checker=free, environ={})
    assert busy.message == "GPUs busy: GPU 0: pid 1589 uses 44362 MiB (--force to run anyway)"
    two = preflight(runbook("gpus=2 arch=sm90", "vllm serve m --tp 2"), facts=real_facts(),
                    port_checker=free, environ={})
    assert two.message == "runbook needs 2 GPUs; 1 available (0)"


# --------------------------------------------------------------------------- containers

NO_GPU = HostFacts(smi_found=False, docker_found=True)



def test_container_name_taken_by_another_container_is_refused_even_when_forced() -> None:
    rb = runbook("gpus=2", "docker run --rm --name \"srv-${TAG:-x}\" --gpus all img "
                 "vllm serve m --tp 2")
    seen: list[str] = []
    cid = "9ace3a5a7e47" + "0" * 52
    taken = DockerFacts(runtimes=("nvidia", "runc"), taken=(("srv-42", cid),))
    v = preflight(rb, force=True, facts=facts("rtxpro6000-x2"), port_checker=free,
                  environ={"TAG": "42"}, docker=taken)
    seen.append(v.message or "")
    assert not v.ok
    assert check(v, "container") == (
        "fail", "container name srv-42 already in use by a container this run did not start "
        "(ID 9ace3a5a7e47); remove or rename it, or change the name")
    free_name = preflight(rb, facts=facts("rtxpro6000-x2"), port_checker=free,
                          environ={"TAG": "42"}, docker=NVIDIA_DOCKER)
    assert free_name.ok and check(free_name, "container") == (
        "ok", "container name srv-42 is free")


def test_gpus_without_nvidia_container_runtime() -> None:
    rb = runbook("gpus=0", "docker run --gpus all img vllm serve m")
    plain = DockerFacts(runtimes=("io.containerd.runc.v2", "runc"))
    v = preflight(rb, force=True, facts=NO_GPU, port_checker=free,
                  environ={}, docker=plain)
    assert not v.ok
    assert check(v, "docker-gpus") == (
        "fail", "docker --gpus all needs the NVIDIA container runtime (nvidia-container-toolkit), "
        "which this host's Docker does not have (runtimes: io.containerd.runc.v2, runc; no "
        "nvidia-container-runtime-hook on PATH)")
    hook = DockerFacts(runtimes=("runc",), nvidia_hook=True)
    assert preflight(rb, facts=NO_GPU, port_checker=free, environ={},
                     docker=hook).ok


def test_no_docker_daemon() -> None:
    rb = runbook("gpus=0", "docker run img vllm serve m")
    v = preflight(rb, facts=NO_GPU, port_checker=free, environ={},
                  docker=DockerFacts(daemon_error="Cannot connect to the Docker daemon at "
                                     "unix:///var/run/docker.sock. Is the docker daemon running?"))
    assert v.message == ("no Docker daemon answers: Cannot connect to the Docker daemon at "
                         "unix:///var/run/docker.sock. Is the docker daemon running?")
