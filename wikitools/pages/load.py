"""Every page of a wiki read and parsed once, in path order; in worker processes when the tree
is large."""

from __future__ import annotations

import os
from pathlib import Path

from wikitools.core.config import WikiConfig, iter_pages
from wikitools.pages.parse import Page, read_page


def _read(args: tuple[Path, Path]) -> Page:
    return read_page(args[0], args[1])


# Below this many bytes a worker pool costs more CPU time than it saves wall time (starting the
# workers, sending their facts back): the community wiki's 2.7 MB take less CPU in one process
# (benchmarks/results/checks.txt).
PARALLEL_BYTES = 8_000_000


def workers_for(paths: list[Path] | tuple[Path, ...]) -> int:
    """How many worker processes to parse `paths` with (1: in this process)."""
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                  else os.cpu_count() or 1, 8)
    if workers < 2 or len(paths) < 50:
        return 1
    total = 0
    for p in paths:
        total += p.stat().st_size
        if total >= PARALLEL_BYTES:
            return workers
    return 1


def load_pages(config: WikiConfig, paths: list[Path] | None = None) -> list[Page]:
    """Read and parse each page once, in path order; in worker processes when there are many."""
    paths = list(iter_pages(config) if paths is None else paths)
    jobs = [(p, config.root) for p in paths]
    workers = workers_for(paths)
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(_read, jobs, chunksize=max(1, len(jobs) // (workers * 8))))
    return [_read(job) for job in jobs]
