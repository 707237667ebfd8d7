"""Material containers rewritten in syntax that GitHub renders: admonitions (`!!! warning
"Title"`) as GitHub alerts (`> [!WARNING]` and the title in bold), collapsible ones (`??? note`)
as `<details>` blocks, content tabs (`=== "vLLM"`) as headings one level below the heading
they sit under, over their dedented body.
The site draws the alerts as admonitions (wikitools.site.alerts) and the `<details>` blocks as
Material's collapsible boxes (md_in_html); on GitHub none of them shows as text or as code."""

from __future__ import annotations

import html
import re

from wikitools.pages.dialect import alert_type

_OPEN = re.compile(
    r'^(?P<indent>[ ]*)(?:(?P<admonition>!!!|\?\?\?\+?)[ \t]+(?P<kind>[\w-]+)(?:[ \t]+'
    r'(?P<atitle>"[^"]*"|\'[^\']*\'))?|(?P<tab>===[!+]?)[ \t]+(?P<ttitle>"[^"]*"|\'[^\']*\'))'
    r'[ \t]*$'
)
_HEADING = re.compile(r"^(?P<marks>#{1,6})[ \t]")
_FENCE = re.compile(r"^[ ]*(?P<fence>`{3,}|~{3,})")
# A results region's checksum covers its body as indented; one moved out of a container loses
# its sum, so that the next `wiki runbook render` writes the body afresh instead of calling it
# hand-edited.
_SUMMED_END = re.compile(r"^(?P<head>[ ]*<!--[ \t]*wiki:end)[ \t]+sum=\w+(?P<tail>[ \t]*-->)")


def convert(text: str) -> str:
    """`text` with every Material container rewritten (nested ones too); the rest unchanged."""
    return "\n".join(_convert_lines(text.split("\n")))


def _convert_lines(lines: list[str], level: int = 2) -> list[str]:
    out: list[str] = []
    i = 0
    fence: str | None = None
    while i < len(lines):
        line = lines[i]
        fence = _track_fence(line, fence)
        match = _OPEN.match(line) if fence is None else None
        if match is None:
            heading = _HEADING.match(line) if fence is None else None
            level = len(heading["marks"]) if heading else level
            out.append(line)
            i += 1
            continue
        indent = match["indent"]
        if out and out[-1].strip():
            out.append("")
        body, i = _body(lines, i + 1, len(indent) + 4)
        inner = [_SUMMED_END.sub(r"\g<head>\g<tail>", x) for x in _convert_lines(body, level)]
        out.extend(indent + x if x else "" for x in _container(match, inner, level))
        if i < len(lines) and lines[i].strip():  # else the next line would join the quote
            out.append("")
    return out


def _track_fence(line: str, fence: str | None) -> str | None:
    """The open fence after `line` (None outside code)."""
    found = _FENCE.match(line)
    if found is None:
        return fence
    marker = found["fence"]
    if fence is None:
        return marker
    return None if marker[0] == fence[0] and len(marker) >= len(fence) and \
        not line.strip()[len(marker):].strip() else fence


def _body(lines: list[str], start: int, width: int) -> tuple[list[str], int]:
    """The container's body (dedented by `width`) and the index after it: the lines indented by
    at least `width` and the blank lines between them."""
    end = start
    last = start
    while end < len(lines):
        line = lines[end]
        if line.strip():
            if len(line) - len(line.lstrip(" ")) < width:
                break
            last = end + 1
        end += 1
    return [x[width:] if x.strip() else "" for x in lines[start:last]], last


def _title(quoted: str | None) -> str:
    return quoted[1:-1] if quoted else ""


def _container(match: re.Match[str], body: list[str], level: int) -> list[str]:
    while body and not body[0].strip():
        body = body[1:]
    if match["tab"]:
        return [f"{'#' * min(level + 1, 6)} {_title(match['ttitle'])}", "", *body]
    kind = match["kind"].lower()
    title = _title(match["atitle"])
    if match["admonition"].startswith("???"):
        title = title or kind.capitalize()
        opened = " open" if match["admonition"].endswith("+") else ""
        return [f'<details class="{kind}"{opened} markdown>',
                f'<summary markdown="span">{html.escape(title, quote=False)}</summary>', "",
                *body, "",
                "</details>"]
    head = [f"> [!{alert_type(kind)}]"]
    if title:
        head += [f"> **{title}**", ">"]
    return head + [f"> {x}" if x else ">" for x in body]
