"""`wiki check`'s view of the records: every file under `runbooks/<id>/` read through the one
record reader, each that does not fit the schema reported as RGN006 at its file, line, column and
field."""

from __future__ import annotations

from pathlib import Path

from wikitools.core.diagnostics import Diagnostic
from wikitools.runbook.records.record import RECORDS_DIR, RecordError, read_record


def check_records(root: Path) -> list[Diagnostic]:
    """RGN006 for each record file that cannot be read or does not fit the schema, or whose
    runbook and run id are not the folder and file it sits in."""
    base = root / RECORDS_DIR
    if not base.is_dir():
        return []
    diags = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()):
        for path in sorted(folder.glob("*.json")):
            rel = path.relative_to(root).as_posix()
            try:
                read_record(path, rel, placed=True)
            except RecordError as exc:
                diags.append(Diagnostic(rel, exc.line, exc.col, "RGN006", exc.detail))
    return diags
