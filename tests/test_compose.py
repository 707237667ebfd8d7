"""Compose files and container launchers as the runbook tools read them."""

from __future__ import annotations

import pytest

from wikitools.runbook.engines.command import parse_server_command
from wikitools.runbook.engines.compose import ComposeError, compose_call, interpolate, parse_compose
from wikitools.runbook.engines.shell import heredoc_files, resolve
from wikitools.runbook.execution.containers import explain


@pytest.mark.parametrize(("text", "env", "expected"), [
    ("$${MODEL}", {}, "${MODEL}"),
    ("${TP:-4}", {}, "4"),
    ("${TP:-4}", {"TP": ""}, "4"),
    ("${TP-4}", {"TP": ""}, ""),
    ("${TP}", {"TP": "8"}, "8"),
    ("${MISSING}", {}, ""),
    ("${NEEDED:?set it}", {}, "${NEEDED}"),
    ("${X:+on}", {"X": "1"}, "on"),
    ("a$$b ${IMAGE:-vllm/vllm-openai:${TAG:-v1}}", {}, "a$b vllm/vllm-openai:v1"),
])
def test_interpolation(text: str, env: dict[str, str], expected: str) -> None:
    assert interpolate(text, env) == expected


def test_service_command_shapes() -> None:
    text = """services:
  a:
    image: img
    entrypoint: ["/bin/bash", "-lc"]
    command: |
      exec vllm serve "$${MODEL}" --tp 2
    environment:
      MODEL: ${MODEL:-org/m}
      FLAG: true
  b:
    image: img
    command: >
      python3 -m sglang.launch_server
      --model-path org/s --tp 4
    environment:
      - A=1
      - HOST_VAR
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, count: all, capabilities: [gpu]}]
"""
    cf = parse_compose(text, {"HOST_VAR": "from-host"})
    a, b = cf.services
    assert a.argv == ("/bin/bash", "-lc", 'exec vllm serve "${MODEL}" --tp 2\n')
    assert a.env == (("MODEL", "org/m"), ("FLAG", "true")) and not a.gpus
    assert b.argv == ("python3", "-m", "sglang.launch_server", "--model-path", "org/s", "--tp", "4")
    assert b.env == (("A", "1"), ("HOST_VAR", "from-host")) and b.gpus


def test_bad_compose_files() -> None:
    with pytest.raises(ComposeError, match=r"not valid YAML \(line 3\)"):
        parse_compose("services:\n  a: [\n")
    with pytest.raises(ComposeError, match="no `services:` map"):
        parse_compose("version: '3'\n")


def test_compose_cli() -> None:
    call = compose_call(["docker", "compose", "-f", "x.yaml", "--project-name", "p", "up", "-d",
                         "--timeout", "5", "srv"], 0)
    assert call is not None
    assert (call.files, call.project, call.subcommand, call.detached, call.services) == (
        ("x.yaml",), "p", "up", True, ("srv",))
    legacy = compose_call(["docker-compose", "up"], 0)
    assert legacy is not None and legacy.program == ("docker-compose",) and not legacy.detached
    assert compose_call(["docker", "run", "img"], 0) is None


def test_compose_up_reads_the_service_from_the_file() -> None:
    files = {"srv.yaml": "services:\n  s:\n    image: lmsysorg/sglang:v0.5\n"
                         "    container_name: sg\n    environment:\n      TP: '4'\n"
                         "    entrypoint: [bash, -lc]\n"
                         "    command: ['python3 -m sglang.launch_server --model-path o/m "
                         "--tp $${TP} --port 30001']\n"}
    cmd = parse_server_command("docker compose -f srv.yaml up -d", files=files)
    assert (cmd.engine, cmd.model, cmd.tp, cmd.port) == ("sglang", "o/m", 4, 30001)
    assert cmd.image == "lmsysorg/sglang:v0.5" and cmd.docker
    use = cmd.container
    assert use is not None and use.kind == "compose" and use.detached
    assert (use.name, use.service, use.compose_file) == ("sg", "s", "srv.yaml")
    missing = parse_server_command("docker compose -f other.yaml up -d", files=files)
    assert missing.engine is None
    assert missing.problems == ("docker compose up needs its compose file (other.yaml) on the "
                                "page, in a block marked `yaml { .runbook-file for=ID path=… }`",)


def test_docker_run_options_the_executor_needs() -> None:
    cmd = parse_server_command("docker run -dit --rm --name=srv img vllm serve m")
    use = cmd.container
    assert use is not None and (use.kind, use.detached, use.remove, use.name) == (
        "run", True, True, "srv")
    wrapped = parse_server_command("bash -c 'docker run --name srv img vllm serve m'")
    assert wrapped.container is not None and not wrapped.container.top_level
    exec_ = parse_server_command("docker exec -e TP=2 dev bash -lc 'vllm serve m --tp $TP'")
    assert exec_.container is not None and exec_.container.kind == "exec"
    assert (exec_.model, exec_.tp) == ("m", 2)


def test_heredoc_files_and_wrappers() -> None:
    text = "cat > s.sh <<'EOF'\nexec vllm serve \"$@\" --port 8000\nEOF\n./s.sh org/m -tp 2\n"
    assert heredoc_files(text) == {"s.sh": 'exec vllm serve "$@" --port 8000\n'}
    cmd = parse_server_command(text)
    assert (cmd.engine, cmd.model, cmd.tp, cmd.port) == ("vllm", "org/m", 2, 8000)
    uncalled = parse_server_command('#!/bin/bash\nexec vllm serve "$@"\n')
    assert uncalled.engine == "vllm" and uncalled.model is None  # not "$@"
    assert resolve("$M", {"M": "${M:-org/x}"}) == "org/x"


def test_docker_name_conflict_in_the_runs_words() -> None:
    line = ('docker: Error response from daemon: Conflict. The container name "/srv" is already '
            'in use by container "9ace3a5a7e47c99bfde5043f0a61b3013c261259a93e5cf03fae9a1642a84146"'
            '. You have to remove (or rename) that container to be able to reuse that name.')
    assert explain(line) == ("container name srv already in use by a container this run did not "
                             "start (ID 9ace3a5a7e47)")
    assert explain("Unable to find image 'x:1' locally") == "Unable to find image 'x:1' locally"
