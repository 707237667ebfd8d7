"""An engine added purely as data (llama.cpp's `llama-server` in `engines`): its launcher, flags,
docker image and readiness are understood, and a full `wiki runbook run` against a fake
llama-server records it, with its build and layer offload read from the log."""

from __future__ import annotations

import json
import os

import pytest
from harness import FAKE_BIN, free_port

from wikitools.cli import main
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.command import parse_server_command
from wikitools.runbook.engines.markers import scan_markers
from wikitools.runbook.execution.host import port_free
from wikitools.runbook.execution.logwatch import LogWatcher
from wikitools.runbook.session import prepare

PAGE = """---
title: A GGUF model with llama.cpp
---

# A GGUF model

```{{ .bash #llama-rb .runbook-server gpus=0 ready_timeout=30 stop_timeout=3 }}
llama-server -m tiny.gguf --port {port} -ngl 99 -c 4096
```

```{{ .bash .runbook-client for=llama-rb name=bench timeout=30 }}
vllm bench serve --model tiny.gguf --port {port} --num-prompts 4
```

```{{ .bash .runbook-client for=llama-rb name=hello timeout=30 }}
curl -sS http://127.0.0.1:{port}/v1/completions -H 'Content-Type: application/json' \\
  -d '{{"model": "tiny.gguf", "prompt": "Hello", "max_tokens": 4}}'
```

<!-- wiki:results runbook=llama-rb view=serving -->
<!-- wiki:end -->
"""


def test_llama_server_command_understood():
    c = parse_server_command("llama-server -m /models/q4.gguf --port 8081 -ngl 99 --host 0.0.0.0")
    assert (c.engine, c.launcher, c.model, c.port, c.host) == (
        "llama.cpp", "llama-server", "/models/q4.gguf", 8081, "0.0.0.0")
    assert c.flag("--n-gpu-layers") == "99"
    assert c.problems == ()


def test_llama_server_docker_image_entrypoint():
    c = parse_server_command(
        "docker run --gpus all -p 8080:8080 -v /models:/models "
        "ghcr.io/ggml-org/llama.cpp:server -m /models/q4.gguf --port 8080 -ngl 99")
    assert (c.engine, c.docker, c.model, c.port) == ("llama.cpp", True, "/models/q4.gguf", 8080)
    assert c.launcher == "ghcr.io/ggml-org/llama.cpp:server (entrypoint)"


def test_plan_uses_the_engine_facts(tmp_path):
    port = free_port()
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "llama.md").write_text(PAGE.format(port=port))
    prepared = prepare("llama-rb", tmp_path)
    srv = prepared.plan.server
    assert srv.engine == "llama.cpp"
    assert srv.health_url == f"http://127.0.0.1:{port}{engines.LLAMA_CPP.health_path}"
    assert srv.fatal_patterns == engines.LLAMA_CPP.fatal_log


@pytest.fixture
def fake_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_SERVER_ARGS", raising=False)
    monkeypatch.delenv("FAKE_BENCH_ARGS", raising=False)


def test_run_against_a_fake_llama_server(tmp_path, capsys, fake_path):
    port = free_port()
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "llama.md").write_text(PAGE.format(port=port))
    assert main(["runbook", "run", "llama-rb", "--root", str(tmp_path), "--yes"]) == 0, (
        capsys.readouterr())
    (path,) = (tmp_path / "runbooks" / "llama-rb").glob("*.json")
    rec = json.loads(path.read_text())
    assert rec["status"] == "ok"
    assert rec["engine"]["name"] == "llama.cpp"
    assert rec["engine"]["version"] == "b4242"  # from the log's build line
    assert (rec["markers"]["gpu_layers"], rec["markers"]["model_layers"]) == (33, 33)
    assert rec["server"]["model"] == "tiny.gguf"
    bench, hello = rec["clients"]
    assert bench["points"][0]["metrics"]["completed"] == 4
    assert hello["points"][0]["metrics"]["usage"]["completion_tokens"] == 4
    assert "llama.cpp b4242" in (tmp_path / "wiki" / "llama.md").read_text()
    assert port_free(port)


def test_llama_server_load_failure_is_located(tmp_path, capsys, fake_path, monkeypatch):
    port = free_port()
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "llama.md").write_text(PAGE.format(port=port))
    monkeypatch.setenv("FAKE_SERVER_ARGS", "--exit-code 1")
    assert main(["runbook", "run", "llama-rb", "--root", str(tmp_path), "--yes"]) == 1
    out = capsys.readouterr().out
    assert "FAILED at ready: server exited with code 1" in out
    assert "error loading model" in out
    assert port_free(port)


def test_log_watcher_sees_the_listening_line(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("build: 4242 (abcdef12) with cc for x86_64-linux-gnu\n"
                   "main: server is listening on http://127.0.0.1:8080 - starting the main loop\n")
    watcher = LogWatcher(log, engines.LLAMA_CPP.fatal_log, engines.LLAMA_CPP.ready_log)
    watcher.poll()
    assert watcher.ready_line is not None and "listening" in watcher.ready_line
    assert watcher.fatal_line is None
    assert scan_markers(watcher.lines)["engine_version"] == "b4242"
