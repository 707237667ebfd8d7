"""Which of several server blocks sharing a runbook id is the original and which are copies: the
block git saw first is the original; a block git has not seen (a copy not yet committed) is a
copy; without history to tell, page order decides."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def _introduced(root: Path, path: str, rid: str) -> float:
    """When git first saw `#rid` in the page (commit time); infinity when it never did (a copy
    not yet committed) or the wiki is not in a git repository."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "log", "--format=%ct", "--reverse", "-S", f"#{rid}",
             "--", path], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return math.inf
    first = proc.stdout.split()
    return float(first[0]) if proc.returncode == 0 and first else math.inf


def find_originals(places: Mapping[str, Sequence[tuple[str, int]]], root: Path | None,
                   ) -> dict[str, tuple[str, int]]:
    """For each id that several server blocks share (`places`: id → (page path, line) of each
    block), where the original stands."""
    out = {}
    for rid, where in places.items():
        if len(where) < 2:
            continue
        def age(place: tuple[str, int], rid: str = rid) -> tuple[float, str, int]:
            when = _introduced(root, place[0], rid) if root is not None else math.inf
            return (when, place[0], place[1])
        out[rid] = min(where, key=age)
    return out
