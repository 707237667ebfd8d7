"""Exception hierarchy; `commands.finish` maps each class to an exit code."""

from __future__ import annotations


class WikiError(Exception):
    """Base class for expected errors: printed as one line, never with a traceback."""

    exit_code = 2


class UsageError(WikiError):
    """Bad command-line use (unknown runbook id, missing file argument)."""


class ConfigError(WikiError):
    """Bad configuration (wiki.yml, glossary without a usable table)."""


class InputError(WikiError):
    """An input file that cannot be read or parsed at all (located when possible)."""


class CheckFailed(WikiError):
    """Findings, drift under --check, or a failed runbook step."""

    exit_code = 1
