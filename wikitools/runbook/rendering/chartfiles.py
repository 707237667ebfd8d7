"""Charts as `.svg` files beside the page, behind image links: GitHub drops inline `<svg>`, so a
region's figures are written to `charts/<page>-<hash>.svg` in the page's folder, named by their
content, each with its own colours (light and dark), since a page's stylesheet does not reach
into an image."""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass

FOLDER = "charts"
_FIGURE = re.compile(
    r'^(?P<indent>[ \t]*)<div class="wiki-charts" markdown="0">(?P<inner>.*)</div>$', re.MULTILINE)
_SVG = re.compile(r"<svg\b.*?</svg>", re.DOTALL)
_CAPTION = re.compile(r'<p class="wiki-chart-caption">(?P<text>.*?)</p>')
_LABEL = re.compile(r'aria-label="(?P<label>[^"]*)"')
_VIEWBOX = re.compile(r'viewBox="0 0 (?P<w>[\d.]+) (?P<h>[\d.]+)"')
_PALETTE = ("#3d6e00", "#1565c0", "#c2410c", "#7b1fa2", "#00838f", "#6d4c41")
_DARK = ("#a6dc4a", "#64b5f6", "#fb923c", "#ce93d8", "#4dd0e1", "#bcaaa4")
_HEAT = ("0.1", "0.3", "0.5", "0.75", "0.95")


def _style() -> str:
    light = "".join(f".wiki-s{i}{{stroke:{c};fill:{c}}}" for i, c in enumerate(_PALETTE))
    dark = "".join(f".wiki-s{i}{{stroke:{c};fill:{c}}}" for i, c in enumerate(_DARK))
    heat = "".join(f".wiki-heat{i} rect{{fill-opacity:{o}}}" for i, o in enumerate(_HEAT))
    return ("<style>svg{color:#1f2328}polyline{fill:none}.wiki-noisy{fill:#ffffff;stroke-width:2}"
            f"{light}[class^=\"wiki-heat\"] rect{{fill:{_PALETTE[0]}}}{heat}"
            ".wiki-heat-na rect{fill:currentColor;fill-opacity:0.05}"
            "[class^=\"wiki-heat\"] text{fill:currentColor}"
            ".wiki-heat3 text,.wiki-heat4 text{fill:#ffffff}"
            "@media (prefers-color-scheme: dark){svg{color:#e6edf3}"
            f".wiki-noisy{{fill:#0d1117}}{dark}[class^=\"wiki-heat\"] rect{{fill:{_DARK[0]}}}"
            ".wiki-heat3 text,.wiki-heat4 text{fill:#15181b}}</style>")


STYLE = _style()


@dataclass(frozen=True, slots=True)
class ChartFile:
    path: str  # POSIX, relative to the wiki root
    text: str


def prefix(page_path: str) -> str:
    """The path every chart file of a page starts with: `wiki/x/charts/<page stem>-`."""
    folder, name = posixpath.split(page_path)
    return posixpath.join(folder, FOLDER, name.rsplit(".", 1)[0] + "-")


def standalone(svg: str) -> str:
    """An inline chart as a file of its own: a size and its own colours."""
    size = _VIEWBOX.search(svg)
    head = svg.index(">") + 1
    sized = svg[:4] + (f' width="{size["w"]}" height="{size["h"]}"' if size else "") + svg[4:head]
    return sized + STYLE + svg[head:] + "\n"


def externalize(body: str, page_path: str) -> tuple[str, list[ChartFile]]:
    """`body` with each inline figure replaced by image links to its charts, and the files."""
    files: list[ChartFile] = []

    def replace(match: re.Match[str]) -> str:
        indent, inner = match["indent"], match["inner"]
        links = []
        for svg in _SVG.findall(inner):
            text = standalone(svg)
            digest = hashlib.sha256(text.encode()).hexdigest()[:10]
            path = prefix(page_path) + digest + ".svg"
            files.append(ChartFile(path, text))
            label = _LABEL.search(svg)
            alt = re.sub(r"([\[\]\\])", r"\\\1", label["label"] if label else "chart")
            links.append(f"![{alt}]({posixpath.relpath(path, posixpath.dirname(page_path))})")
        caption = _CAPTION.search(inner)
        lines = [" ".join(links)] + (["", caption["text"]] if caption else [])
        return "\n".join(indent + line if line else "" for line in lines)

    return _FIGURE.sub(replace, body), files


def is_chart_of(name: str, page_path: str) -> bool:
    """Whether a file name in the charts folder is one of this page's charts."""
    stem = posixpath.basename(prefix(page_path))
    return re.fullmatch(re.escape(stem) + r"[0-9a-f]{10}\.svg", name) is not None


def referenced(text: str, page_path: str) -> set[str]:
    """The chart files of this page that `text` links to (paths relative to the root)."""
    folder = posixpath.join(posixpath.dirname(page_path), FOLDER)
    names = re.findall(rf"\({FOLDER}/([^)/\s]+\.svg)\)", text)
    return {posixpath.join(folder, n) for n in names if is_chart_of(n, page_path)}
