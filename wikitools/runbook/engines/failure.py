"""Why a run failed, in one line a reader can act on: the exception a traceback ends with
(`RuntimeError: CUDA error: …`), not the `Traceback (most recent call last):` that starts it."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable

from wikitools.runbook.engines import log_catalog

_PREFIX = re.compile(log_catalog.LOG_LINE_PREFIX)
# "RuntimeError: …", "torch.OutOfMemoryError: …", "ValueError", "KeyboardInterrupt"
_EXCEPTION = re.compile(
    r"^((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s+(.*))?$"
)
TRACEBACK = "Traceback (most recent call last):"
_FAULT = re.compile(log_catalog.FAULTHANDLER_LINE)
_DIED = re.compile(log_catalog.WORKER_DIED_LINE)


def strip_prefix(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\n"), count=1).strip()


def exception_line(lines: Iterable[str]) -> str | None:
    """The first exception line that ends a traceback in `lines` (log prefixes removed); when
    no traceback is seen, the first line that looks like an exception; None when there is none."""
    after_traceback = False
    first_any: str | None = None
    for raw in lines:
        line = strip_prefix(raw)
        if line.startswith(TRACEBACK):
            after_traceback = True
            continue
        m = _EXCEPTION.match(line)
        if m is None:
            continue
        if after_traceback:
            return line
        if first_any is None:
            first_any = line
    return first_any


def signal_death(lines: Iterable[str]) -> str | None:
    """"worker killed by SIGILL (illegal instruction)" when a process of the server says a
    signal killed it (the first such line); None when no line does."""
    for line in lines:
        m = _FAULT.search(line)
        if m is not None:
            return killed_by(signal.Signals[log_catalog.FAULTHANDLER_SIGNALS[m[1]]])
        m = _DIED.search(line)
        if m is not None and int(m[1]) in signal.valid_signals():
            return killed_by(signal.Signals(int(m[1])))
    return None


def killed_by(sig: signal.Signals) -> str:
    what = signal.strsignal(sig) or sig.name
    return f"worker killed by {sig.name} ({what.lower()})"


def better_message(message: str | None, log_lines: Iterable[str]) -> str | None:
    """`message`, with a bare traceback header replaced by the exception the log names."""
    if message is None or TRACEBACK not in message:
        return message
    found = exception_line(log_lines)
    if found is None:
        return message
    head = message.split(TRACEBACK, 1)[0]
    head = head[: head.find(":") + 1] if ":" in head else ""
    return f"{head} {found}".strip() if head else found


__all__ = ["TRACEBACK", "better_message", "exception_line", "killed_by", "signal_death",
           "strip_prefix"]
