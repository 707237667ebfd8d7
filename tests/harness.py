"""What the tests share: wiki trees (`make_tree`, the `wiki_tree` fixture), the fake runbook page
and its records (the fake engine on PATH), polling (`wait_until`); and for the engine, Docker and
fleet tests the engine environment and its tiny model, free ports, processes found by a tag in
their environment, and `Run`, one `wiki runbook run` as a subprocess whose record and leftovers
the tests check.

Every process a run starts inherits TAG_VAR=<the run's tag>, so a test finds (and as a last
resort kills) exactly its own processes, never anyone else's."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fakes.procs import tagged

from wikitools.pages.parse import read_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.execution.processes import command_of
from wikitools.runbook.records.record import ClientResult, Point, Record, Step, write_record
from wikitools.runbook.rendering.render import render_pages

REPO = Path(__file__).resolve().parents[1]
ENGINE_VENV = Path(os.environ.get("WIKI_ENGINE_VENV", REPO / ".venv-engine"))
ENGINE_BIN = ENGINE_VENV / "bin"
MAKE_MODEL = REPO / "scripts" / "make-dummy-model.py"
TAG_VAR = "WIKI_E2E_TAG"
HAVE_ENGINE = (ENGINE_BIN / "vllm").is_file()
NO_ENGINE = (f"engine environment missing ({ENGINE_VENV}); create it with "
             "scripts/setup-engine-env.sh")
# What vLLM logs when the model path of the pages' "bad model" runbooks does not exist.
BAD_MODEL = ("huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
             "'namespace/repo_name': '/nonexistent/tiny-model'. Use `repo_type` argument if "
             "needed.")
# The marks of a test that serves with the real vLLM CPU engine.
needs_engine = (pytest.mark.engine, pytest.mark.skipif(not HAVE_ENGINE, reason=NO_ENGINE))


def make_tiny_model(out: Path) -> Path:
    """The tiny model with dummy weights (scripts/make-dummy-model.py --preset tiny)."""
    subprocess.run([str(ENGINE_BIN / "python"), str(MAKE_MODEL), str(out), "--preset", "tiny"],
                   check=True, capture_output=True, timeout=120)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except OSError:
        return True


def wait_until(ready: Callable[[], object], timeout: float, interval: float = 0.1) -> bool:
    """Poll `ready` until it is true or `timeout` seconds pass; its last answer, as a bool."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() >= deadline:
            return bool(ready())
        time.sleep(interval)
    return True


def without_gpus(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """This host as one without GPUs (its nvidia-smi a file that is not there), so that a
    plan's preflight says the same on every machine."""
    monkeypatch.setenv("WIKI_NVIDIA_SMI", str(folder / "no-nvidia-smi"))


def tagged_pids(tag: str) -> list[int]:
    """Live processes whose environment carries TAG_VAR=tag (inherited by every process the run
    started: bash, the server, its engine core and workers, the clients)."""
    return tagged(TAG_VAR, tag)


def describe(pids: Sequence[int]) -> str:
    return "\n".join(f"{pid}: {command_of(pid, limit=200)}" for pid in pids)


def step(record: Mapping[str, Any], name: str) -> dict[str, Any]:
    for s in record["steps"]:
        if s["name"] == name:
            return dict(s)
    raise AssertionError(f"no step {name!r} in {[s['name'] for s in record['steps']]}")


def strict_json(path: Path) -> dict[str, Any]:
    """A record file: strict JSON (no NaN), serialised deterministically (sorted keys, indent 2,
    UTF-8, LF, one trailing newline)."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and "\r" not in text

    def refuse(name: str) -> Any:
        raise AssertionError(f"record is not strict JSON: it contains {name}")

    data = json.loads(text, parse_constant=refuse)
    assert text == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert isinstance(data, dict)
    return data


class Run:
    """`wiki runbook run RUNBOOK --yes` in `root` as a subprocess, with the engine environment
    first on PATH, TINY_MODEL naming the tiny model and this run's tag in the environment."""

    def __init__(self, root: Path, runbook: str, *, port: int, model: Path | None,
                 args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.runbook = runbook
        self.port = port
        self.tag = uuid.uuid4().hex[:16]
        self.env = dict(os.environ)
        self.env.update(
            PATH=f"{ENGINE_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            TINY_MODEL=str(model or "/nonexistent-model"),
            HF_HUB_OFFLINE="1",
            NO_COLOR="1",
            **(env or {}),
            **{TAG_VAR: self.tag},
        )
        self.env.pop("VIRTUAL_ENV", None)
        self.argv = [sys.executable, "-m", "wikitools", "runbook", "run", runbook, "--yes",
                     *args]
        self.proc: subprocess.Popen[str] | None = None
        self.seconds = 0.0
        self.stdout = ""
        self.stderr = ""
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, cwd=self.root, env=self.env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            self.stdout, self.stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.stdout, self.stderr = self.proc.communicate()
            self.cleanup()
            pytest.fail(f"wiki runbook run {self.runbook} did not finish in {timeout:g} s\n"
                        f"{self.output}")
        self.seconds = time.monotonic() - self._t0
        return self.proc.returncode

    def __call__(self, timeout: float = 900) -> int:
        self.start()
        return self.wait(timeout)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def output(self) -> str:
        return f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"

    def stored_records(self) -> list[Path]:
        """The records this run stored with the wiki, under `runbooks/`."""
        return sorted((self.root / "runbooks" / self.runbook).glob("*.json"))

    def record_path(self) -> Path:
        """The run's record: under `runbooks/`, or in its artifacts folder for a run that
        preflight refused (such a record never goes into the wiki)."""
        paths = self.stored_records() or sorted(
            (self.root / ".artifacts" / self.runbook).glob("*/record.json"))
        assert len(paths) == 1, f"expected one record, found {paths}\n{self.output}"
        return paths[0]

    def record(self) -> dict[str, Any]:
        return strict_json(self.record_path())

    def artifacts(self) -> Path:
        return self.root / self.record()["artifacts_dir"]

    def wait_for_client(self, pattern: str, timeout: float = 900) -> Path:
        """The log of the first client run matching `pattern` (a glob below the run's artifacts
        folder), once the client process has written to it: the client is running."""
        folder = self.root / ".artifacts" / self.runbook
        found: list[Path] = []

        def started() -> bool:
            assert self.running(), f"the run ended before its client started\n{self.output}"
            found[:] = [p for p in folder.glob(pattern) if p.stat().st_size > 0]
            return bool(found)

        assert wait_until(started, timeout, 0.2), "the client never started"
        return found[0]

    def leftovers(self) -> list[str]:
        """What of this run is still there (processes carrying its tag)."""
        return [f"process {line}" for line in describe(tagged_pids(self.tag)).splitlines()]

    def cleanup(self) -> None:
        """Last resort so a failing test leaves nothing behind: kill only our tagged processes."""
        for pid in tagged_pids(self.tag):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def assert_nothing_left(self, timeout: float = 10) -> None:
        wait_until(lambda: not self.leftovers(), timeout, 0.2)
        left = self.leftovers()
        self.cleanup()
        assert not left, "left running:\n" + "\n".join(left)
        assert port_free(self.port), f"port {self.port} still accepts connections"


def assert_failed(run: Run, rc: int, failed_step: str) -> dict[str, Any]:
    """The run failed at exactly `failed_step`, said why in one line, reported it without a
    traceback of its own, tore down whatever it started and left nothing behind."""
    assert rc == 1, run.output
    rec = run.record()
    assert rec["status"] == "failed", rec
    assert rec["failed_step"] == failed_step, (rec["failed_step"], rec["message"])
    assert rec["message"] and "\n" not in rec["message"]
    assert f"FAILED at {failed_step}" in run.stdout, run.output
    # An expected failure is reported, not raised: no traceback from the tool itself (the
    # engine's own traceback may appear in the log tail it prints).
    assert "wikitools" not in run.stderr.replace("\n", ""), run.output
    teardown = step(rec, "teardown")
    if failed_step == "preflight":  # refused before anything started: nothing to tear down
        assert run.stored_records() == [], "a refused run wrote into runbooks/"
        assert "start" not in [s["name"] for s in rec["steps"]], rec["steps"]
        assert (teardown["status"], teardown["message"]) == ("skipped", "nothing was started")
    else:
        assert teardown["status"] == "ok", rec["steps"]
    run.assert_nothing_left()
    return rec


# --------------------------------------------------------------------------- wiki trees


def make_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write `files` under `root` (a new tree, or more files in one); a tree of wiki/ pages
    without a wiki.yml or mkdocs.yml (given or already there) gets a wiki.yml naming wiki/ its
    docs folder."""
    configured = {"wiki.yml", "mkdocs.yml"} & (set(files) | {
        name for name in ("wiki.yml", "mkdocs.yml") if (root / name).exists()})
    if any(rel.startswith("wiki/") for rel in files) and not configured:
        files = {"wiki.yml": "docs_dir: wiki\n", **files}
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


# A wiki configured by mkdocs.yml alone, its pages under wiki/ (with make_tree: {**MKDOCS, …}).
MKDOCS = {"mkdocs.yml": "site_name: t\ndocs_dir: wiki\n"}


@pytest.fixture
def wiki_tree(tmp_path: Path) -> Callable[[dict[str, str | bytes]], Path]:
    """`wiki_tree(files)`: the files written under the test's own folder (`make_tree`)."""
    return lambda files: make_tree(tmp_path, files)


# --------------------------------------------------------------------------- the fake runbook page
# One page with a runbook of the fake engine (tests/fakes/bin/vllm first on PATH), its records
# and its rendered regions.

FAKE_BIN = Path(__file__).parent / "fakes" / "bin"

PAGE = """---
title: Fake model on one GPU
---

# Fake model

```{{ .bash #fake-rb .runbook-server engine=vllm gpus=0 ready_timeout=30 stop_timeout=3 }}
vllm serve fake-model --port {port}{extra}
```

```{{ .bash .runbook-client for=fake-rb name=bench sweep="C=1,2" timeout=30 }}
vllm bench serve --model fake-model --num-prompts 4 --max-concurrency "${{C:-1}}"
```

<!-- wiki:results runbook=fake-rb view=serving -->
<!-- wiki:end -->

## History

<!-- wiki:results runbook=fake-rb view=history -->
<!-- wiki:end -->
"""


def make_wiki(tmp_path: Path, port: int = 18000, extra: str = "") -> Path:
    return make_tree(tmp_path, {"wiki/fake.md": PAGE.format(port=port, extra=extra)})


def runbook_hash(root: Path) -> str:
    runbooks, _ = extract_runbooks([read_page(root / "wiki/fake.md", root)], root)
    return runbooks.get("fake-rb").blocks_hash


def record(root: Path, *, started="2026-11-30T10:00:00Z", status="ok", blocks=None,
           command="vllm serve fake-model", host=None, **kw) -> Record:
    blocks = blocks or runbook_hash(root)
    stamp = started.replace("-", "").replace(":", "")
    rec = Record(
        runbook="fake-rb", page="wiki/fake.md", blocks_hash=blocks,
        run_id=f"{stamp}-{blocks[7:15]}", started_at=started, finished_at=started,
        status=status,
        host=host or {"gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Workstation "
                                "Edition", "compute_capability": "12.0"}], "gpu_count": 1,
                      "driver": "580.95.05", "cuda": "13.0", "topology": "none",
                      "cpu_only": False},
        engine={"name": "vllm", "version": "0.26.0", "image": None, "image_digest": None},
        server={"command": command, "env": {}, "port": 8000, "log_tail": []},
        markers={"attention_backend": "FLASH_ATTN", "kv_cache_tokens": 1274576},
        steps=(Step("ready", "ok", 1.0),),
        clients=(ClientResult("bench", "serving", "vllm bench serve", "C", (
            Point("1", "ok", {"completed": 16, "num_prompts": 16,
                              "request_throughput": 13.617563777157836,
                              "output_throughput": 435.76204086905074,
                              "total_token_throughput": 2189.8744749141943,
                              "median_ttft_ms": 39.546492999988914, "p99_ttft_ms": 137.42,
                              "median_tpot_ms": 7.367281887097064, "p99_tpot_ms": 9.41,
                              "median_itl_ms": 7.37, "p99_itl_ms": 9.96}),
            Point("8", "ok", {"completed": 16, "num_prompts": 16,
                              "output_throughput": 1234.5}),
        )),),
        **kw,
    )
    write_record(root, rec)
    return rec


def render(root: Path, check: bool = False):
    page = read_page(root / "wiki/fake.md", root)
    return render_pages([page], root, check=check)


def apply(root: Path) -> str:
    changes, _ = render(root)
    for c in changes:
        if c.new is None:
            (root / c.path).unlink()
        else:
            (root / c.path).parent.mkdir(parents=True, exist_ok=True)
            (root / c.path).write_text(c.new)
    return (root / "wiki/fake.md").read_text()


@dataclass
class Case:
    """One case of a fixture file in markdown-it-py's form: a title line, then `.`, the input,
    `.`, the expected output, `.`."""

    file: Path
    line: int  # 1-based line of the title
    title: str
    source: str
    expected: str


def read_cases(folder: Path) -> list[Case]:
    """Every case of the `*.md` fixture files in `folder`, in file and line order."""
    return [c for f in sorted(folder.glob("*.md")) for c in _read_cases(f)]


def _read_cases(file: Path) -> list[Case]:
    lines = file.read_text(encoding="utf-8").split("\n")
    cases: list[Case] = []
    i = 0
    while i < len(lines):
        if i + 1 < len(lines) and lines[i + 1] == "." and lines[i].strip():
            parts: list[list[str]] = [[], []]
            j = i + 2
            for part in parts:
                while j < len(lines) and lines[j] != ".":
                    part.append(lines[j])
                    j += 1
                j += 1
            cases.append(Case(file, i + 1, lines[i], "\n".join(parts[0]) + "\n",
                              "\n".join(parts[1])))
            i = j
        else:
            i += 1
    return cases


def load_script(path: Path, name: str) -> ModuleType:
    """A script of the repository (a file with a dash in its name, or outside any package)
    imported as module `name`, registered in sys.modules (its dataclasses need that)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
