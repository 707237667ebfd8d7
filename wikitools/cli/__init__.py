"""The `wiki` command: argparse wiring and exit codes. Each subcommand lives in
`wikitools.cli.<name>` with `add_parser(subparsers)` and `run(args) -> int`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from wikitools.cli.common import finish

# Order is the order of `wiki --help`.
COMMANDS = (
    "init",
    "check",
    "index",
    "acronyms",
    "lint",
    "runbook",
    "fleet",
    "kld",
    "probe",
    "support_bundle",
)


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, sized without `shutil` (whose compression modules cost every
    command start-up time, as argparse builds a formatter for each argument)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        if width is None:
            try:
                columns = int(os.environ.get("COLUMNS", "0")) or os.get_terminal_size(
                    sys.__stdout__.fileno() if sys.__stdout__ else 1).columns
            except (OSError, ValueError, AttributeError):
                columns = 80
            width = columns - 2
        super().__init__(prog, indent_increment, max_help_position, width)


class ArgumentParser(argparse.ArgumentParser):
    """Raises instead of exiting, so `main(argv)` is testable and exit codes stay ours."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageExit(f"{self.prog}: error: {message}")


class _UsageExit(Exception):
    pass


def build_parser(only: str | None = None) -> ArgumentParser:
    """The parser with every subcommand, or with `only` that one (importing only its
    module: `wiki index` never loads the runbook executor or the HTTP client)."""
    parser = ArgumentParser(
        prog="wiki", description="Tools for the RTX PRO 6000 Blackwell LLM Wiki."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name in COMMANDS if only is None else (only,):
        module = importlib.import_module(f"wikitools.cli.{name}")
        module.add_parser(sub)
    return parser


def _command_of(argv: list[str]) -> str | None:
    """The module of the subcommand that `argv` names, when its first word names one."""
    first = argv[0] if argv else ""
    name = first.replace("-", "_")
    return name if name in COMMANDS else None


def main(argv: list[str] | None = None, *, from_record: bool = True) -> int:
    """Run `wiki ARGV`. `wiki index` first tries the record of its last run (`from_record`;
    the scripts try it themselves before importing this module)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if from_record and argv[:1] == ["index"]:
        from wikitools.cli.index import answer_from_record

        code = finish(lambda: answer_from_record(argv[1:]))
        if code is not None:
            return code
    try:
        parser = build_parser(_command_of(argv))
        args = parser.parse_args(argv)
    except _UsageExit as exc:
        print(exc, file=sys.stderr)
        return 2
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return 2
    code = finish(lambda: _handle(args))
    assert code is not None
    return code


def _handle(args: argparse.Namespace) -> int:
    if hasattr(args, "root"):  # every command works on the wiki around it
        from wikitools.core.config import resolve_root

        args.root = resolve_root(args.root)
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
