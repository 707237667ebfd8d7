"""Generate a community wiki for the benchmarks: varied copies of this repository's own pages
(front matter, admonitions, tables, code blocks, links) plus long bot-written daily summaries,
laid out like a GitHub-style wiki (top-level folders, a small `docs/`, GLOSSARY.md) with a
`wiki.yml` that names the whole tree as the wiki.

Runbook attributes and results markers are turned into plain fences and comments: a community
wiki has none, and copies of one runbook id would collide. The output is the same for the same
arguments on every machine.

Usage: python benchmarks/community_wiki.py DIR [--pages 300] [--megabytes 2.6]
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "wiki"
_BRACE_FENCE = re.compile(r"^(\s*(?:`{3,}|~{3,}))\{\s*\.(\w+)[^}]*\}\s*$", re.MULTILINE)
_WIKI_MARKER = re.compile(r"^<!--\s*wiki:[^>]*-->\n?", re.MULTILINE)
_FRONT_TITLE = re.compile(r"^title:\s*(.*)$", re.MULTILINE)
_H1 = re.compile(r"^# (.*)$", re.MULTILINE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_TABLE_ROW = re.compile(r"^\|.*\|$")


CONFIG = "docs_dir: .\nglossary: GLOSSARY.md\n"


def _source_pages() -> list[tuple[str, str]]:
    """(path relative to wiki/, text) of every page but the glossary, with runbook syntax
    made plain."""
    out = []
    for path in sorted(SOURCE.rglob("*.md")):
        rel = path.relative_to(SOURCE).as_posix()
        if rel == "glossary.md":
            continue
        text = path.read_text(encoding="utf-8")
        text = _BRACE_FENCE.sub(r"\1\2", text)
        text = _WIKI_MARKER.sub("", text)
        out.append((rel, text))
    return out


def _sentences(pages: list[tuple[str, str]]) -> list[str]:
    """Prose sentences of the source pages (no code, tables, headings or front matter)."""
    found: list[str] = []
    for _, text in pages:
        fence = False
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith(("```", "~~~")):
                fence = not fence
                continue
            if fence or not stripped or stripped[0] in "#|!-=<>*:" or _TABLE_ROW.match(stripped):
                continue
            found += [s for s in _SENTENCE.split(stripped) if len(s) > 40]
    return found


def glossary_text() -> str:
    """GLOSSARY.md in the community wiki's shape: `| Acronym | Meaning |` tables."""
    rows = []
    for line in (SOURCE / "glossary.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        header = cells[0] in ("Term", "---") or set(cells[0]) <= set("-: ")
        if len(cells) >= 2 and line.startswith("|") and not header:
            rows.append(f"| {cells[0]} | {cells[1]} |")
    head = ["# Glossary", "", "Acronyms used across the wiki.", "", "| Acronym | Meaning |"]
    return "\n".join([*head, "|---|---|", *rows]) + "\n"


def _vary(rng: random.Random, text: str, n: int) -> str:
    """A variant of a page: numbered title, some sections repeated or dropped."""
    text = _FRONT_TITLE.sub(lambda m: f"title: {m.group(1).strip()} (variant {n})", text, 1)
    text = _H1.sub(lambda m: f"# {m.group(1)} (variant {n})", text, 1)
    parts = re.split(r"(?m)^(?=## )", text)
    head, sections = parts[0], parts[1:]
    kept = [s for s in sections if rng.random() > 0.15] or sections
    extra = [rng.choice(sections) for _ in range(rng.randint(0, 3))] if sections else []
    return head + "".join(kept + extra)


def _daily(rng: random.Random, sentences: list[str], day: int, size: int) -> str:
    """A daily summary: long paragraphs of sentences from the wiki, a few bullet lists."""
    month, date = 1 + (day // 28) % 12, 1 + day % 28
    out = [f"# Daily Summary — 2026-{month:02d}-{date:02d}", ""]
    written = 0
    while written < size:
        if rng.random() < 0.2:
            block = "\n".join(f"- {rng.choice(sentences)}" for _ in range(rng.randint(3, 8)))
        else:
            block = " ".join(rng.choice(sentences) for _ in range(rng.randint(6, 30)))
        out += [block, ""]
        written += len(block) + 1
    return "\n".join(out)


def generate(root: Path, pages: int, megabytes: float, seed: int = 20261130) -> int:
    """Write the wiki into `root` (which must be empty or missing); return its size in bytes."""
    rng = random.Random(seed)
    sources = _source_pages()
    sentences = _sentences(sources)
    files: dict[str, str] = {"GLOSSARY.md": glossary_text(), "wiki.yml": CONFIG}
    for rel, text in sources:
        if rel in ("contributing.md", "onboarding.md"):
            files[f"docs/{rel}"] = text
        elif rel == "index.md":
            files["README.md"] = text
        else:
            files[rel] = text
    target = int(megabytes * 1_000_000)
    budget = target - sum(len(t) for t in files.values())
    copies = max(0, pages - len(files) + 1)
    copied = copies * 2 // 5  # the rest are daily summaries
    page_sources = [s for s in sources if not s[0].endswith("index.md")]
    for n in range(copied):
        rel, text = page_sources[n % len(page_sources)]
        stem, _, _ = rel.rpartition(".md")
        files[f"{stem}-v{n + 2}.md"] = _vary(rng, text, n + 2)
        budget -= len(files[f"{stem}-v{n + 2}.md"])
    dailies = copies - copied
    for day in range(dailies):
        size = max(2000, int(budget / max(1, dailies - day) * rng.uniform(0.6, 1.4)))
        text = _daily(rng, sentences, day, size)
        month = 1 + (day // 28) % 12
        files[f"daily-summaries/2026-{month:02d}/day-{day:04d}.md"] = text
        budget -= len(text)
    total = 0
    for rel, text in sorted(files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        total += len(data)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--megabytes", type=float, default=2.6)
    args = parser.parse_args()
    size = generate(args.root, args.pages, args.megabytes)
    print(f"{args.root}: {args.pages} pages, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
