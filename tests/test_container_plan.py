"""What the plan says a container runbook runs is what runs: the run's own Compose project
whatever the page names, the page's own compose file or a refusal, the run's label on
`docker run`. (Against the real daemon: tests/e2e/test_docker_ownership.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from wikitools.cli import main
from wikitools.core.errors import UsageError
from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.engines.shell import split_commands
from wikitools.runbook.execution import locks
from wikitools.runbook.execution.plan import make_plan

RUN_DIR = ".artifacts/r/20261201T000000Z-0123abcd"
PROJECT = "wiki-20261201t000000z-0123abcd"
COMPOSE = ("```{ .yaml .runbook-file for=r path=compose.yaml }\nservices:\n  vllm:\n"
           "    image: vllm/vllm-openai:v0.11.0\n    network_mode: host\n"
           "    command: [\"--model\", \"org/m\", \"--port\", \"8100\"]\n```\n\n")


def _runbook(server: str, files: str = COMPOSE):  # type: ignore[no-untyped-def]
    page = parse_page(f"{files}```{{ .bash #r .runbook-server gpus=0 }}\n{server}\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    return (None if diags else runbooks.get("r")), diags


def _projects(command: str) -> list[str]:
    """Every project name the compose call in `command` passes, as the shell splits it."""
    (cmd,) = [c for c in split_commands(command)
               if {"compose", "docker-compose"} & set(c.argv)]
    argv, out = cmd.argv, []
    for i, a in enumerate(argv):
        if a in ("-p", "--project-name"):
            out.append(argv[i + 1])
        elif a.startswith("--project-name="):
            out.append(a.split("=", 1)[1])
        elif a.startswith("-p") and not a.startswith("--") and len(a) > 2:
            out.append(a[2:])
    return out


@pytest.mark.parametrize("server", [
    "docker compose -pvictim -f compose.yaml up -d",
    "docker compose -p victim -f compose.yaml up -d",
    "docker compose --project-name victim -f compose.yaml up -d",
    "docker compose --project-name=victim -f compose.yaml up -d",
    "COMPOSE_PROJECT_NAME=victim docker compose -f compose.yaml up -d",
    "docker-compose -f compose.yaml -p victim up -d",
])
def test_compose_project_is_always_the_runs_own_whatever_the_page_says(server: str) -> None:
    rb, diags = _runbook(server)
    assert diags == []
    plan = make_plan(rb, artifacts_dir=RUN_DIR)
    spec = plan.server.container
    assert spec is not None and spec.project == PROJECT
    # up: exactly one project on the command line, the run's (it outranks the environment and
    # the file's `name:`); logs and down: the same, and nothing of the page's.
    assert _projects(plan.server.command) == [PROJECT]
    assert _projects(" ".join([*spec.compose_program, *spec.compose_args, "down"])) == [PROJECT]
    assert "victim" not in spec.compose_args
    assert plan.server.env["COMPOSE_PROJECT_NAME"] == PROJECT


def test_compose_file_named_by_name_in_the_file_is_overridden_by_the_runs_project() -> None:
    files = COMPOSE.replace("services:\n", "name: ${PROJ:-victim}\nservices:\n")
    rb, diags = _runbook("docker compose -f compose.yaml up -d", files)
    assert diags == []
    plan = make_plan(rb, artifacts_dir=RUN_DIR)
    assert _projects(plan.server.command) == [PROJECT]


def test_compose_file_the_server_reads_elsewhere_is_refused_not_shown_as_the_pages() -> None:
    """A file block `path=compose.yaml` while the server runs `-f /elsewhere/compose.yaml`: the
    plan cannot say what runs, so the block is an error naming the file."""
    _rb, diags = _runbook("docker compose -f /elsewhere/compose.yaml up -d")
    messages = [d.message for d in diags]
    assert any("-f /elsewhere/compose.yaml reads a file outside the run's folder, not a file "
               "block of the page" in m for m in messages), messages


def test_compose_file_of_another_folder_with_the_same_name_is_not_the_pages() -> None:
    _rb, diags = _runbook("docker compose -f deploy/compose.yaml up -d")
    assert any("needs its compose file (deploy/compose.yaml) on the page" in d.message
               for d in diags), [d.message for d in diags]


def test_compose_file_by_its_own_path_is_the_pages() -> None:
    rb, diags = _runbook("docker compose -f ./compose.yaml up -d")
    assert diags == []
    container = make_plan(rb, artifacts_dir=RUN_DIR).server.container
    assert container is not None
    assert (container.kind, container.project, container.workdir) == ("compose", PROJECT, RUN_DIR)
    assert container.compose_args == ("-f", "./compose.yaml", "-p", PROJECT)
    assert [path for path, _text in container.files] == ["compose.yaml"]


def test_compose_command_inside_a_quoted_string_cannot_get_its_own_project() -> None:
    rb, diags = _runbook("bash -lc 'docker compose -f compose.yaml -p victim up -d'")
    assert diags == []
    with pytest.raises(UsageError, match="could not give it its own Compose project"):
        make_plan(rb, artifacts_dir=RUN_DIR)


def test_lock_path_problem_is_a_located_error_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "p.md").write_text(
        "---\ntitle: P\n---\n\n# P\n\n```bash { #r .runbook-server engine=vllm gpus=0 }\n"
        "vllm serve m --port 18699\n```\n", encoding="utf-8")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "runbooks").write_text("a file where the lock folder belongs\n")
    monkeypatch.setenv(locks.STATE_ENV, str(state))
    code = main(["runbook", "run", "r", "--root", str(tmp_path), "--yes", "--no-render"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{state / 'runbooks'}: a file where a lock folder belongs; move it away" in err
    assert "Traceback" not in err
