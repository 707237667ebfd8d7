"""A stand-in for `vllm bench serve`: sends real completion requests to the server and writes a
result JSON with the same keys as `--save-result` (reference §1.3). Accepts the vLLM flags.

    python fake_bench.py --base-url http://127.0.0.1:18000 --model fake-model --num-prompts 8
        --max-concurrency 2 --save-result --result-dir D --result-filename F [--fail] [--sleep S]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model", default=None)
    p.add_argument("--num-prompts", type=int, default=8)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--result-dir", default=".")
    p.add_argument("--result-filename", default="result.json")
    p.add_argument("--fail", action="store_true")
    p.add_argument("--no-result", action="store_true")
    p.add_argument("--sleep", type=float, default=0.0)
    args, _unknown = p.parse_known_args()
    base = args.base_url or f"http://{args.host}:{args.port}"
    if args.fail:
        print("Traceback (most recent call last):\nConnectionError: fake client failure")
        return 1
    print(f"FAKE_PID {os.getpid()} PGID {os.getpgid(0)}", flush=True)
    print("Starting main benchmark run...", flush=True)
    model = args.model
    if model is None:
        with urllib.request.urlopen(base + "/v1/models", timeout=5) as r:
            model = json.load(r)["data"][0]["id"]
    t0 = time.perf_counter()
    for _ in range(args.num_prompts):
        req = urllib.request.Request(
            base + "/v1/completions",
            data=json.dumps({"model": model, "prompt": "hi", "max_tokens": 4}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            r.read()
    time.sleep(args.sleep)
    duration = time.perf_counter() - t0
    c = args.max_concurrency or 1
    result = {
        "date": "20261130-100000", "endpoint_type": "openai", "backend": "openai",
        "label": None, "model_id": model, "tokenizer_id": model,
        "num_prompts": args.num_prompts, "request_rate": "inf", "burstiness": 1.0,
        "max_concurrency": args.max_concurrency, "duration": duration,
        "completed": args.num_prompts, "failed": 0,
        "total_input_tokens": 128 * args.num_prompts, "total_output_tokens": 4 * args.num_prompts,
        "request_throughput": 10.123456789 * c, "request_goodput": None,
        "output_throughput": 40.98765432 * c, "total_token_throughput": 1336.5 * c,
        "max_output_tokens_per_s": 44.0, "max_concurrent_requests": c,
        "mean_ttft_ms": 11.65 + c, "median_ttft_ms": 11.32 + c, "std_ttft_ms": 1.0,
        "p99_ttft_ms": 16.49 + c, "mean_tpot_ms": 2.11, "median_tpot_ms": 2.05,
        "std_tpot_ms": 0.1, "p99_tpot_ms": 2.9, "mean_itl_ms": 2.2, "median_itl_ms": 2.1,
        "std_itl_ms": 0.2, "p99_itl_ms": 3.3, "latencies": [0.1] * args.num_prompts,
    }
    print("============ Serving Benchmark Result ============")
    print(f"{'Successful requests:':<40} {args.num_prompts:<10}")
    print("==================================================", flush=True)
    if args.save_result and not args.no_result:
        out = Path(args.result_dir) / args.result_filename
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
