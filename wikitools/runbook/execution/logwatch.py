"""Reading a growing server log: every line, the first fatal one, and the line that best says
why start-up failed."""

from __future__ import annotations

import re
from pathlib import Path

from wikitools.runbook.engines import failure

# An exception line as Python prints it, e.g. "RuntimeError: CUDA error: …".
_EXCEPTION_LINE = re.compile(r"\b(?:[A-Z]\w*(?:Error|Exception)|[a-z]\w*\.\w*Error): \S")
# A warning ("WARNING 12-01 18:45:25 [...]", "WARNING: ..."): it may quote an exception as
# advice (vLLM's ulimit warning names `OSError: [Errno 24] ...`) but says nothing failed. Its
# place among the traceback's lines depends on how the server's streams interleave.
_WARNING = re.compile(r"\bWARNING(?: \d\d-\d\d \d\d:\d\d:\d\d\b|:)")
LOG_TAIL = 40


class LogWatcher:
    """Reads a growing log file incrementally; remembers every line, the first fatal one and
    the first that holds one of `ready_log` (the server saying it listens)."""

    def __init__(self, path: Path, fatal_patterns: tuple[str, ...],
                 ready_log: tuple[str, ...] = ()) -> None:
        self.path = path
        self.fatal = [re.compile(p) for p in fatal_patterns]
        self.ready_log = ready_log
        self.lines: list[str] = []
        self.ready_line: str | None = None
        self.fatal_line: str | None = None
        self.fatal_index: int | None = None
        self._pos = 0
        self._partial = ""

    def poll(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self._pos)
                chunk = f.read()
                self._pos = f.tell()
        except OSError:
            return
        if not chunk:
            return
        text = self._partial + chunk.decode("utf-8", errors="replace")
        *complete, self._partial = text.split("\n")
        for line in complete:
            self.lines.append(line)
            if self.ready_line is None and any(m in line for m in self.ready_log):
                self.ready_line = line.strip()
            if self.fatal_line is None and any(p.search(line) for p in self.fatal):
                self.fatal_line = line.strip()
                self.fatal_index = len(self.lines) - 1

    def cause(self) -> str | None:
        """The most telling line about a failure: a signal that killed a worker ("worker killed
        by SIGILL (illegal instruction)"), else the first exception line (`RuntimeError: CUDA
        error: …`) at or after the first fatal line, else the fatal line itself."""
        if self.fatal_index is None:
            return None
        killed = failure.signal_death(self.lines)
        if killed is not None:
            return killed
        for line in self.lines[self.fatal_index :]:
            if _EXCEPTION_LINE.search(line) and not _WARNING.search(line):
                return line.strip()
        return self.fatal_line

    def tail(self, n: int = LOG_TAIL) -> list[str]:
        self.poll()
        lines = self.lines + ([self._partial] if self._partial else [])
        return [line.rstrip() for line in lines[-n:]]


def tail_file(path: Path, n: int = LOG_TAIL) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines()[-n:]]
