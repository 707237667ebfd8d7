"""`wiki runbook …`: groups the runbook subcommands, which live in runbook_inspect (list, show,
plan, scan), runbook_run (run, render), runbook_compare (compare, history) and runbook_pin
(pin)."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

_PARTS = ("wikitools.cli.runbook_inspect", "wikitools.cli.runbook_run",
          "wikitools.cli.runbook_compare", "wikitools.cli.runbook_pin")


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("runbook", help="list, plan, run and render executable runbooks")
    parser.set_defaults(handler=lambda _args: _help(parser))
    runbook_sub = parser.add_subparsers(dest="runbook_command", metavar="SUBCOMMAND")
    for name in _PARTS:
        importlib.import_module(name).add_parsers(runbook_sub)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2
