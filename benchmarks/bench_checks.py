"""Benchmark the checks on a synthetic wiki of 2,000 pages (about 20 MB).

Prints wall time and peak memory (largest single process, from getrusage of the children) of
`wiki check` without the parse cache, then `wiki index --check`, `wiki acronyms` and `wiki check`
with a warm cache, and a plain per-term regex scan of the same text for comparison.

Usage: python benchmarks/bench_checks.py [--pages 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TERMS = [
    ("TP", "Tensor Parallelism"),
    ("PP", "Pipeline Parallelism"),
    ("EP", "Expert Parallelism"),
    ("DCP", "Decode Context Parallelism"),
    ("MTP", "Multi-Token Prediction"),
    ("MoE", "Mixture of Experts"),
    ("KV", "Key-Value"),
    ("TTFT", "Time To First Token"),
    ("TPOT", "Time Per Output Token"),
    ("ITL", "Inter-Token Latency"),
    ("NVFP4", "NVIDIA 4-bit Floating Point"),
    ("FP8", "8-bit Floating Point"),
    ("PCIe", "Peripheral Component Interconnect Express"),
    ("NCCL", "NVIDIA Collective Communications Library"),
    ("CUDA", "Compute Unified Device Architecture"),
    ("GPU", "Graphics Processing Unit"),
    ("LLM", "Large Language Model"),
    ("KLD", "Kullback-Leibler Divergence"),
    ("SM", "Streaming Multiprocessor"),
    ("VRAM", "Video Random-Access Memory"),
    ("vLLM", "Virtual Large Language Model engine"),
    ("CUDA Graph", "captured CUDA kernel launch sequence"),
    ("P2P", "Peer-to-Peer"),
    ("NUMA", "Non-Uniform Memory Access"),
    ("IOMMU", "Input-Output Memory Management Unit"),
]
# Generic tokens for filler prose; extra glossary terms make the term count realistic (~150).
_FILLER = (
    "the model runs on two cards with a large context and the server answers quickly while "
    "the batch grows under load so the cache fills and throughput rises until memory runs out "
    "then latency climbs because each request waits for the scheduler to free blocks"
)
WORDS = tuple(_FILLER.split())
SECTIONS = ["hardware", "engines", "topics", "models/gpt-oss", "models/qwen", "models/glm", "daily"]


def glossary_text() -> str:
    rows = [*TERMS, *((f"X{i:03d}Q", f"Synthetic term number {i}") for i in range(125))]
    lines = ["# Glossary", "", "| Acronym | Meaning | Notes |", "|---|---|---|"]
    lines += [f"| {t} | {m} | |" for t, m in rows]
    return "\n".join(lines) + "\n"


def prose(rng: random.Random, words: int, up: str) -> str:
    out: list[str] = []
    for _ in range(words):
        r = rng.random()
        if r < 0.04:
            term, meaning = rng.choice(TERMS)
            out.append(f"{meaning} ({term})" if rng.random() < 0.5 else term)
        elif r < 0.05:
            out.append(f"`--tp {rng.randint(1, 8)}`")
        elif r < 0.055:
            out.append(f"[link]({up}topics/page-v{7 * rng.randint(0, 200) + 2}.md)")
        elif r < 0.057:
            out.append("https://docs.vllm.ai/en/latest/?q=tp#serve")
        else:
            out.append(rng.choice(WORDS))
    return " ".join(out).capitalize() + "."


def page_text(rng: random.Random, index: int, target: int, up: str) -> str:
    status = rng.choice(["current", "experimental", "historical", "unverified"])
    parts = [
        f"---\ntitle: Page {index} on {rng.choice(TERMS)[0]}\nstatus: {status}\ntags: [a, b]\n---",
        f"# Page {index}",
    ]
    size = 0
    n = 0
    while size < target:
        n += 1
        kind = rng.random()
        if kind < 0.55:
            block = prose(rng, rng.randint(40, 120), up)
        elif kind < 0.7:
            block = f"## Section {n}"
        elif kind < 0.85:
            rows = "\n".join(
                f"| {rng.randint(1, 64)} | {rng.random() * 100:.1f} | {rng.choice(TERMS)[0]} |"
                for _ in range(rng.randint(3, 12))
            )
            block = f"| Concurrency | tok/s | Note |\n|---:|---:|---|\n{rows}"
        else:
            lines = "\n".join(
                f"  --max-model-len {rng.randint(1, 9) * 16384} --gpu-memory-utilization 0.9 \\"
                for _ in range(rng.randint(2, 10))
            )
            block = f"```bash\n# serve\nNCCL_P2P_DISABLE=1 vllm serve org/model \\\n{lines}\n```"
        parts.append(block)
        size += len(block) + 2
    return "\n\n".join(parts) + "\n"


def generate(root: Path, pages: int, total_bytes: int) -> int:
    rng = random.Random(20261130)
    wiki = root / "wiki"
    wiki.mkdir(parents=True)
    (wiki / "glossary.md").write_text(glossary_text(), encoding="utf-8")
    (wiki / "index.md").write_text("# Home\n\nThe synthetic wiki.\n", encoding="utf-8")
    per_page = total_bytes // pages
    written = 0
    for i in range(pages):
        section = SECTIONS[i % len(SECTIONS)]
        folder = wiki / section
        folder.mkdir(parents=True, exist_ok=True)
        up = "../" * (section.count("/") + 1)
        text = page_text(rng, i, int(per_page * rng.uniform(0.5, 1.5)), up)
        (folder / f"page-v{i}.md").write_text(text, encoding="utf-8")
        written += len(text.encode("utf-8"))
    return written


def measure(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds, peak MiB, exit code) of one command, run in a fresh child process."""
    code = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL).returncode\n"
        "dt = time.perf_counter() - t\n"
        "kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(dt, kib, rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=True,
    )
    seconds, kib, rc = done.stdout.split()
    return float(seconds), int(kib) / 1024, int(rc)


def check_steps(wiki: list[str], root: Path, env: dict[str, str]) -> dict[str, float]:
    """Per-step seconds from `wiki check --timings` (parse, index, acronyms, lint, ...)."""
    done = subprocess.run(
        [*wiki, "check", "--timings", "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    steps: dict[str, float] = {}
    for line in done.stderr.splitlines():
        name, _, rest = line.partition(": ")
        if rest.endswith(" s") and " " not in name:
            steps[name] = float(rest[:-2])
    return steps


def regex_scan(root: Path) -> tuple[float, int]:
    """The naive alternative: read every page and search it once per glossary term. Each
    pattern starts with the literal term so that `re` can use its fast literal search; the
    left word boundary is checked by hand (a leading lookbehind is about 100 times slower)."""
    start = time.perf_counter()
    terms = [t for t, _ in TERMS] + [f"X{i:03d}Q" for i in range(125)]
    patterns = [re.compile(rf"{re.escape(t)}(?![\w-])") for t in terms]
    hits = 0
    for path in sorted((root / "wiki").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        for pattern in patterns:
            for m in pattern.finditer(text):
                before = text[m.start() - 1] if m.start() else " "
                if not (before.isalnum() or before in "_-"):
                    hits += 1
    return time.perf_counter() - start, hits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--megabytes", type=float, default=20.0)
    parser.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    args = parser.parse_args()
    wiki = [sys.executable, "-m", "wikitools"]
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="wiki-bench-"))
    try:
        size = generate(tmp, args.pages, int(args.megabytes * 1_000_000))
        print(f"synthetic wiki: {args.pages} pages, {size / 1e6:.1f} MB in {tmp}")
        cold = {**os.environ, "WIKI_CACHE_DIR": "off"}
        warm = {**os.environ, "WIKI_CACHE_DIR": str(tmp / ".parse-cache")}
        subprocess.run([*wiki, "glossary", "--root", str(tmp)], capture_output=True, check=False)
        results: dict[str, float] = {}
        runs = (
            ("wiki check (no cache)", ["check"], cold),
            ("wiki index (fills cache)", ["index"], warm),
            ("wiki index --check", ["index", "--check"], warm),
            ("wiki acronyms", ["acronyms"], warm),
            ("wiki check", ["check"], warm),
        )
        for name, argv, env in runs:
            seconds, mib, rc = measure([*wiki, *argv, "--root", str(tmp)], tmp, env)
            results[name] = seconds
            print(f"{name:<26} {seconds:7.2f} s  peak {mib:7.1f} MiB  (exit {rc})")
        steps = check_steps(wiki, tmp, warm)
        print("wiki check steps (warm): " + ", ".join(f"{k} {v:.2f} s" for k, v in steps.items()))
        regex_seconds, hits = regex_scan(tmp)
        print(f"{'per-term regex scan':<26} {regex_seconds:7.2f} s  ({hits} hits, in process)")
        whole = results["wiki acronyms"] / regex_seconds
        step = steps.get("acronyms", float("nan")) / regex_seconds
        print(f"ratio acronyms / regex: whole command {whole:.2f}, acronym step alone {step:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
