"""`wiki runbook list|show|plan|scan`: read runbooks and say what would run, starting nothing."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from wikitools.cli.common import add_root
from wikitools.cli.runbook_options import add_run_options, run_options
from wikitools.core.config import load_config
from wikitools.core.diagnostics import Diagnostic, Severity, sort_diagnostics, summary
from wikitools.core.errors import UsageError
from wikitools.core.fsio import write_if_changed
from wikitools.pages.load import load_pages
from wikitools.pages.parse import Page, parse_page, read_page
from wikitools.runbook.blocks.adopt import adopt_page, keep_layout, modernise_fences
from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.blocks.extract import extract_runbooks, load_runbooks
from wikitools.runbook.blocks.scan import Suggestion, merged_suggestions, scan_wiki
from wikitools.runbook.blocks.sources import runbook_unset
from wikitools.runbook.engines.secrets import mask_env
from wikitools.runbook.execution.plantext import format_plan, format_summary, format_verdict
from wikitools.runbook.execution.preflight import required_gpus
from wikitools.runbook.records.record import read_records
from wikitools.runbook.rendering.render import stored_text
from wikitools.runbook.session import prepare, render_into


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("list", help="one line per runbook: page#id, engine, model, GPUs, last run",
                       description="List every runbook of the wiki with its engine, model, GPU "
                       "requirements and the date of its latest record.")
    add_root(p)
    p.set_defaults(handler=run_list)

    p = sub.add_parser("show", help="print a runbook's blocks and what was understood",
                       description="Print a runbook's server and client blocks and what the "
                       "tools understood from them (engine, model, parallel sizes, port, ...).")
    p.add_argument("ref", metavar="PAGE#ID", help="runbook id, or path/to/page.md#id")
    add_root(p)
    p.set_defaults(handler=run_show)

    p = sub.add_parser("plan", help="print exactly what a run would execute, and the preflight",
                       description="Print the final server and client commands, environment "
                       "(secrets masked), timeouts, log and result paths, and the preflight "
                       "verdict for this host. Starts nothing and always prints the plan; the "
                       "exit status is the verdict: 0 when the runbook could run on this host, "
                       "1 when preflight refuses (on a host without GPUs that is the expected "
                       "answer), 2 when the runbook, its blocks or an option are wrong.")
    add_run_options(p)
    p.set_defaults(handler=run_plan)

    p = sub.add_parser("scan", help="find plain shell blocks holding launchers; suggest the "
                       "runbook form",
                       description="Find un-annotated code blocks that start an engine (shell "
                       "blocks, and compose files in YAML blocks) or a benchmark client, and print "
                       "the attribute list that makes each one a runbook block. --write marks them "
                       "in place (only the opening fence line changes) and rewrites runbook fences "
                       "of the older `{ .bash … }` form as `bash { … }`; --check reports what "
                       "--write would change and exits 1.")
    p.add_argument("paths", nargs="*", type=Path, help="pages or folders (default: the wiki)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true",
                      help="mark the blocks in place: only the opening fence line changes")
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 when --write would change a page")
    add_root(p)
    p.set_defaults(handler=run_scan)


def _report(diags: list[Any]) -> bool:
    diags = sort_diagnostics(diags)
    for d in diags:
        print(d.format(), file=sys.stderr)
    return any(d.severity is Severity.ERROR for d in diags)


def _resolve(root: Path, ref: str) -> tuple[Runbook, list[Any]]:
    runbooks, diags, _pages = load_runbooks(root)
    if not ref.strip("#").strip():
        raise UsageError("name a runbook: ID or path/to/page.md#ID")
    return runbooks.get(ref), diags


def run_list(args: argparse.Namespace) -> int:
    root = load_config(args.root).root
    runbooks, diags, _pages = load_runbooks(args.root)
    rows: list[list[str]] = []
    unreadable: list[str] = []
    for rb in runbooks:
        s = rb.server
        need = required_gpus(s)
        records, errors = read_records(root, rb.id)
        unreadable += [str(e) for e in errors]
        last = records[-1] if records else None
        when = "never run" if last is None else f"{last.started_at[:10]} ({last.status})"
        if errors:
            when += f", {len(errors)} unreadable record{'s' * (len(errors) != 1)}"
        rows.append([rb.ref, s.engine or "?", s.command.model or "?",
                     f"{need} GPU{'s' * (need != 1)}" if need else "CPU",
                     ",".join(s.requirements.arch) or "any arch", when])
    if rows:
        rows.insert(0, ["RUNBOOK", "ENGINE", "MODEL", "GPUS", "ARCH", "LAST RUN"])
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(6)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if not rows:
        print("no runbooks", file=sys.stderr)
    for message in unreadable:
        print(f"{message} (unreadable record)", file=sys.stderr)
    bad = _report(diags)
    if diags:
        print(summary(sort_diagnostics(diags)), file=sys.stderr)
    return 1 if bad or unreadable else 0


# --------------------------------------------------------------------------- show


def _describe_server(rb: Runbook) -> list[str]:
    s = rb.server
    c = s.command
    out = [f"runbook {rb.ref}", f"blocks  {rb.blocks_hash}", "",
           f"server block ({s.page}:{s.line}): {s.info.strip()}"]
    out += ["    " + ln for ln in s.content.rstrip("\n").splitlines()]
    req = s.requirements
    need = required_gpus(s)
    stated = "" if req.gpus is not None else " (from tp x pp x dp)"
    out.append("  understood:")
    fields: list[tuple[str, Any]] = [
        ("engine", s.engine), ("launcher", c.launcher), ("wrapped in", " > ".join(c.wrappers)),
        ("image", c.image), ("docker --gpus", c.docker_gpus), ("model", c.model),
        ("tensor parallel", c.tp), ("pipeline parallel", c.pp), ("data parallel", c.dp),
        ("decode context parallel", c.dcp), ("expert parallel", "yes" if c.ep else None),
        ("port", s.port), ("host", c.host), ("quantization", c.quantization),
        ("kv cache dtype", c.kv_cache_dtype),
        ("speculative", json.dumps(c.speculative, sort_keys=True) if c.speculative else None),
        ("env", " ".join(f"{k}={v}" for k, v in mask_env(dict(c.env)).items())),
        ("run-only env", " ".join(f"{k}={v}" for k, v in mask_env(dict(s.extra_env)).items())),
        ("variants", f"{s.variants.text()} ({len(s.variants)} servers, one after the other)"
         if s.variants else None),
        ("other flags", " ".join(k if v is None else f"{k} {v}" for k, v in c.flags)),
    ]
    for label, value in fields:
        if value not in (None, ""):
            out.append(f"    {label + ':':<25}{value}")
    out.append(f"  requires: {need} GPU{'s' * (need != 1)}{stated}, arch "
               f"{','.join(req.arch) or 'any'}"
               + (f", {req.min_mem_gib:g} GiB free per GPU" if req.min_mem_gib is not None else "")
               + f"; ready within {s.ready_timeout:g} s, stop grace {s.stop_timeout:g} s")
    for p in c.problems:
        out.append(f"  note: {p}")
    return out


def _describe_clients(rb: Runbook) -> list[str]:
    out: list[str] = []
    for cl in rb.clients:
        c = cl.command
        out += ["", f"client {cl.name} ({cl.page}:{cl.line}): {cl.info.strip()}"]
        out += ["    " + ln for ln in cl.content.rstrip("\n").splitlines()]
        out.append("  understood:")
        fields: list[tuple[str, Any]] = [
            ("kind", cl.kind), ("tool", c.tool), ("launcher", c.launcher), ("model", c.model),
            ("base url", c.base_url), ("host", c.host), ("port", c.port), ("backend", c.backend),
            ("dataset", c.dataset), ("prompts", c.num_prompts),
            ("max concurrency", c.max_concurrency), ("request rate", c.request_rate),
            ("url", c.url),
            ("sweep", cl.sweep.text() or None),
            ("timeout", f"{cl.timeout:g} s per point"),
        ]
        for label, value in fields:
            if value not in (None, ""):
                out.append(f"    {label + ':':<25}{value}")
    if not rb.clients:
        out += ["", "no client blocks"]
    return out


def run_show(args: argparse.Namespace) -> int:
    rb, diags = _resolve(args.root, args.ref)
    print("\n".join(_describe_server(rb) + _describe_clients(rb)))
    own = sort_diagnostics([d for d in diags if d.path == rb.page])
    for d in own:
        print(d.format(), file=sys.stderr)
    return 1 if any(d.severity is Severity.ERROR for d in own) else 0


# --------------------------------------------------------------------------- plan


def run_plan(args: argparse.Namespace) -> int:
    prepared = prepare(args.ref, args.root, run_options(args))
    for d in prepared.warnings:
        print(d.format(), file=sys.stderr)
    print(format_summary(prepared.plan, prepared.unset), end="")
    print()
    print(format_plan(prepared.plan), end="")
    print()
    print(format_verdict(prepared.verdict), end="")
    missing = runbook_unset(prepared.runbook, prepared.pages, os.environ)
    if missing:  # the server would start with an empty model, image or path: not runnable
        for r in missing:
            print(f"{prepared.runbook.page}:{r.line}:{r.col}: {r.code} {r.message}",
                  file=sys.stderr)
        return 2
    return 0 if prepared.verdict.ok else 1


# --------------------------------------------------------------------------- scan


def run_scan(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    if args.paths:
        files: list[Path] = []
        for p in args.paths:
            path = p if p.is_absolute() else Path.cwd() / p
            if path.is_dir():
                files += sorted(path.rglob("*.md"))
            elif path.is_file():
                files.append(path)
            else:
                raise UsageError(f"{p}: no such file or folder")
        root = config.root.resolve()
        outside = [f for f in files if not f.resolve().is_relative_to(root)]
        if outside:
            raise UsageError(f"{outside[0]}: not inside the wiki at {root} (scan pages of the "
                             "wiki, or give --root)")
        pages = [read_page(f.resolve(), root) for f in files]
    else:
        pages = load_pages(config)
    runbooks, _diags, every_page = load_runbooks(args.root)
    result = scan_wiki(pages, taken=runbooks.ids(), root=config.root)
    found = result.suggestions
    if not (args.write or args.check):
        found = merged_suggestions(found)  # a block of variables several launches read: once
        for s in found:
            print(s.format())
        for d in sort_diagnostics(result.refused):
            print(d.format())
        n = len(found)
        print(f"{n} block{'s' * (n != 1)} could become runbook blocks" if n else
              "no plain launcher blocks", file=sys.stderr)
        return 0
    return _adopt(args, pages, every_page, found, result.refused)


def _render_new_regions(root: Path, paths: list[str]) -> None:
    """Fill the results regions `scan --write` added ("not measured yet" until a run), so that
    `wiki check` finds them current."""
    config = load_config(root)
    every = load_pages(config)
    runbooks, _diags = extract_runbooks(every, config.root)
    wanted = set(paths)
    render_into([p for p in every if p.path in wanted], root, runbooks)


def _adopt(args: argparse.Namespace, pages: list[Page], every_page: list[Page],
           found: list[Suggestion], refused: list[Diagnostic]) -> int:
    """scan --write / --check: convert the suggested blocks in place (fence lines only)."""
    root = Path(args.root)
    wiki_root = load_config(root).root
    converted = 0
    changed: list[str] = []
    skipped: list[Diagnostic] = list(refused)
    regions: list[str] = []  # pages given a new results region, rendered once written
    for page in pages:
        text, modernised = modernise_fences(page)
        verb = "would rewrite" if args.check else "rewrote"
        for line in modernised:
            print(f"{page.path}:{line}:1: {verb} the fence as `LANG {{ … }}`")
        converted += len(modernised)
        mine = [s for s in found if s.path == page.path]
        if mine:
            others = [p for p in every_page if p.path != page.path]
            result = adopt_page(parse_page(text, page.path), mine, others, wiki_root)
            skipped += result.skipped
            text = result.text
            converted += len(result.converted)
            verb = "would mark" if args.check else "marked"
            for s in result.converted:
                print(f"{s.path}:{s.line}:{s.col}: {verb} {s.role} block: {s.fence}")
            if "wiki:results" in text and text.count("wiki:results") > page.text.count(
                    "wiki:results"):
                regions.append(page.path)
        if text == page.text:
            continue
        changed.append(page.path)
        if args.write:
            write_if_changed(root / page.path,
                             keep_layout(stored_text(root, page), page.text, text))
    if args.write and regions:
        _render_new_regions(root, regions)
    for d in sort_diagnostics(skipped):
        print(d.format())
    pages_n = len(changed)
    what = f"{converted} block{'s' * (converted != 1)} in {pages_n} page{'s' * (pages_n != 1)}"
    if args.check:
        print(f"{what} would be marked" if converted else "nothing to mark", file=sys.stderr)
        return 1 if converted else 0
    print(f"{what} marked" if converted else "nothing to mark", file=sys.stderr)
    return 0
