"""Runs `execute` on a fake plan in its own process (for signal tests) and writes the record.

    python run_plan.py ROOT PORT [server args] -- [bench args]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes.plans import fake_plan

from wikitools.runbook.execution.execute import execute
from wikitools.runbook.records.record import write_record


def main() -> int:
    root, port = Path(sys.argv[1]), int(sys.argv[2])
    rest = sys.argv[3:]
    split = rest.index("--") if "--" in rest else len(rest)
    plan = fake_plan(port=port, server_args=" ".join(rest[:split]),
                     bench_args=" ".join(rest[split + 1:]))
    record = execute(plan, root=root)
    print(write_record(root, record), flush=True)
    return 0 if record.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
