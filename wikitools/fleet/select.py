"""Which runbooks a fleet run takes (ids, pages, stale, never run) and what each asks of the
cluster (GPUs, an architecture resource, a CPU for CPU-only runbooks). Pure: no Ray here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wikitools.core.errors import UsageError
from wikitools.runbook.blocks.declared import Runbook, RunbookSet
from wikitools.runbook.execution.preflight import required_gpus
from wikitools.runbook.records.record import Record, RecordError, load_records

# A node labelled `ray start --resources '{"sm120": 1}'` holds up to 1/ARCH_SHARE runbooks at
# once: the label says what the node is; how many run together is decided by the GPUs.
ARCH_SHARE = 0.01


@dataclass(frozen=True, slots=True)
class Demand:
    """What one runbook's Ray task asks for."""

    num_gpus: int
    num_cpus: float
    resources: Mapping[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"{self.num_gpus} GPU{'s' * (self.num_gpus != 1)}"]
        if self.num_cpus:
            parts.append(f"{self.num_cpus:g} CPU")
        parts += [f"{name}" for name in sorted(self.resources)]
        return ", ".join(parts)


# --------------------------------------------------------------------------- selection


def never_run(root: Path, runbook: Runbook) -> bool:
    """No record at all under runbooks/<id>/."""
    return not _records(root, runbook)


def is_stale(root: Path, runbook: Runbook) -> bool:
    """The newest successful record was measured with other blocks than the page holds now."""
    ok = [r for r in _records(root, runbook) if r.ok]
    return bool(ok) and ok[-1].blocks_hash != runbook.blocks_hash


def _records(root: Path, runbook: Runbook) -> list[Record]:
    try:
        return load_records(root, runbook.id)
    except RecordError as exc:
        raise UsageError(f"cannot read the records of '{runbook.id}': {exc}") from None


def select(
    runbooks: RunbookSet,
    root: Path,
    refs: Sequence[str] = (),
    *,
    stale: bool = False,
    unrun: bool = False,
    every: bool = False,
) -> list[Runbook]:
    """The union of: each ref (`ID`, `page.md#ID`, or `page.md` for every runbook of a page),
    the stale runbooks, the never-run ones (or every runbook); in wiki order, once each."""
    if not (refs or stale or unrun or every):
        raise UsageError("select runbooks: IDs, pages, --stale, --never-run or --all")
    wanted: set[str] = set()
    for ref in refs:
        wanted.update(r.id for r in _resolve(runbooks, root, ref))
    for rb in runbooks:
        if every or (stale and is_stale(root, rb)) or (unrun and never_run(root, rb)):
            wanted.add(rb.id)
    return [rb for rb in runbooks if rb.id in wanted]


def _resolve(runbooks: RunbookSet, root: Path, ref: str) -> list[Runbook]:
    if "#" in ref or not ref.endswith(".md"):
        if not ref.strip("#").strip():
            raise UsageError("name a runbook: ID, path/to/page.md#ID or path/to/page.md")
        return [runbooks.get(ref)]
    page = _page_rel(root, ref)
    found = [rb for rb in runbooks if rb.page == page]
    if not found:
        pages = sorted({rb.page for rb in runbooks})
        hint = next((p for p in pages if p.endswith("/" + ref.lstrip("./"))), None)
        raise UsageError(f"{ref}: no runbook on this page"
                         + (f"; did you mean {hint}?" if hint else ""))
    return found


def _page_rel(root: Path, ref: str) -> str:
    """A page path as the runbooks name it: relative to the wiki root, POSIX."""
    path = Path(ref)
    for base in (Path.cwd(), root):
        full = (path if path.is_absolute() else base / path).resolve()
        if full.is_file() and full.is_relative_to(root.resolve()):
            return full.relative_to(root.resolve()).as_posix()
    return path.as_posix().removeprefix("./")


# --------------------------------------------------------------------------- placement


def demand(runbook: Runbook, arch: str | None = None) -> Demand:
    """GPUs as Ray GPUs, the architecture (`arch`, else the block's first) as a custom
    resource, and one CPU for a runbook that uses no GPU."""
    gpus = required_gpus(runbook.server)
    archs = runbook.server.requirements.arch
    name = arch if arch is not None else (archs[0] if archs else None)
    resources = {name: ARCH_SHARE} if name else {}
    return Demand(num_gpus=gpus, num_cpus=0.0 if gpus else 1.0, resources=resources)


def fits(d: Demand, totals: Mapping[str, float]) -> bool:
    """Could a node with these total resources ever hold the task?"""
    if totals.get("GPU", 0.0) < d.num_gpus or totals.get("CPU", 0.0) < d.num_cpus:
        return False
    return all(totals.get(k, 0.0) >= v for k, v in d.resources.items())


def place(runbook: Runbook, nodes: Iterable[Mapping[str, float]]) -> Demand | None:
    """The demand to submit, choosing among the block's architectures one that some node
    carries (Ray cannot ask for "sm90 or sm120"); None when no node could ever run it."""
    nodes = list(nodes)
    archs = runbook.server.requirements.arch or (None,)
    for arch in archs:
        d = demand(runbook, arch)
        if any(fits(d, n) for n in nodes):
            return d
    return None
