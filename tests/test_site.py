"""The published site: a real `mkdocs build --strict`, then checks on the generated HTML.

One build of a temporary copy of the project (config, theme overrides, run records and the
whole wiki/; the site extension and the `wiki` plugin come from the installed package) plus one
self-test page that uses every feature the checks look for. The checks then run over that page
and over every real page of the wiki.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from harness import make_tree
from mkdocs.utils import yaml_load

from wikitools.pages.glossary import abbreviation_lines, load_glossary
from wikitools.pages.parse import read_page

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = Path(sys.executable).parent / "mkdocs"
SELFTEST = "zz-site-selftest"
ALLOWED_STATUS = ("measured", "reviewed", "experimental", "historical", "unverified")

# Conditional loaders inside the theme's JavaScript bundle: mermaid is fetched only for pages
# with a mermaid diagram (checked below: none), the ResizeObserver polyfill only by browsers
# that lack ResizeObserver.
JS_LOADER_ALLOWED = ("https://unpkg.com/mermaid@", "https://unpkg.com/resize-observer-polyfill")
CDN_HOSTS = re.compile(
    r"https?://(?:unpkg\.com|cdn\.jsdelivr\.net|cdnjs\.cloudflare\.com|fonts\.googleapis\.com"
    r"|fonts\.gstatic\.com|polyfill\.io|[a-z0-9.-]*cdn[a-z0-9.-]*\.[a-z]+)/[^\s\"'`)]*"
)
LEAKS = (
    "{ .bash",
    "bash {",
    "{.bash",
    ".runbook-server",
    ".runbook-client",
    "runbook-server engine=",
    "for=",
    "sweep=",
)


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", DISABLE_MKDOCS_2_WARNING="true")
    env.pop("SOURCE_DATE_EPOCH", None)
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _copy_project(dest: Path, *, whole_wiki: bool) -> None:
    shutil.copy2(ROOT / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copy2(ROOT / "wiki.yml", dest / "wiki.yml")
    for name in ("overrides", "runbooks"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name)
    if whole_wiki:
        shutil.copytree(ROOT / "wiki", dest / "wiki")
    else:
        shutil.copytree(ROOT / "wiki" / "assets", dest / "wiki" / "assets")
        shutil.copy2(ROOT / "wiki" / "glossary.md", dest / "wiki" / "glossary.md")
        make_tree(dest, {"wiki/index.md": "# Home\n\nA page.\n"})


def _first_abbreviation() -> tuple[str, str]:
    """A plain term of the glossary and the tooltip the site extension gives it."""
    glossary = load_glossary(ROOT / "wiki" / "glossary.md", ROOT)
    text = abbreviation_lines(glossary)
    m = re.search(r"^\*\[([A-Za-z][A-Za-z0-9]*)\]:[ \t]*(.+)$", text, re.MULTILINE)
    assert m, "the glossary defines no plain abbreviation"
    return m.group(1), m.group(2).strip()


def _selftest_page(term: str) -> str:
    return f"""---
title: Site self-test
status: experimental
---
# Site self-test

The {term} term gets a tooltip.

```bash {{ #site-selftest-rb .runbook-server engine=vllm gpus=2 arch=sm120 min_mem_gib=90 }}
NCCL_P2P_DISABLE=1 vllm serve openai/gpt-oss-120b \\
  --tensor-parallel-size 2 --port 8000
```

```{{ .bash .runbook-client for=site-selftest-rb name=throughput sweep="CONCURRENCY=1,8" }}
vllm bench serve --model openai/gpt-oss-120b --max-concurrency "${{CONCURRENCY:-8}}"
```

<!-- wiki:results runbook=site-selftest-rb view=serving client=throughput -->
| Concurrency | Output tok/s |
|---:|---:|
| 1 | 182.4 |
| 8 | 1,054.3 |

Measured on 2 RTX PRO 6000.
{{ .wiki-provenance }}
<!-- wiki:end sum=0000000000 -->
"""


class _Text(HTMLParser):
    """Visible text outside <pre>, <code>, <script>, <style>, plus every asset reference."""

    SKIP = frozenset({"pre", "code", "script", "style", "template"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.parts: list[str] = []
        self.assets: list[tuple[str, str]] = []
        self.abbrs: list[tuple[str, str]] = []
        self._abbr: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag in self.SKIP:
            self.depth += 1
        if tag == "abbr":
            self._abbr = a.get("title", "")
        for key in ("src", "srcset", "poster", "data"):
            if key in a:
                self.assets.append((tag, a[key]))
        if tag == "link" and "href" in a:
            rel = a.get("rel", "")
            if any(
                r in rel.split()
                for r in ("stylesheet", "icon", "preload", "manifest", "modulepreload", "prefetch")
            ):
                self.assets.append((tag, a["href"]))
        if "style" in a:
            for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", a["style"]):
                self.assets.append((tag, url))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.depth:
            self.depth -= 1
        if tag == "abbr":
            self._abbr = None

    def handle_data(self, data: str) -> None:
        if self._abbr is not None:
            self.abbrs.append((data, self._abbr))
        if not self.depth:
            self.parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(self.parts)


def _parse(path: Path) -> _Text:
    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _page_html(site: Path, src: str) -> Path:
    rel = re.sub(r"(^|/)index\.md$", r"\1", src)
    rel = re.sub(r"\.md$", "/", rel)
    return site / rel / "index.html"


def _front_matter(text: str) -> dict[str, object]:
    m = re.match(r"---\r?\n(.*?)\r?\n---\r?\n", text, re.DOTALL)
    if not m:
        return {}
    try:
        data = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(project copy, site dir) of one strict build with the self-test page added."""
    root = tmp_path_factory.mktemp("project")
    _copy_project(root, whole_wiki=True)
    term, _ = _first_abbreviation()
    make_tree(root, {f"wiki/{SELFTEST}.md": _selftest_page(term)})
    site = tmp_path_factory.mktemp("site")
    proc = _build(root, site)
    assert proc.returncode == 0, f"strict build failed:\n{proc.stdout}\n{proc.stderr}"
    return root, site


def _pages(root: Path) -> list[tuple[str, str]]:
    docs = root / "wiki"
    return [
        (p.relative_to(docs).as_posix(), p.read_text(encoding="utf-8"))
        for p in sorted(docs.rglob("*.md"))
    ]


def test_config_is_strict_and_offline() -> None:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = yaml_load(text)  # MkDocs' own loader: resolves !ENV and the theme's !! tags
    assert config["strict"] is True
    assert config["docs_dir"] == "wiki"
    assert config["theme"]["font"] is False
    assert "nav" not in config, "a hand-written nav breaks when pages are added"
    for key in ("omitted_files", "not_found", "absolute_links", "unrecognized_links", "anchors"):
        assert config["validation"][key] == "warn"
    plugins = {next(iter(p)) if isinstance(p, dict) else p: p for p in config["plugins"]}
    assert plugins["privacy"]["privacy"]["assets_fetch"] is False
    assert sorted(config["extra"]["status"]) == sorted(ALLOWED_STATUS)


@pytest.mark.xdist_group("site-build")  # one strict build for all of them
def test_abbreviation_tooltip_on_page(built: tuple[Path, Path]) -> None:
    _, site = built
    term, expansion = _first_abbreviation()
    page = _parse(_page_html(site, f"{SELFTEST}.md"))
    assert (term, html.unescape(expansion)) in page.abbrs
    # The site extension hands the glossary to abbr; no definition line shows as text.
    assert f"*[{term}]" not in page.text


@pytest.mark.xdist_group("site-build")
def test_abbreviations_on_real_pages(built: tuple[Path, Path]) -> None:
    root, site = built
    term, _ = _first_abbreviation()
    pattern = re.compile(rf"(?<![\w`]){re.escape(term)}(?![\w`])")
    pages = [src for src, text in _pages(root) if src != f"{SELFTEST}.md" and pattern.search(text)]
    for src in pages[:20]:
        parsed = _parse(_page_html(site, src))
        if any(word == term for word, _ in parsed.abbrs):
            return
    if pages:
        pytest.fail(f"no real page that uses {term} shows it as <abbr>: {pages[:5]}")


@pytest.mark.xdist_group("site-build")
def test_status_badges(built: tuple[Path, Path]) -> None:
    root, site = built
    checked = 0
    for src, text in _pages(root):
        status = _front_matter(text).get("status")
        if status not in ALLOWED_STATUS:
            continue
        out = _page_html(site, src).read_text(encoding="utf-8")
        assert f'class="wiki-status wiki-status--{status}"' in out, f"{src}: no status chip"
        label = re.search(r'<span class="wiki-status__label">([^<]*)</span>', out)
        assert label is not None, f"{src}: chip without a label"
        if status == "reviewed":  # a review says when it was done
            assert label.group(1) == f"Reviewed {_front_matter(text)['reviewed']}", src
        if _front_matter(text).get("hub") is True:
            assert "least proven status of its family" in out, f"{src}: hub chip"
        checked += 1
    assert checked >= 1
    page = _page_html(site, f"{SELFTEST}.md").read_text(encoding="utf-8")
    # The theme's nav badge, with our icon rules in the stylesheet.
    assert 'class="md-status md-status--experimental"' in page
    css = (site / "assets" / "stylesheets" / "wikitools.css").read_text(encoding="utf-8")
    for status in ALLOWED_STATUS:
        assert f".md-status--{status}::after" in css
        assert f"--wiki-status--{status}: url('data:image/svg+xml" in css


_RUNBOOK_DIV = re.compile(
    r'<div(?P<attrs>[^>]*class="(?P<cls>[^"]*\brunbook-(?P<kind>server|client)\b[^"]*)"[^>]*)>'
    r"\s*<pre>(?:<span></span>)?<code>(?P<code>.*?)</code></pre>",
    re.DOTALL,
)


def _runbook_blocks(out: str) -> list[re.Match[str]]:
    return list(_RUNBOOK_DIV.finditer(out))


@pytest.mark.xdist_group("site-build")
def test_runbook_blocks_render_as_code(built: tuple[Path, Path]) -> None:
    """The server block is written `bash { … }` (the canonical form), the client block in the
    older `{ .bash … }` form: both render as highlighted bash with their id and classes."""
    _, site = built
    out = _page_html(site, f"{SELFTEST}.md").read_text(encoding="utf-8")
    blocks = _runbook_blocks(out)
    assert [b.group("kind") for b in blocks] == ["server", "client"]
    server, client = blocks
    assert 'id="site-selftest-rb"' in server.group("attrs")
    assert "id=" not in client.group("attrs")
    for block in blocks:
        classes = block.group("cls").split()
        assert "highlight" in classes and "language-bash" in classes
        code = html.unescape(re.sub(r"<[^>]+>", "", block.group("code")))
        assert "{" not in code.splitlines()[0] or "${" in code  # no fence header in the code
    server_code = html.unescape(re.sub(r"<[^>]+>", "", server.group("code")))
    assert server_code == (
        "NCCL_P2P_DISABLE=1 vllm serve openai/gpt-oss-120b \\\n"
        "  --tensor-parallel-size 2 --port 8000\n"
    )
    assert '<span class="nv">NCCL_P2P_DISABLE</span>' in server.group("code")  # highlighted
    visible = _parse(_page_html(site, f"{SELFTEST}.md")).text
    for leak in LEAKS:
        assert leak not in visible, f"fence attributes leak into the page: {leak!r}"
    # The copy button is added by the theme's script to every highlighted block.
    assert '"content.code.copy"' in out


@pytest.mark.xdist_group("site-build")
def test_runbook_blocks_on_real_pages(built: tuple[Path, Path]) -> None:
    root, site = built
    for src, _ in _pages(root):
        if src == f"{SELFTEST}.md":
            continue
        page = read_page(root / "wiki" / src, root)
        expected = [
            kind
            for block in page.code_blocks
            if block.attrs is not None
            for kind in ("server", "client")
            if f"runbook-{kind}" in block.attrs.classes
        ]
        out_path = _page_html(site, src)
        visible = _parse(out_path).text
        for leak in ("{ .bash", "bash {", "runbook-server engine=", ".runbook-client for="):
            assert leak not in visible, f"{src}: fence attributes leak into the page: {leak!r}"
        got = [b.group("kind") for b in _runbook_blocks(out_path.read_text(encoding="utf-8"))]
        assert got == expected, f"{src}: runbook blocks {expected} rendered as {got}"


@pytest.mark.xdist_group("site-build")
def test_results_table_and_provenance(built: tuple[Path, Path]) -> None:
    _, site = built
    out = _page_html(site, f"{SELFTEST}.md").read_text(encoding="utf-8")
    assert '<td style="text-align: right;">1,054.3</td>' in out
    assert re.search(r"<p class=\"wiki-provenance\">Measured on .*</p>", out)
    assert "wiki:results" in out  # the markers stay as comments, invisible
    assert "wiki:results" not in _parse(_page_html(site, f"{SELFTEST}.md")).text


@pytest.mark.xdist_group("site-build")
def test_no_external_assets(built: tuple[Path, Path]) -> None:
    _, site = built
    problems: list[str] = []
    for path in sorted(site.rglob("*.html")):
        parsed = _parse(path)
        for tag, url in parsed.assets:
            if re.match(r"\s*(https?:)?//", url):
                problems.append(f"{path.relative_to(site)}: <{tag}> loads {url}")
        if 'class="mermaid"' in path.read_text(encoding="utf-8"):
            problems.append(
                f"{path.relative_to(site)}: mermaid diagram loads its script from a CDN"
            )
    for path in sorted(site.rglob("*.css")):
        text = path.read_text(encoding="utf-8")
        for url in re.findall(r"url\(\s*['\"]?((?:https?:)?//[^'\")]+)", text):
            problems.append(f"{path.relative_to(site)}: url({url})")
        for url in re.findall(r"@import\s+(?:url\()?['\"]?((?:https?:)?//[^'\")\s;]+)", text):
            problems.append(f"{path.relative_to(site)}: @import {url}")
    for path in sorted(site.rglob("*.js")):
        for url in CDN_HOSTS.findall(path.read_text(encoding="utf-8")):
            if not url.startswith(JS_LOADER_ALLOWED):
                problems.append(f"{path.relative_to(site)}: {url}")
    assert not problems, "\n".join(problems)


def test_external_asset_fails_strict_build(tmp_path: Path) -> None:
    """An external image or script on any page fails the build (privacy plugin, no fetching)."""
    _copy_project(tmp_path, whole_wiki=False)
    image, script = "https://example.com/diagram.png", "https://cdn.example.com/lib.js"
    (tmp_path / "wiki" / "external.md").write_text(
        f'# External\n\n![diagram]({image})\n\n<script src="{script}"></script>\n',
        encoding="utf-8",
    )
    proc = _build(tmp_path, tmp_path / "site")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert f"External file: {image}" in output, output
    assert f"External file: {script}" in output, output


def test_broken_link_fails_strict_build(tmp_path: Path) -> None:
    _copy_project(tmp_path, whole_wiki=False)
    (tmp_path / "wiki" / "links.md").write_text(
        "# Links\n\n[gone](nowhere.md) and [anchor](index.md#no-such-heading)\n", encoding="utf-8"
    )
    proc = _build(tmp_path, tmp_path / "site")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "nowhere.md" in output and "no-such-heading" in output
