"""Builds executor Plans around the fake server and fake benchmark client."""

from __future__ import annotations

import sys
from pathlib import Path

from wikitools.runbook.blocks.declared import ClientBlock, Requirements, Runbook, ServerBlock
from wikitools.runbook.blocks.sweep import Sweep
from wikitools.runbook.engines.catalog import VLLM
from wikitools.runbook.engines.types import ClientCommand, EngineCommand
from wikitools.runbook.execution.planned import (
    Plan,
    PlannedClient,
    PlannedPoint,
    PlannedRun,
    PlannedServer,
    PlannedVariant,
)

FAKES = Path(__file__).resolve().parent
SERVER = FAKES / "fake_openai_server.py"
BENCH = FAKES / "fake_bench.py"


def fake_plan(
    *,
    port: int,
    server_args: str = "",
    bench_args: str = "",
    sweep: tuple[str, ...] = ("1", "2"),
    ready_timeout: float = 10.0,
    stop_timeout: float = 3.0,
    client_timeout: float = 30.0,
    runbook_id: str = "fake-rb",
    run_id: str = "20261130T100000Z-abcdef12",
) -> Plan:
    server_cmd = f"{sys.executable} {SERVER} --port {port} {server_args}".strip()
    server_block = ServerBlock(
        runbook_id=runbook_id, page="wiki/fake.md", line=3, col=1,
        content=server_cmd + "\n", info="{ .bash #" + runbook_id + " .runbook-server }",
        attrs=(), requirements=Requirements(), engine="vllm", port=port,
        ready_timeout=ready_timeout, stop_timeout=stop_timeout, extra_env=(),
        command=EngineCommand(text=server_cmd, engine="vllm"),
    )
    client_text = f"{sys.executable} {BENCH} --num-prompts 4 --max-concurrency ${{C:-1}}"
    client_block = ClientBlock(
        runbook_id=runbook_id, name="bench", kind="serving", sweep=Sweep((("C", sweep),)),
        timeout=client_timeout, page="wiki/fake.md", line=8, col=1,
        content=client_text + "\n", info="{ .bash .runbook-client for=" + runbook_id + " }",
        command=ClientCommand(text=client_text, tool="vllm-bench"),
    )
    runbook = Runbook(runbook_id, "wiki/fake.md", server_block, (client_block,))
    art = f".artifacts/{runbook_id}/{run_id}"
    base = f"http://127.0.0.1:{port}"
    server = PlannedServer(
        command=server_cmd, env={"FAKE_ENV": "1"}, display_env={"FAKE_ENV": "1"},
        log_path=f"{art}/server.log", port=port, health_url=f"{base}/health",
        models_url=f"{base}/v1/models", metrics_url=f"{base}/metrics",
        ready_timeout=ready_timeout, stop_timeout=stop_timeout, engine="vllm",
        fatal_patterns=VLLM.fatal_log,
    )
    points = []
    for value in sweep:
        result = f"{art}/bench-{value}.json"
        cmd = (
            f"{client_text} --base-url {base} --save-result --result-dir {art} "
            f"--result-filename bench-{value}.json {bench_args}"
        ).strip()
        run = PlannedRun(1, f"client:bench[{value}]", cmd, cmd, result, f"{art}/bench-{value}.log")
        points.append(PlannedPoint((("C", value),), value, f"client:bench[{value}]",
                                   {"C": value}, {"C": value}, (run,)))
    client = PlannedClient(name="bench", kind="serving", parser="vllm-bench",
                           timeout=client_timeout, sweep_vars=("C",), repeats=1, warmup=False,
                           points=tuple(points))
    variant = PlannedVariant((), art, server, (client,))
    return Plan(runbook=runbook, artifacts_dir=art, variants=(variant,))
