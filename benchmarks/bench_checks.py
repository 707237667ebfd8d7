"""Benchmark the wiki's checks against the community wiki's own regex scripts.

Generates two community wikis with benchmarks/community_wiki.py (308 pages / 2.7 MB for the
index, 2,144 pages / 23 MB for the checks), then prints, for each command: wall seconds, CPU
seconds (all processes), peak memory of the whole process tree, and the ratio to the regex
script (benchmarks/regex_reference.py) on the same pages. Goals: index (cache warm) at most 2x
the regex index script; `wiki check` cold at most 0.6x the regex acronym script and under
300 MB, warm at most 0.2x. Two pathological inputs follow (a 16,000-line paragraph, a 40 KB
`GPU-GPU-...` chain), each of which must take under a second.

Usage: python benchmarks/bench_checks.py [--scale 1.0] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from community_wiki import generate  # noqa: E402


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants, from /proc."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        todo += [int(c) for c in children]
    return total


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s of every process, peak MiB of the process tree, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kib(proc.pid))
        time.sleep(0.005)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    peak = max(peak, after.ru_maxrss)  # a short run may end between two samples
    return wall, cpu, peak / 1024, proc.returncode


def best_of(n: int, argv: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """The median run of `n` by wall time."""
    runs = sorted((measure(argv, env) for _ in range(n)), key=lambda r: r[0])
    return runs[len(runs) // 2]


def row(name: str, result: tuple[float, float, float, int], base=None) -> tuple[float, float]:
    """Print one command's figures; with `base` (the regex script's result) the ratios of
    wall time and of CPU time. Returns (wall, CPU)."""
    wall, cpu, mib, rc = result
    ratio = ""
    if base is not None:
        ratio = f"  {wall / base[0]:5.2f}x wall {cpu / base[1]:5.2f}x CPU of regex"
    print(f"  {name:<38} {wall:6.2f} s wall {cpu:6.2f} s CPU {mib:6.0f} MiB (exit {rc}){ratio}")
    return wall, cpu


PATHOLOGICAL = {
    "parse a 16,000-line paragraph": (
        "from wikitools.pages import parse_page\n"
        "parse_page('# T\\n\\n' + 'word and more words here\\n' * 16000)\n"
    ),
    "acronyms on a 40 KB GPU-GPU-... chain": (
        "from wikitools.acronyms import check_pages\n"
        "from wikitools.glossary import Entry, Glossary\n"
        "from wikitools.pages import parse_page\n"
        "g = Glossary('g.md', [Entry('GPU', 'graphics processing unit', '', 1, 1)])\n"
        "check_pages([parse_page('# T\\n\\n' + 'GPU-' * 10000 + 'GPU\\n', 'p.md')], g)\n"
    ),
}


def pathological(timeout: float) -> None:
    print("pathological pages (goal: under 1 s each; CPU seconds of the whole child process)")
    for name, code in PATHOLOGICAL.items():
        argv = [sys.executable, "-c", code]
        try:
            wall, cpu, _mib, rc = measure_timeout(argv, timeout)
            print(f"  {name:<38} {wall:6.2f} s wall {cpu:6.2f} s CPU (exit {rc}, with start-up)")
        except subprocess.TimeoutExpired:
            print(f"  {name:<38} more than {timeout:.0f} s (stopped)")


def measure_timeout(argv: list[str], timeout: float) -> tuple[float, float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, timeout=timeout, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, 0.0, proc.returncode


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="size factor for both wikis")
    parser.add_argument("--repeat", type=int, default=3, help="runs per fast command (median)")
    parser.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    parser.add_argument("--timeout", type=float, default=120.0, help="for pathological cases")
    args = parser.parse_args()
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="wiki-bench-"))
    py = sys.executable
    wiki = [py, "-m", "wikitools"]
    regex = [py, str(HERE / "regex_reference.py")]
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    try:
        small, big = tmp / "index-wiki", tmp / "check-wiki"
        size = generate(small, round(308 * args.scale), 2.7 * args.scale)
        print(f"index wiki: {round(308 * args.scale)} pages, {size / 1e6:.1f} MB")
        env = {**os.environ, "WIKI_CACHE_DIR": str(tmp / "cache-index")}
        script = [py, str(REPO / "scripts" / "generate-wiki-index.py"), "--root", str(small)]
        base = row("regex index script", best_of(args.repeat, [*regex, "index", str(small)], env))
        measure(script, env)  # fills the cache
        warm = row("generate-wiki-index.py (cache warm)", best_of(args.repeat, script, env), base)
        print(f"  goal index <= 2x regex: {verdict(warm[0] <= 2 * base[0])} (wall), "
              f"{verdict(warm[1] <= 2 * base[1])} (CPU)")

        size = generate(big, round(2144 * args.scale), 23.0 * args.scale)
        print(f"check wiki: {round(2144 * args.scale)} pages, {size / 1e6:.1f} MB")
        base = row("regex acronym script", measure([*regex, "acronyms", str(big)], env))
        check = [*wiki, "check", "--root", str(big)]
        cache = tmp / "cache-check"
        env = {**os.environ, "WIKI_CACHE_DIR": str(cache)}
        cold_result = measure(check, env)
        cold = row("wiki check (cold, empty cache)", cold_result, base)
        warm = row("wiki check (cache warm)", best_of(args.repeat, check, env), base)
        off = {**os.environ, "WIKI_CACHE_DIR": "off"}
        row("wiki check (cache off)", measure(check, off), base)
        print(
            f"  goal cold <= 0.6x: {verdict(cold[0] <= 0.6 * base[0])} ({cold[0] / base[0]:.2f}x "
            f"wall, {cold[1] / base[1]:.2f}x CPU); under 300 MB: "
            f"{verdict(cold_result[2] < 300)} ({cold_result[2]:.0f} MiB, all processes); "
            f"warm <= 0.2x: {verdict(warm[0] <= 0.2 * base[0])} ({warm[0] / base[0]:.2f}x wall, "
            f"{warm[1] / base[1]:.2f}x CPU)"
        )
        pathological(args.timeout)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
