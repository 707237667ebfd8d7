"""The run path, walked: one `wiki runbook run` of a small runbook against the fake vLLM
(tests/fakes/bin), in this process, with a profile hook on every Python call inside wikitools.

Printed, for a runbook with a KLD client and one without:
- steps: calls from one wikitools file into another, from `session.run_prepared` down;
  back: those that enter a file the walk had already left; files: how many files the walk enters;
- the files entered most often;
- how often a record is read (`read_record`), a server command parsed (`parse_server_command`)
  and the KLD scorer entered (`score_record`).

    .venv/bin/python benchmarks/bench_run_path.py
"""

from __future__ import annotations

import collections
import os
import socket
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FAKE_BIN = ROOT / "tests" / "fakes" / "bin"
PACKAGE = str(ROOT / "wikitools")
COUNTED = ("read_record", "parse_server_command", "score_record")

PAGE = """---
title: Run path
---

# Run path

```bash {{ #walk .runbook-server engine=vllm gpus=0 stop_timeout=3 }}
vllm serve ./model --port {port}
```

```bash {{ .runbook-client for=walk name=bench timeout=30 }}
vllm bench serve --model ./model --num-prompts 4 --max-concurrency 1
```
{kld}
<!-- wiki:results runbook=walk view=serving client=bench -->
<!-- wiki:end -->
"""

KLD = """
```bash { .runbook-client for=walk name=kld kind=kld timeout=60 }
wiki kld capture --model ./model --seed 0 --positions 64 --id-range 3-100 --top-k 8
```
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Walk:
    """Counts file-to-file calls inside wikitools while it is the profile hook."""

    def __init__(self) -> None:
        self.steps = 0
        self.back = 0
        self.entered: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self._left: set[str] = set()

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        file = frame.f_code.co_filename
        if not file.startswith(PACKAGE):
            return
        name = frame.f_code.co_name
        if name in COUNTED:
            self.calls[name] += 1
        caller = frame.f_back
        while caller is not None and not caller.f_code.co_filename.startswith(PACKAGE):
            caller = caller.f_back
        if caller is None or caller.f_code.co_filename == file:
            return
        self.steps += 1
        self.back += file in self._left
        self._left.add(caller.f_code.co_filename)
        self.entered[os.path.relpath(file, ROOT)] += 1


def walk(with_kld: bool) -> Walk:
    from wikitools.runbook.session import RunOptions, prepare, run_prepared

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "wiki").mkdir()
        (root / "model").mkdir()
        (root / "wiki/walk.md").write_text(PAGE.format(port=_port(),
                                                       kld=KLD if with_kld else ""))
        prepared = prepare("walk", root, RunOptions(repeats=1, warmup=False))
        seen = Walk()
        sys.setprofile(seen)
        try:
            result = run_prepared(prepared, handle_signals=False)
        finally:
            sys.setprofile(None)
        if not result.record.ok:
            raise SystemExit(f"the run failed: {result.record.message}")
        return seen


def main() -> int:
    os.environ["PATH"] = f"{FAKE_BIN}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}" \
        + os.environ["PATH"]
    for label, with_kld in (("with a KLD client", True), ("without one", False)):
        w = walk(with_kld)
        share = 100 * w.back / w.steps if w.steps else 0.0
        print(f"{label}: {w.steps} steps through {len(w.entered)} files, {w.back} back into a "
              f"file already left ({share:.0f} %)")
        print("  most entered: " + ", ".join(f"{f} {n}" for f, n in w.entered.most_common(4)))
        print("  calls: " + ", ".join(f"{n} {w.calls[n]}" for n in COUNTED))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
