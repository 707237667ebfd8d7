"""Start-up shared by the scripts: use the `wikitools` of this checkout (installed or not) and run
one `wiki` subcommand on the wiki around the working directory, found exactly as `wiki` finds it
(the nearest folder holding wiki.yml or mkdocs.yml, else the top of the git repository), or on
`--root DIR`. Never on the repository the script lives in unless the working directory lies in
it. When the running Python lacks the dependencies, the scripts run again under the checkout's
`.venv` (made by `make site`), or say how to install them."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)
VENV_PYTHON = Path(REPO) / ".venv" / "bin" / "python"
_REEXEC = "WIKI_SCRIPT_REEXEC"  # set once, so a broken .venv cannot loop


# What every page command needs; looked for before anything of the package is imported.
NEEDED = ("yaml", "markdown_it_pyrs", "pathspec")


def run(command: str, argv: list[str]) -> int:
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    missing = next((m for m in NEEDED if importlib.util.find_spec(m) is None), None)
    if missing is not None:
        if VENV_PYTHON.is_file() and not os.environ.get(_REEXEC):
            os.environ[_REEXEC] = "1"
            os.execv(VENV_PYTHON, [VENV_PYTHON, sys.argv[0], *sys.argv[1:]])
        print(
            f"{Path(sys.argv[0]).name}: error: the Python package {missing!r} is missing; "
            "run `make site` (or `pip install -e .`) and use .venv/bin/python",
            file=sys.stderr,
        )
        return 2
    from wikitools.cli import main

    return main([command, *argv])
