"""Subcommands of `wiki`; each module has `add_parser(subparsers)` and a handler. The arguments
every command shares are declared here, once, and `finish` ends every command the same way."""

from __future__ import annotations

import os
import sys

from wikitools.core.errors import WikiError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

ROOT_HELP = "wiki root (default: the wiki around the working directory)"


def add_root(parser: argparse.ArgumentParser) -> None:
    """`--root DIR`; `cli.main` resolves it (None: the wiki around the working directory)."""
    from pathlib import Path

    parser.add_argument("--root", type=Path, default=None, help=ROOT_HELP)


def finish(call: Callable[[], int]) -> int:
    """Run a command and give its exit code: expected errors (WikiError) as one line and
    their own code, Ctrl-C 130, a reader of stdout gone away 141, and anything else as a bug
    with its traceback (3)."""
    try:
        code = call()
        sys.stdout.flush()  # a reader gone away is seen here, not at interpreter exit
        return code
    except WikiError as exc:
        print(f"wiki: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("wiki: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception:
        import traceback

        print("wiki: internal error (a bug; please report it with this traceback)", file=sys.stderr)
        traceback.print_exc()
        return 3


def _reader_gone() -> int:
    """The reader of stdout went away (`wiki runbook list | head -1`): stop quietly, as a
    process killed by SIGPIPE would (exit 141), and point stdout at /dev/null so that the
    interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return 141
