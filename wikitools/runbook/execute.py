"""Carry out a Plan on this host: start the server in its own process group, wait until it is
really ready, run every client point against it, and always tear everything down and verify the
port and GPU memory came back. Returns the run Record; never prints (progress goes to on_event)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from wikitools.runbook import clients as result_parsers
from wikitools.runbook.model import Plan, PlannedClient, Verdict
from wikitools.runbook.preflight import nvidia_smi
from wikitools.runbook.record import (
    ClientResult,
    Point,
    Record,
    Step,
    make_run_id,
    utc_stamp,
)
from wikitools.runbook.secrets import mask_command

POLL_S = 0.1  # readiness poll interval: readiness is seen within ~0.1 s of the engine answering
# An exception line as Python prints it, e.g. "RuntimeError: CUDA error: …".
_EXCEPTION_LINE = re.compile(r"\b(?:[A-Z]\w*(?:Error|Exception)|[a-z]\w*\.\w*Error): \S")
FATAL_GRACE_S = 5.0  # after a fatal-looking log line, how long the process may take to exit
CLIENT_GRACE_S = 5.0  # TERM → KILL grace for a client's process group
LOG_TAIL = 40
GPU_MEM_TOLERANCE_MIB = 64
_RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Event:
    """Progress for the command layer. kind: step-start | step-end | waiting | point-start |
    point-end | note. `index`/`total` count client points."""

    kind: str
    step: str
    status: str | None = None
    message: str | None = None
    elapsed: float = 0.0
    index: int = 0
    total: int = 0


EventSink = Callable[[Event], None]


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while the run was in progress."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StepFailed(Exception):
    def __init__(self, step: str, message: str, status: str = "failed") -> None:
        super().__init__(message)
        self.step = step
        self.message = message
        self.status = status


# --------------------------------------------------------------------------- log markers

# Startup facts worth keeping, first match wins (reference/engines-and-benchmarks.md §3.3, §3.5).
_MARKERS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]], ...] = (
    (
        "attention_backend",
        re.compile(
            r"Using (\S+) attention backend out of potential backends"
            r"|Using AttentionBackendEnum\.(\w+) backend"
            r"|Using ([\w ]+?) backend on V1 engine"
            r"|Attention backend not explicitly specified\. Use (\w+) backend by default"
        ),
        lambda m: {"attention_backend": next(g for g in m.groups() if g)},
    ),
    (
        "flash_attn_version",
        re.compile(r"Using FlashAttention version (\d+)"),
        lambda m: {"flash_attn_version": int(m[1])},
    ),
    (
        "kv_cache_tokens",
        re.compile(r"(\w+)(?: \+ host)? KV cache size: ([\d,]+) tokens"),
        lambda m: {"kv_cache_device": m[1], "kv_cache_tokens": _int(m[2])},
    ),
    (
        "max_concurrency",
        re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"),
        lambda m: {"max_concurrency_tokens": _int(m[1]), "max_concurrency": float(m[2])},
    ),
    (
        "kv_cache_gib",
        re.compile(r"Available KV cache memory: (-?[\d.]+) GiB"),
        lambda m: {"kv_cache_gib": float(m[1])},
    ),
    (
        "engine_version",
        re.compile(
            r"vLLM API server version ([0-9][\w.+-]*)|Starting vLLM .*?version ([0-9][\w.+-]*)"
            r"|Initializing a V1 LLM engine \(v([0-9][\w.+-]*)\)"
        ),
        lambda m: {"engine_version": next(g for g in m.groups() if g)},
    ),
    (
        "cuda_graph",
        re.compile(r"Graph capturing finished in ([\d.]+) secs?, took ([-\d.]+) GiB"),
        lambda m: {"cuda_graph_capture_s": float(m[1]), "cuda_graph_gib": float(m[2])},
    ),
    (
        "model_load",
        re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds"),
        lambda m: {"model_load_gib": float(m[1]), "model_load_s": float(m[2])},
    ),
    (
        "init_engine_s",
        re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
        lambda m: {"init_engine_s": float(m[1])},
    ),
    (
        "max_model_len",
        re.compile(r"Using max model len (\d+)"),
        lambda m: {"max_model_len": int(m[1])},
    ),
    (
        "moe_backend",
        re.compile(r"Using '?([\w ]+?)'? (\w+) MoE backend"),
        lambda m: {"moe_backend": f"{m[1]} ({m[2]})"},
    ),
    (
        "nvfp4_gemm",
        re.compile(r"Using (\S+) for NVFP4 GEMM"),
        lambda m: {"nvfp4_gemm": m[1]},
    ),
    (
        "marlin_fallback",
        re.compile(r"leveraging the Marlin kernel"),
        lambda m: {"marlin_fallback": True},
    ),
    (
        "sglang_kv_tokens",
        re.compile(r"KV Cache is allocated\. #tokens: (\d+)"),
        lambda m: {"kv_cache_tokens": int(m[1])},
    ),
    (
        "sglang_max_total_tokens",
        re.compile(r"max_total_num_tokens=(\d+)"),
        lambda m: {"max_total_num_tokens": int(m[1])},
    ),
    (
        "cuda_graphs_disabled",
        re.compile(r"enforce_eager[\"']?[:=] ?True|disabling torch\.compile and CUDAGraphs"),
        lambda m: {"cuda_graphs": False},
    ),
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def scan_markers(lines: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Backend and capacity facts from server log lines; the first match of each marker wins."""
    found: dict[str, Any] = {}
    pending = list(_MARKERS)
    for line in lines:
        if not pending:
            break
        keep = []
        for name, pattern, convert in pending:
            m = pattern.search(line)
            if m:
                for k, v in convert(m).items():
                    found.setdefault(k, v)
            else:
                keep.append((name, pattern, convert))
        pending = keep
    return found


# --------------------------------------------------------------------------- prometheus

_PROM_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_PROM_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
SPEC_COUNTERS = {
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "drafts": "vllm:spec_decode_num_drafts_total",
}


_CACHE_KEYS = frozenset({
    "block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization",
    "kv_cache_max_concurrency", "kv_cache_size_tokens", "num_gpu_blocks",
})


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _PROM_LINE.match(line)
        if not m:
            continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        labels = dict(_PROM_LABEL.findall(m["labels"] or ""))
        samples.append((m["name"], labels, value))
    return samples


def spec_counters(text: str) -> dict[str, float]:
    """Totals of the spec-decode counters (summed over engines); empty when not exposed."""
    totals: dict[str, float] = {}
    names = {v: k for k, v in SPEC_COUNTERS.items()}
    for name, _labels, value in parse_prometheus(text):
        if name in names:
            totals[names[name]] = totals.get(names[name], 0.0) + value
    return totals


def spec_acceptance(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, Any]:
    """Acceptance = Δaccepted / Δdraft tokens; mean acceptance length = 1 + Δaccepted / Δdrafts."""
    if "accepted" not in after or "draft_tokens" not in after:
        return {}
    d_acc = after["accepted"] - before.get("accepted", 0.0)
    d_draft = after["draft_tokens"] - before.get("draft_tokens", 0.0)
    d_drafts = after.get("drafts", 0.0) - before.get("drafts", 0.0)
    out: dict[str, Any] = {
        "spec_decode_acceptance": (d_acc / d_draft) if d_draft > 0 else None,
        "spec_decode_accepted_delta": int(d_acc),
        "spec_decode_draft_tokens_delta": int(d_draft),
    }
    if d_drafts > 0:
        out["spec_decode_acceptance_length"] = 1 + d_acc / d_drafts
    return out


def metrics_markers(text: str) -> dict[str, Any]:
    """KV-cache facts from vLLM's `/metrics` (`vllm:cache_config_info` labels)."""
    out: dict[str, Any] = {}
    for name, labels, _value in parse_prometheus(text):
        if name == "vllm:cache_config_info" and "cache_config" not in out:
            out["cache_config"] = {k: labels[k] for k in sorted(labels) if k in _CACHE_KEYS}
        elif name == "vllm:num_gpu_blocks" and "num_gpu_blocks" not in out:
            out["num_gpu_blocks"] = int(_value)
    cfg = out.get("cache_config", {})
    for key in ("kv_cache_size_tokens", "num_gpu_blocks", "block_size"):
        if key in cfg and cfg[key].isdigit():
            out.setdefault(key if key != "kv_cache_size_tokens" else "metrics_kv_cache_tokens",
                           int(cfg[key]))
    return out


def server_info_markers(data: Mapping[str, Any]) -> dict[str, Any]:
    """SGLang `/server_info`: backends, KV capacity and version."""
    out: dict[str, Any] = {}
    for key in ("attention_backend", "moe_runner_backend", "kv_cache_dtype",
                "speculative_algorithm", "max_total_num_tokens", "version"):
        if data.get(key) is not None:
            out[key if key != "version" else "engine_version"] = data[key]
    return out


# --------------------------------------------------------------------------- the log watcher


class LogWatcher:
    """Reads a growing log file incrementally; remembers every line and the first fatal one."""

    def __init__(self, path: Path, fatal_patterns: tuple[str, ...]) -> None:
        self.path = path
        self.fatal = [re.compile(p) for p in fatal_patterns]
        self.lines: list[str] = []
        self.fatal_line: str | None = None
        self.fatal_index: int | None = None
        self._pos = 0
        self._partial = ""

    def poll(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self._pos)
                chunk = f.read()
                self._pos = f.tell()
        except OSError:
            return
        if not chunk:
            return
        text = self._partial + chunk.decode("utf-8", errors="replace")
        *complete, self._partial = text.split("\n")
        for line in complete:
            self.lines.append(line)
            if self.fatal_line is None and any(p.search(line) for p in self.fatal):
                self.fatal_line = line.strip()
                self.fatal_index = len(self.lines) - 1

    def cause(self) -> str | None:
        """The most telling line about a failure: the first exception line (`RuntimeError:
        CUDA error: …`) at or after the first fatal line, else the fatal line itself."""
        if self.fatal_index is None:
            return None
        for line in self.lines[self.fatal_index :]:
            if _EXCEPTION_LINE.search(line):
                return line.strip()
        return self.fatal_line

    def tail(self, n: int = LOG_TAIL) -> list[str]:
        self.poll()
        lines = self.lines + ([self._partial] if self._partial else [])
        return [line.rstrip() for line in lines[-n:]]


def tail_file(path: Path, n: int = LOG_TAIL) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines()[-n:]]


# --------------------------------------------------------------------------- processes


def _spawn(
    command: str, env: Mapping[str, str], log_path: Path, cwd: Path
) -> subprocess.Popen[bytes]:
    """`bash -c command` in its own session (so its own process group), output to log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    full_env.update(env)
    with log_path.open("wb") as log:
        return subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        )


def group_alive(pgid: int) -> bool:
    """True while any live process of the group exists. Zombies do not count: they hold no
    port or GPU memory, and an orphan waits for init to reap it (slowly in some containers)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def stop_group(proc: subprocess.Popen[bytes], grace: float) -> tuple[bool, str | None]:
    """TERM the process group, wait `grace` for all of it to go, then KILL. Returns
    (clean, note) where clean means it went on TERM alone."""
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()
        if proc.returncode is not None and not group_alive(pgid):
            return True, None
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    end = time.monotonic() + 5
    while group_alive(pgid) and time.monotonic() < end:
        time.sleep(0.05)
    if group_alive(pgid):
        return False, f"process group {pgid} survived SIGKILL"
    return False, f"process group {pgid} needed SIGKILL after {grace:g} s"


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing accepts connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.3):
            return False
    except OSError:
        return True


def gpu_memory_used() -> dict[int, int] | None:
    """Used MiB per GPU index from nvidia-smi; None when there is no nvidia-smi or it fails."""
    try:
        out = subprocess.run(
            [nvidia_smi(), "--query-gpu=index,memory.used",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=15, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    used: dict[int, int] = {}
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            used[int(parts[0])] = int(parts[1])
    return used or None


# --------------------------------------------------------------------------- the executor


@dataclass
class _State:
    steps: list[Step] = field(default_factory=list)
    markers: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    points: dict[str, list[Point]] = field(default_factory=dict)
    failed_step: str | None = None
    message: str | None = None
    log_tail: list[str] = field(default_factory=list)
    engine_version: str | None = None
    model_id: str | None = None
    server: subprocess.Popen[bytes] | None = None
    client: subprocess.Popen[bytes] | None = None
    server_started: bool = False

    def fail(self, step: str, message: str, tail: list[str] | None = None) -> None:
        if self.failed_step is None:
            self.failed_step = step
            self.message = message
            if tail is not None:
                self.log_tail = tail


def execute(
    plan: Plan,
    *,
    root: Path,
    verdict: Verdict | None = None,
    on_event: EventSink | None = None,
    started: datetime | None = None,
    handle_signals: bool = True,
    http_timeout: float = 5.0,
) -> Record:
    """Run the plan and return its record (not yet written). Teardown always runs; SIGINT and
    SIGTERM during the run end it as a failed step and still clean up."""
    emit = on_event or (lambda _e: None)
    verdict = verdict if verdict is not None else plan.verdict
    started = started or datetime.now(UTC)
    run_id = _run_id(plan, started)
    artifacts = root / plan.artifacts_dir
    artifacts.mkdir(parents=True, exist_ok=True)
    st = _State()
    t0 = time.monotonic()
    baseline_gpu: dict[int, int] | None = None

    with _signals_raise(handle_signals):
        try:
            _preflight(plan, verdict, st, emit)
            baseline_gpu = gpu_memory_used()
            _start_and_wait(plan, root, st, emit, http_timeout)
            _warmup(plan, st, emit, http_timeout)
            _run_clients(plan, root, st, emit, http_timeout)
        except StepFailed as exc:
            if not any(s.name == exc.step for s in st.steps):
                st.steps.append(Step(exc.step, exc.status, 0.0, exc.message))
            st.fail(exc.step, exc.message)
        except Interrupted as exc:
            _interrupted(plan, root, st, str(exc))
        finally:
            with _signals_ignored(handle_signals):
                _teardown(plan, st, emit, baseline_gpu, verdict)
    if st.failed_step is not None and not st.log_tail and st.server_started:
        st.log_tail = tail_file(root / plan.server.log_path)
    st.timings["total_s"] = round(time.monotonic() - t0, 3)
    finished = datetime.now(UTC)
    return _build_record(plan, verdict, st, run_id, started, finished)


def _run_id(plan: Plan, started: datetime) -> str:
    name = Path(plan.artifacts_dir).name
    return name if _RUN_ID.match(name) else make_run_id(started, plan.runbook.blocks_hash)


def _interrupted(plan: Plan, root: Path, st: _State, signame: str) -> None:
    step = _current_step(st, plan)
    msg = f"interrupted by {signame}"
    for c in plan.clients:
        if c.label == step:
            _record_point(st, c, Point(c.point_value, "failed", result_file=c.result_path,
                                       message=msg))
            st.fail(step, msg, tail_file(root / c.log_path))
            break
    else:
        st.fail(step, msg)
    st.steps.append(Step(step, "failed", 0.0, msg))


def _current_step(st: _State, plan: Plan) -> str:
    if not any(s.name == "preflight" for s in st.steps):
        return "preflight"
    if not st.server_started:
        return "start"
    if "ready_s" not in st.timings:
        return "ready"
    if "warmup_s" not in st.timings:
        return "warmup"
    done = sum(len(v) for v in st.points.values())
    if done < len(plan.clients):
        return plan.clients[done].label
    return "teardown"


# --------------------------------------------------------------------------- steps


def _preflight(plan: Plan, verdict: Verdict | None, st: _State, emit: EventSink) -> None:
    emit(Event("step-start", "preflight"))
    t = time.monotonic()
    problems: list[str] = []
    if verdict is not None and not verdict.ok and not verdict.forced:
        problems.append(verdict.message or "preflight refused")
    if not port_free(plan.server.port, plan.server.host):
        problems.append(f"port {plan.server.port} is already in use on {plan.server.host}")
    secs = round(time.monotonic() - t, 3)
    if problems:
        msg = "; ".join(dict.fromkeys(problems))
        st.steps.append(Step("preflight", "failed", secs, msg))
        emit(Event("step-end", "preflight", "failed", msg))
        raise StepFailed("preflight", msg)
    note = verdict.message if verdict is not None and verdict.forced else None
    st.steps.append(Step("preflight", "ok", secs, f"forced: {note}" if note else None))
    emit(Event("step-end", "preflight", "ok"))


def _start_and_wait(
    plan: Plan, root: Path, st: _State, emit: EventSink, http_timeout: float
) -> None:
    srv = plan.server
    log_path = root / srv.log_path
    emit(Event("step-start", "start", message=srv.command))
    t_start = time.monotonic()
    try:
        st.server = _spawn(srv.command, srv.env, log_path, root)
    except OSError as exc:
        raise StepFailed("start", f"could not start bash: {exc.strerror}") from None
    st.server_started = True
    st.timings["start_s"] = round(time.monotonic() - t_start, 3)
    st.steps.append(Step("start", "ok", st.timings["start_s"]))
    emit(Event("step-end", "start", "ok"))

    emit(Event("step-start", "ready"))
    watcher = LogWatcher(log_path, srv.fatal_patterns)
    deadline = t_start + srv.ready_timeout
    fatal_since: float | None = None
    state = "starting"
    with httpx.Client(timeout=httpx.Timeout(http_timeout, connect=0.5)) as http:
        while True:
            now = time.monotonic()
            watcher.poll()
            code = st.server.poll()
            if code is not None:
                watcher.poll()
                msg = f"server exited with code {code} during start-up"
                if watcher.fatal_line:
                    msg += f": {watcher.cause()}"
                _ready_failed(st, watcher, now - t_start, msg, emit)
            if watcher.fatal_line is not None:
                fatal_since = fatal_since or now
                if now - fatal_since >= FATAL_GRACE_S:
                    msg = f"fatal log line: {watcher.cause()}"
                    _ready_failed(st, watcher, now - t_start, msg, emit)
            if now >= deadline:
                _ready_failed(
                    st, watcher, now - t_start,
                    f"not ready after {srv.ready_timeout:g} s (last state: {state})", emit,
                    status="timeout",
                )
            state = _probe(http, srv.health_url)
            if state == "healthy":
                st.timings.setdefault("health_s", round(time.monotonic() - t_start, 3))
                ok, detail = _tiny_completion(http, srv, st)
                if ok:
                    break
                state = f"healthy, completion failed: {detail}"
            emit(Event("waiting", "ready", state, elapsed=now - t_start))
            time.sleep(POLL_S)
    st.timings["ready_s"] = round(time.monotonic() - t_start, 3)
    st.steps.append(Step("ready", "ok", st.timings["ready_s"]))
    emit(Event("step-end", "ready", "ok", elapsed=st.timings["ready_s"]))
    watcher.poll()
    st.markers.update(scan_markers(watcher.lines))
    _scrape_server(http_timeout, srv, st)


def _ready_failed(
    st: _State, watcher: LogWatcher, elapsed: float, msg: str, emit: EventSink,
    status: str = "failed",
) -> None:
    st.steps.append(Step("ready", status, round(elapsed, 3), msg))
    st.log_tail = watcher.tail()
    emit(Event("step-end", "ready", status, msg))
    raise StepFailed("ready", msg, status)


def _probe(http: httpx.Client, url: str) -> str:
    try:
        r = http.get(url)
    except httpx.ConnectError:
        return "starting (connection refused)"
    except httpx.HTTPError as exc:
        return f"starting ({type(exc).__name__})"
    if r.status_code == 200:
        return "healthy"
    return f"starting (HTTP {r.status_code})"


def _tiny_completion(http: httpx.Client, srv: Any, st: _State) -> tuple[bool, str]:
    """One real completion (max_tokens=1) with the served model name from /v1/models."""
    base = _base_url(srv)
    try:
        r = http.get(srv.models_url or f"{base}/v1/models")
        data = r.json().get("data") if r.status_code == 200 else None
        if not data:
            return False, f"/v1/models answered HTTP {r.status_code}"
        st.model_id = data[0].get("id")
        c = http.post(
            f"{base}/v1/completions",
            json={"model": st.model_id, "prompt": "Hello", "max_tokens": 1, "temperature": 0},
        )
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return False, type(exc).__name__
    if c.status_code != 200:
        return False, f"/v1/completions answered HTTP {c.status_code}"
    return True, ""


def _base_url(srv: Any) -> str:
    return f"http://{srv.host}:{srv.port}"


def _scrape_server(http_timeout: float, srv: Any, st: _State) -> None:
    """Engine version (/version or /server_info) and capacity facts (/metrics)."""
    base = _base_url(srv)
    with httpx.Client(timeout=http_timeout) as http:
        if srv.engine == "sglang":
            for path in ("/server_info", "/get_server_info"):
                info = _get_json(http, base + path)
                if isinstance(info, dict):
                    st.markers.update(server_info_markers(info))
                    break
        else:
            version = _get_json(http, base + "/version")
            if isinstance(version, dict) and version.get("version"):
                st.engine_version = str(version["version"])
            text = _get_text(http, srv.metrics_url or base + "/metrics")
            if text:
                st.markers.update(metrics_markers(text))
    st.engine_version = st.engine_version or st.markers.get("engine_version")
    if st.engine_version is None and srv.version_command and not srv.docker:
        st.engine_version = _version_from_command(srv.version_command)


def _get_json(http: httpx.Client, url: str) -> Any:
    try:
        r = http.get(url)
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _get_text(http: httpx.Client, url: str) -> str | None:
    try:
        r = http.get(url)
        return r.text if r.status_code == 200 else None
    except httpx.HTTPError:
        return None


def _version_from_command(argv: tuple[str, ...]) -> str | None:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"\d+\.\d+[\w.+-]*", out.stdout)
    return m.group(0) if out.returncode == 0 and m else None


def _warmup(plan: Plan, st: _State, emit: EventSink, http_timeout: float) -> None:
    """A few short completions before anything is measured; counted apart from the clients."""
    emit(Event("step-start", "warmup"))
    t = time.monotonic()
    base = _base_url(plan.server)
    body = {"model": st.model_id, "prompt": "Warm-up request.", "max_tokens": 8, "temperature": 0}
    try:
        with httpx.Client(timeout=max(http_timeout, 120.0)) as http:
            for _ in range(2):
                r = http.post(f"{base}/v1/completions", json=body)
                if r.status_code != 200:
                    raise StepFailed("warmup", f"warm-up completion answered HTTP {r.status_code}")
    except httpx.HTTPError as exc:
        raise StepFailed("warmup", f"warm-up request failed: {type(exc).__name__}") from None
    st.timings["warmup_s"] = round(time.monotonic() - t, 3)
    st.steps.append(Step("warmup", "ok", st.timings["warmup_s"]))
    emit(Event("step-end", "warmup", "ok"))


def _run_clients(plan: Plan, root: Path, st: _State, emit: EventSink, http_timeout: float) -> None:
    total = len(plan.clients)
    for index, client in enumerate(plan.clients, start=1):
        if st.server is not None and st.server.poll() is not None:
            msg = f"server exited with code {st.server.returncode} before {client.label}"
            st.log_tail = tail_file(root / plan.server.log_path)
            _record_point(st, client, Point(client.point_value, "failed", message=msg))
            st.steps.append(Step(client.label, "failed", 0.0, msg))
            raise StepFailed(client.label, msg)
        emit(Event("point-start", client.label, index=index, total=total))
        point = _run_point(plan, client, root, st, http_timeout)
        _record_point(st, client, point)
        st.steps.append(Step(client.label, point.status, point.seconds, point.message))
        emit(Event("point-end", client.label, point.status, point.message, point.seconds,
                   index, total))
        if point.status != "ok":
            if not st.log_tail:
                st.log_tail = tail_file(root / client.log_path)
            raise StepFailed(client.label, point.message or point.status, point.status)


def _record_point(st: _State, client: PlannedClient, point: Point) -> None:
    st.points.setdefault(client.name, []).append(point)


def _run_point(
    plan: Plan, client: PlannedClient, root: Path, st: _State, http_timeout: float
) -> Point:
    result = root / client.result_path if client.result_path else None
    if result is not None:
        # SGLang appends to its output file; a stale file would be read as this run's result.
        result.parent.mkdir(parents=True, exist_ok=True)
        if result.is_file():
            result.unlink()
    before = _spec_snapshot(plan, http_timeout)
    t = time.monotonic()
    try:
        st.client = _spawn(client.command, client.env, root / client.log_path, root)
    except OSError as exc:
        return Point(client.point_value, "failed", message=f"could not start bash: {exc.strerror}")
    try:
        code = st.client.wait(timeout=client.timeout)
    except subprocess.TimeoutExpired:
        stop_group(st.client, CLIENT_GRACE_S)
        st.client = None
        secs = round(time.monotonic() - t, 3)
        return Point(client.point_value, "timeout", result_file=client.result_path,
                     message=f"no result after {client.timeout:g} s", seconds=secs)
    # The client's leader exited; anything it left in its group goes now.
    if group_alive(st.client.pid):
        stop_group(st.client, CLIENT_GRACE_S)
    st.client = None
    secs = round(time.monotonic() - t, 3)
    if code != 0:
        tail = tail_file(root / client.log_path, 1)
        why = f": {tail[-1]}" if tail and tail[-1] else ""
        return Point(client.point_value, "failed", result_file=client.result_path,
                     message=f"client exited with code {code}{why}", seconds=secs)
    source = result if result is not None else root / client.log_path
    try:
        metrics = result_parsers.parse_result(client.parser, source, client.command)
    except result_parsers.ResultError as exc:
        return Point(client.point_value, "failed", result_file=client.result_path,
                     message=str(exc), seconds=secs)
    metrics.update(_spec_delta(plan, before, http_timeout))
    if client.kind == "serving":
        metrics.setdefault("spec_decode_acceptance", None)
    return Point(client.point_value, "ok", metrics, client.result_path or client.log_path,
                 None, secs)


def _spec_snapshot(plan: Plan, http_timeout: float) -> dict[str, float] | None:
    if plan.server.engine == "sglang":
        return None
    with httpx.Client(timeout=http_timeout) as http:
        text = _get_text(http, plan.server.metrics_url or _base_url(plan.server) + "/metrics")
    return spec_counters(text) if text else None


def _spec_delta(plan: Plan, before: dict[str, float] | None, http_timeout: float) -> dict[str, Any]:
    if plan.server.engine == "sglang":
        with httpx.Client(timeout=http_timeout) as http:
            info = _get_json(http, _base_url(plan.server) + "/server_info")
        states = info.get("internal_states") if isinstance(info, dict) else None
        if isinstance(states, list) and states and isinstance(states[0], dict):
            length = states[0].get("avg_spec_accept_length")
            if length is not None:
                return {"spec_decode_acceptance_length": length}
        return {}
    if before is None:
        return {}
    after = _spec_snapshot(plan, http_timeout)
    return spec_acceptance(before, after) if after else {}


# --------------------------------------------------------------------------- teardown


def _teardown(
    plan: Plan,
    st: _State,
    emit: EventSink,
    baseline_gpu: dict[int, int] | None,
    verdict: Verdict | None,
) -> None:
    if not st.server_started:
        st.steps.append(Step("teardown", "skipped", 0.0, "nothing was started"))
        return
    emit(Event("step-start", "teardown"))
    t = time.monotonic()
    problems: list[str] = []
    notes: list[str] = []
    if st.client is not None:
        _clean, note = stop_group(st.client, CLIENT_GRACE_S)
        st.client = None
        if note and "survived" in note:
            problems.append(f"client {note}")
    if st.server is not None:
        code = st.server.poll()
        if code is not None:
            notes.append(f"server had exited with code {code}")
        _clean, note = stop_group(st.server, plan.server.stop_timeout)
        if note:
            (problems if "survived" in note else notes).append(f"server {note}")
    if plan.server.docker:
        name = container_name(plan.server.command)
        if name:
            err = _docker_stop(name, plan.server.stop_timeout)
            if err:
                problems.append(err)
    if not _wait_until(lambda: port_free(plan.server.port, plan.server.host), 5.0):
        problems.append(f"port {plan.server.port} still in use after teardown")
    if baseline_gpu is not None:
        leak = _gpu_leak(baseline_gpu, verdict)
        if leak:
            problems.append(leak)
    secs = round(time.monotonic() - t, 3)
    st.timings["teardown_s"] = secs
    if problems:
        msg = "; ".join(problems)
        st.steps.append(Step("teardown", "failed", secs, msg))
        st.fail("teardown", msg)
        emit(Event("step-end", "teardown", "failed", msg))
    else:
        st.steps.append(Step("teardown", "ok", secs, "; ".join(notes) or None))
        emit(Event("step-end", "teardown", "ok"))


def container_name(command: str) -> str | None:
    """The `--name` a docker run command gives its container (the plan names it wiki-<run-id>)."""
    m = re.search(r"--name[= ]+([\w.-]+)", command)
    return m.group(1) if m else None


def _docker_stop(name: str, grace: float) -> str | None:
    try:
        out = subprocess.run(
            ["docker", "stop", "--time", str(int(grace)), name],
            capture_output=True, text=True, timeout=grace + 30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker stop {name} failed: {exc}"
    if out.returncode != 0 and "No such container" not in out.stderr:
        return f"docker stop {name} failed: {out.stderr.strip()[:200]}"
    return None


def _gpu_leak(baseline: dict[int, int], verdict: Verdict | None) -> str | None:
    watch = set(verdict.selected_gpus) if verdict and verdict.selected_gpus else set(baseline)
    last: dict[int, int] | None = None

    def back() -> bool:
        nonlocal last
        last = gpu_memory_used()
        if last is None:
            return True
        return all(last.get(i, 0) <= baseline.get(i, 0) + GPU_MEM_TOLERANCE_MIB for i in watch)

    if _wait_until(back, 15.0):
        return None
    assert last is not None
    extra = ", ".join(
        f"GPU {i}: {last.get(i, 0)} MiB used (was {baseline.get(i, 0)})" for i in sorted(watch)
    )
    return f"GPU memory not returned after teardown ({extra})"


def _wait_until(cond: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


# --------------------------------------------------------------------------- signals


@contextlib.contextmanager
def _signals_raise(enabled: bool) -> Iterator[None]:
    """SIGINT/SIGTERM raise Interrupted in the main thread for the duration of the run."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _signals_ignored(enabled: bool) -> Iterator[None]:
    """Teardown must finish: a second Ctrl-C while cleaning up is ignored."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# --------------------------------------------------------------------------- the record


def _build_record(
    plan: Plan,
    verdict: Verdict | None,
    st: _State,
    run_id: str,
    started: datetime,
    finished: datetime,
) -> Record:
    srv = plan.server
    host = dict(verdict.host) if verdict is not None and verdict.host else _fallback_host()
    clients: list[ClientResult] = []
    seen: list[str] = []
    for c in plan.clients:
        if c.name not in seen:
            seen.append(c.name)
    for name in seen:
        planned = [c for c in plan.clients if c.name == name]
        done = st.points.get(name, [])
        points = list(done)
        for c in planned[len(done):]:
            points.append(Point(c.point_value, "skipped", result_file=None,
                                message="not run: an earlier step failed"))
        first = planned[0]
        shown = first.display_command or mask_command(first.command)
        clients.append(ClientResult(name, first.kind, shown,
                                    first.sweep_var, tuple(points)))
    status = "ok" if st.failed_step is None else "failed"
    return Record(
        runbook=plan.runbook.id,
        page=plan.runbook.page,
        blocks_hash=plan.runbook.blocks_hash,
        run_id=run_id,
        started_at=utc_stamp(started),
        finished_at=utc_stamp(finished),
        status=status,
        failed_step=st.failed_step,
        message=_one_line(st.message),
        host=host,
        engine={
            "name": srv.engine,
            "version": st.engine_version,
            "image": srv.image,
            "image_digest": None,
        },
        server={
            "command": srv.display_command or mask_command(srv.command),
            "env": dict(sorted(srv.display_env.items())),
            "port": srv.port,
            "model": st.model_id,
            "log_tail": st.log_tail if status == "failed" else [],
        },
        markers=dict(sorted(st.markers.items())),
        timings=dict(sorted(st.timings.items())),
        steps=tuple(st.steps),
        clients=tuple(clients),
        artifacts_dir=plan.artifacts_dir,
    )


def _one_line(text: str | None) -> str | None:
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:297] + "..."


def _fallback_host() -> dict[str, Any]:
    """Host facts when no preflight verdict is given: just enough to tell a CPU-only host."""
    return {"gpus": [], "gpu_count": 0, "driver": None, "cuda": None, "topology": "none",
            "hostname_hash": None, "cpu_only": gpu_memory_used() is None}
