#!/usr/bin/env python3
"""Check the built site in a real browser: search finds code, and on a phone the first command
of every model runbook page is on the first screen.

Builds the site (mkdocs build --strict) into a temporary folder, serves it on 127.0.0.1 and
opens it in headless Chromium through Playwright.

* Search: types each query into Material's search box and reads the result list. The queries
  are the code identifiers readers search for: a JSON key, a pull request number, command-line
  flags and an environment variable.
* Phone fold: opens every page under wiki/models/ that holds a runbook server block (hubs
  aside) at 390x844 and checks that its first code block starts within the first screen.
* Landing: the queries a reader types after an error or about a name met elsewhere (an error
  string, a flag, `sm_120`, a model or an acronym) must put the page that answers them first,
  not merely somewhere.
* Every page's code words: each command-line flag and upper-case underscore name on any page
  (wikitools.site.searchterms) is searched, and every page that holds it must be listed before
  any page that does not. The theme shows ten results and loads more as the list is scrolled; the
  check scrolls the list as a reader would until every such page has appeared.
* Phone tables: on every page at 390 px, with collapsed boxes opened, each table wider than the
  screen scrolls inside its own frame and keeps its first column in view when scrolled; no
  page scrolls sideways.
* Phone breadcrumb: on the same pages, the path above the title is one line (no item wraps,
  none drops below another).

Exit 0 when everything passes, 1 when a check fails, 2 when Chromium or Playwright is missing.

    .venv/bin/pip install -e '.[browser]'      # Playwright, the Python package only
    apt-get install -y chromium                # the browser it drives
    .venv/bin/python scripts/check-browser.py  # or --site DIR to test an existing build
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wikitools.core.config import load_config
from wikitools.pages.load import load_pages
from wikitools.site.searchterms import SearchTerms, search_terms

ROOT = Path(__file__).resolve().parent.parent

# query -> the page (site-relative URL prefix) that must be among the first TOP results
QUERIES = {
    "enable_thinking": "topics/thinking-mode/",
    "31089": "models/gpt-oss-120b/triton-vs-marlin/",
    "--tensor-parallel-size": "engines/vllm-sm120/",
    "NCCL_P2P_DISABLE": "hardware/multi-gpu-nccl/",
    "index_topk_pattern": "models/glm-5.2/",
    "--moe-backend": "engines/vllm-sm120/",
}
# What a reader types when something broke, or a flag, model or acronym they met elsewhere: the
# page that answers it must be the first result (LANDS), not merely appear.
LANDS = 1
LANDING = {
    "--kv-cache-dtype": "topics/kv-cache-sessions/",
    "sm_120": "hardware/sm120-vs-sm100/",
    "DeepSeek": "models/deepseek-v4-flash/",
    "Qwen3.5-397B": "models/qwen3.5/397b-a17b/",
    "DCP": "topics/decode-context-parallelism/",
    "CUDA error": "troubleshooting/",
    "illegal memory access": "troubleshooting/",
    "no kernel image": "troubleshooting/",
    "fallen off the bus": "hardware/bus-drops-grounding/",
    "NCCL_P2P_LEVEL": "hardware/multi-gpu-nccl/",
    "unhandled system error": "troubleshooting/",
}
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
TOP = 20  # how many results count as "found"
PHONE = {"width": 390, "height": 844}
FIRST_LINE = 60  # px of a code block that must be on screen: its label and first line


def build(site: Path, root: Path = ROOT) -> None:
    """`mkdocs build --strict` of the project at `root` into `site`; exits on failure."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", DISABLE_MKDOCS_2_WARNING="true")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    proc = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(site)],
                          cwd=root, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"error: mkdocs build --strict failed (exit {proc.returncode})")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def runbook_pages() -> list[str]:
    """Site paths of the model pages that hold a runbook server block. Hubs are left out: they
    open with what the model is and where its pages are, and a runbook on a hub comes later."""
    out = []
    for path in sorted((ROOT / "wiki" / "models").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        hub = re.search(r"^hub:\s*true\s*$", text.split("\n---", 1)[0], re.MULTILINE)
        if ".runbook-server" in text and not hub:
            rel = path.relative_to(ROOT / "wiki").with_suffix("").as_posix()
            out.append(rel.removesuffix("index") if rel.endswith("/index") else rel + "/")
    return out


def first_code_top(browser: Any, base: str, paths: list[str]) -> dict[str, int]:
    """Top of each page's first code block, in CSS pixels, on a phone screen."""
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        tops = {}
        for path in paths:
            page.goto(base + path)
            tops[path] = page.evaluate(
                "() => { const e = document.querySelector('article .highlight, article pre');"
                " return e ? Math.round(e.getBoundingClientRect().top) : -1; }")
        return tops
    finally:
        context.close()


def site_pages() -> list[str]:
    """Site paths of every page under wiki/."""
    out = []
    for path in sorted((ROOT / "wiki").rglob("*.md")):
        rel = path.relative_to(ROOT / "wiki").with_suffix("").as_posix()
        if rel.split("/")[-1].startswith("_"):
            continue
        out.append("" if rel == "index" else rel.removesuffix("index") if rel.endswith("/index")
                   else rel + "/")
    return out


# For each table on the page (collapsed boxes opened first): does it fit, and if not, does it
# scroll inside its own frame with the first column staying in view when scrolled?
_TABLES_JS = """() => {
  document.querySelectorAll('article details').forEach(d => { d.open = true; });
  const bad = [];
  let wide = 0;
  document.querySelectorAll('article table').forEach((table, i) => {
    const frame = table.closest('.md-typeset__scrollwrap') || table.parentElement;
    if (!frame.clientWidth || table.scrollWidth <= frame.clientWidth + 1) return;
    wide += 1;
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(frame).overflowX);
    const cell = table.querySelector('tbody td:first-child') || table.querySelector('td');
    let stays = false;
    if (scrolls && cell) {
      frame.scrollLeft = 120;
      const gap = cell.getBoundingClientRect().left - frame.getBoundingClientRect().left;
      stays = frame.scrollLeft > 0 && Math.abs(gap) <= 2;
      frame.scrollLeft = 0;
    }
    if (!scrolls || !stays) {
      const head = (table.querySelector('th') || {}).textContent || '';
      bad.push(`table ${i + 1} ("${head.trim()}"): ` +
               (scrolls ? 'first column scrolls away' : 'does not scroll inside its frame'));
    }
  });
  const overflow = document.documentElement.scrollWidth - window.innerWidth;
  if (overflow > 1) bad.push(`page scrolls sideways by ${overflow} px`);
  return {bad, wide};
}"""


# The breadcrumb on one line: every item at the same height on the screen, none taller than
# a line of its text (a wrapped item is two font sizes or more).
_CRUMB_JS = """() => {
  const items = [...document.querySelectorAll('.md-path .md-path__item')];
  if (!items.length) return {bad: [], crumbs: 0};
  const boxes = items.map(e => e.getBoundingClientRect());
  const font = parseFloat(getComputedStyle(items[0]).fontSize);
  const wrapped = boxes.filter(b => b.height >= 2 * font).length;
  const rows = new Set(boxes.map(b => Math.round(b.top / 4))).size;
  const bad = wrapped ? [`breadcrumb wraps: ${wrapped} of its ${items.length} items take more ` +
                         'than one line'] :
    rows > 1 ? [`breadcrumb breaks into ${rows} rows`] : [];
  return {bad, crumbs: 1};
}"""


def tables_on_phone(browser: Any, base: str, paths: list[str]) -> dict[str, dict[str, Any]]:
    """Per page: the tables that a 390 px wide phone cannot read, how many were wider
    than the screen, and whether the page's breadcrumb (`crumbs`: 1 where it has one) keeps
    to one line."""
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        out = {}
        for path in paths:
            page.goto(base + path)
            out[path] = page.evaluate(_TABLES_JS)
            crumb = page.evaluate(_CRUMB_JS)
            out[path]["bad"] += crumb["bad"]
            out[path]["crumbs"] = crumb["crumbs"]
        return out
    finally:
        context.close()


# One query typed the way a reader leaves it (the theme searches on key-up), then the rendered
# result list read back; the list is scrolled, as a reader scrolls it, until every page in `want`
# has appeared or the list ends. The meta line is reset first, so that the answer read is this
# query's.
_RESULTS_JS = """async (want) => {
  const meta = document.querySelector('.md-search-result__meta');
  const list = document.querySelector('.md-search-result__list');
  const wrap = document.querySelector('.md-search__scrollwrap');
  const tick = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  const until = async (done, ms) => {
    const end = Date.now() + ms;
    while (!done() && Date.now() < end) await tick();
    return done();
  };
  if (!await until(() => meta.textContent !== 'PENDING', 10000)) return null;
  const total = parseInt(meta.textContent, 10) || 0;
  const paths = () => [...list.querySelectorAll(
      ':scope > .md-search-result__item > .md-search-result__link')]
    .map(e => new URL(e.href).pathname);
  const missing = () => want.filter(p => !paths().includes(p)).length;
  while (missing() && list.children.length < total) {
    const shown = list.children.length;
    wrap.scrollTop = Math.max(0, wrap.scrollHeight - wrap.clientHeight - 200);
    await tick();
    wrap.scrollTop = wrap.scrollHeight;
    if (!await until(() => list.children.length > shown, 3000)) break;
  }
  wrap.scrollTop = 0;
  return {total, paths: paths()};
}"""
FIRST_SCREEN = 10  # results the theme renders before the list is scrolled


def search_code_words(browser: Any, base: str,
                      wants: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """For each query of `wants`: how many results the theme reports and the pages it lists
    (site paths, best first), scrolled far enough to show every page wanted (for a code word of
    SearchTerms.holders, every page that holds it)."""
    prefix = urllib.parse.urlsplit(base).path  # the site root's path: "/"
    found: dict[str, Any] = {}
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(base)
        page.click("label.md-search__icon, .md-search__input")
        box = page.locator("input.md-search__input")
        page.wait_for_function(
            "() => !/Initializing/.test("
            "document.querySelector('.md-search-result__meta').textContent)", timeout=30_000)
        box.focus()
        for word, holders in wants.items():
            page.evaluate("() => { document.querySelector('.md-search-result__meta')"
                          ".textContent = 'PENDING'; document.activeElement.select(); }")
            page.keyboard.insert_text(word)  # replaces the selected query, as a paste does
            page.keyboard.press("End")  # the key-up the theme searches on
            result = page.evaluate(_RESULTS_JS, [prefix + p for p in holders])
            if result is not None:
                paths = [p.removeprefix(prefix) for p in result["paths"]]
                result = {"total": result["total"], "paths": list(dict.fromkeys(paths))}
            found[word] = result
        box.fill("")
        page.keyboard.press("Escape")
    finally:
        page.close()
    return found


def search(browser: Any, base: str) -> dict[str, list[str]]:
    """The result list (site paths, best first, one entry per page) for each query of QUERIES
    and LANDING, read back once the answer to the whole query is on screen (as
    search_code_words does), not while the answers to its first letters are still shown."""
    wants = {query: [page] for query, page in {**QUERIES, **LANDING}.items()}
    found = search_code_words(browser, base, wants)
    return {query: result["paths"][:TOP] if result else [] for query, result in found.items()}


def code_word_failures(terms: SearchTerms,
                       found: dict[str, Any]) -> tuple[list[str], int, int]:
    """Problems (one line each), and how many (word, page) pairs were listed on the first
    screen and how many further down."""
    problems: list[str] = []
    first = later = 0
    for word, holders in terms.holders.items():
        result = found.get(word)
        if result is None:
            problems.append(f"search {word!r}: no answer from the search box")
            continue
        listed = result["paths"]
        for path in holders:
            if path not in listed:
                problems.append(f"search {word!r}: {path or '/'} holds it and is not listed "
                                f"({result['total']} results)")
                continue
            rank = listed.index(path)
            first += rank < FIRST_SCREEN
            later += rank >= FIRST_SCREEN
            above = [p or "/" for p in listed[:rank] if p not in holders]
            if above:
                problems.append(f"search {word!r}: {path or '/'} holds it and is listed at "
                                f"{rank + 1}, after {', '.join(above)}, which do not")
    return problems, first, later


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="test this built site instead of building")
    parser.add_argument("--chromium", default=None, help="Chromium executable")
    args = parser.parse_args(argv)
    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("error: Chromium not found (Debian: apt-get install -y chromium)", file=sys.stderr)
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print("error: Playwright not installed (pip install playwright)", file=sys.stderr)
        return 2
    config = load_config(ROOT)
    terms = search_terms(load_pages(config), config.docs_dir)
    with tempfile.TemporaryDirectory(prefix="wiki-search-") as tmp:
        site = args.site or Path(tmp) / "site"
        if args.site is None:
            build(site)
        server, base = serve(site)
        try:
            from playwright.sync_api import sync_playwright

            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium,
                                             args=CHROMIUM_FLAGS[1:], headless=True)
                try:
                    found = search(browser, base)
                    started = time.monotonic()
                    code = search_code_words(browser, base, terms.holders)
                    code_seconds = time.monotonic() - started
                    tops = first_code_top(browser, base, runbook_pages())
                    tables = tables_on_phone(browser, base, site_pages())
                finally:
                    browser.close()
        finally:
            server.shutdown()
            server.server_close()
    failures = 0
    for query, expected in QUERIES.items():
        pages = found.get(query, [])
        ok = any(p.startswith(expected) for p in pages)
        failures += not ok
        shown = ", ".join(dict.fromkeys(p or "/" for p in pages)) or "no results"
        print(f"{'ok  ' if ok else 'FAIL'} search {query!r}: expects {expected}; found {shown}")
    for query, expected in LANDING.items():
        pages = list(dict.fromkeys(found.get(query, [])))  # one entry per page, best first
        ok = any(p.startswith(expected) for p in pages[:LANDS])
        failures += not ok
        shown = ", ".join(p or "/" for p in pages[:3]) or "no results"
        print(f"{'ok  ' if ok else 'FAIL'} search {query!r} lands on {expected} first "
              f"(top 3: {shown})")
    problems, first, later = code_word_failures(terms, code)
    for problem in problems:
        print(f"FAIL {problem}")
    failures += len(problems)
    print(f"{'ok  ' if not problems and terms.pairs else 'FAIL'} search code words: "
          f"{len(terms.holders)} flags and names from {len(terms.pages)} pages, one query each "
          f"({code_seconds:.0f} s); {terms.pairs} pages that hold one listed before every page "
          f"that does not ({first} on the first screen of {FIRST_SCREEN}, "
          f"{later} reached by scrolling the list)")
    failures += not terms.pairs  # a check that searched nothing proved nothing
    for path, top in tops.items():
        ok = 0 <= top <= PHONE["height"] - FIRST_LINE
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} phone {path}: first command at {top} px "
              f"(screen {PHONE['height']} px)")
    wide = sum(r["wide"] for r in tables.values())
    for path, result in tables.items():
        for problem in result["bad"]:
            failures += 1
            print(f"FAIL phone {path or '/'}: {problem}")
    print(f"{'ok  ' if wide else 'FAIL'} phone tables: {len(tables)} pages at "
          f"{PHONE['width']} px, {wide} tables wider than the screen checked for scrolling and "
          "a sticky first column")
    failures += not wide  # a check that met no wide table proved nothing
    crumbs = sum(r["crumbs"] for r in tables.values())
    print(f"{'ok  ' if crumbs else 'FAIL'} phone breadcrumb: {crumbs} pages with a breadcrumb "
          f"checked for one line at {PHONE['width']} px")
    failures += not crumbs
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
