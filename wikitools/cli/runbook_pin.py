"""`wiki runbook pin REPO [REF]`: the commit a branch or tag of another repository names now,
and the `repo= commit=` attributes that pin a file block to it."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "pin", help="the commit a branch or tag of another repository names now",
        description="Resolve a branch or tag of a git repository to its commit (git "
        "ls-remote) and print the attributes that pin a file block to it: a file of another "
        "repository is named by its full commit, since a branch moves.")
    p.add_argument("repo", metavar="REPO", help="the repository's URL")
    p.add_argument("ref", metavar="REF", nargs="?", default="HEAD",
                   help="a branch or tag (default: the repository's default branch)")
    p.set_defaults(handler=run_pin)


def run_pin(args: argparse.Namespace) -> int:
    from wikitools.runbook.execution.fetch import resolve_ref

    commit = resolve_ref(args.repo, args.ref)
    print(f"repo={args.repo} commit={commit}")
    return 0


__all__ = ["add_parsers", "run_pin"]
