"""The SGLang server adapter end to end, against test doubles of `python -m sglang.launch_server`
and `python -m sglang.bench_serving` (tests/fakes/pkgs/sglang): readiness by /health_generate,
facts from /server_info and SGLang's own log lines, a computed prompt count, teardown, and a
start-up failure named by SGLang's line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from harness import free_port, make_tree

from wikitools.cli import main
from wikitools.runbook.execution.host import port_free

PKGS = Path(__file__).resolve().parent / "fakes" / "pkgs"

PAGE = """# SGLang

```{{ .bash #sg .runbook-server engine=sglang gpus=0 ready_timeout=30 stop_timeout=3 }}
python3 -m sglang.launch_server --model-path /models/m --served-model-name m \\
  --tp-size 1 --host 127.0.0.1 --port {port}
```

```{{ .bash .runbook-client for=sg name=throughput sweep="CONCURRENCY=1,2" timeout=60 }}
python3 -m sglang.bench_serving --backend sglang --host 127.0.0.1 --port {port} --model m \\
  --random-output-len 4 --num-prompts "$(( ${{CONCURRENCY:-8}} * 3 ))" \\
  --max-concurrency "${{CONCURRENCY:-8}}"
```

<!-- wiki:results runbook=sg view=serving client=throughput -->
<!-- wiki:end -->
"""


@pytest.fixture
def wiki(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:
    monkeypatch.setenv("PYTHONPATH", f"{PKGS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.delenv("FAKE_SERVER_ARGS", raising=False)
    port = free_port()
    return make_tree(tmp_path, {"wiki/sg.md": PAGE.format(port=port)}), port


def record(root: Path) -> dict:
    (path,) = (root / "runbooks" / "sg").glob("*.json")
    return json.loads(path.read_text())


def test_a_run_against_sglang(wiki: tuple[Path, int], capsys: pytest.CaptureFixture[str]) -> None:
    root, port = wiki
    rc = main(["runbook", "run", "wiki/sg.md#sg", "--root", str(root), "--yes",
               "--repeats", "1", "--no-warmup"])
    assert rc == 0, capsys.readouterr()
    rec = record(root)
    assert rec["status"] == "ok"  # the double answers 404 on /health: only /health_generate works
    assert rec["engine"]["name"] == "sglang" and rec["engine"]["version"] == "0.0.0+fake"
    markers = rec["markers"]
    assert markers["attention_backend"] == "triton"  # /server_info
    assert markers["max_total_num_tokens"] == 123456
    assert markers["kv_cache_tokens"] == 123456 and markers["kv_cache_gib"] == 2.5  # the log
    assert markers["cuda_graph_capture_s"] == 1.5 and markers["cuda_graphs"] is True
    (client,) = rec["clients"]
    points = {p["value"]: p["metrics"] for p in client["points"]}
    assert points["1"]["num_prompts"] == 3 and points["1"]["completed"] == 3
    assert points["2"]["num_prompts"] == 6 and points["2"]["failed"] == 0
    assert points["2"]["tool"] == "sglang-bench-serving"
    assert port_free(port)
    page = (root / "wiki" / "sg.md").read_text()
    assert "SGLang 0.0.0+fake" in page


def test_sglang_start_up_failure_names_its_line(wiki: tuple[Path, int],
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    root, port = wiki
    monkeypatch.setenv("FAKE_SERVER_ARGS", "--exit-code 3")
    assert main(["runbook", "run", "wiki/sg.md#sg", "--root", str(root), "--yes"]) == 1
    capsys.readouterr()
    rec = record(root)
    assert rec["status"] == "failed" and rec["failed_step"] == "ready"
    # The cause is the log's error line (the fake server's log stamps each line with the time).
    assert re.fullmatch(r"server exited with code 3 during start-up: \[[\d: -]+\] RuntimeError: "
                        r"Not enough memory\. Please try to increase --mem-fraction-static\.",
                        rec["message"]), rec["message"]
    assert port_free(port)
