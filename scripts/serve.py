"""`make serve`: preview the site with `mkdocs serve` on 127.0.0.1, stopping when the process that
started it stops. The kernel sends the server SIGTERM when its parent dies (Linux parent-death
signal, kept across exec), so `kill <pid of make>` leaves nothing serving.

Usage: python scripts/serve.py [ADDRESS]        (default 127.0.0.1:8000)"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from wikitools.runbook.execution.processes import die_with


def main() -> None:
    address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:8000"
    mkdocs = Path(sys.executable).parent / "mkdocs"
    die_with(os.getppid())()  # this process, and mkdocs after the exec below
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    os.execv(mkdocs, [str(mkdocs), "serve", "-a", address])


if __name__ == "__main__":
    main()
