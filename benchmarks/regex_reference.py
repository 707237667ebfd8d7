"""The baseline the benchmarks compare against: the two stdlib-only regex scripts a community
wiki keeps in `scripts/` (as described in docs of the sjug/rtx6kpro wiki, 2026-08), rewritten
here from that description. Both scan every `*.md` file under the root, skipping folders named
.git, images, logs and data.

- `index ROOT`: title = the first line starting with `#`; print one `- [title](path)` line per
  page under a heading per top-level folder.
- `acronyms ROOT`: glossary rows `| ACR | Meaning |` from GLOSSARY.md; drop fenced lines; for
  each term one case-sensitive search for its first use with a lookbehind/lookahead word
  boundary; report it unless `Meaning (ACR)` comes before it.

Usage: python benchmarks/regex_reference.py index|acronyms ROOT
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SKIP = {".git", "images", "logs", "data"}
ROW = re.compile(r"^\|\s*`?([A-Za-z0-9+./-]+)`?\s*\|\s*([^|]+?)\s*\|", re.MULTILINE)


def markdown_files(root: Path) -> list[Path]:
    return [
        p for p in sorted(root.rglob("*.md"))
        if not SKIP.intersection(p.relative_to(root).parts)
    ]


def index(root: Path) -> int:
    sections: dict[str, list[str]] = {}
    for path in markdown_files(root):
        rel = path.relative_to(root)
        title = path.stem
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip().startswith("#"):
                title = line.strip().lstrip("#").strip() or path.stem
                break
        section = rel.parts[0] if len(rel.parts) > 1 else "landing"
        sections.setdefault(section, []).append(f"- [{title}]({rel.as_posix()}) - `{rel}`")
    out = ["# Index", ""]
    for name, lines in sections.items():
        out += [f"## {name}", "", *lines, ""]
    sys.stdout.write("\n".join(out))
    return 0


def load_terms(root: Path) -> dict[str, str]:
    text = (root / "GLOSSARY.md").read_text(encoding="utf-8")
    return {
        m.group(1): m.group(2)
        for m in ROW.finditer(text)
        if m.group(1) != "Acronym" and not set(m.group(1)) <= set("-") and len(m.group(1)) > 1
    }


def strip_code_fences(text: str) -> str:
    kept, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            kept.append(line)
    return "\n".join(kept)


def acronyms(root: Path) -> int:
    terms = load_terms(root)
    patterns = {
        acr: re.compile(rf"(?<![A-Za-z0-9_`/-]){re.escape(acr)}(?![A-Za-z0-9_`/-])")
        for acr in terms
    }
    warnings = 0
    for path in markdown_files(root):
        if path.name in ("GLOSSARY.md", "INDEX.md"):
            continue
        text = strip_code_fences(path.read_text(encoding="utf-8"))
        for acr, meaning in terms.items():
            m = patterns[acr].search(text)
            if m is None:
                continue
            before = text[: m.start()]
            if f"{meaning} ({acr})" in before or f"{meaning} `{acr}`" in before:
                continue
            line = text.count("\n", 0, m.start()) + 1
            print(f"{path.relative_to(root)}:{line}: {acr} -> {meaning}")
            warnings += 1
    return 1 if warnings else 0


if __name__ == "__main__":
    command, root = sys.argv[1], Path(sys.argv[2])
    raise SystemExit({"index": index, "acronyms": acronyms}[command](root))
