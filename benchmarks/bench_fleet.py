"""What going through Ray costs a fleet run, and what it gains.

Starts a real Ray cluster in a network namespace made for it (head + N worker nodes, one
declared GPU each, labelled sm120; the first also sm100), as the fleet tests do, and runs
runbooks served by the stand-in engine (tests/fakes: the fake OpenAI server and benchmark
client, each runbook about `--sleep` seconds of client work plus start-up and teardown):

- dispatch overhead: driver submission → the run starting on its node, per runbook, for the
  first wave (Ray starts a worker process on each node) and for later waves (workers reused);
- speed-up: N independent runbooks on N nodes against the same N runbooks queued on one node
  (asking for sm100, which only the first node has), through the same driver.

Needs root (network namespace), iproute2 and Ray (`pip install -e '.[fleet]'`).

    .venv/bin/python benchmarks/bench_fleet.py [--nodes 3] [--sleep 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKES = REPO / "tests" / "fakes"
CAPTURES = REPO / "tests" / "fixtures" / "nvidia-smi"
sys.path.insert(0, str(FAKES))
sys.path.insert(0, str(REPO))

PAGE_HEAD = """---
title: Fleet benchmark runbooks
description: Runbooks for the stand-in engine, to time fleet runs.
status: experimental
---

# Fleet benchmark runbooks

"""

BLOCK = """```bash {{ #{id} .runbook-server engine=vllm gpus=1 arch={arch} ready_timeout=60 \
stop_timeout=5 }}
vllm serve fake-model --port 8000 --delay 0.2 --unhealthy 0.1
```

```bash {{ .runbook-client for={id} name=bench kind=serving timeout=120 }}
vllm bench serve --model fake-model --num-prompts 4 --max-concurrency 1 --sleep {sleep}
```

"""


def make_tree(root: Path, nodes: int, sleep: float) -> None:
    blocks = [BLOCK.format(id=f"par-{i}", arch="sm120", sleep=sleep) for i in range(nodes)]
    blocks += [BLOCK.format(id=f"seq-{i}", arch="sm100", sleep=sleep) for i in range(nodes)]
    (root / "wiki").mkdir(parents=True)
    (root / "wiki" / "bench.md").write_text(PAGE_HEAD + "".join(blocks), encoding="utf-8")


# --------------------------------------------------------------------------- inside the namespace


def inner(address: str, root: Path, nodes: int) -> dict[str, object]:
    from wikitools.fleet import driver
    from wikitools.runbook.blocks.extract import load_runbooks

    runbooks, _, _ = load_runbooks(root)
    par = [r for r in runbooks if r.id.startswith("par-")]
    seq = [r for r in runbooks if r.id.startswith("seq-")]
    out: dict[str, object] = {}
    with driver.connect(address):
        for label, chosen in (("cold", par), ("parallel", par), ("sequential", seq)):
            t = time.monotonic()
            # The sm100 label stands for "only this node": its nvidia-smi says sm120, so force.
            outcomes, _ = driver.run_fleet(chosen, workdir=str(root), force=label == "sequential")
            wall = time.monotonic() - t
            bad = [(o.runbook.id, o.status, o.message) for o in outcomes if o.status != "ok"]
            if bad:
                raise SystemExit(f"{label}: runs failed: {bad}")
            out[label] = {
                "wall_s": wall,
                "dispatch_s": [o.dispatch_s for o in outcomes],
                "began": [o.began for o in outcomes],
                "run_s": [o.record.timings.get("total_s") for o in outcomes if o.record],
                "nodes": sorted({o.node or "?" for o in outcomes}),
            }
    return out


# --------------------------------------------------------------------------- outside


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=3, help="worker nodes (default 3)")
    p.add_argument("--sleep", type=float, default=3.0,
                   help="seconds the fake client works per runbook (default 3)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--inner", nargs=2, metavar=("ADDRESS", "ROOT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.inner:
        print(json.dumps(inner(args.inner[0], Path(args.inner[1]), args.nodes)))
        return 0

    from ray_cluster import RayCluster, fake_smi, why_not

    reason = why_not()
    if reason:
        print(f"bench_fleet: cannot run here: {reason}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    root = work / "wiki-root"
    make_tree(root, args.nodes, args.sleep)
    smi = fake_smi(work, "rtxpro6000-x2", CAPTURES)
    path = f"{FAKES / 'bin'}{os.pathsep}{os.environ['PATH']}"
    cluster = RayCluster(Path(sys.executable).parent)
    try:
        t = time.monotonic()
        cluster.make_namespace()
        cluster.start_node("head", head=True, num_cpus=0)
        # One CPU each, as real hosts have some: Ray keeps that many idle workers for reuse.
        cluster.start_nodes([
            {"name": f"node-{i + 1}", "num_gpus": 1, "num_cpus": 1,
                 "resources": {"sm120": 1, "sm100": 1} if i == 0 else {"sm120": 1},
                 "env": {"PATH": path, "WIKI_NVIDIA_SMI": str(smi)}}
            for i in range(args.nodes)
        ])
        up = time.monotonic() - t
        proc = subprocess.run(
            cluster.netns(sys.executable, __file__, "--nodes", str(args.nodes),
                          "--inner", cluster.address, str(root)),
            env=cluster.env("driver"), capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr, file=sys.stderr)
            return 1
        figures = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        cluster.stop(grace=5.0)
        shutil.rmtree(work, ignore_errors=True)
    report(figures, args, up)
    if args.json:
        args.json.write_text(json.dumps({"cluster_up_s": up, **figures}, indent=2,
                                        sort_keys=True) + "\n", encoding="utf-8")
    return 0


def report(f: dict, args: argparse.Namespace, up: float) -> None:
    n = args.nodes
    cold, par, seq = f["cold"], f["parallel"], f["sequential"]
    warm = par["dispatch_s"]
    # Queued runs on one node: the next starts when the previous one's task has returned.
    order = sorted(zip(seq["began"], seq["run_s"], strict=True))
    handoff = [b2 - b1 - r1 for (b1, r1), (b2, _) in itertools.pairwise(order)]
    print(f"cluster: head + {n} worker nodes in a network namespace, up in {up:.1f} s")
    print(f"runbook: stand-in engine, client work {args.sleep:g} s; one run takes "
          f"{statistics.median(par['run_s']):.2f} s on its node (median executor total)")
    print("dispatch overhead, submission -> run starts on its node:")
    print(f"  first wave (Ray starts a worker per node): median "
          f"{statistics.median(cold['dispatch_s']):.3f} s, max {max(cold['dispatch_s']):.3f} s")
    print(f"  second wave (worker reused):               median {statistics.median(warm):.3f} s, "
          f"max {max(warm):.3f} s")
    print(f"  queued on one node, previous run's end -> next start (incl. the next preflight): "
          f"median {statistics.median(handoff):.3f} s")
    print(f"{n} runbooks on {n} nodes ({', '.join(par['nodes'])}): {par['wall_s']:.2f} s")
    print(f"{n} runbooks queued on one node ({', '.join(seq['nodes'])}): {seq['wall_s']:.2f} s")
    print(f"speed-up: {seq['wall_s'] / par['wall_s']:.2f}x (ideal {n}x); parallel time = "
          f"{par['wall_s'] / seq['wall_s']:.2f} of sequential (ideal {1 / n:.2f})")


if __name__ == "__main__":
    raise SystemExit(main())
