"""The environment variables a runbook's commands read and nothing on the page sets: what a
contributor must export before a run (`QWEN35_35B_AWQ=/models/…`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.engines.shell import env_assignments

# `$NAME` or `${NAME}`; `${NAME:-x}`, `${NAME-x}`, `${NAME:=x}` carry their own default.
_READ = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-=+?])?|\$([A-Za-z_][A-Za-z0-9_]*)")
_SINGLE_QUOTED = re.compile(r"'[^']*'")
_LOOP_VAR = re.compile(r"\b(?:for|select)\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b|\bread\s+(?:-\w+\s+)*"
                       r"([A-Za-z_][A-Za-z0-9_]*)")
# Set by the shell or the login itself on every host.
SHELL_VARS = frozenset({"HOME", "PATH", "PWD", "USER", "SHELL", "HOSTNAME", "RANDOM", "UID",
                        "LOGNAME", "TMPDIR", "OLDPWD", "IFS", "BASH_SOURCE", "LINENO", "SECONDS"})


def reads(text: str) -> list[str]:
    """Variables shell `text` reads without a default, in order of first use."""
    return _read(text)


def sets(text: str) -> set[str]:
    """Variables shell `text` sets (assignments, exports, loop and read variables)."""
    return _set_by(text)


def _read(text: str) -> list[str]:
    """Variables `text` reads without a default, in order of first use."""
    text = _SINGLE_QUOTED.sub("", text)
    out: list[str] = []
    for m in _READ.finditer(text):
        name = m.group(1) or m.group(3)
        if m.group(2) and m.group(2).lstrip(":") in ("-", "="):
            continue
        if name not in out:
            out.append(name)
    return out


def _set_by(text: str) -> set[str]:
    names = {name for name, _value, _how in env_assignments(text)}
    for m in _LOOP_VAR.finditer(text):
        names.add(m.group(1) or m.group(2))
    return names


def needed_variables(runbook: Runbook) -> list[tuple[str, str]]:
    """(variable, which block reads it) for each variable a command reads without a default
    that neither the block's `env=`, its own assignments, a sweep nor a variant sets."""
    server = runbook.server
    given = {k for k, _ in server.extra_env} | set(server.variants.vars) | SHELL_VARS
    given |= _set_by(server.content)
    for f in runbook.files:  # blocks of the page that run first (`export PORT=5002`)
        given |= {k for k, _v in f.sets}
    out: dict[str, str] = {}
    for name in _read(server.content):
        if name not in given:
            out.setdefault(name, "the server command")
    for client in runbook.clients:
        mine = given | set(client.sweep.vars) | _set_by(client.content)
        for name in _read(client.content):
            if name not in mine:
                out.setdefault(name, f"client {client.name}")
    return list(out.items())


def unset_variables(runbook: Runbook, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """`needed_variables` that `environ` does not set (or sets to the empty string)."""
    return [(name, where) for name, where in needed_variables(runbook) if not environ.get(name)]


__all__ = ["SHELL_VARS", "needed_variables", "reads", "sets", "unset_variables"]
