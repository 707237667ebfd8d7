"""`wiki check`: every check in one process, each page parsed once: index fresh, abbreviations
fresh, acronyms (with baseline), lint, and runbook result regions."""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wikitools.config import WikiConfig, load_config, load_pages
from wikitools.diagnostics import Diagnostic, Severity, sort_diagnostics, summary
from wikitools.errors import WikiError
from wikitools.index import render_index
from wikitools.lint import lint_pages
from wikitools.pages import Page

DEFAULT_ABBREVIATIONS = "includes/abbreviations.md"
DEFAULT_BASELINE = ".acronyms-baseline.json"


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "check",
        help="run every check (index, abbreviations, acronyms, lint, result regions)",
        description="Run every check in one process, parsing each page once. Exit 0 when "
        "clean, 1 on findings or drift, 2 on usage or configuration errors.",
    )
    parser.add_argument("--root", type=Path, default=Path(), help="wiki root (default: .)")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help=f"acronym baseline file (default: {DEFAULT_BASELINE} at the root, if present)",
    )
    parser.add_argument("--timings", action="store_true", help="print per-check seconds on stderr")
    parser.set_defaults(handler=run)


def _optional(module: str) -> Any | None:
    """Import a module owned elsewhere; None when it does not exist (yet)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return None
        raise


def _call(func: Callable[..., Any], **available: Any) -> Any:
    """Call `func` with the keyword arguments it declares, from what this check has at hand."""
    params = inspect.signature(func).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return func(**available)
    return func(**{k: v for k, v in available.items() if k in params})


def check_index(config: WikiConfig, pages: list[Page]) -> list[Diagnostic]:
    text, diags = render_index(config, pages)
    current = config.index_path.read_text(encoding="utf-8") if config.index_path.is_file() else ""
    if current != text:
        diags.append(
            Diagnostic(
                config.index_output,
                1,
                1,
                "IDX100",
                f"would change: {config.index_output} (run `wiki index` to regenerate it)",
            )
        )
    return diags


def _glossary(config: WikiConfig) -> tuple[Any | None, list[Diagnostic], list[str]]:
    """The loaded glossary (or None), its problems, and notes about checks that cannot run."""
    module = _optional("wikitools.glossary")
    if module is None or not hasattr(module, "load_glossary"):
        return None, [], ["glossary: wikitools.glossary is not available; skipped"]
    if not config.glossary_path.is_file():
        return None, [], [f"glossary: {config.glossary} not found; acronym checks skipped"]
    glossary = module.load_glossary(config.glossary_path, config.root)
    return glossary, list(getattr(glossary, "problems", [])), []


def check_abbreviations(config: WikiConfig, glossary: Any) -> list[Diagnostic]:
    """ACR100 when the abbreviations include file is not what `wiki glossary` would write."""
    module = _optional("wikitools.glossary")
    render = getattr(module, "render_abbreviations", None)
    if render is None:
        return []
    rel = str(getattr(module, "ABBREVIATIONS_PATH", DEFAULT_ABBREVIATIONS))
    target = config.root / rel
    text = render(glossary)
    current = target.read_text(encoding="utf-8") if target.is_file() else ""
    if current == text:
        return []
    message = f"would change: {rel} (run `wiki glossary` to regenerate it)"
    return [Diagnostic(rel, 1, 1, "ACR100", message)]


def check_acronyms(
    config: WikiConfig, pages: list[Page], glossary: Any, baseline: Path | None
) -> list[Diagnostic]:
    """ACR findings, less those recorded in the baseline (an explicit --baseline must exist)."""
    module = _optional("wikitools.acronyms")
    if module is None or not hasattr(module, "check_pages"):
        return []
    default = config.root / str(getattr(module, "DEFAULT_BASELINE", DEFAULT_BASELINE))
    if baseline is None and default.is_file():
        baseline = default
    checked = [p for p in pages if p.path != config.index_output]
    diags = list(module.check_pages(checked, glossary, glossary_path=config.glossary))
    if baseline is not None and hasattr(module, "apply_baseline"):
        diags, _suppressed, _gone = module.apply_baseline(diags, module.load_baseline(baseline))
    return diags


def check_regions(config: WikiConfig, pages: list[Page]) -> list[Diagnostic]:
    """Hook for result regions: `wikitools.runbook.render.check_regions(pages, root)`."""
    module = _optional("wikitools.runbook.render")
    func = getattr(module, "check_regions", None)
    if func is None:
        return []
    return list(_call(func, pages=pages, root=config.root, config=config))


def run(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    timings: list[tuple[str, float]] = []
    started = time.perf_counter()
    pages = load_pages(config)
    timings.append(("parse", time.perf_counter() - started))
    diags: list[Diagnostic] = []
    notes: list[str] = []

    def step(name: str, func: Callable[[], list[Diagnostic]]) -> None:
        t0 = time.perf_counter()
        try:
            diags.extend(func())
        except WikiError as exc:
            raise type(exc)(f"{name}: {exc}") from None
        timings.append((name, time.perf_counter() - t0))

    step("index", lambda: check_index(config, pages))
    glossary, problems, skipped = _glossary(config)
    diags.extend(problems)
    notes.extend(skipped)
    if glossary is not None:
        step("abbreviations", lambda: check_abbreviations(config, glossary))
        step("acronyms", lambda: check_acronyms(config, pages, glossary, args.baseline))
    step("lint", lambda: lint_pages(config, pages))
    step("regions", lambda: check_regions(config, pages))

    diags = sort_diagnostics(diags)
    for diag in diags:
        print(diag.format())
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.timings:
        for name, seconds in timings:
            print(f"{name}: {seconds:.3f} s", file=sys.stderr)
    print(f"{summary(diags)} ({len(pages)} pages)", file=sys.stderr)
    return 1 if any(d.severity is Severity.ERROR for d in diags) else 0
