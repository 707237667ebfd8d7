"""Subcommands of `wiki`; each module has `add_parser(subparsers)` and a handler. The arguments
every command shares are declared here, once."""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT_HELP = "wiki root (default: the wiki around the working directory)"


def add_root(parser: argparse.ArgumentParser) -> None:
    """`--root DIR`; `cli.main` resolves it (None: the wiki around the working directory)."""
    parser.add_argument("--root", type=Path, default=None, help=ROOT_HELP)

