"""Declared servers: the block's engine=/model=/tp= read and checked against its command, shown
by `plan`, and checked against the server's own answers (recorded real logs and /v1/models)."""

from __future__ import annotations

import json
from pathlib import Path

from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.execution.declared_check import (
    declaration_problems,
    engines_in_log,
    served_models,
    tp_in_log,
)
from wikitools.runbook.execution.plan import PlanOverrides, make_plan
from wikitools.runbook.execution.plantext import format_summary

FIXTURES = Path(__file__).parent / "fixtures"
VLLM_LOG = (FIXTURES / "engines" / "vllm-cpu-server.log").read_text().splitlines()
SGLANG_LOG = (FIXTURES / "gpu" / "h200-sglang" / "sglang-server.log").read_text().splitlines()
VLLM_TP2_LOG = (FIXTURES / "gpu" / "h200-x2" / "vllm-server-tp2-failed.log").read_text(
    ).splitlines()
MODELS = json.loads((FIXTURES / "engines" / "vllm-v1-models.json").read_text())

IN_IMAGE = ("docker run -d --gpus all --name glm --network host -e SERVED_MODEL_NAME=GLM-5 "
            "voipmonitor/vllm:glm51 /usr/local/bin/run-glm51-vllm")


def _read(attrs: str, command: str):  # type: ignore[no-untyped-def]
    page = parse_page(f"```bash {{ #r .runbook-server {attrs} }}\n{command}\n```\n", "p.md")
    return extract_runbooks([page], None)


def test_a_helper_inside_the_image_is_the_declared_engine() -> None:
    runbooks, diags = _read("engine=vllm model=GLM-5 tp=8 port=5264", IN_IMAGE)
    assert diags == []
    server = runbooks.get("r").server
    assert server.declared is not None and server.declared.stands_in
    assert server.declared.pairs() == (("engine", "vllm"), ("model", "GLM-5"), ("tp", "8"))
    assert (server.engine, server.port, server.command.model, server.command.gpus) == (
        "vllm", 5264, "GLM-5", 8)
    assert server.command.container is not None and server.command.container.name == "glm"
    assert server.command.launcher == "/usr/local/bin/run-glm51-vllm (declared vllm)"


def test_without_a_declaration_the_helper_is_not_understood() -> None:
    runbooks, diags = _read("", IN_IMAGE)
    assert runbooks.ids() == [] and [d.code for d in diags] == ["RB007"]


def test_a_declaration_the_command_contradicts_is_an_error_at_the_attribute() -> None:
    runbooks, diags = _read("engine=vllm model=Other tp=2", "vllm serve Qwen/Qwen3-0.6B --tp 4")
    assert runbooks.ids() == []
    assert [(d.col, d.code, d.message) for d in diags] == [
        (42, "RB010", "model=Other but the command serves Qwen/Qwen3-0.6B"),
        (54, "RB010", "tp=2 but the command sets tensor parallel size 4")]


def test_a_declaration_that_agrees_with_the_command_is_kept() -> None:
    runbooks, diags = _read("engine=vllm model=qwen tp=4",
                            "vllm serve Qwen/Qwen3-0.6B --tp 4 --served-model-name qwen")
    assert diags == []
    declared = runbooks.get("r").server.declared
    assert declared is not None and not declared.stands_in


def test_a_declaration_names_its_engine_and_model() -> None:
    _r, diags = _read("model=GLM-5", IN_IMAGE)
    assert [d.message for d in diags if d.code == "RB004"] == [
        "model= declares what the server serves: declare its engine= too (vllm, sglang or "
        "llama.cpp)"]
    _r, diags = _read("engine=vllm tp=8", IN_IMAGE)
    assert [d.message for d in diags if d.code == "RB004"] == [
        "tp= declares what the server serves: declare its model= too"]
    _r, diags = _read("engine=vllm model=GLM-5 tp=0", IN_IMAGE)
    assert [d.message for d in diags if d.code == "RB004"] == [
        "bad value for tp: '0' (expected a whole number above 0)"]


def test_a_compose_service_running_a_helper_is_the_declared_engine() -> None:
    page = parse_page(
        "```yaml { .runbook-file for=r path=compose.yaml }\nservices:\n  glm:\n"
        "    image: voipmonitor/vllm:glm51\n    network_mode: host\n    gpus: all\n"
        "    command: run-glm52-v14-server\n```\n\n"
        "```bash { #r .runbook-server engine=vllm model=GLM-5 tp=4 port=5002 }\n"
        "docker compose up -d\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert diags == []
    cmd = runbooks.get("r").server.command
    assert cmd.container is not None and cmd.container.service == "glm"
    assert (cmd.model, cmd.tp, cmd.image) == ("GLM-5", 4, "voipmonitor/vllm:glm51")


def test_plan_shows_the_declaration_as_such(tmp_path: Path) -> None:
    runbooks, _ = _read("engine=vllm model=GLM-5 tp=8 port=5264", IN_IMAGE)
    plan = make_plan(runbooks.get("r"), root=tmp_path, artifacts_dir=".artifacts/r/x",
                     overrides=PlanOverrides(), verdict=None)
    summary = format_summary(plan)
    assert ("  declared by the block, not read from its command: engine=vllm model=GLM-5 tp=8 "
            "port=5264; checked against the server after readiness (/v1/models for the model, "
            "its log for the engine and TP)") in summary.splitlines()


def test_plan_shows_what_a_compose_service_runs(tmp_path: Path) -> None:
    page = parse_page(
        "```yaml { .runbook-file for=r path=compose.yaml }\nservices:\n  vllm:\n"
        "    image: vllm/vllm-openai:v0.26.0\n    network_mode: host\n"
        "    command: [\"--model\", \"Qwen/Qwen3-0.6B\", \"--tensor-parallel-size\", \"2\"]\n"
        "```\n\n```bash { #r .runbook-server }\ndocker compose up -d\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert diags == []
    plan = make_plan(runbooks.get("r"), root=tmp_path, artifacts_dir=".artifacts/r/x",
                     overrides=PlanOverrides(), verdict=None)
    lines = format_summary(plan).splitlines()
    assert "  compose service vllm of compose.yaml runs: --model Qwen/Qwen3-0.6B " \
        "--tensor-parallel-size 2" in lines
    assert "  read from the command: engine=vllm model=Qwen/Qwen3-0.6B tp=2 port=8000" in lines


def test_engines_and_tp_read_from_real_logs() -> None:
    assert engines_in_log(VLLM_LOG) == ["vllm"]
    assert engines_in_log(SGLANG_LOG) == ["sglang"]
    assert tp_in_log("vllm", VLLM_LOG) == 1
    assert tp_in_log("vllm", VLLM_TP2_LOG) == 2
    assert tp_in_log("sglang", SGLANG_LOG) == 1
    assert served_models(MODELS) == ["/work/main/.cache/tiny-model"]
    assert served_models({"error": "x"}) is None


def test_declaration_problems_say_what_was_declared_and_what_is_served() -> None:
    from wikitools.runbook.blocks.declaration import Declaration

    models = served_models(MODELS)
    right = Declaration("vllm", "/work/main/.cache/tiny-model", 1)
    assert declaration_problems(right, VLLM_LOG, models) == []
    assert declaration_problems(Declaration("vllm", "tiny", 2), VLLM_LOG, models) == [
        "declared model=tiny, the server serves /work/main/.cache/tiny-model",
        "declared tp=2, the server serves tp=1"]
    assert declaration_problems(Declaration("vllm", "m"), SGLANG_LOG, ["m"]) == [
        "declared engine=vllm, the server is SGLang"]
    assert declaration_problems(Declaration("sglang", "m", 1), ["nothing to see"], None) == [
        "declared model=m, /v1/models did not answer with a list of models",
        "declared engine=sglang, the server's log has none of SGLang's start-up lines"]


def test_scan_write_marks_a_declared_server_that_then_plans(tmp_path: Path) -> None:
    from wikitools.cli import main
    from wikitools.runbook.blocks.extract import load_runbooks

    (tmp_path / "wiki.yml").write_text("docs_dir: .\n")
    page = tmp_path / "p.md"
    page.write_text("# P\n\n```bash\n" + IN_IMAGE.replace(
        " voipmonitor/", " -e TP_SIZE=4 -e PORT=5003 voipmonitor/") + "\n```\n")
    assert main(["runbook", "scan", "--write", "--root", str(tmp_path)]) == 0
    assert ("```bash { #glm-5-tp4 .runbook-server engine=vllm model=GLM-5 tp=4 port=5003 "
            "gpus=4 }") in page.read_text()
    assert main(["runbook", "scan", "--check", "--root", str(tmp_path)]) == 0
    runbooks, diags, _pages = load_runbooks(tmp_path)
    assert [d for d in diags if d.severity.name == "ERROR"] == []
    server = runbooks.get("glm-5-tp4").server
    assert server.declared is not None and server.declared.stands_in
    assert (server.port, server.command.gpus) == (5003, 4)
