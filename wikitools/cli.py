"""The `wiki` command: argparse wiring and exit codes. Each subcommand lives in
`wikitools.commands.<name>` with `add_parser(subparsers)` and `run(args) -> int`."""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from wikitools.errors import WikiError

# Order is the order of `wiki --help`.
COMMANDS = (
    "check",
    "index",
    "acronyms",
    "glossary",
    "lint",
    "runbook",
    "fleet",
    "support_bundle",
)


class ArgumentParser(argparse.ArgumentParser):
    """Raises instead of exiting, so `main(argv)` is testable and exit codes stay ours."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageExit(f"{self.prog}: error: {message}")


class _UsageExit(Exception):
    pass


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="wiki", description="Tools for the RTX PRO 6000 Blackwell LLM Wiki."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name in COMMANDS:
        module = importlib.import_module(f"wikitools.commands.{name}")
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageExit as exc:
        print(exc, file=sys.stderr)
        return 2
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args))
    except WikiError as exc:
        print(f"wiki: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("wiki: interrupted", file=sys.stderr)
        return 130
    except Exception:
        print("wiki: internal error (a bug; please report it with this traceback)", file=sys.stderr)
        traceback.print_exc()
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
