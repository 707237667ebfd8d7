#!/usr/bin/env python3
"""Write runbooks/record.schema.json: the JSON Schema of a run record, generated from the record
dataclasses (wikitools/runbook/records/record.py) and the mappings they hold (schema.py), for
contributors and their editors. tests/test_record_schema.py fails when it has drifted.

    python scripts/record-schema.py          # write
    python scripts/record-schema.py --check  # exit 1 on drift, write nothing"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from wikitools.core.fsio import unified_diff, write_if_changed  # noqa: E402
from wikitools.runbook.records.record import SCHEMA_FILE, record_schema  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 on drift, write nothing")
    args = parser.parse_args(argv)
    target = ROOT / SCHEMA_FILE
    text = record_schema()
    old = target.read_text(encoding="utf-8") if target.is_file() else ""
    if args.check:
        if old != text:
            sys.stdout.write(unified_diff(SCHEMA_FILE, old, text))
            print(f"{SCHEMA_FILE}: out of date; run python scripts/record-schema.py",
                  file=sys.stderr)
            return 1
        return 0
    if write_if_changed(target, text):
        print(f"wrote {SCHEMA_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
