"""Honest mistakes in runbook blocks that read as valid: a server block that states fewer GPUs
than its command's parallel sizes need, and a swept variable (a client's `sweep=`, a server's
`variants=`) that the command never reads, so that every point would run one identical command.
Each is an RB004 error at the block."""

from __future__ import annotations

from collections.abc import Iterable

from wikitools.core.diagnostics import Diagnostic
from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.blocks.sweep import reads_variable


def _too_few_gpus(rb: Runbook) -> Diagnostic | None:
    s = rb.server
    stated, cmd = s.requirements.gpus, s.command
    if not stated or cmd.engine is None or cmd.gpus <= stated:
        return None  # gpus=0 is a CPU engine, which may split a model its own way
    sizes = [f"{name} {n}" for name, n in (("tensor parallel", cmd.tp),
                                           ("pipeline parallel", cmd.pp),
                                           ("data parallel", cmd.dp)) if n and n > 1]
    return Diagnostic(s.page, s.line, s.col, "RB004",
                      f"bad value for gpus: {stated}, but the command needs {cmd.gpus} GPUs "
                      f"({' × '.join(sizes)}); give gpus={cmd.gpus}, or lower the parallel size")


def _unread(page: str, line: int, col: int, key: str, role: str, var: str) -> Diagnostic:
    return Diagnostic(page, line, col, "RB004",
                      f"bad value for {key}: the {role} command does not read ${var} (write "
                      f"${{{var}:-default}} where the setting goes)")


def _unread_sweeps(rb: Runbook) -> list[Diagnostic]:
    """A swept variable read neither by its block nor by a file block the runbook runs."""
    files = "\n".join(f.content for f in rb.files)
    s = rb.server
    out = [_unread(s.page, s.line, s.col, "variants", "server", var) for var in s.variants.vars
           if not reads_variable(s.content, var)]
    return out + [_unread(c.page, c.line, c.col, "sweep", "client", var)
                  for c in rb.clients for var in c.sweep.vars
                  if not reads_variable(c.content, var) and not reads_variable(files, var)]


def mistakes(runbooks: Iterable[Runbook]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for rb in runbooks:
        gpus = _too_few_gpus(rb)
        out += [gpus] if gpus is not None else []
        out += _unread_sweeps(rb)
    return out
