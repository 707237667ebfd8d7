"""Located findings (`path:line:col: CODE message`) shared by every checker."""

from __future__ import annotations

import difflib
import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


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


def sort_key(d: Diagnostic) -> tuple[str, int, int, str, str, int]:
    """The dataclass order as one tuple: sorting by key is several times faster than by
    the generated comparison methods, which matters with tens of thousands of findings."""
    return (d.path, d.line, d.col, d.code, d.message, d.severity)


def sort_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted by (path, line, col, code, message), duplicates dropped."""
    return sorted(set(diags), key=sort_key)


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


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice most like `word` (difflib ratio at least `cutoff`; of equal ratios the last
    in sort order), or None."""
    found = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """"; did you mean 'x'?" for the closest choice, or "" when none is close."""
    hint = closest(word, choices, cutoff)
    return f"; did you mean '{hint}'?" if hint is not None else ""


def yaml_problem(exc: Any) -> tuple[int | None, int | None, str]:
    """(line, column, problem) of a YAML error: 0-based position of its problem mark (None when
    it has none) and the problem in a few words."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return None, None, problem
    return mark.line, mark.column, problem
