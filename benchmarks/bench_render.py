"""Time `wiki runbook render` over 100 run records with charts.

Builds a throw-away wiki with two runbooks (a serving region with charts, a history region with
the trend chart, and a trade-off region), writes 100 records of schema 2 (three sweep points,
three samples each) split between them, and times the render from disk: reading every record,
building every table and SVG, and the page text. Prints the best of a few rounds.

Usage: python benchmarks/bench_render.py [--records 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wikitools.pages.parse import read_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.records.record import (
    ClientResult,
    Point,
    Record,
    Sample,
    Step,
    write_record,
)
from wikitools.runbook.records.stats import median_metrics
from wikitools.runbook.rendering.render import render_pages

PAGE = """---
title: Render benchmark
---

# Render benchmark

```bash { #bench-a .runbook-server engine=vllm gpus=1 }
vllm serve m --tensor-parallel-size 1
```

```bash { .runbook-client for=bench-a name=throughput sweep="CONCURRENCY=1,8,32" }
vllm bench serve --model m --max-concurrency "${CONCURRENCY:-8}"
```

```bash { #bench-b .runbook-server engine=vllm gpus=2 }
vllm serve m --tensor-parallel-size 2
```

```bash { .runbook-client for=bench-b name=throughput sweep="CONCURRENCY=1,8,32" }
vllm bench serve --model m --max-concurrency "${CONCURRENCY:-8}"
```

<!-- wiki:results runbook=bench-a view=serving -->
<!-- wiki:end -->

<!-- wiki:results runbook=bench-b view=serving -->
<!-- wiki:end -->

<!-- wiki:results runbook=bench-a view=history -->
<!-- wiki:end -->

<!-- wiki:results runbook=bench-b view=history -->
<!-- wiki:end -->

<!-- wiki:results runbook=bench-a view=tradeoff with=bench-b -->
<!-- wiki:end -->
"""


def make_record(rid: str, blocks: str, i: int, rng: random.Random) -> Record:
    points = []
    for c in (1, 8, 32):
        samples = []
        for _ in range(3):
            tput = 550.0 * c ** 0.8 * rng.uniform(0.9, 1.1)
            samples.append(Sample("ok", {
                "output_throughput": tput, "request_throughput": tput / 256,
                "total_token_throughput": tput * 3, "median_ttft_ms": 13.0 * c ** 0.5,
                "p99_ttft_ms": 20.0 * c ** 0.5, "median_tpot_ms": 1.6 + c * 0.06,
                "p99_tpot_ms": 2.2 + c * 0.06, "median_itl_ms": 1.7, "p99_itl_ms": 2.7,
                "completed": 64 * c, "num_prompts": 64 * c}, 10.0))
        points.append(Point(str(c), "ok", median_metrics([s.metrics for s in samples]),
                            samples=tuple(samples), coords=(("CONCURRENCY", str(c)),)))
    minute = f"{i // 60:02d}:{i % 60:02d}"
    started = f"2026-12-01T00:{minute}Z"
    return Record(
        runbook=rid, page="wiki/bench.md", blocks_hash=blocks,
        run_id=f"20261201T00{minute.replace(':', '')}Z-{blocks[7:15]}",
        started_at=started, finished_at=started, status="ok",
        host={"gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                        "compute_capability": "12.0"}], "gpu_count": 1, "driver": "580.95.05",
              "cuda": "13.0", "topology": "none", "cpu_only": False},
        engine={"name": "vllm", "version": "0.26.0", "image": None, "image_digest": None},
        server={"command": "vllm serve m", "env": {}, "port": 8000, "log_tail": []},
        steps=(Step("ready", "ok", 1.0),),
        clients=(ClientResult("throughput", "serving", "vllm bench serve", "CONCURRENCY",
                              tuple(points), ("CONCURRENCY",), 3, True),),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wiki-bench-render-") as tmp:
        root = Path(tmp)
        (root / "wiki").mkdir()
        (root / "wiki" / "bench.md").write_text(PAGE, encoding="utf-8")
        runbooks, _ = extract_runbooks([read_page(root / "wiki/bench.md", root)], root)
        rng = random.Random(7)
        for i in range(args.records):
            rb = runbooks.get("bench-a" if i % 2 == 0 else "bench-b")
            write_record(root, make_record(rb.id, rb.blocks_hash, i, rng))
        best = float("inf")
        size = 0
        for _ in range(args.rounds):
            page = read_page(root / "wiki/bench.md", root)
            start = time.perf_counter()
            changes, diags = render_pages([page], root)
            best = min(best, time.perf_counter() - start)
            if diags:
                print("\n".join(d.format() for d in diags), file=sys.stderr)
                return 1
            size = len(changes[0].new)
        print(f"render {args.records} records (5 regions, charts, 3x3 samples each): "
              f"best of {args.rounds} {best * 1000:.0f} ms; page {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
