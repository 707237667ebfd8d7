"""Benchmark the wiki's checks against the community wiki's own scripts, on the community wiki.

The community wiki (github.com/voipmonitor/rtx6kpro) ships `scripts/check-acronyms.py` and
`scripts/generate-wiki-index.py`, both plain regex scripts that find their pages from their own
location. Given a working tree of that repository (`--community DIR`; nothing of it is kept in
this project), the benchmark builds two scratch trees: the wiki as it is (about 308 pages) and
seven copies of its pages side by side (about 2,150 pages), each with the community's glossary
and its two scripts. It then prints, for each command, wall seconds, CPU seconds of every
process, peak memory of the process tree, and the ratio to the community script on the same
tree, wall and CPU side by side.

Our package's bytecode is compiled first (`compileall`), as `pip install` does for an installed
package: where PYTHONDONTWRITEBYTECODE is set, every run would otherwise compile each of our
modules from source, a cost no installed tool pays (the community scripts are single files that
import only the standard library, whose bytecode ships with Python). Cold runs start from an
empty facts cache each time; every figure is the median of `--repeat` runs by CPU time.

Goals on a 2-core machine: index (cache warm) at most 1.5x the community index script;
acronym check cold at most 1.0x its CPU time and warm at most 0.2x; cold `wiki check` on the
seven copies at most 1.0x the acronym script's CPU time, using both cores (CPU > wall), under
300 MB. Two pathological inputs follow (a 16,000-line paragraph, a 40 KB `GPU-GPU-...` chain),
each of which must take under a second.

Usage: python benchmarks/bench_checks.py --community DIR [--repeat 3] [--keep DIR]
  (a working tree: `git clone https://github.com/voipmonitor/rtx6kpro DIR`)
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

import psutil

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SCRIPTS = ("check-acronyms.py", "generate-wiki-index.py")
SKIP = {".git", "images", "logs", "data"}  # the folders both community scripts skip
COPIES = 7
# The community wiki has no wiki.yml: this one states what its scripts assume (pages from the
# root, GLOSSARY.md, images/logs/data skipped; INDEX.md and GLOSSARY.md are not checked).
WIKI_YML = """\
docs_dir: .
glossary: GLOSSARY.md
exclude: ["images/", "logs/", "data/", "INDEX.md", "scripts/"]
"""

Result = tuple[float, float, float, int]  # wall s, CPU s of all processes, peak MiB, exit code


def _pages(src: Path) -> list[Path]:
    return sorted(p for p in src.rglob("*.md")
                  if not SKIP.intersection(p.relative_to(src).parts))


def build_tree(src: Path, dst: Path, copies: int) -> tuple[int, int]:
    """The community's pages (`copies` times, in c1/, c2/, … when more than one), its glossary
    and its two scripts. Returns (pages, bytes)."""
    pages = _pages(src)
    total = 0
    for i in range(copies):
        base = dst if copies == 1 else dst / f"c{i + 1}"
        for page in pages:
            rel = page.relative_to(src)
            if copies > 1 and rel.name == "GLOSSARY.md" and len(rel.parts) == 1:
                continue
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, base / rel)
            total += page.stat().st_size
    shutil.copyfile(src / "GLOSSARY.md", dst / "GLOSSARY.md")
    (dst / "scripts").mkdir(exist_ok=True)
    for script in SCRIPTS:
        shutil.copyfile(src / "scripts" / script, dst / "scripts" / script)
    (dst / "wiki.yml").write_text(WIKI_YML)
    return len(_pages(dst)), total


PEAK_PROCESSES = [0]  # the most processes seen at once in the last measured run's tree


def _tree_rss_mib(proc: psutil.Process) -> float:
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0.0
    PEAK_PROCESSES[0] = max(PEAK_PROCESSES[0], len(procs))
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def measure(argv: list[str], cwd: Path, env: dict[str, str]) -> Result:
    """One run: its process (and the workers it waited for) alone, read by wait4: the
    peak of RUSAGE_CHILDREN would be the largest of every run before it."""
    start = time.perf_counter()
    popen = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    proc, peak = psutil.Process(popen.pid), 0.0
    PEAK_PROCESSES[0] = 0
    while True:
        pid, status, usage = os.wait4(popen.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _tree_rss_mib(proc))
        time.sleep(0.005)
    wall = time.perf_counter() - start
    popen.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    peak = max(peak, usage.ru_maxrss / 1024)  # a short run may end between two samples
    return wall, cpu, peak, popen.returncode


def median_of(n: int, argv: list[str], cwd: Path, env: dict[str, str],
              cold: Path | None = None) -> Result:
    """The median run of `n` by CPU time (the machine's other load moves wall time more).
    `cold`: the facts cache folder, emptied before each run."""
    runs: list[Result] = []
    for _ in range(n):
        if cold is not None:
            shutil.rmtree(cold, ignore_errors=True)
        runs.append(measure(argv, cwd, env))
    return sorted(runs, key=lambda r: r[1])[len(runs) // 2]


def paired(n: int, first: tuple[list[str], Path, dict[str, str], Path | None],
           second: tuple[list[str], Path, dict[str, str], Path | None],
           ) -> tuple[Result, Result, list[float]]:
    """`n` runs of two commands taken in turn, so that a drift of the machine's speed moves both
    alike: the median run of each (by CPU time) and, run by run, the second's CPU time over the
    first's. Each command is (argv, cwd, env, the cache folder emptied before each run)."""
    runs: tuple[list[Result], list[Result]] = ([], [])
    for _ in range(n):
        for (argv, cwd, env, cold), done in zip((first, second), runs, strict=True):
            if cold is not None:
                shutil.rmtree(cold, ignore_errors=True)
            done.append(measure(argv, cwd, env))
    a, b = (sorted(r, key=lambda x: x[1])[len(r) // 2] for r in runs)
    return a, b, [y[1] / x[1] for x, y in zip(*runs, strict=True)]


def row(name: str, result: Result, base: Result | None = None) -> Result:
    wall, cpu, mib, rc = result
    ratio = ""
    if base is not None:
        ratio = f"   {wall / base[0]:5.2f}x wall {cpu / base[1]:5.2f}x CPU"
    print(f"  {name:<40} {wall:6.2f} s wall {cpu:6.2f} s CPU {mib:5.0f} MiB (exit {rc}){ratio}")
    return result


def goal(label: str, value: float, limit: float) -> None:
    print(f"  goal {label} <= {limit:g}x: {'met' if value <= limit else 'NOT met'} ({value:.2f}x)")


PATHOLOGICAL = {
    "parse a 16,000-line paragraph": (
        "from wikitools.pages.parse import parse_page\n"
        "parse_page('# T\\n\\n' + 'word and more words here\\n' * 16000)\n"
    ),
    "acronyms on a 40 KB GPU-GPU-... chain": (
        "from wikitools.checks.acronyms import check_pages\n"
        "from wikitools.pages.glossary import Entry, Glossary\n"
        "from wikitools.pages.parse import parse_page\n"
        "g = Glossary('g.md', [Entry('GPU', 'graphics processing unit', '', 1, 1)])\n"
        "check_pages([parse_page('# T\\n\\n' + 'GPU-' * 10000 + 'GPU\\n', 'p.md')], g)\n"
    ),
}


def pathological(timeout: float) -> None:
    print("pathological pages (goal: under 1 s each; whole child process, with start-up)")
    for name, code in PATHOLOGICAL.items():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired:
            print(f"  {name:<40} more than {timeout:.0f} s (stopped)")
            continue
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"  {name:<40} {wall:6.2f} s wall {cpu:6.2f} s CPU (exit {proc.returncode})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--community", type=Path, required=True,
                        help="a working tree of github.com/voipmonitor/rtx6kpro")
    parser.add_argument("--repeat", type=int, default=3, help="runs per warm command (median)")
    parser.add_argument("--keep", type=Path, help="build the scratch trees in DIR and keep them")
    parser.add_argument("--timeout", type=float, default=120.0, help="for pathological cases")
    args = parser.parse_args()
    src = args.community.resolve()
    missing = [s for s in ("GLOSSARY.md", *(f"scripts/{s}" for s in SCRIPTS))
               if not (src / s).is_file()]
    if missing:
        parser.error(f"{src} is not a working tree of the community wiki: no {', '.join(missing)}")
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="wiki-bench-"))
    py = sys.executable
    wiki = [py, "-m", "wikitools"]
    print(f"machine: {platform.node()}, {len(os.sched_getaffinity(0))} CPUs usable, "
          f"load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}")
    compiled = subprocess.run([py, "-m", "compileall", "-q", str(REPO / "wikitools")],
                              check=False, stdout=subprocess.DEVNULL).returncode == 0
    print(f"bytecode of wikitools compiled first, as an installed package has it: "
          f"{'yes' if compiled else 'NO (compileall failed)'}")
    try:
        one, seven = tmp / "one", tmp / "seven"
        pages, size = build_tree(src, one, 1)
        print(f"the community wiki: {pages} pages, {size / 1e6:.1f} MB")
        print("  no acronym baseline: `wiki init` would write one of today's findings, which "
              "our checks\n  would then leave unreported; without it both tools report every "
              "finding, like for like")
        cache = {**os.environ, "WIKI_CACHE_DIR": str(tmp / "cache-one")}
        base = row("community generate-wiki-index.py", median_of(
            args.repeat, [py, "scripts/generate-wiki-index.py"], one, cache))
        index = [py, str(REPO / "scripts" / "generate-wiki-index.py"), "--root", str(one)]
        measure(index, one, cache)  # fills the cache
        warm = row("generate-wiki-index.py (cache warm)", median_of(args.repeat, index, one,
                                                                    cache), base)
        goal("index warm, wall", warm[0] / base[0], 1.5)
        goal("index warm, CPU", warm[1] / base[1], 1.5)

        base = row("community check-acronyms.py", median_of(
            args.repeat, [py, "scripts/check-acronyms.py"], one, cache))
        acronyms = [py, str(REPO / "scripts" / "check-acronyms.py"), "--root", str(one)]
        cold_env = {**os.environ, "WIKI_CACHE_DIR": str(tmp / "cache-acronyms")}
        cold = row("check-acronyms.py (cold, empty cache)", median_of(
            args.repeat, acronyms, one, cold_env, tmp / "cache-acronyms"), base)
        warm = row("check-acronyms.py (cache warm)", median_of(args.repeat, acronyms, one,
                                                               cold_env), base)
        goal("acronyms cold, CPU", cold[1] / base[1], 1.0)
        goal("acronyms warm, wall", warm[0] / base[0], 0.2)
        goal("acronyms warm, CPU", warm[1] / base[1], 0.2)

        pages, size = build_tree(src, seven, COPIES)
        print(f"seven copies: {pages} pages, {size / 1e6:.1f} MB")
        env = {**os.environ, "WIKI_CACHE_DIR": str(tmp / "cache-seven")}
        base, cold, ratios = paired(
            args.repeat, ([py, "scripts/check-acronyms.py"], seven, cache, None),
            ([*wiki, "check"], seven, env, tmp / "cache-seven"))
        processes = PEAK_PROCESSES[0]
        row("community check-acronyms.py", base)
        row("wiki check (cold, empty cache)", cold, base)
        row("wiki check (cache warm)", measure([*wiki, "check"], seven, env), base)
        print("  the two cold commands ran in turn; CPU ratio run by run: "
              + ", ".join(f"{r:.2f}x" for r in ratios))
        goal("check cold, CPU (median of the runs' ratios)", sorted(ratios)[len(ratios) // 2],
             1.0)
        print(f"  both cores used: {processes} processes at once (the command and its parsing "
              f"workers), CPU / wall {cold[1] / cold[0]:.2f} (below 2 when the machine is "
              "busy with other work)")
        print(f"  peak "
              f"{cold[2]:.0f} MiB: {'met' if cold[2] < 300 else 'NOT met'} (goal < 300 MiB)")
        pathological(args.timeout)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
