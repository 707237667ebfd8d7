"""`python -m sglang.bench_serving … --output-file F`: sends its prompts to the fake server's
/v1/completions and appends one JSON line to F with SGLang's key names (no prompt count, and
`request_rate` written as the bare `Infinity` SGLang writes)."""

from __future__ import annotations

import argparse
import json
import time
import urllib.request

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--base-url")
    p.add_argument("--model", required=True)
    p.add_argument("--num-prompts", type=int, default=8)
    p.add_argument("--max-concurrency", type=int, default=1)
    p.add_argument("--random-output-len", type=int, default=4)
    p.add_argument("--output-file", required=True)
    args, _rest = p.parse_known_args()
    base = args.base_url or f"http://{args.host}:{args.port}"
    t0 = time.monotonic()
    for _ in range(args.num_prompts):
        body = json.dumps({"model": args.model, "prompt": "x",
                           "max_tokens": args.random_output_len}).encode()
        req = urllib.request.Request(f"{base}/v1/completions", body,
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
    duration = max(time.monotonic() - t0, 1e-6)
    out = args.num_prompts * args.random_output_len
    result = {"backend": "sglang", "max_concurrency": args.max_concurrency,
              "completed": args.num_prompts, "duration": duration,
              "request_throughput": args.num_prompts / duration,
              "output_throughput": out / duration, "total_output_tokens": out,
              "median_ttft_ms": 1.5, "p99_ttft_ms": 2.5, "median_tpot_ms": 0.5,
              "p99_tpot_ms": 0.7, "median_itl_ms": 0.5, "p99_itl_ms": 0.9}
    line = json.dumps(result)[:-1] + ', "request_rate": Infinity}'
    with open(args.output_file, "a") as f:
        f.write(line + "\n")
    print("============ Serving Benchmark Result ============")
    print(f"Successful requests: {args.num_prompts}")
