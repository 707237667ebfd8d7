"""Processes found by a variable in their environment: how tests see everything a run started.
The one process reader is the executor's (wikitools.runbook.execution.processes); tests use it
too, so what a test checks is read the way the executor reads it."""

from __future__ import annotations

from wikitools.runbook.execution.processes import with_env


def tagged(var: str, value: str) -> list[int]:
    """Live, non-zombie processes whose environment holds var=value."""
    return with_env(var, value)
