"""The runbook executor's own overhead, side by side with a plain shell script doing the same.

Both sides run the same steps against the same engine: start `vllm serve` in its own process
group, wait until `GET /health` answers 200, run `vllm bench serve` once, then stop the group and
wait until the port is free. A separate fast poller (every 20 ms) timestamps the moment the
engine first answers 200, so each side's readiness detection delay is measured against the same
reference. Then the bookkeeping: parse a real `vllm bench serve` result, write run records and
render results regions for 100 synthetic records.

Targets: readiness declared within 0.5 s of the engine answering, teardown under 10 s,
render of 100 records under 1 s.

On the CPU machines (defaults): the engine environment from scripts/setup-engine-env.sh and the
tiny model in .cache/tiny-model:

    .venv/bin/python benchmarks/bench_executor.py

On a GPU host with a real vLLM on PATH (model path and flags are arguments):

    python benchmarks/bench_executor.py --engine-bin "" --model /models/tiny --gpus 1 \\
        --serve-args "--load-format dummy --max-model-len 2048 --gpu-memory-utilization 0.3" \\
        --env ""

`--skip-engine` runs only the bookkeeping part; `--json FILE` also writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from wikitools.core.config import load_config  # noqa: E402
from wikitools.pages.load import load_pages  # noqa: E402
from wikitools.runbook.blocks.extract import extract_runbooks  # noqa: E402
from wikitools.runbook.engines import clients as result_parsers  # noqa: E402
from wikitools.runbook.execution.execute import Event, execute  # noqa: E402
from wikitools.runbook.records.record import Record, make_run_id, write_record  # noqa: E402
from wikitools.runbook.rendering.render import render_pages  # noqa: E402
from wikitools.runbook.session import RunOptions, prepare  # noqa: E402

FIXTURE_RESULT = REPO / "tests/fixtures/engines/vllm-bench-serve.json"
POLL_S = 0.02
SWEPT = 'name=bench kind=serving sweep="CONCURRENCY=1,8,32"'

SHELL_SCRIPT = r"""
# The same steps by hand: start, poll /health with curl, bench, kill the group, wait for the port.
set -u
stamp() { echo "$1 $(date +%s.%N)"; }
stamp start
setsid bash -c "$SERVE_CMD" > "$WORK/shell-server.log" 2>&1 &
pid=$!
until curl -sf -o /dev/null "http://127.0.0.1:$PORT/health"; do
  if ! kill -0 "$pid" 2>/dev/null; then stamp died; exit 1; fi
  sleep "$SHELL_POLL"
done
stamp ready
bash -c "$BENCH_CMD" > "$WORK/shell-bench.log" 2>&1
stamp bench_done
kill -TERM -- "-$pid"
for _ in $(seq 1 200); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
kill -KILL -- "-$pid" 2>/dev/null
while curl -s -o /dev/null "http://127.0.0.1:$PORT/health"; do sleep 0.1; done
stamp stopped
"""


# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HealthPoller:
    """Polls /health every POLL_S in a thread and remembers the wall-clock time of the first
    200 (the reference moment "the engine answers")."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.first_200: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        request = (f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                   "Connection: close\r\n\r\n").encode()
        while not self._stop.is_set() and self.first_200 is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(request)
                    head = s.recv(64)
                if head.startswith(b"HTTP/1.1 200"):
                    self.first_200 = time.time()
                    return
            except OSError:
                pass
            time.sleep(POLL_S)


def page_text(rid: str, serve: str, bench: str, gpus: int, env: str, ready_timeout: int) -> str:
    env_attr = f' env="{env}"' if env else ""
    return (
        f"---\ntitle: Executor benchmark {rid}\nstatus: experimental\n---\n\n# {rid}\n\n"
        f"```bash {{ #{rid} .runbook-server engine=vllm gpus={gpus} "
        f"ready_timeout={ready_timeout}{env_attr} }}\n{serve}\n```\n\n"
        f"```bash {{ .runbook-client for={rid} name=bench kind=serving timeout=1800 }}\n"
        f"{bench}\n```\n\n"
        f"<!-- wiki:results runbook={rid} view=serving client=bench -->\n<!-- wiki:end -->\n\n"
        f"<!-- wiki:results runbook={rid} view=history -->\n<!-- wiki:end -->\n"
    )


def env_pairs(text: str) -> dict[str, str]:
    pairs = {}
    for item in shlex.split(text):
        key, _, value = item.partition("=")
        pairs[key] = value
    return pairs


# --------------------------------------------------------------------------- engine part


def run_executor(args: argparse.Namespace, work: Path, serve: str, bench: str) -> dict[str, Any]:
    root = work / "executor-wiki"
    (root / "wiki").mkdir(parents=True)
    (root / "wiki/bench.md").write_text(
        page_text("bench-executor", serve, bench, args.gpus, args.env, args.ready_timeout)
    )
    port = free_port()
    prepared = prepare("bench-executor", root, RunOptions(port=port, force=args.force))
    stamps: dict[str, float] = {}

    def on_event(e: Event) -> None:
        key = f"{e.kind}:{e.step}"
        stamps.setdefault(key, time.time())

    with HealthPoller(port) as poller:
        t0 = time.time()
        record = execute(prepared.plan, root=prepared.root, verdict=prepared.verdict,
                         on_event=on_event, started=prepared.started, handle_signals=False)
        t_end = time.time()
    if not record.ok:
        raise SystemExit(f"executor run failed at {record.failed_step}: {record.message}\n"
                         + "\n".join(record.server.get("log_tail", [])[-15:]))
    t_start = stamps["step-start:start"]
    health_seen = t_start + record.timings["health_s"]
    first = poller.first_200 or float("nan")
    bench_name = next(s.name for s in record.steps if s.name.startswith("client:"))
    return {
        "start_to_200_s": first - t_start,
        "health_detect_delay_s": health_seen - first,
        "ready_delay_s": stamps["step-end:ready"] - first,
        "bench_s": stamps[f"point-end:{bench_name}"] - stamps[f"point-start:{bench_name}"],
        "teardown_s": stamps["step-end:teardown"] - stamps["step-start:teardown"],
        "total_s": t_end - t0,
        "record": record,
    }


def run_shell(args: argparse.Namespace, work: Path, serve: str, bench: str) -> dict[str, Any]:
    port = free_port()
    env = dict(os.environ)
    env.update(env_pairs(args.env))
    env.update(
        SERVE_CMD=f"{serve} --port {port}",
        BENCH_CMD=f"{bench} --base-url http://127.0.0.1:{port}",
        PORT=str(port), WORK=str(work), SHELL_POLL=str(args.shell_poll),
    )
    with HealthPoller(port) as poller:
        t0 = time.time()
        out = subprocess.run(["bash", "-c", SHELL_SCRIPT], env=env, capture_output=True,
                             text=True, timeout=args.ready_timeout + 1800, check=False)
        t_end = time.time()
    stamps = {}
    for line in out.stdout.splitlines():
        name, _, value = line.partition(" ")
        stamps[name] = float(value)
    if out.returncode != 0 or "stopped" not in stamps:
        log = (work / "shell-server.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"shell run failed (exit {out.returncode}): {out.stderr}\n{log}")
    first = poller.first_200 or float("nan")
    return {
        "start_to_200_s": first - stamps["start"],
        "health_detect_delay_s": stamps["ready"] - first,
        "ready_delay_s": stamps["ready"] - first,
        "bench_s": stamps["bench_done"] - stamps["ready"],
        "teardown_s": stamps["stopped"] - stamps["bench_done"],
        "total_s": t_end - t0,
    }


# --------------------------------------------------------------------------- bookkeeping part


def synthetic_record(rid: str, page: str, blocks_hash: str, i: int,
                     metrics: dict[str, Any]) -> dict[str, Any]:
    started = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(hours=i)
    run_id = make_run_id(started, blocks_hash)
    points = []
    for value in ("1", "8", "32"):
        m = dict(metrics)
        m["max_concurrency"] = int(value)
        m["output_throughput"] = metrics["output_throughput"] * int(value) * (1 + i / 1000)
        points.append({"value": value, "status": "ok", "metrics": m, "seconds": 12.0,
                       "result_file": f".artifacts/{rid}/{run_id}/bench-{value}.json",
                       "message": None})
    return {
        "schema_version": 1, "runbook": rid, "page": page, "blocks_hash": blocks_hash,
        "run_id": run_id, "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "finished_at": (started + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "status": "ok", "failed_step": None, "message": None,
        "host": {"gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                           "compute_capability": "12.0", "memory_total_mib": 97887,
                           "memory_free_mib": 97000, "pci_bus_id": "00000000:01:00.0"}],
                 "gpu_count": 1, "driver": "580.95.05", "cuda": "13.0", "topology": "none",
                 "hostname_hash": None, "cpu_only": False},
        "engine": {"name": "vllm", "version": "0.32.0", "image": None, "image_digest": None},
        "server": {"command": "vllm serve m --port 8000", "env": {}, "port": 8000,
                   "log_tail": []},
        "markers": {"attention_backend": "FLASHINFER", "kv_cache_tokens": 123456},
        "timings": {"start_s": 0.01, "ready_s": 48.1, "teardown_s": 2.3},
        "steps": [{"name": "preflight", "status": "ok", "seconds": 0.1, "message": None}],
        "clients": [{"name": "bench", "kind": "serving", "command": "vllm bench serve …",
                     "sweep_var": "CONCURRENCY", "points": points}],
        "artifacts_dir": f".artifacts/{rid}/{run_id}",
    }


def timed(fn: Any, repeat: int) -> float:
    """Best of `repeat` wall times of fn() (seconds)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bookkeeping(work: Path, n: int, repeat: int) -> dict[str, Any]:
    metrics = result_parsers.parse_result("vllm-bench", FIXTURE_RESULT)

    # (a) n pages, one runbook each, one record each: the usual measured wiki.
    wide = work / "wide"
    (wide / "wiki").mkdir(parents=True)
    bench = "vllm bench serve --model m --max-concurrency \"${CONCURRENCY:-1}\""
    for i in range(n):
        (wide / f"wiki/p{i:03d}.md").write_text(
            page_text(f"rb{i:03d}", f"vllm serve m{i} --port 8000", bench, 1, "", 900)
            .replace("name=bench kind=serving", SWEPT)
        )
    wide_config = load_config(wide)
    pages = load_pages(wide_config)
    runbooks, _ = extract_runbooks(pages, wide_config.root)
    dicts = [synthetic_record(r.id, r.page, r.blocks_hash, i, metrics)
             for i, r in enumerate(sorted(runbooks, key=lambda r: r.id))]

    # (b) one runbook with n records (history view with n rows).
    deep = work / "deep"
    (deep / "wiki").mkdir(parents=True)
    (deep / "wiki/deep.md").write_text(
        page_text("deep", "vllm serve m --port 8000", bench, 1, "", 900)
        .replace("name=bench kind=serving", SWEPT)
    )
    deep_config = load_config(deep)
    deep_pages = load_pages(deep_config)
    deep_rbs, _ = extract_runbooks(deep_pages, deep_config.root)
    (deep_rb,) = list(deep_rbs)
    deep_dicts = [synthetic_record("deep", deep_rb.page, deep_rb.blocks_hash, i, metrics)
                  for i in range(n)]

    def parse_all() -> None:
        for _ in range(n):
            result_parsers.parse_result("vllm-bench", FIXTURE_RESULT)

    def write_all() -> None:
        for d in dicts:
            write_record(wide, Record.from_dict(d))
        for d in deep_dicts:
            write_record(deep, Record.from_dict(d))

    def render_wide() -> None:
        changes, _ = render_pages(pages, wide, runbooks=runbooks)
        assert len(changes) == n, len(changes)

    def render_deep() -> None:
        changes, _ = render_pages(deep_pages, deep, runbooks=deep_rbs)
        assert len(changes) == 1

    def by_hand() -> None:
        # The minimum a hand-written script does: read each record, print one table row.
        rows = []
        for path in sorted((wide / "runbooks").glob("*/*.json")):
            data = json.loads(path.read_text())
            for p in data["clients"][0]["points"]:
                m = p["metrics"]
                rows.append(f"| {p['value']} | {m['request_throughput']:.2f} | "
                            f"{m['output_throughput']:.1f} | {m['median_ttft_ms']:.1f} |")
        assert rows

    write_all()  # once before timing the renders, so that the records exist
    return {
        "parse_s": timed(parse_all, repeat),
        "write_s": timed(write_all, repeat),
        "render_wide_s": timed(render_wide, repeat),
        "render_deep_s": timed(render_deep, repeat),
        "by_hand_s": timed(by_hand, repeat),
    }


# --------------------------------------------------------------------------- main


def fmt_s(value: float) -> str:
    if value != value:  # NaN
        return "n/a"
    return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine-bin", default=str(REPO / ".venv-engine/bin"),
                   help="directory put first on PATH for vllm (empty: use PATH as is)")
    p.add_argument("--model", default=str(REPO / ".cache/tiny-model"))
    p.add_argument("--served-model-name", default="bench")
    p.add_argument("--serve-args",
                   default="--load-format dummy --max-model-len 512 --enforce-eager",
                   help="extra vllm serve flags")
    p.add_argument("--bench-args",
                   default="--dataset-name random --random-input-len 64 --random-output-len 16 "
                   "--num-prompts 8 --max-concurrency 2",
                   help="vllm bench serve flags besides model/tokenizer/base-url")
    p.add_argument("--env", default="VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1",
                   help='server environment, "K=V K2=V2" (empty on a GPU host)')
    p.add_argument("--gpus", type=int, default=0, help="gpus= on the runbook block")
    p.add_argument("--force", action="store_true", help="run although preflight refuses")
    p.add_argument("--ready-timeout", type=int, default=900)
    p.add_argument("--shell-poll", type=float, default=1.0,
                   help="the shell script's sleep between curl polls (s)")
    p.add_argument("--runs", type=int, default=1, help="executor/shell pairs (median shown)")
    p.add_argument("--records", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3, help="bookkeeping timings: best of N")
    p.add_argument("--skip-engine", action="store_true")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)

    if args.engine_bin:
        os.environ["PATH"] = f"{args.engine_bin}{os.pathsep}{os.environ['PATH']}"
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-executor-") as tmp:
        work = Path(tmp)
        if not args.skip_engine:
            if shutil.which("vllm") is None:
                print("vllm not found on PATH (see --engine-bin)", file=sys.stderr)
                return 2
            serve = (f"vllm serve {shlex.quote(args.model)} --served-model-name "
                     f"{args.served_model_name} {args.serve_args} --host 127.0.0.1")
            bench = (f"vllm bench serve --model {args.served_model_name} --tokenizer "
                     f"{shlex.quote(args.model)} {args.bench_args}")
            ex_runs, sh_runs = [], []
            for i in range(args.runs):
                print(f"[{i + 1}/{args.runs}] executor run …", file=sys.stderr, flush=True)
                ex_runs.append(run_executor(args, work / f"ex{i}", serve, bench))
                print(f"[{i + 1}/{args.runs}] shell run …", file=sys.stderr, flush=True)
                (work / f"sh{i}").mkdir()
                sh_runs.append(run_shell(args, work / f"sh{i}", serve, bench))
            keys = ("start_to_200_s", "health_detect_delay_s", "ready_delay_s", "bench_s",
                    "teardown_s", "total_s")
            ex = {k: statistics.median(r[k] for r in ex_runs) for k in keys}
            sh = {k: statistics.median(r[k] for r in sh_runs) for k in keys}
            results["engine"] = {"executor": ex, "shell": sh, "runs": args.runs,
                                 "shell_poll_s": args.shell_poll,
                                 "engine_version": ex_runs[0]["record"].engine.get("version"),
                                 "serve": serve, "bench": bench}
            labels = {
                "start_to_200_s": "start → engine answers /health 200",
                "health_detect_delay_s": "first 200 → seen by the runner",
                "ready_delay_s": "first 200 → ready declared",
                "bench_s": "vllm bench serve (client process)",
                "teardown_s": "teardown (TERM group → port free)",
                "total_s": "whole run",
            }
            print(f"\nEngine: vLLM {results['engine']['engine_version']}, "
                  f"median of {args.runs} run(s); shell polls every {args.shell_poll:g} s")
            print(f"  {'step':<40} {'executor':>10} {'shell':>10}")
            for k in keys:
                print(f"  {labels[k]:<40} {fmt_s(ex[k]):>10} {fmt_s(sh[k]):>10}")
            print("  (the executor's 'ready' includes one real 1-token completion after the "
                  "200;\n   its teardown also verifies the port and GPU memory)")
        bk = bookkeeping(work, args.records, args.repeat)
        results["bookkeeping"] = {**bk, "records": args.records}
    n = args.records
    print(f"\nBookkeeping, {n} records (best of {args.repeat}):")
    rows = [
        (f"parse {n} vllm bench serve results", bk["parse_s"]),
        (f"write {2 * n} records (JSON, atomic)", bk["write_s"]),
        (f"render {n} pages × 2 regions (1 record each)", bk["render_wide_s"]),
        (f"render 1 page: {n}-row history + table", bk["render_deep_s"]),
        (f"by hand: read {n} records, print rows", bk["by_hand_s"]),
    ]
    for label, value in rows:
        print(f"  {label:<46} {fmt_s(value):>10}")
    if "engine" in results:
        ex = results["engine"]["executor"]
        print("\nTargets: ready within 0.5 s of the engine answering: "
              f"{'met' if ex['ready_delay_s'] < 0.5 else 'MISSED'} ({fmt_s(ex['ready_delay_s'])}); "
              f"teardown under 10 s: {'met' if ex['teardown_s'] < 10 else 'MISSED'}; "
              f"render of 100 records under 1 s: "
              f"{'met' if bk['render_wide_s'] < 1 else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
