"""The options `wiki runbook plan` and `wiki runbook run` share, declared once: `plan` with
the same options previews exactly what `run` does."""

from __future__ import annotations

import argparse

from wikitools.cli.common import add_root
from wikitools.runbook.session import RunOptions


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of `wiki runbook plan` and `wiki runbook run`: one set, so that `plan`
    previews exactly what `run` with the same options does."""
    parser.add_argument("ref", metavar="PAGE#ID", help="runbook id, or path/to/page.md#id")
    parser.add_argument("--sweep", metavar="VAR=v1,v2",
                        help="these values for a swept variable instead of the block's "
                        "(variables separated by ';')")
    parser.add_argument("--variant", metavar="VAR=v1",
                        help="only the server variants with these values (e.g. KV=fp8; "
                        "variables separated by ';')")
    parser.add_argument("--client", action="append", metavar="NAME",
                        help="only this client (repeatable)")
    parser.add_argument("--force", action="store_true",
                        help="run although preflight refuses (other GPU architecture, busy "
                        "GPUs, too little free memory)")
    parser.add_argument("--port", type=int, help="serve on this port instead of the block's")
    parser.add_argument("--repeats", type=int, metavar="N",
                        help="measure every sweep point N times (default: 3 for serving "
                        "clients, 1 for the others); the record keeps every run")
    parser.add_argument("--no-warmup", action="store_true",
                        help="no unrecorded warm-up run before each serving point")
    parser.add_argument("--resume", nargs="?", const="latest", metavar="RUN_ID",
                        help="continue a run of server variants that stopped part-way (the "
                        "runbook's newest record, or RUN_ID): measure only the variants it did "
                        "not finish; the new record takes over the others")
    add_root(parser)


def run_options(args: argparse.Namespace) -> RunOptions:
    """RunOptions from the shared options (a command adds its own with `dataclasses.replace`)."""
    return RunOptions(port=args.port, sweep=args.sweep, variant=args.variant,
                      clients=tuple(args.client) if args.client else None, force=args.force,
                      repeats=args.repeats, warmup=False if args.no_warmup else None,
                      resume=args.resume)
