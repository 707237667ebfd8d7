"""`wiki support-bundle PAGE#ID --log server.log`: the onboarding contract in one paste."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wikitools.cli.common import add_root
from wikitools.core.errors import UsageError
from wikitools.core.fsio import write_if_changed
from wikitools.runbook.blocks.extract import load_runbooks
from wikitools.runbook.execution.host import gather_host
from wikitools.support import build_bundle, read_log


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "support-bundle",
        help="print what a helper needs to answer a question about one runbook",
        description="Collect the page, the exact commands, the settings understood from them, "
        "the GPU layout (nvidia-smi), the latest run record and the telling lines of your logs, "
        "as Markdown ready to paste.",
    )
    p.add_argument("ref", metavar="PAGE#ID", help="the runbook, e.g. wiki/models/x.md#my-id")
    p.add_argument(
        "--log",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a server or client log to excerpt (repeatable)",
    )
    p.add_argument("--no-gpu", action="store_true", help="do not run nvidia-smi")
    p.add_argument(
        "--output", "-o", type=Path, metavar="FILE", help="write to FILE instead of stdout"
    )
    add_root(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    runbooks, _diags, pages = load_runbooks(root)
    runbook = runbooks.get(args.ref)
    for log in args.log:
        if not log.is_file():
            raise UsageError(f"log file not found: {log}")
    page = next((p for p in pages if p.path == runbook.page), None)
    front = page.front_matter if page else {}
    engine_name = runbook.server.command.engine or runbook.server.engine
    text = build_bundle(
        runbook,
        root=root,
        title=page.title if page else None,
        status=str(front.get("status")) if front.get("status") else None,
        facts=None if args.no_gpu else gather_host(),
        logs=[read_log(log, engine_name) for log in args.log],
    )
    if args.output:
        write_if_changed(args.output, text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
