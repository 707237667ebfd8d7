"""Whether an engine's server accepts a flag, judged the way its own argument parser does:
the option strings it defines (flag_lists.py, read from that parser for one engine version),
unique prefixes (argparse's abbreviations), and the engine's own spellings (vLLM reads
`--a_b` as `--a-b`, `--json-arg.key=value` as part of `--json-arg`, `-O3` as
`--optimization-level 3`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from wikitools.core.diagnostics import closest


@dataclass(frozen=True, slots=True)
class FlagList:
    version: str  # the engine version the list was read from
    flags: frozenset[str]
    underscores: bool = False  # `--a_b` is read as `--a-b`
    dotted: bool = False  # `--a.b=c` sets key b of the JSON argument --a
    opt_level: bool = False  # `-O3`, `-O.x=y` stand for --optimization-level

    def accepts(self, name: str) -> bool:
        if name in self.flags:
            return True
        if self.opt_level and name.startswith("-O") and not name.startswith("--"):
            return "--optimization-level" in self.flags
        head, dot, _rest = name.partition(".")
        if dot and not self.dotted:
            return False
        if not name.startswith("--"):
            return head in self.flags  # `-cc.key=value`: a short JSON argument's key
        if self.underscores:
            head = head.replace("_", "-")
        if head in self.flags:
            return True
        longs = [f for f in self.flags if f.startswith(head)]
        return len(longs) == 1  # argparse takes a unique prefix as the flag

    def suggestion(self, name: str) -> str | None:
        """The flag `name` most likely misspells, or None."""
        head = name.partition(".")[0]
        if self.underscores:
            head = head.replace("_", "-")
        return _closest_flag(head, self.flags)

    def typo_of(self, name: str) -> str | None:
        """The flag `name` misspells by one or two letters (`--tensor-paralel-size`), or None
        (a flag of another version or of a fork, or no near flag at all)."""
        near = self.suggestion(name)
        head = name.partition(".")[0]
        if self.underscores:
            head = head.replace("_", "-")
        return near if near is not None and edits(head, near) <= 2 else None


@lru_cache(maxsize=4096)
def _closest_flag(head: str, flags: frozenset[str]) -> str | None:
    """difflib over every flag of an engine takes milliseconds; a wiki repeats its flags."""
    return closest(head, flags, cutoff=0.75)


def edits(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]
