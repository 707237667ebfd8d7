"""How well `wiki runbook scan` understands community launchers.

Reads the pages under tests/fixtures/community (written in the shapes real community pages use:
`docker run` with many flags, compose files with `command:`/`entrypoint:` lists and `$${VAR}`,
image-entrypoint launchers, `docker exec … bash -lc '…'`, wrapper scripts forwarding "$@", env
prefixes, flag aliases, escaped JSON). Before each launcher block a comment says what a reader
should take from it: `<!-- expect engine=E model=M tp=N -->` (`none` for "not stated").

Prints the share of launchers found, and of those found the share with the right engine, model
and tensor-parallel size; lists every miss; counts blocks reported as launchers that are not.

    python benchmarks/bench_scan.py [--pages DIR] [--quiet]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from wikitools.pages.parse import read_page  # noqa: E402
from wikitools.runbook.blocks.scan import Suggestion, scan_pages  # noqa: E402
from wikitools.runbook.engines.types import EngineCommand  # noqa: E402

EXPECT = re.compile(r"^<!-- expect (?P<body>.*?) -->$")


@dataclass(frozen=True, slots=True)
class Expected:
    path: str
    line: int
    engine: str
    model: str | None
    tp: int | None


@dataclass(frozen=True, slots=True)
class Score:
    launchers: int
    found: int
    engine_right: int
    model_right: int
    tp_right: int
    false_positives: int
    misses: tuple[str, ...]

    def pct(self, n: int, of: int) -> float:
        return 100.0 * n / of if of else 0.0

    def lines(self) -> list[str]:
        def share(label: str, n: int, of: int) -> str:
            return f"{label:<21}{n}/{of} ({self.pct(n, of):.1f} %)"

        return [
            f"{'launchers':<21}{self.launchers}",
            share("found", self.found, self.launchers),
            share("engine right", self.engine_right, self.found),
            share("model right", self.model_right, self.found),
            share("TP right", self.tp_right, self.found),
            f"{'false positives':<21}{self.false_positives}",
        ]


def expectations(root: Path) -> tuple[list, list[Expected]]:
    pages = []
    expected: list[Expected] = []
    for path in sorted(root.rglob("*.md")):
        page = read_page(path, root)
        pages.append(page)
        lines = page.text.split("\n")
        for block in page.code_blocks:
            m = EXPECT.match(lines[block.line - 2].strip()) if block.line >= 2 else None
            if not m:
                continue
            kv = dict(item.split("=", 1) for item in m["body"].split())
            expected.append(Expected(
                page.path, block.line, kv["engine"],
                None if kv["model"] == "none" else kv["model"],
                None if kv["tp"] == "none" else int(kv["tp"]),
            ))
    return pages, expected


def score(root: Path) -> Score:
    pages, expected = expectations(root)
    found: dict[tuple[str, int], Suggestion] = {}
    for s in scan_pages(pages):
        if s.role in ("server", "file") and isinstance(s.command, EngineCommand):
            found.setdefault((s.path, s.source_line), s)
    wanted = {(e.path, e.line) for e in expected}
    n_found = engine = model = tp = 0
    misses: list[str] = []
    for e in expected:
        s = found.get((e.path, e.line))
        if s is None:
            misses.append(f"{e.path}:{e.line}: not found (expected {e.engine} {e.model} "
                          f"tp={e.tp})")
            continue
        cmd = s.command
        assert isinstance(cmd, EngineCommand)
        n_found += 1
        engine += cmd.engine == e.engine
        model += cmd.model == e.model
        tp += cmd.tp == e.tp
        if (cmd.engine, cmd.model, cmd.tp) != (e.engine, e.model, e.tp):
            misses.append(f"{e.path}:{e.line}: read {cmd.engine} {cmd.model} tp={cmd.tp}, "
                          f"expected {e.engine} {e.model} tp={e.tp}")
    extra = [k for k in found if k not in wanted]
    misses += [f"{p}:{ln}: reported as a launcher, but it is not one" for p, ln in sorted(extra)]
    return Score(len(expected), n_found, engine, model, tp, len(extra), tuple(misses))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=Path, default=REPO / "tests" / "fixtures" / "community")
    ap.add_argument("--quiet", action="store_true", help="figures only, no list of misses")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    result = score(args.pages)
    secs = time.perf_counter() - t
    shown = args.pages.relative_to(REPO) if args.pages.is_relative_to(REPO) else args.pages
    print(f"community launcher scan ({shown})")
    for line in result.lines():
        print("  " + line)
    print(f"  time                 {secs * 1000:.0f} ms")
    if not args.quiet and result.misses:
        print("misses:")
        for m in result.misses:
            print("  " + m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
