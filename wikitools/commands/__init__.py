"""Subcommands of `wiki`; each module has `add_parser(subparsers)` and a handler."""
