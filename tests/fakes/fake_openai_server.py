"""A tiny OpenAI-compatible server that behaves like vLLM during start-up, for fast executor
tests: refused → 503 → 200 phases, vLLM-like log lines, /v1/models, /v1/completions, /version
and /metrics with spec-decode counters. Standard library only; listens on 127.0.0.1.

    python fake_openai_server.py --port 18000 [--delay 0.5] [--unhealthy 0.5] [--exit-code 3]
        [--never-ready] [--fatal] [--ignore-term] [--child] [--spec]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def log(msg: str) -> None:
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} {msg}", flush=True)


class State:
    healthy = False
    completions = 0
    accepted = 0
    drafts = 0
    draft_tokens = 0


def make_handler(args: argparse.Namespace) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *a: object) -> None:  # quiet
            pass

        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            if args.log_requests:
                log(f"REQUEST {self.command} {self.path} {code}")
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(*get_answer(args, self.path))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not State.healthy:
                self._send(503, b'{"error": "starting"}')
                return
            if self.path != "/v1/completions" or body.get("model") != args.model:
                self._send(404, b'{"error": "unknown model or path"}')
                return
            n = int(body.get("max_tokens") or 16)
            State.completions += 1
            if args.spec:
                State.drafts += n
                State.draft_tokens += 3 * n
                State.accepted += 2 * n
            choice = {"index": 0, "text": " x" * n, "finish_reason": "length"}
            if body.get("prompt_logprobs") is not None and isinstance(body.get("prompt"), list):
                choice["prompt_logprobs"] = prompt_logprobs(body["prompt"], args.vocab)
            out = {"id": "cmpl-1", "object": "text_completion", "model": args.model,
                   "choices": [choice],
                   "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}}
            self._send(200, json.dumps(out).encode())

    return Handler



Answer = tuple[int, bytes, str]  # status, body, content type
JSON = "application/json"


def get_answer(args: argparse.Namespace, path: str) -> Answer:
    """What the fake server answers a GET of `path`: the endpoints of its flavour first."""
    found = _flavour_answer(args, path)
    if found is not None:
        return found
    if path == "/health":
        return (200 if State.healthy else 503), b"", JSON
    if not State.healthy:
        return 503, b'{"error": "starting"}', JSON
    if path == "/v1/models":
        data = {"object": "list", "data": [{"id": args.model, "max_model_len": 2048}]}
        return 200, json.dumps(data).encode(), JSON
    if path == "/version":
        return 200, json.dumps({"version": "0.0.0+fake"}).encode(), JSON
    if path == "/metrics":
        return 200, metrics(args).encode(), "text/plain"
    return 404, b"{}", JSON


def _flavour_answer(args: argparse.Namespace, path: str) -> Answer | None:
    """SGLang's and llama-server's own endpoints and the ones they lack."""
    if args.flavour == "sglang" and path in ("/health_generate", "/server_info"):
        if not State.healthy:
            return 503, b"", JSON
        if path == "/server_info":
            return 200, json.dumps(server_info(args)).encode(), JSON
        return 200, b"", JSON
    if args.flavour == "sglang" and path in ("/health", "/version", "/metrics"):
        # Readiness must come from /health_generate: these tell nothing here.
        return 404, b'{"detail": "Not Found"}', JSON
    if args.flavour == "llama" and path in ("/version", "/metrics"):
        return 404, b'{"error": {"code": 404, "message": "File Not Found"}}', JSON
    if path == "/health" and args.flavour == "llama" and not State.healthy:
        return 503, b'{"error": {"code": 503, "message": "Loading model"}}', JSON
    return None


def prompt_logprobs(ids: list[int], vocab: int) -> list[dict | None]:
    """vLLM's answer shape for `prompt_logprobs: -1`: per prompt token after the first, every
    token of a `vocab`-token vocabulary with a log-probability that depends on the position."""
    out: list[dict | None] = [None]
    for pos in range(1, len(ids)):
        weights = [1.0 + ((pos * 7 + v * 13) % 17) for v in range(vocab)]
        total = sum(weights)
        out.append({str(v): {"logprob": math.log(w / total), "rank": 1, "decoded_token": "x"}
                    for v, w in enumerate(weights)})
    return out


def server_info(args: argparse.Namespace) -> dict:
    """The part of SGLang's /server_info the executor reads (server arguments, version, states)."""
    return {"model_path": args.model, "attention_backend": "triton", "kv_cache_dtype": "auto",
            "moe_runner_backend": "auto", "max_total_num_tokens": args.kv_tokens,
            "version": "0.0.0+fake", "internal_states": [{"avg_spec_accept_length": None}]}


def metrics(args: argparse.Namespace) -> str:
    lab = f'engine="0",model_name="{args.model}"'
    lines = [
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        "# TYPE vllm:cache_config_info gauge",
        f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",'
        f'kv_cache_size_tokens="{args.kv_tokens}",num_gpu_blocks="{args.kv_tokens // 16}"}} 1.0',
        f"vllm:num_requests_running{{{lab}}} 0.0",
        f"vllm:generation_tokens_total{{{lab}}} {float(State.completions)}",
    ]
    if args.spec:
        lines += [
            f"vllm:spec_decode_num_drafts_total{{{lab}}} {float(State.drafts)}",
            f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {float(State.draft_tokens)}",
            f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {float(State.accepted)}",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", default="fake-model")
    p.add_argument("--delay", type=float, default=0.2, help="seconds before listening")
    p.add_argument("--unhealthy", type=float, default=0.2, help="seconds of 503 after listening")
    p.add_argument("--exit-code", type=int, default=None, help="exit during start-up")
    p.add_argument("--never-ready", action="store_true")
    p.add_argument("--fatal", action="store_true", help="log a CUDA OOM traceback, then hang")
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--child", action="store_true", help="leave a child process in the group")
    p.add_argument("--spec", action="store_true", help="expose spec-decode counters")
    p.add_argument("--kv-tokens", type=int, default=123456)
    p.add_argument("--log-requests", action="store_true", help="log each answer it gives")
    p.add_argument("--vocab", type=int, default=8, help="tokens per prompt_logprobs position")
    p.add_argument("--flavour", choices=("vllm", "llama", "sglang"), default="vllm",
                   help="log lines and endpoints of vLLM, llama.cpp's llama-server or SGLang")
    args, _unknown = p.parse_known_args()

    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.child:
        # Sleeps in the same process group; only a group-wide signal reaches it.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        log(f"worker pid {child.pid}")

    log(f"FAKE_PID {os.getpid()} PGID {os.getpgid(0)}")
    if args.flavour == "llama":
        return serve_like_llama(args)
    if args.flavour == "sglang":
        return serve_like_sglang(args)
    compiled = os.environ.get("VLLM_CACHE_ROOT")
    if compiled:  # as vLLM's torch.compile does: its cache under VLLM_CACHE_ROOT
        os.makedirs(os.path.join(compiled, "torch_compile_cache"), exist_ok=True)
        with open(os.path.join(compiled, "torch_compile_cache", "fake"), "w") as f:
            f.write("compiled\n")
    log("vLLM API server version 0.0.0+fake")
    log(f"non-default args: {{'model': '{args.model}', 'port': {args.port}}}")
    log("Using max model len 2048")
    time.sleep(args.delay / 2)
    log("Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN'].")
    log("Using FlashAttention version 2")
    log("Model loading took 0.25 GiB memory and 0.123456 seconds")
    if args.exit_code is not None:
        log("Traceback (most recent call last):")
        log("ValueError: fake start-up failure")
        return args.exit_code
    if args.fatal:
        log("Traceback (most recent call last):")
        log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
        time.sleep(3600)
        return 1
    log("Available KV cache memory: 1.5 GiB")
    log(f"GPU KV cache size: {args.kv_tokens:,} tokens")
    log("Maximum concurrency for 2,048 tokens per request: 60.28x")
    log("Graph capturing finished in 3 secs, took 0.12 GiB")
    time.sleep(args.delay / 2)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log(f"Starting vLLM server on http://127.0.0.1:{args.port}")
    if args.never_ready:
        time.sleep(3600)
        return 0
    time.sleep(args.unhealthy)
    State.healthy = True
    log(f"READY_AT {time.time():.6f}")
    log("Application startup complete.")
    try:
        while True:
            time.sleep(3600)
    finally:
        server.shutdown()


def serve_like_llama(args: argparse.Namespace) -> int:
    """llama-server's start-up: build line, layer offload, then /health 503 until loaded."""
    print("build: 4242 (abcdef12) with cc (GCC) 13.2.0 for x86_64-linux-gnu", flush=True)
    print(f"llama_model_loader: loaded meta data from {args.model}", flush=True)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(args.delay)
    if args.exit_code is not None:
        print(f"llama_model_load: error loading model: fake failure for {args.model}", flush=True)
        return args.exit_code
    print("load_tensors: offloaded 33/33 layers to GPU", flush=True)
    time.sleep(args.unhealthy)
    State.healthy = True
    print(f"main: server is listening on http://127.0.0.1:{args.port} - starting the main loop",
          flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.shutdown()


def serve_like_sglang(args: argparse.Namespace) -> int:
    """SGLang 0.5.17's start-up lines (seen on an H200); /health_generate 503 until warmed up."""
    stamp = time.strftime("[%Y-%m-%d %H:%M:%S]")
    say = lambda msg: print(f"{stamp} {msg}", flush=True)  # noqa: E731
    say(f"server_args=ServerArgs(model_path='{args.model}', port={args.port})")
    say("Ignore import error when loading sglang.srt.models.inkling: No module named 'helion'")
    time.sleep(args.delay / 2)
    if args.exit_code is not None:
        say("Scheduler hit an exception: Traceback (most recent call last):")
        say("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
        return args.exit_code
    say(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {args.kv_tokens}, "
        "K size: 1.25 GB, V size: 1.25 GB")
    say("Capture target decode CUDA graph end. elapsed=1.50 s, mem usage=0.08 GB, avail mem=9 GB.")
    say(f"max_total_num_tokens={args.kv_tokens}, chunked_prefill_size=8192, context_len=4096")
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    say(f"INFO:     Uvicorn running on http://127.0.0.1:{args.port} (Press CTRL+C to quit)")
    time.sleep(args.unhealthy)
    State.healthy = True
    say("The server is fired up and ready to roll!")
    try:
        while True:
            time.sleep(3600)
    finally:
        server.shutdown()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
