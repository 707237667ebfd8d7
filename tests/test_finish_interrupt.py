"""No lost record: a real SIGINT to a real `wiki runbook run` while it scores the KLD captures,
and while it hashes the files for the receipt (after the last teardown), still writes the run's
record, failed at that step with everything measured, and leaves no file under runbooks/ that
the record does not name. The server is the fake vLLM; the KLD client is the real
`wiki kld capture`. The captures are large enough (full vocabulary) and the model folder holds a
sparse file large enough that each phase lasts seconds: the signal is sent when the run says
the phase began, and the record says which phase it stopped. A failure in either phase is
recorded the same way."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from harness import free_port, make_tree, port_free

FAKE_BIN = Path(__file__).parent / "fakes" / "bin"
WIKI = Path(sys.executable).parent / "wiki"

PAGE = """---
title: Interrupted while finishing
---

# Interrupted while finishing

```bash {{ #kld-rb .runbook-server engine=vllm gpus=0 ready_timeout=30 stop_timeout=3 }}
vllm serve ./model --port {port}
```

```bash {{ .runbook-client for=kld-rb name=kld kind=kld timeout=120 }}
wiki kld capture --model ./model --seed 0 --positions 300 --id-range 3-100 --top-k -1
```
"""


def _tree(tmp_path: Path, big: int) -> tuple[Path, int]:
    port = free_port()
    make_tree(tmp_path, {"wiki/finish.md": PAGE.format(port=port)})
    (tmp_path / "model").mkdir()
    with (tmp_path / "model/model.safetensors").open("wb") as f:
        f.truncate(big)  # sparse: hashing reads `big` bytes of zeros
    return tmp_path, port


def _run_until(root: Path, line: str) -> tuple[subprocess.Popen[str], list[str]]:
    """`wiki runbook run` in its own process; SIGINT as soon as its progress prints `line`."""
    env = {**os.environ, "PATH": f"{FAKE_BIN}:{WIKI.parent}:{os.environ['PATH']}",
           "FAKE_SERVER_ARGS": "--vocab 1200"}
    proc = subprocess.Popen([str(WIKI), "runbook", "run", "kld-rb", "--root", str(root), "--yes",
                             "--repeats", "2", "--no-warmup", "--no-render"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    assert proc.stderr is not None
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            text = lines.get(timeout=1)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        seen.append(text)
        if line in text:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
            while not lines.empty():
                seen.append(lines.get())
            return proc, seen
    proc.kill()
    proc.wait()
    pytest.fail(f"the run never printed {line!r}:\n" + "".join(seen))


def _record(root: Path) -> dict:
    (path,) = (root / "runbooks/kld-rb").glob("*.json")
    return json.loads(path.read_text())


def _named(rec: dict) -> set[str]:
    return {p["metrics"]["kld_reference"] for c in rec["clients"] for p in c["points"]
            if "kld_reference" in p["metrics"]}


def test_sigint_while_scoring_still_writes_the_record(tmp_path: Path) -> None:
    root, port = _tree(tmp_path, 1 << 20)
    proc, out = _run_until(root, "scoring the KLD captures")
    assert proc.returncode == 1, "".join(out)
    rec = _record(root)
    assert rec["status"] == "failed" and rec["failed_step"] == "kld scoring"
    assert rec["message"] == "interrupted by SIGINT while scoring the KLD captures"
    assert rec["steps"][-1]["name"] == "kld scoring"
    (point,) = rec["clients"][0]["points"]
    assert point["status"] == "ok" and len(point["samples"]) == 2  # both captures measured
    assert all((root / s["result_file"]).is_file() for s in point["samples"])
    # Nothing under runbooks/ but the record and what it names.
    kept = {p.relative_to(root).as_posix() for p in (root / "runbooks").rglob("*")
            if p.is_file()}
    assert kept == {f"runbooks/kld-rb/{rec['run_id']}.json", *_named(rec)}
    assert port_free(port)


def test_sigint_while_hashing_for_the_receipt_keeps_the_scores(tmp_path: Path) -> None:
    root, port = _tree(tmp_path, 3 << 30)
    proc, out = _run_until(root, "hashing the files for the receipt")
    assert proc.returncode == 1, "".join(out)
    rec = _record(root)
    assert rec["status"] == "failed" and rec["failed_step"] == "receipt", "".join(out)
    assert rec["message"] == "interrupted by SIGINT while hashing the files for the receipt"
    (point,) = rec["clients"][0]["points"]
    m = point["metrics"]
    assert m["kld_runs"] == 1 and m["kld_mean"] == 0 and m["kld_positions"] == 299
    # The reference the scores name is kept beside the record, and nothing else is.
    ref = m["kld_reference"]
    assert (root / ref).is_file()
    kept = {p.relative_to(root).as_posix() for p in (root / "runbooks").rglob("*")
            if p.is_file()}
    assert kept == {f"runbooks/kld-rb/{rec['run_id']}.json", ref}
    assert port_free(port)


def test_a_failure_while_hashing_is_recorded_with_the_scores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from wikitools.cli import main
    from wikitools.runbook import session

    def broken(*_a: object, **_k: object) -> None:
        raise OSError(5, "Input/output error")

    root, _port = _tree(tmp_path, 1 << 10)
    monkeypatch.setenv("PATH", f"{FAKE_BIN}:{WIKI.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SERVER_ARGS", "--vocab 8")
    monkeypatch.setattr(session, "build_receipt", broken)
    assert main(["runbook", "run", "kld-rb", "--root", str(root), "--yes", "--repeats", "2",
                 "--no-warmup", "--no-render"]) == 1
    rec = _record(root)
    assert rec["failed_step"] == "receipt" and rec["message"] == (
        "failed while hashing the files for the receipt: OSError: [Errno 5] Input/output error")
    assert rec["clients"][0]["points"][0]["metrics"]["kld_runs"] == 1
    assert (root / rec["clients"][0]["points"][0]["metrics"]["kld_reference"]).is_file()


def test_a_run_that_returns_its_record_still_keeps_the_reference_it_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet node returns the record to the driver instead of writing it: the reference the
    record names is kept in the node's checkout all the same."""
    from wikitools.runbook.session import RunOptions, prepare, run_prepared

    root, _port = _tree(tmp_path, 1 << 10)
    monkeypatch.setenv("PATH", f"{FAKE_BIN}:{WIKI.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SERVER_ARGS", "--vocab 8")
    result = run_prepared(prepare("kld-rb", root, RunOptions(repeats=2, warmup=False,
                                                             render=False, write=False)))
    assert result.record_path is None and result.record.ok, result.record.message
    ref = result.record.clients[0].points[0].metrics["kld_reference"]
    assert (root / ref).is_file() and not list((root / "runbooks/kld-rb").glob("*.json"))
