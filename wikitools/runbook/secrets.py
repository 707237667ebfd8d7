"""Masking of secrets (tokens, keys, passwords) in environments, commands and log lines, so that
plans, records and support bundles never show them."""

from __future__ import annotations

import re
from collections.abc import Mapping

MASK = "***"

_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|CREDENTIAL|AUTH|(?:^|_)KEY$", re.I
)
# `NAME=value` assignments (prefixes, `export`, `docker -e`) and `--api-key value` /
# `--api-key=value` flags and `Authorization:` headers inside a command or a log line.
_ASSIGN = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\"[^\"]*\"|'[^']*'|\S+)")
_FLAG = re.compile(
    r"(?P<flag>--(?:api-key|token|hf-token|password)|-H|--header)(?P<sep>[ =])"
    r"(?P<value>\"[^\"]*\"|'[^']*'|\S+)"
)
_BEARER = re.compile(r"(Authorization:\s*Bearer\s+)[^\s'\"]+", re.I)


def is_secret(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """A sorted copy with the non-empty values of secret-looking variables replaced by `***`."""
    return {k: (MASK if is_secret(k) and v else v) for k, v in sorted(env.items())}


def mask_command(command: str) -> str:
    """`command` with secret assignments, secret flags and authorization headers masked.
    Values that are variable references (`$HF_TOKEN`) are kept: they reveal nothing."""

    def assign(m: re.Match[str]) -> str:
        value = m["value"].strip("\"'")
        if not is_secret(m["name"]) or not value or value.startswith("$"):
            return m.group(0)
        quote = m["value"][0] if m["value"][:1] in "\"'" else ""
        return f"{m['name']}={quote}{MASK}{quote}"

    def flag(m: re.Match[str]) -> str:
        value = m["value"]
        if m["flag"] in ("-H", "--header"):
            if not re.search(r"authorization|api-key|token", value, re.I):
                return m.group(0)
            quote = value[0] if value[:1] in "\"'" else ""
            name = value.strip("\"'").split(":", 1)[0]
            scheme = "Bearer " if re.search(r":\s*Bearer\s", value, re.I) else ""
            return f"{m['flag']}{m['sep']}{quote}{name}: {scheme}{MASK}{quote}"
        if value.strip("\"'").startswith("$"):
            return m.group(0)
        return f"{m['flag']}{m['sep']}{MASK}"

    return _BEARER.sub(r"\1" + MASK, _FLAG.sub(flag, _ASSIGN.sub(assign, command)))
