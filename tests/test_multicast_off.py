"""NVLink multicast stays off in every server the executor starts: the plan adds the four
variables whatever the block's env= says, preflight refuses a block that sets other values, and a
real run shows them in the server process's environment even when the caller's has them on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from harness import free_port

from wikitools.cli import main
from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.engines.catalog import MULTICAST_OFF
from wikitools.runbook.execution.host import HostFacts
from wikitools.runbook.execution.plan import make_plan
from wikitools.runbook.execution.preflight import preflight

FAKES = Path(__file__).resolve().parent / "fakes"
SMI = Path(__file__).resolve().parent / "fixtures" / "nvidia-smi"


def runbook(attrs: str, server: str):
    text = f"```{{ .bash #r .runbook-server engine=vllm gpus=2 {attrs} }}\n{server}\n```\n"
    runbooks, diags = extract_runbooks([parse_page(text, "p.md")], None)
    assert diags == []
    return runbooks.get("r")


def facts() -> HostFacts:
    parts = [(SMI / f"rtxpro6000-x2.synthetic.{p}").read_text()
             for p in ("query.csv", "smi.txt", "topo.txt", "apps.csv")]
    return HostFacts.from_outputs(*parts, docker_found=True)


def test_the_four_values() -> None:
    assert MULTICAST_OFF == {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
    }


def test_plan_env_overrides_the_blocks_env_attribute() -> None:
    rb = runbook('env="NCCL_NVLS_ENABLE=1 VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl FOO=bar"',
                 "vllm serve m --tensor-parallel-size 2")
    plan = make_plan(rb, artifacts_dir=".artifacts/r/x")
    for key, value in MULTICAST_OFF.items():
        assert plan.server.env[key] == value
    assert plan.server.env["FOO"] == "bar"


@pytest.mark.parametrize(
    ("attrs", "server", "named"),
    [
        ('env="NCCL_NVLS_ENABLE=1"', "vllm serve m", "NCCL_NVLS_ENABLE=1"),
        ("", "export TORCH_SYMM_MEM_DISABLE_MULTICAST=0\nvllm serve m",
         "TORCH_SYMM_MEM_DISABLE_MULTICAST=0"),
        ("", "VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl vllm serve m",
         "VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl"),
        ("", "docker run --gpus all -e NVSHMEM_DISABLE_NVLS=0 vllm/vllm-openai serve m",
         "NVSHMEM_DISABLE_NVLS=0"),
    ],
)
def test_preflight_refuses_a_block_that_turns_multicast_on(attrs: str, server: str,
                                                          named: str) -> None:
    rb = runbook(attrs, server)
    for force in (False, True):
        verdict = preflight(rb, facts=facts(), port_checker=lambda _p: True, environ={},
                            force=force)
        assert not verdict.ok
        (check,) = [c for c in verdict.checks if c.name == "env"]
        assert check.status == "fail" and named in check.message


def test_preflight_accepts_the_same_values() -> None:
    rb = runbook('env="NCCL_NVLS_ENABLE=0"', "export NVSHMEM_DISABLE_NVLS=1\nvllm serve m")
    verdict = preflight(rb, facts=facts(), port_checker=lambda _p: True, environ={})
    assert verdict.ok, verdict.checks


def test_a_real_run_starts_the_server_with_multicast_off(tmp_path: Path, monkeypatch,
                                                         capsys) -> None:
    """The server block records its own environment; the caller's has multicast on."""
    monkeypatch.setenv("PATH", f"{FAKES / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_SERVER_ARGS", raising=False)
    monkeypatch.delenv("FAKE_BENCH_ARGS", raising=False)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.setenv("VLLM_FLASHINFER_ALLREDUCE_BACKEND", "mnnvl")
    monkeypatch.delenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", raising=False)
    port = free_port()
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "m.md").write_text(
        "# m\n\n"
        "```{ .bash #mc .runbook-server engine=vllm gpus=0 ready_timeout=30 stop_timeout=3 }\n"
        "python3 -c 'import json, os; print(json.dumps(dict(os.environ)))' "
        "> server-env.json && \\\n"
        f"vllm serve fake-model --port {port}\n"
        "```\n"
    )
    assert main(["runbook", "run", "wiki/m.md#mc", "--root", str(tmp_path), "--yes"]) == 0, (
        capsys.readouterr())
    seen = json.loads((tmp_path / "server-env.json").read_text())
    for key, value in MULTICAST_OFF.items():
        assert seen[key] == value, key
    (path,) = (tmp_path / "runbooks" / "mc").glob("*.json")
    assert json.loads(path.read_text())["server"]["env"]["NCCL_NVLS_ENABLE"] == "0"
