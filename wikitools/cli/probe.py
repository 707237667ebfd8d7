"""`wiki probe FILE`: correctness probes against a running server, `n/N correct at cC`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from wikitools.core.fsio import write_if_changed
from wikitools.quality.capture import served_model
from wikitools.quality.probe import load_probes, run_probes


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "probe", help="send prompts with checkable answers; n/N correct at concurrency C",
        description="Send every prompt of a probe file (JSON Lines: prompt plus expect or "
        "match) to a running OpenAI-compatible server, C at a time, and write the result with "
        "every failure (prompt, answer, expected). Wrong answers are a result, not an error: "
        "the exit status is 0 once every request was sent.")
    p.add_argument("file", type=Path, help="the probe file (.jsonl)")
    p.add_argument("--base-url", default="http://127.0.0.1:8000", help="the server")
    p.add_argument("--model", help="served model name (default: the first of /v1/models)")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    p.add_argument("--chat", action="store_true", help="use /v1/chat/completions")
    p.add_argument("--out", type=Path, default=Path("probe-result.json"), help="result file")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds each request's whole answer may take")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    probes = load_probes(args.file)
    model = args.model or served_model(args.base_url, args.timeout)
    result = run_probes(args.base_url, model, probes, args.concurrency, args.chat, args.timeout,
                        args.file.as_posix())
    result["probe_file"] = args.file.as_posix()
    write_if_changed(args.out, json.dumps(result, sort_keys=True, indent=2) + "\n")
    print(f"{result['correct']}/{result['total']} correct at c{result['concurrency']}",
          file=sys.stderr)
    return 0
