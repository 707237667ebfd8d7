"""Placeholder until the command lands."""

from __future__ import annotations

from typing import Any


def add_parser(sub: Any) -> None:
    pass


def add_parsers(sub: Any) -> None:
    pass
