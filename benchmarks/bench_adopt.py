"""The adoption funnel of a docs tree: how many of its engine launch blocks become runbooks that
plan, how many are refused with a located reason, and how many are left without a word.

Works on a copy of the tree (the tree itself is never written): writes a minimal `wiki.yml` when
the copy has none, runs `wiki runbook scan --write`, then `--check`, a second `--write`, and
checks that only opening fence lines changed (and empty results regions were added). Then it
plans every new runbook on a host with no GPUs (exit 1 is the expected "preflight refuses"; 2
is a wrong block) and sorts every launch block into one of:

  runbook   part of a runbook whose plan exits 0 or 1 (engine, model, TP, image, port shown)
  planfail  part of a runbook whose plan exits 2
  refused   scan said why it did not propose it (a located diagnostic on the block)
  silent    neither

The issue's own share is printed too: "real launches" are the launch blocks less those refused
as not one real launch (a placeholder in the command, a block of alternatives, an interactive
shell, a command in a container that starts no server: an offline check, an idle container);
then runbooks / real launches, and the refusals of real launches by reason. `--list` tags each
refused block `excluded:CATEGORY` or `real:REASON`, so the denominator can be audited.

A launch block is found by text alone (not by the tool's own reader), so blocks the reader misses
are counted: a fenced block that starts an engine (`vllm serve`, `python -m vllm.entrypoints…`,
`python -m sglang.launch_server`, `sglang serve`, `llama-server`), a `docker run` of an engine
image, a compose file whose services run an engine, or a `docker compose up` with no compose file
before it on the page, or a run of a script or compose file of the tree that does one of
these. Needs no network.

    python benchmarks/bench_adopt.py TREE [--docs-dir DIR] [--list] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from wikitools.cli import main as wiki  # noqa: E402
from wikitools.core.config import load_config  # noqa: E402
from wikitools.core.diagnostics import Diagnostic  # noqa: E402
from wikitools.core.errors import WikiError  # noqa: E402
from wikitools.pages.load import load_pages  # noqa: E402
from wikitools.runbook.blocks.declared import RunbookSet  # noqa: E402
from wikitools.runbook.blocks.extract import extract_runbooks  # noqa: E402
from wikitools.runbook.execution.host import HostFacts  # noqa: E402
from wikitools.runbook.execution.plan import PlanOverrides, artifacts_dir_for, make_plan  # noqa: E402
from wikitools.runbook.execution.preflight import preflight  # noqa: E402
from wikitools.runbook.session import block_errors  # noqa: E402

_OPEN = re.compile(r"^(?P<lead>(?:[ \t]*>)*[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_ENGINE = re.compile(
    r"\bvllm\s+serve\b|vllm\.entrypoints\.(?:openai\.)?api_server|sglang\.launch_server"
    r"|\bsglang\s+serve\b|\bllama-server\b")
_IMAGE = re.compile(r"vllm|sglang|llama\.cpp|llama-server", re.I)
_DOCKER_RUN = re.compile(r"\b(?:docker|podman)\s+(?:container\s+)?run\b")
_COMPOSE_UP = re.compile(r"\bdocker[ -]compose\b[^\n]*\bup\b")
_REGION = re.compile(r"\r?\n\r?\n[ \t>]*<!-- wiki:results [^\n]*-->.*?<!-- wiki:end[^\n]*-->",
                     re.S)
_SERVER = re.compile(r"\r?\n\r?\n[ \t>]*```bash \{ #[\w.-]+ \.runbook-server [^}\n]*\}\r?\n"
                     r"[ \t>]*docker compose up -d\r?\n[ \t>]*```(?=\r?\n)")
_DIAG = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<rest>.*)$")


@dataclass(frozen=True, slots=True)
class Block:
    path: str
    line: int  # opening fence
    end: int  # closing fence
    lang: str
    text: str


def fenced_blocks(path: str, text: str) -> list[Block]:
    """Every fenced block of a page, at any indentation (lists, tabs, admonitions, quotes)."""
    out: list[Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lead = m["fence"], m["lead"]
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].lstrip(" \t>")
            indent = len(lines[j]) - len(stripped) - len(lead)  # 4 more: text, not a fence
            if stripped.startswith(fence) and not stripped.strip().strip(fence[0]) and \
                    indent < 4:
                break
            body.append(lines[j][len(lead):] if lines[j].startswith(lead) else lines[j].lstrip())
            j += 1
        info = m["info"].strip().lstrip("{").strip()
        lang = re.split(r"[\s{}]", info.lstrip("."), maxsplit=1)[0].lower() if info else ""
        out.append(Block(path, i + 1, j + 1, lang, "\n".join(body)))
        i = j + 1
    return out


def _code(text: str) -> str:
    return "\n".join(ln for ln in text.split("\n") if not ln.lstrip().startswith("#"))


_PROGRAM = re.compile(r"(?:^|&&|;|\|\|)\s*(?:[A-Za-z_]\w*=\S*\s+)*(?:(?:bash|sh|exec|nohup)\s+)?"
                      r"(?:\./)?([\w.-]+(?:/[\w.-]+)+|\./[\w.-]+)(?=\s|$|;|&)", re.M)
_COMPOSE_FILE = re.compile(r"\bdocker[ -]compose\b[^\n]*?(?:-f|--file)[ =](\S+)[^\n]*\bup\b")
_SCRIPT_LAUNCH = re.compile(r"\b(?:docker|podman)\s+run\b[^\n]*(?:\s-d\b|--detach|--gpus)")


def _starts_engine(text: str) -> bool:
    """A script or compose file that starts a server (not a build or a one-off check)."""
    code = _code(text)
    if re.search(r"(?m)^services:", text):
        return bool(_IMAGE.search(text))
    return bool(_ENGINE.search(code) or (_SCRIPT_LAUNCH.search(code) and _IMAGE.search(code))
                or (_COMPOSE_UP.search(code) and _IMAGE.search(code)))


def _runs_tree_file(tree: Path | None, page: str, code: str) -> bool:
    """The block runs a file of the tree as a command (or `docker compose -f FILE up`), by a
    relative path from the root, the page's folder or a `cd` of the block, and that file
    starts a server itself."""
    if tree is None:
        return False
    top = tree.resolve()
    bases = [top / d for d in re.findall(r"(?m)^\s*cd\s+([\w./-]+)", code) if d[0] != "/"]
    bases += [top, top / Path(page).parent]
    for rel in [*_PROGRAM.findall(code), *_COMPOSE_FILE.findall(code)]:
        for base in bases:
            f = (base / rel).resolve()
            if f.is_file() and f.is_relative_to(top):
                try:
                    if _starts_engine(f.read_text(encoding="utf-8")):
                        return True
                except (OSError, UnicodeDecodeError):
                    pass
    return False


def launch_blocks(path: str, text: str, tree: Path | None = None) -> list[Block]:
    out: list[Block] = []
    compose_seen = False
    for b in fenced_blocks(path, text):
        code = _code(b.text)
        is_compose = bool(re.search(r"(?m)^services:", b.text))
        if b.lang in ("yaml", "yml") or is_compose:
            if is_compose and _IMAGE.search(b.text):
                out.append(b)
                compose_seen = True
            continue
        if b.lang not in ("", "bash", "sh", "shell", "zsh", "console", "shell-session", "text"):
            continue
        engine = _ENGINE.search(code) or (_DOCKER_RUN.search(code) and _IMAGE.search(code))
        runs_file = b.lang not in ("", "text") and _runs_tree_file(tree, path, code)
        if engine or (_COMPOSE_UP.search(code) and not compose_seen) or runs_file:
            out.append(b)
    return out


# Refusals that say a block is not one real launch: the denominator of the share
# leaves them out. Nothing else is left out.
NOT_A_LAUNCH = (
    ("placeholder", re.compile(r"RB014 warning: .*the command holds a placeholder")),
    ("alternatives", re.compile(r"RB014 warning: .*the block starts \d+ servers .*alternatives")),
    ("interactive-shell", re.compile(r"RB014 warning: .*opens an interactive shell")),
    ("no-server", re.compile(r"RB016 warning: .*(?:a one-off command, not a server|the block "
                             r"starts no server)")),
    ("illustration", re.compile(r"RB014 warning: .*the command names no model")),
)
# Why a real launch was refused, for the breakdown (the first that matches; else "other").
REASONS = (
    ("declaration-incomplete", re.compile(r"RB018 ")),
    ("variable-unset", re.compile(r"RB015 ")),
    ("multi-node", re.compile(r"across several nodes")),
    ("repository-file", re.compile(r"a (?:file|script) of the repository")),
    ("several-servers-in-a-script", re.compile(r"which starts \d+ servers")),
    ("compose-file-elsewhere", re.compile(r"needs its compose file")),
    ("compose-file-of-another-repository-unpinned", re.compile(r"the compose file is .*, which "
                                                              r"moves")),
    ("compose-file-of-another-repository-pinned", re.compile(r"the compose file is .* at commit")),
    ("script-in-image", re.compile(r"inside the image")),
    ("compose-service-unknown", re.compile(r"compose file whose services start no engine")),
    ("script-not-shown", re.compile(r"which the page does not show")),
    ("unknown-flag", re.compile(r"unknown flag")),
    ("split-over-blocks", re.compile(r"which the block at line \d+ writes|leaves running it")),
    ("client-in-server-block", re.compile(r"then runs a client")),
    ("file-not-attached", re.compile(r"names a file that the page does not attach")),
    ("cd-before-compose", re.compile(r"before docker compose up, so Compose would read")),
)


def refusal_category(message: str) -> tuple[bool, str]:
    """(left out of the real launches, category) of a refusal's message."""
    for name, rx in NOT_A_LAUNCH:
        if rx.search(message):
            return True, name
    return False, next((name for name, rx in REASONS if rx.search(message)), "other")


def _quiet(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = wiki(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return rc, out.getvalue() + err.getvalue()


def _changed_lines(before: Path, after: Path) -> list[str]:
    """Lines changed between two copies other than opening fences, once the blocks `scan
    --write` may add (empty results regions, a server block after a compose file) are taken
    out again."""
    bad: list[str] = []
    for old in sorted(before.rglob("*.md")):
        rel = old.relative_to(before)
        a_text = old.read_bytes().decode("utf-8", "replace")
        b_text = (after / rel).read_bytes().decode("utf-8", "replace")
        if "wiki:results" not in a_text:
            b_text = _REGION.sub("", b_text)
        b_text = _SERVER.sub("", b_text)
        a, b = a_text.split("\n"), b_text.split("\n")
        if len(a) != len(b):
            bad.append(f"{rel}: {len(b) - len(a):+d} lines")
            continue
        bad += [f"{rel}:{n}: {x!r} -> {y!r}" for n, (x, y) in enumerate(zip(a, b, strict=True), 1)
                if x != y and not (_OPEN.match(x) and _OPEN.match(y))]
    return bad


def _line_maps(before: Path, after: Path) -> dict[str, dict[int, int]]:
    """For each page `scan --write` changed: where each line of the page went (1-based), once
    results regions and server blocks were added above it."""
    out: dict[str, dict[int, int]] = {}
    for old in before.rglob("*.md"):
        rel = old.relative_to(before)
        a = old.read_bytes().decode("utf-8", "replace").split("\n")
        b = (after / rel).read_bytes().decode("utf-8", "replace").split("\n")
        if len(a) == len(b):
            continue
        mapping: dict[int, int] = {}
        ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        for tag, i1, i2, j1, j2 in ops:
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                mapping.update((i1 + k + 1, j1 + k + 1) for k in range(i2 - i1))
        out[rel.as_posix()] = mapping
    return out



def _planned(runbooks: RunbookSet, diags: list[Diagnostic], after: Path,
             ) -> dict[tuple[str, int], tuple[str, int, str]]:
    """(page, line) of each runbook's server and file blocks → (id, plan exit code, summary)."""
    facts = HostFacts(smi_found=False)
    planned: dict[tuple[str, int], tuple[str, int, str]] = {}
    for rb in runbooks:
        try:
            block_errors(rb, diags)
            verdict = preflight(rb, facts=facts)
            make_plan(rb, root=after, artifacts_dir=artifacts_dir_for(rb, "funnel"),
                      overrides=PlanOverrides(), verdict=verdict)
            rc = 0 if verdict.ok else 1
        except WikiError:
            rc = 2
        cmd = rb.server.command
        what = (f"{rb.server.engine} model={cmd.model} tp={cmd.tp} image={cmd.image} "
                f"port={rb.server.port} gpus={rb.server.requirements.gpus}")
        spans = [(rb.server.line, rb.server.line)]
        spans += [(f.line, f.line) for f in rb.files]
        for line, _ in spans:
            planned[(rb.page, line)] = (rb.id, rc, what)
    return planned



def _rows(blocks: list[Block], moved: dict[str, dict[int, int]],
          planned: dict[tuple[str, int], tuple[str, int, str]],
          refusals: dict[tuple[str, int], str]) -> list[tuple[str, str]]:
    """Each launch block's fate: (runbook | planfail | refused | silent, the line to print)."""
    rows: list[tuple[str, str]] = []
    for b in blocks:
        shift = moved.get(b.path, {})
        key = (b.path, shift.get(b.line, b.line))
        hit = planned.get(key)
        if hit is None:  # a compose `up` block reads the file: find a runbook on its lines
            hit = next((v for (p, ln), v in planned.items() if p == b.path
                        and key[1] <= ln <= shift.get(b.end, b.end)), None)
        if hit is not None:
            rid, rc, what = hit
            kind = "runbook" if rc in (0, 1) else "planfail"
            rows.append((kind, f"{b.path}:{b.line}: #{rid} plan={rc} {what}"))
            continue
        why = next((r for (p, ln), r in refusals.items()
                    if p == b.path and b.line <= ln <= b.end), None)
        if why is not None:
            left_out, category = refusal_category(why)
            tag = f"{'excluded' if left_out else 'real'}:{category}"
            rows.append(("refused", f"{tag:<30} {b.path}:{b.line}: {why}"))
        else:
            rows.append(("silent", f"{b.path}:{b.line}: {b.text.strip().splitlines()[0][:90]}"
                         if b.text.strip() else f"{b.path}:{b.line}: (empty)"))
    return rows


def funnel(tree: Path, docs_dir: str | None, keep: Path | None, listing: bool) -> int:
    work = Path(tempfile.mkdtemp(prefix="wiki-funnel-"))
    try:
        before, after = work / "before", work / "after"
        ignore = shutil.ignore_patterns(".git", "site", ".artifacts")
        shutil.copytree(tree, before, ignore=ignore, symlinks=True)
        if not any((before / n).exists() for n in ("wiki.yml", "mkdocs.yml", "mkdocs.yaml")):
            (before / "wiki.yml").write_text(f"docs_dir: {docs_dir or '.'}\n", encoding="utf-8")
        shutil.copytree(before, after, symlinks=True)
        config = load_config(after)
        docs = config.docs_dir
        blocks = [b for p in load_pages(config) for b in launch_blocks(p.path, p.text, before)]

        t0 = time.perf_counter()
        rc_write, out_write = _quiet(["runbook", "scan", "--write", "--root", str(after)])
        t_write = time.perf_counter() - t0
        rc_check, out_check = _quiet(["runbook", "scan", "--check", "--root", str(after)])
        snapshot = {p: p.read_bytes() for p in after.rglob("*.md")}
        rc_write2, _ = _quiet(["runbook", "scan", "--write", "--root", str(after)])
        second_changed = sum(p.read_bytes() != data for p, data in snapshot.items())
        stray = _changed_lines(before, after)

        config = load_config(after)
        pages = load_pages(config)
        runbooks, diags = extract_runbooks(pages, config.root)
        planned = _planned(runbooks, diags, after)
        refusals: dict[tuple[str, int], str] = {}
        for text in (out_write,):
            for ln in text.splitlines():
                m = _DIAG.match(ln)
                if m and "RB0" in m["rest"]:
                    refusals.setdefault((m["path"], int(m["line"])), m["rest"])

        moved = _line_maps(before, after)
        rows = _rows(blocks, moved, planned, refusals)
        counts = Counter(kind for kind, _ in rows)
        n = len(blocks)
        print(f"adoption funnel: {tree} (docs_dir {docs})")
        print(f"  pages                 {len(pages)}")
        print(f"  launch blocks         {n}")
        for kind in ("runbook", "planfail", "refused", "silent"):
            share = 100.0 * counts[kind] / n if n else 0.0
            print(f"  {kind:<21} {counts[kind]} ({share:.1f} %)")
        print(f"  runbooks              {len(runbooks)}")
        print(f"  scan --write          exit {rc_write}, {t_write:.1f} s")
        print(f"  scan --check after    exit {rc_check}"
              + (f" ({out_check.strip().splitlines()[-1]})" if rc_check else ""))
        print(f"  second --write        exit {rc_write2}, {second_changed} pages changed")
        print(f"  other lines changed   {len(stray)}")
        tags = Counter(text.split(" ", 1)[0] for kind, text in rows if kind == "refused")
        left = {t.split(":", 1)[1]: c for t, c in tags.items() if t.startswith("excluded:")}
        real = n - sum(left.values())
        print(f"  real launches         {real} (launch blocks less {sum(left.values())} "
              "refused as not one launch: "
              + ", ".join(f"{name} {left.get(name, 0)}" for name, _rx in NOT_A_LAUNCH) + ")")
        share = 100.0 * counts["runbook"] / real if real else 0.0
        print(f"  runbooks / real launches = {counts['runbook']} / {real} = {share:.1f} %")
        refused_real = sum(c for t, c in tags.items() if t.startswith("real:"))
        print(f"  real launches refused {refused_real}, by reason:")
        for tag, c in sorted(tags.items(), key=lambda kv: (-kv[1], kv[0])):
            if tag.startswith("real:"):
                print(f"    {c:>4}  {tag.split(':', 1)[1]}")
        if listing:
            for kind, text in sorted(rows):
                print(f"{kind:<9}{text}")
            for s in stray[:50]:
                print(f"changed  {s}")
        if keep is not None:
            if keep.exists():
                shutil.rmtree(keep)
            shutil.copytree(after, keep, symlinks=True)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path, help="the docs tree (its root; it is not written)")
    ap.add_argument("--docs-dir", help="docs folder, when the tree has no wiki.yml/mkdocs.yml")
    ap.add_argument("--list", action="store_true", help="one line per launch block")
    ap.add_argument("--keep", type=Path, help="keep the converted copy here")
    args = ap.parse_args(argv)
    if not args.tree.is_dir():
        print(f"{args.tree}: not a folder", file=sys.stderr)
        return 2
    return funnel(args.tree.resolve(), args.docs_dir, args.keep, args.list)


if __name__ == "__main__":
    raise SystemExit(main())
