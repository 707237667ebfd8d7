"""Located findings (`path:line:col: CODE message`) shared by every checker."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Severity(enum.IntEnum):
    WARNING = 1
    ERROR = 2


@dataclass(frozen=True, slots=True, order=True)
class Diagnostic:
    """One finding. `path` is POSIX and relative to the wiki root; line and col are 1-based,
    columns count Unicode code points."""

    path: str
    line: int
    col: int
    code: str
    message: str
    severity: Severity = Severity.ERROR

    def format(self) -> str:
        """`path:line:col: CODE error: message` (or `warning:`)."""
        kind = "error" if self.severity is Severity.ERROR else "warning"
        return f"{self.path}:{self.line}:{self.col}: {self.code} {kind}: {self.message}"


def sort_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted by (path, line, col, code, message), duplicates dropped."""
    return sorted(set(diags))


def summary(diags: list[Diagnostic]) -> str:
    errors = sum(1 for d in diags if d.severity is Severity.ERROR)
    warnings = len(diags) - errors
    files = len({d.path for d in diags})
    if not diags:
        return "no findings"
    return (
        f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
        f" in {files} file{'s' * (files != 1)}"
    )
