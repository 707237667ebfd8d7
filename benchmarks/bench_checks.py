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
import only the standard library, whose bytecode ships with Python). Nothing is kept between
runs (the tools have no cache); every figure is the median of `--repeat` runs by CPU time.

Goals on a 2-core machine: the index at most 0.5 s of CPU on the community wiki; the acronym
check at most 1.0x the community script's CPU time; `wiki check` on the seven copies at most
1.0x the acronym script's CPU time and 0.6x its wall time, under 300 MB. Two pathological
inputs follow (a 16,000-line paragraph, a 40 KB `GPU-GPU-...` chain), each of
which must take under a second.

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


def _tree_rss_mib(proc: psutil.Process) -> float:
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def measure(argv: list[str], cwd: Path) -> Result:
    """One run: its process (and any it waited for) alone, read by wait4: the peak of
    RUSAGE_CHILDREN would be the largest of every run before it."""
    start = time.perf_counter()
    popen = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    proc, peak = psutil.Process(popen.pid), 0.0
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


def _median(runs: list[Result]) -> Result:
    return sorted(runs, key=lambda r: r[1])[len(runs) // 2]


def paired(n: int, *commands: tuple[list[str], Path]) -> list[tuple[Result, list[float]]]:
    """`n` runs of each command (argv, cwd) taken in turn, so that a drift of the machine's
    speed moves all alike: for each, its median run (by CPU time, which the machine's other
    load moves less than wall time) and, run by run, its CPU time over the first command's."""
    runs: list[list[Result]] = [[] for _ in commands]
    for _ in range(n):
        for (argv, cwd), done in zip(commands, runs, strict=True):
            done.append(measure(argv, cwd))
    return [(_median(r), [y[1] / x[1] for x, y in zip(runs[0], r, strict=True)]) for r in runs]


def row(name: str, result: Result, base: Result | None = None) -> Result:
    wall, cpu, mib, rc = result
    ratio = ""
    if base is not None:
        ratio = f"   {wall / base[0]:5.2f}x wall {cpu / base[1]:5.2f}x CPU"
    print(f"  {name:<40} {wall:6.2f} s wall {cpu:6.2f} s CPU {mib:5.0f} MiB (exit {rc}){ratio}")
    return result


def goal(label: str, value: float, limit: float, unit: str = "x") -> None:
    print(f"  goal {label} <= {limit:g}{unit}: {'met' if value <= limit else 'NOT met'} "
          f"({value:.2f}{unit})")


def mid(ratios: list[float]) -> float:
    return sorted(ratios)[len(ratios) // 2]


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
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (median)")
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
        n = args.repeat
        (base, _), (ours, _) = paired(n, ([py, "scripts/generate-wiki-index.py"], one),
                                      ([py, str(REPO / "scripts" / "generate-wiki-index.py"),
                                        "--root", str(one), "--check"], one))
        row("community generate-wiki-index.py", base)
        row("generate-wiki-index.py --check", ours, base)
        goal("index, CPU", ours[1], 0.5, " s")

        (base, _), (ours, ratios) = paired(
            n, ([py, "scripts/check-acronyms.py"], one),
            ([py, str(REPO / "scripts" / "check-acronyms.py"), "--root", str(one)], one))
        row("community check-acronyms.py", base)
        row("check-acronyms.py", ours, base)
        goal("acronyms, CPU (median of the runs' ratios)", mid(ratios), 1.0)

        pages, size = build_tree(src, seven, COPIES)
        print(f"seven copies: {pages} pages, {size / 1e6:.1f} MB")
        (base, _), (check, ratios) = paired(
            n, ([py, "scripts/check-acronyms.py"], seven), ([*wiki, "check"], seven))
        row("community check-acronyms.py", base)
        row("wiki check", check, base)
        print("  the commands ran in turn; CPU ratio run by run: "
              + ", ".join(f"{r:.2f}x" for r in ratios))
        goal("check, CPU (median of the runs' ratios)", mid(ratios), 1.0)
        goal("check, wall", check[0] / base[0], 0.6)
        print(f"  peak {check[2]:.0f} MiB: {'met' if check[2] < 300 else 'NOT met'} "
              "(goal < 300 MiB)")
        pathological(args.timeout)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
