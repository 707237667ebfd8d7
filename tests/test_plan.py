"""The plan: final commands, env with secrets masked, paths, timeouts; golden output."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from harness import free_port

from wikitools.cli import main
from wikitools.core.errors import UsageError
from wikitools.pages.parse import parse_page, read_page
from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.blocks.sweep import parse_sweep
from wikitools.runbook.engines.catalog import MULTICAST_OFF
from wikitools.runbook.engines.secrets import mask_command, mask_env
from wikitools.runbook.execution.containers import DockerFacts
from wikitools.runbook.execution.host import HostFacts
from wikitools.runbook.execution.plan import PlanOverrides, artifacts_dir_for, make_plan
from wikitools.runbook.execution.planned import Plan, PlannedClient, PlannedPoint, PlannedRun
from wikitools.runbook.execution.plantext import format_plan, format_summary, format_verdict
from wikitools.runbook.execution.preflight import preflight

HERE = Path(__file__).parent
GOOD = HERE / "fixtures" / "runbook-pages" / "good"
GOLDEN = HERE / "fixtures" / "runbook-pages" / "plan-gptoss-120b-tp2.golden.txt"
SMI = HERE / "fixtures" / "nvidia-smi"
ART = ".artifacts/gptoss-120b-tp2/20261130T100000Z-d0294125"


def good_runbook(rid: str) -> Runbook:
    pages = [read_page(p, GOOD) for p in sorted(GOOD.rglob("*.md"))]
    return extract_runbooks(pages, None)[0].get(rid)


def facts(name: str) -> HostFacts:
    parts = [(SMI / f"{name}.synthetic.{p}").read_text()
             for p in ("query.csv", "smi.txt", "topo.txt", "apps.csv")]
    return HostFacts.from_outputs(*parts, docker_found=True)


def one(attrs: str, server: str, *clients: tuple[str, str]) -> Runbook:
    text = f"```{{ .bash #r .runbook-server {attrs} }}\n{server}\n```\n"
    for cattrs, body in clients:
        text += f"\n```{{ .bash .runbook-client for=r {cattrs} }}\n{body}\n```\n"
    runbooks, diags = extract_runbooks([parse_page(text, "p.md")], None)
    assert diags == []
    return runbooks.get("r")


def runs(plan: Plan) -> list[tuple[PlannedClient, PlannedPoint, PlannedRun]]:
    """Every client run of the first variant, in the order they execute."""
    return [(c, p, r) for c in plan.variants[0].clients for p in c.points for r in p.runs]


def test_golden_plan_and_verdict() -> None:
    rb = good_runbook("gptoss-120b-tp2")
    verdict = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=lambda _p: True,
                        environ={})
    plan = make_plan(rb, root=GOOD, artifacts_dir=ART, verdict=verdict)
    text = format_summary(plan) + "\n" + format_plan(plan) + "\n" + format_verdict(verdict)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_plan_data_for_the_executor() -> None:
    rb = good_runbook("gptoss-120b-tp2")
    verdict = preflight(rb, facts=facts("rtxpro6000-x2"), port_checker=lambda _p: True,
                        environ={})
    plan = make_plan(rb, artifacts_dir=ART, verdict=verdict,
                     overrides=PlanOverrides(repeats=1, warmup=False))
    srv = plan.server
    assert srv.command == rb.server.content.rstrip("\n")
    assert srv.env == {"HF_TOKEN": "hf_not_a_real_token", "VLLM_LOGGING_LEVEL": "INFO",
                       "CUDA_VISIBLE_DEVICES": "0,1", "PYTHONFAULTHANDLER": "1", **MULTICAST_OFF}
    assert srv.display_env["HF_TOKEN"] == "***"
    assert (srv.port, srv.host, srv.health_url, srv.metrics_url, srv.models_url) == (
        8000, "127.0.0.1", "http://127.0.0.1:8000/health", "http://127.0.0.1:8000/metrics",
        "http://127.0.0.1:8000/v1/models")
    assert (srv.log_path, srv.ready_timeout, srv.stop_timeout, srv.engine) == (
        f"{ART}/server.log", 900.0, 20.0, "vllm")
    assert srv.version_command == ("vllm", "--version")
    assert any("EngineDeadError" in p for p in srv.fatal_patterns)
    assert [(r.label, c.parser, r.result_path, p.env) for c, p, r in runs(plan)] == [
        ("client:throughput[1]", "vllm-bench", f"{ART}/throughput-1.json", {"CONCURRENCY": "1"}),
        ("client:throughput[8]", "vllm-bench", f"{ART}/throughput-8.json", {"CONCURRENCY": "8"}),
        ("client:throughput[32]", "vllm-bench", f"{ART}/throughput-32.json",
         {"CONCURRENCY": "32"}),
        ("client:client2", "text", None, {}),
    ]
    client, _point, first = runs(plan)[0]
    assert first.command.endswith(
        f'--max-concurrency "${{CONCURRENCY:-8}}" --save-result --result-dir {ART} '
        "--result-filename throughput-1.json --base-url http://127.0.0.1:8000")
    assert first.log_path == f"{ART}/throughput-1.log" and client.timeout == 1800.0
    assert runs(plan)[3][2].command == "curl -fsS http://127.0.0.1:8000/v1/models"


def test_port_override_is_added_to_the_server_and_clients() -> None:
    rb = good_runbook("gptoss-120b-tp2")
    plan = make_plan(rb, artifacts_dir=ART, overrides=PlanOverrides(port=8123))
    assert plan.server.command.endswith("--port 8000 --port 8123")
    assert plan.server.health_url == "http://127.0.0.1:8123/health"
    assert runs(plan)[0][2].command.endswith("--base-url http://127.0.0.1:8123")
    assert "--port 8123 added to the server command" in plan.notes


def test_port_attribute_without_port_in_command() -> None:
    rb = one("port=8200", "vllm serve m")
    assert make_plan(rb, artifacts_dir="a").server.command == "vllm serve m --port 8200"
    assert make_plan(one("", "vllm serve m"), artifacts_dir="a").server.command == "vllm serve m"


def test_port_override_of_wrapped_command_is_refused() -> None:
    rb = one("", "bash -lc 'vllm serve m'")
    with pytest.raises(UsageError, match="cannot add --port 9000 to the server command"):
        make_plan(rb, artifacts_dir="a", overrides=PlanOverrides(port=9000))


def test_sglang_docker_plan() -> None:
    rb = good_runbook("qwen35-397b-nvfp4-tp4")
    verdict = preflight(rb, facts=facts("rtxpro6000-x4"), port_checker=lambda _p: True,
                        environ={}, docker=DockerFacts(runtimes=("nvidia", "runc")))
    assert all(c.status == "ok" for c in verdict.checks if c.name.startswith(("docker", "cont")))
    plan = make_plan(rb, artifacts_dir="x", verdict=verdict,
                     overrides=PlanOverrides(repeats=1, warmup=False))
    assert plan.server.env == {}  # docker --gpus chooses the GPUs
    # The container does not see the run's environment: the plan says what to add.
    assert any("-e NCCL_NVLS_ENABLE=0" in n for n in plan.notes)
    assert plan.server.docker and plan.server.image == "voipmonitor/sglang:cu130"
    assert plan.server.health_url == "http://127.0.0.1:30000/health_generate"
    assert plan.server.metrics_url == "http://127.0.0.1:30000/server_info"
    assert plan.server.version_command == ()
    c, _p, r = runs(plan)[0]
    assert (c.parser, r.result_path) == ("sglang-bench", "x/serving.jsonl")
    assert r.command.endswith("--output-file x/serving.jsonl --base-url http://127.0.0.1:30000")


def test_block_cuda_visible_devices_is_kept() -> None:
    rb = one("gpus=2", "CUDA_VISIBLE_DEVICES=2,3 vllm serve m --tp 2")
    verdict = preflight(rb, force=True, facts=facts("rtxpro6000-x4"),
                        port_checker=lambda _p: True, environ={})
    plan = make_plan(rb, artifacts_dir="a", verdict=verdict)
    assert "CUDA_VISIBLE_DEVICES" not in plan.server.env
    assert "GPUs chosen by the block: CUDA_VISIBLE_DEVICES=2,3" in plan.notes


def test_client_additions_per_tool() -> None:
    rb = one("", "vllm serve m --port 8000",
             ("name=same", "vllm bench serve --model m --base-url http://127.0.0.1:8000"),
             ("name=port", "vllm bench serve --model m --port 8000"),
             ("name=other", "vllm bench serve --model m --port 9999"),
             ("name=q", "lm_eval --model local-completions --tasks gsm8k"),
             ("name=wrapped kind=serving", "bash -c 'vllm bench serve --model m'"))
    plan = make_plan(rb, artifacts_dir="a", overrides=PlanOverrides(repeats=1, warmup=False))
    cmds = {c.name: r for c, _p, r in runs(plan)}
    parsers = {c.name: c.parser for c, _p, _r in runs(plan)}
    assert cmds["same"].command.endswith(
        "--base-url http://127.0.0.1:8000 --save-result --result-dir a "
        "--result-filename same.json")
    assert cmds["port"].command.endswith("--result-filename port.json")
    assert cmds["other"].command.endswith("--base-url http://127.0.0.1:8000")
    assert (cmds["q"].command, parsers["q"], cmds["q"].result_path) == (
        "lm_eval --model local-completions --tasks gsm8k --output_path a/q", "lm-eval", "a/q")
    assert (cmds["wrapped"].result_path, parsers["wrapped"]) == (None, "text")
    assert cmds["wrapped"].command == "bash -c 'vllm bench serve --model m'"
    assert "client wrapped: command is wrapped; results read from its output only" in plan.notes


def test_sweep_and_client_overrides() -> None:
    rb = good_runbook("gptoss-120b-tp2")
    plan = make_plan(rb, artifacts_dir="a", overrides=PlanOverrides(
        sweep=parse_sweep("CONCURRENCY=2,4"), clients=("throughput",), repeats=1,
        warmup=False))
    assert [r.label for _c, _p, r in runs(plan)] == [
        "client:throughput[2]", "client:throughput[4]"]
    with pytest.raises(UsageError, match="no client 'thruput'; did you mean 'throughput'"):
        make_plan(rb, artifacts_dir="a", overrides=PlanOverrides(clients=("thruput",)))


def test_serving_points_repeat_after_a_warm_up_run() -> None:
    rb = good_runbook("gptoss-120b-tp2")
    plan = make_plan(rb, artifacts_dir="a", overrides=PlanOverrides(
        sweep=parse_sweep("CONCURRENCY=2,4"), clients=("throughput",)))
    assert [(r.label, r.repeat, c.repeats, r.result_path) for c, _p, r in runs(plan)][:4] == [
        ("client:throughput[2] warm-up", 0, 3, "a/throughput-2-warmup.json"),
        ("client:throughput[2] run 1/3", 1, 3, "a/throughput-2-r1.json"),
        ("client:throughput[2] run 2/3", 2, 3, "a/throughput-2-r2.json"),
        ("client:throughput[2] run 3/3", 3, 3, "a/throughput-2-r3.json"),
    ]
    assert len(runs(plan)) == 8 and [p.label for p in plan.variants[0].clients[0].points] == [
        "client:throughput[2]", "client:throughput[4]"]
    # other kinds run once, without a warm-up; --repeats applies to every client
    plan = make_plan(rb, artifacts_dir="a", overrides=PlanOverrides(repeats=2, warmup=False))
    assert [r.label for c, _p, r in runs(plan) if c.name == "client2"] == [
        "client:client2 run 1/2", "client:client2 run 2/2"]
    plan = make_plan(rb, artifacts_dir="a")
    assert [r.label for c, _p, r in runs(plan) if c.name == "client2"] == ["client:client2"]


def test_grid_sweep_plans_every_combination() -> None:
    rb = one("", "vllm serve m", ('name=g sweep="C=1,8;N=512,2048"',
                                  'vllm bench serve --model m --random-input-len "${N:-512}" '
                                  '--max-concurrency "${C:-1}"'))
    plan = make_plan(rb, artifacts_dir="a", overrides=PlanOverrides(repeats=1, warmup=False))
    assert [(p.value, p.env, r.result_path) for _c, p, r in runs(plan)] == [
        ("C=1,N=512", {"C": "1", "N": "512"}, "a/g-C_1_N_512.json"),
        ("C=1,N=2048", {"C": "1", "N": "2048"}, "a/g-C_1_N_2048.json"),
        ("C=8,N=512", {"C": "8", "N": "512"}, "a/g-C_8_N_512.json"),
        ("C=8,N=2048", {"C": "8", "N": "2048"}, "a/g-C_8_N_2048.json"),
    ]
    assert plan.variants[0].clients[0].sweep_vars == ("C", "N")
    assert "client g (serving) [C=1,N=512]:" in format_plan(plan)


def test_masking() -> None:
    assert mask_env({"HF_TOKEN": "x", "OPENAI_API_KEY": "y", "MY_SECRET_X": "z",
                     "DB_PASSWORD": "p", "NCCL_P2P_LEVEL": "SYS", "EMPTY_TOKEN": ""}) == {
        "HF_TOKEN": "***", "OPENAI_API_KEY": "***", "MY_SECRET_X": "***", "DB_PASSWORD": "***",
        "NCCL_P2P_LEVEL": "SYS", "EMPTY_TOKEN": ""}
    text = ("HF_TOKEN=hf_abc vllm serve m\nexport API_KEY='k 1'\n"
            "docker run -e HF_TOKEN=hf_abc -e HF_HOME=/x img\nHF_TOKEN=$HF_TOKEN x\n"
            "curl -H 'Authorization: Bearer sk-123' http://h")
    assert mask_command(text) == (
        "HF_TOKEN=*** vllm serve m\nexport API_KEY='***'\n"
        "docker run -e HF_TOKEN=*** -e HF_HOME=/x img\nHF_TOKEN=$HF_TOKEN x\n"
        "curl -H 'Authorization: Bearer ***' http://h")
    rb = one('env="HF_TOKEN=abc"', "HF_TOKEN=hf_abc vllm serve m")
    plan = make_plan(rb, artifacts_dir="a")
    out = format_plan(plan)
    assert "hf_abc" not in out and "=abc" not in out
    assert "HF_TOKEN=***" in out and "HF_TOKEN='***'" in out
    assert plan.server.command.startswith("HF_TOKEN=hf_abc")  # what runs is unmasked


def test_artifacts_dir_for() -> None:
    rb = good_runbook("gptoss-120b-tp2")
    assert artifacts_dir_for(rb, "20261130T100000Z-d0294125") == ART


# --------------------------------------------------------------------------- command


def fake_smi(tmp_path: Path, host: str) -> Path:
    script = tmp_path / "nvidia-smi"
    base = SMI / f"{host}.synthetic"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=*) cat '{base}.query.csv' ;;\n"
        f"  --query-compute-apps=*) cat '{base}.apps.csv' ;;\n"
        f"  topo) cat '{base}.topo.txt' ;;\n"
        f"  *) cat '{base}.smi.txt' ;;\n"
        "esac\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_cli_plan_ok_and_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    port = free_port()
    monkeypatch.setenv("WIKI_NVIDIA_SMI", str(fake_smi(tmp_path, "rtxpro6000-x2")))
    args = ["runbook", "plan", "wiki/models/gpt-oss-120b.md#gptoss-120b-tp2", "--root",
            str(GOOD), "--port", str(port)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert ("  env added: CUDA_VISIBLE_DEVICES=0,1 HF_TOKEN='***' NCCL_NVLS_ENABLE=0 "
            "NVSHMEM_DISABLE_NVLS=1 PYTHONFAULTHANDLER=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 "
            "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm VLLM_LOGGING_LEVEL=INFO\n") in out
    assert f"--port 8000 --port {port}\n" in out
    assert "verdict: ok\n" in out
    assert not (GOOD / ".artifacts").exists()  # nothing was started or written

    monkeypatch.setenv("WIKI_NVIDIA_SMI", str(fake_smi(tmp_path, "h200-x2")))
    assert main(args) == 1
    out = capsys.readouterr().out
    assert out.endswith("verdict: refused: runbook requires sm120; this host has NVIDIA H200 "
                        "(sm90) (--force to run anyway)\n")
    assert main([*args, "--force"]) == 0
    assert "verdict: ok (forced)\n" in capsys.readouterr().out


def test_cli_plan_without_nvidia_smi(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WIKI_NVIDIA_SMI", str(tmp_path / "missing-nvidia-smi"))
    assert main(["runbook", "plan", "gptoss-120b-tp2", "--root", str(GOOD), "--port",
                 str(free_port())]) == 1
    assert ("fail nvidia-smi: nvidia-smi not found: no NVIDIA driver on this host; runbook "
            "needs 2 GPUs") in capsys.readouterr().out


# --------------------------------------------------------------------------- containers

RUN_ID_DIR = ".artifacts/r/20261130T100000Z-0123abcd"


def test_docker_run_plan_labels_the_container_with_the_runs_tag() -> None:
    rb = one("gpus=0", "docker run -d --rm --name \"srv-${TAG:-x}\" --network host \\\n"
                "  -e HF_TOKEN=hf_secret -e VLLM_CPU_KVCACHE_SPACE=1 img \\\n"
                "  vllm serve m --port 8000")
    plan = make_plan(rb, artifacts_dir=RUN_ID_DIR)
    srv = plan.server
    assert srv.command.startswith(
        'docker run --label "wikitools.run.${WIKI_RUN_TAG}" -d --rm --name "srv-${TAG:-x}"')
    c = srv.container
    assert c is not None and (c.kind, c.detached, c.remove) == ("run", True, True)
    assert (c.name, c.workdir) == ("srv-${TAG:-x}", ".")
    # The container's -e settings are the server's environment (secrets masked); they are not
    # added to the shell's environment.
    assert srv.container_env == {"HF_TOKEN": "***", "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert srv.env == {}
    assert "hf_secret" not in srv.display_command
    assert "Unable to find image " in srv.fatal_patterns
    text = format_plan(plan)
    assert "  container env: HF_TOKEN='***' VLLM_CPU_KVCACHE_SPACE=1\n" in text
    assert ("  container: docker run, detached: its log followed with docker logs -f; found by "
            "its label wikitools.run.<tag>\n") in text
    assert "  stop: docker stop <that ID>; then the ID checked gone\n" in text


def test_compose_plan_runs_in_the_run_folder_with_a_project_of_its_own() -> None:
    page = parse_page(
        "```{ .yaml .runbook-file for=r path=srv.yaml }\nservices:\n  vllm:\n"
        "    image: vllm/vllm-openai:v0.11.0\n    network_mode: host\n"
        "    environment:\n      HF_TOKEN: hf_secret\n"
        "    command: [\"--model\", \"org/m\", \"--port\", \"8100\"]\n```\n\n"
        "```{ .bash #r .runbook-server gpus=0 }\ndocker compose -f srv.yaml up -d\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert diags == []
    rb = runbooks.get("r")
    assert rb.server.port == 8100 and rb.server.command.model == "org/m"
    plan = make_plan(rb, artifacts_dir=RUN_ID_DIR)
    srv = plan.server
    c = srv.container
    assert c is not None and (c.kind, c.detached) == ("compose", True)
    assert c.project == "wiki-20261130t100000z-0123abcd"
    assert srv.env == {"COMPOSE_PROJECT_NAME": "wiki-20261130t100000z-0123abcd"}
    assert (c.compose_program, c.compose_args, c.workdir) == (
        ("docker", "compose"), ("-f", "srv.yaml", "-p", c.project), RUN_ID_DIR)
    assert srv.command == f"docker compose -p {c.project} -f srv.yaml up -d"
    assert c.files == (("srv.yaml", rb.files[0].content),)
    assert srv.container_env == {"HF_TOKEN": "***"}
    text = format_plan(plan)
    assert f"  command (bash -c, in {RUN_ID_DIR}/):\n" in text
    assert f"  file: {RUN_ID_DIR}/srv.yaml (from the page)\n" in text
    assert (f"  stop: docker compose -f srv.yaml -p {c.project} down; then each container ID "
            "checked gone\n") in text
    # Editing the compose file changes the runbook's hash (its records become stale).
    edited = parse_page(page.text.replace("8100", "8101"), "p.md")
    assert extract_runbooks([edited], None)[0].get("r").blocks_hash != rb.blocks_hash


def test_plan_summary_comes_first_and_names_unset_variables(tmp_path: Path, capsys,
                                                           monkeypatch) -> None:
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "p.md").write_text(
        "---\ntitle: P\n---\n\n# P\n\n"
        '```bash { #r .runbook-server engine=vllm gpus=0 env="TP=1" }\n'
        'MODEL=${MODEL_DIR:-/models}/x\nvllm serve "$QWEN35_35B_AWQ" --tensor-parallel-size "$TP" '
        '--download-dir "$MODEL" --port 18124\n```\n\n'
        '```bash { .runbook-client for=r name=b sweep="C=1,2" }\n'
        'vllm bench serve --model m --max-concurrency "$C" --api-key "$BENCH_KEY" '
        "--tokenizer '$NOT_EXPANDED'\n```\n")
    monkeypatch.delenv("QWEN35_35B_AWQ", raising=False)
    monkeypatch.setenv("BENCH_KEY", "set")
    # the plan is printed in full, and the exit status says the server cannot run as it is
    assert main(["runbook", "plan", "r", "--root", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert "wiki/p.md:9:13: RB015 QWEN35_35B_AWQ is not set: the command needs it" in err
    lines = out.splitlines()
    assert lines[:4] == [
        "runbook wiki/p.md#r", "verdict: ok", "runs: one server; 8 client runs",
        "unset: QWEN35_35B_AWQ (read by the server command): set it before the run"]
    assert lines.index("details:") > lines.index("  client b (serving): 2 points (C=1,2), each "
                                                 "warm-up + 3 runs; a run under 10 s is too "
                                                 "short (min_duration=)")
    assert lines[-1] == "verdict: ok"
