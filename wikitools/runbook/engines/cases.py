"""A launcher script's `case "$MODE" in … esac` read for the values its caller gives: the arm
that matches stays, the others go, so the launcher reader sees the model and flags that run
(`MODE=standard-mtp0 scripts/run.sh` takes the `standard-mtp0)` arm, not the last one)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping

_CASE = re.compile(r"(?m)^[ \t]*case[ \t]+(\S+)[ \t]+in[ \t]*$")
_ESAC = re.compile(r"(?m)^[ \t]*esac\b.*$")
_VAR = re.compile(r"""^["']?\$\{?([A-Za-z_]\w*)\}?["']?$""")
_DEFAULT = re.compile(r"""^["']?\$\{([A-Za-z_]\w*):?[-=]([^${}"'`]*)\}["']?$""")
_PLAIN = re.compile(r"""^["']?([\w.,:/@+-]*)["']?$""")


def _value(name: str, script: str, known: Mapping[str, str]) -> str | None:
    """The value `name` has when the case is reached: the caller's, else the script's own
    top-level assignment (`MODE=${MODE:-dspark}` or `MODE=dspark`); None when unknown."""
    if name in known:
        given = known[name]
        plain = _PLAIN.match(given)
        return plain[1] if plain else None
    for m in re.finditer(rf"(?m)^(?:export[ \t]+)?{re.escape(name)}=(\S*)[ \t]*(?:#.*)?$",
                         script):
        text = m[1]
        default = _DEFAULT.match(text)
        if default and default[1] == name:
            return default[2]
        plain = _PLAIN.match(text)
        return plain[1] if plain else None
    return None


def _arms(body: str) -> list[tuple[list[str], str]] | None:
    """(patterns, commands) of each arm of a case body; None when it is not plainly readable
    (a nested case)."""
    if _CASE.search(body):
        return None
    out: list[tuple[list[str], str]] = []
    for chunk in body.split(";;"):
        if not chunk.strip():
            continue
        m = re.match(r"\s*\(?([^()\n]*?)\)(.*)$", chunk, re.S)
        if m is None:
            return None
        patterns = [p.strip().strip("'\"") for p in m[1].split("|")]
        out.append((patterns, m[2]))
    return out


def choose_cases(script: str, known: Mapping[str, str]) -> str:
    """`script` with each top-level `case WORD in … esac` whose WORD has a known value
    replaced by the commands of the arm that matches it (nothing when none does); a case
    whose value is not known stays as it is. Lines keep their numbers."""
    out: list[str] = []
    at = 0
    while True:
        m = _CASE.search(script, at)
        if m is None:
            break
        end = _ESAC.search(script, m.end())
        if end is None:
            break
        name = _VAR.match(m[1])
        value = _value(name[1], script, known) if name else None
        arms = _arms(script[m.end() : end.start()]) if value is not None else None
        if value is None or arms is None:
            out.append(script[at : end.end()])
            at = end.end()
            continue
        chosen = next((cmds for patterns, cmds in arms
                       if any(fnmatch.fnmatchcase(value, p) for p in patterns)), "")
        whole = script[m.start() : end.end()]
        lines = whole.count("\n") - chosen.count("\n")
        out.append(script[at : m.start()] + chosen + "\n" * max(lines, 0))
        at = end.end()
    out.append(script[at:])
    return "".join(out)
