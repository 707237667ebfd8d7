"""The baseline of today's findings that `wiki check` leaves out: acronym findings, and the
page findings where the site and GitHub render a page differently. Keyed by (path, code, term)
so that entries stay put when lines move."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from wikitools.core.diagnostics import Diagnostic, sort_key
from wikitools.core.errors import ConfigError

BASELINE_VERSION = 1
DEFAULT_BASELINE = ".acronyms-baseline.json"  # used by `wiki check` when present at the root
_QUOTED = re.compile(r'"([^"]*)"')


def baseline_key(diag: Diagnostic) -> tuple[str, str, str]:
    """(path, code, term): stable when lines move."""
    m = _QUOTED.search(diag.message)
    return (diag.path, diag.code, m.group(1) if m else diag.message)


# Page findings where the site and GitHub render a page differently (a line the site takes for
# a heading, an anchor spelled the GitHub way): `wiki init` records today's with the acronyms,
# since a wiki read on GitHub never had them; `wiki check` leaves the recorded ones out.
PAGE_CODES = ("PG007", "LNK003")


def baselined(diag: Diagnostic) -> bool:
    """Whether the baseline file speaks for findings of `diag`'s code."""
    return diag.code.startswith("ACR") or diag.code in PAGE_CODES


def render_baseline(diags: Iterable[Diagnostic],
                    kept: Counter[tuple[str, str, str]] | None = None) -> str:
    """The baseline of `diags`, plus the entries of `kept` (a baseline already written) for
    codes `diags` does not cover (the page findings, when only acronyms are rewritten)."""
    counts = Counter(baseline_key(d) for d in diags)
    codes = {d.code for d in diags}
    for key, n in (kept or Counter()).items():
        if key[1] not in codes and not key[1].startswith("ACR"):
            counts[key] += n
    findings = [
        {"path": p, "code": c, "term": t, "count": n} for (p, c, t), n in sorted(counts.items())
    ]
    data = {"schema_version": BASELINE_VERSION, "tool": "wiki acronyms", "findings": findings}
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def load_baseline(path: Path) -> Counter[tuple[str, str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: baseline not found (write one with --write-baseline)") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read baseline: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema_version") != BASELINE_VERSION:
        raise ConfigError(
            f"{path}: not a baseline file (schema_version {BASELINE_VERSION} expected)"
        )
    counts: Counter[tuple[str, str, str]] = Counter()
    for item in data.get("findings", []):
        try:
            counts[(str(item["path"]), str(item["code"]), str(item["term"]))] += int(item["count"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: malformed baseline entry {item!r}") from exc
    return counts


def apply_baseline(
    diags: list[Diagnostic], baseline: Counter[tuple[str, str, str]]
) -> tuple[list[Diagnostic], int, int]:
    """(new findings, how many the baseline suppressed, baseline entries no longer seen)."""
    left = Counter(baseline)
    fresh: list[Diagnostic] = []
    suppressed = 0
    for diag in sorted(diags, key=sort_key):
        key = baseline_key(diag)
        if left[key] > 0:
            left[key] -= 1
            suppressed += 1
        else:
            fresh.append(diag)
    gone = sum(1 for n in left.values() if n > 0)
    return fresh, suppressed, gone
