"""Generated result regions in pages: `<!-- wiki:results key=value … -->` … `<!-- wiki:end
sum=… -->`. Finds them from the page model's HTML comments, checks the cog-style checksum, and
replaces region bodies line by line, leaving every other byte of the page as it was."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.pages.parse import Page
from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.engines.shell import ShellSyntaxError, tokenize

START = "wiki:results"
END = "wiki:end"
VIEWS = ("serving", "history", "quality", "tradeoff", "kld", "capacity", "probes", "receipt")
KEYS = ("runbook", "view", "client", "arch", "with", "lengths")


@dataclass(frozen=True, slots=True)
class Region:
    """One results region. Lines are 1-based: `start` is the opening marker's line, `end` the
    closing marker's line; the body is the lines strictly between them."""

    path: str
    start: int
    end: int
    col: int  # column of the opening `<!--`
    end_col: int
    attrs: tuple[tuple[str, str], ...]
    sum: str | None  # the checksum written on the end marker, None when absent
    body: str  # body lines, each with its "\n"
    # Leading whitespace of the markers (regions inside admonitions): the shorter of the two,
    # so that a rewritten region is read back as the same region.
    indent: str

    @property
    def runbook(self) -> str | None:
        return self.get("runbook")

    @property
    def view(self) -> str:
        return self.get("view") or "serving"

    @property
    def client(self) -> str | None:
        return self.get("client")

    @property
    def archs(self) -> tuple[str, ...]:
        """`arch=sm90,sm120`: only records measured on these architectures (`cpu` for CPU-only
        hosts); empty = every record."""
        return tuple(a.strip() for a in (self.get("arch") or "").split(",") if a.strip())

    @property
    def compared(self) -> tuple[str, ...]:
        """`with=a,b`: the other runbooks a trade-off region draws beside `runbook`."""
        return tuple(a.strip() for a in (self.get("with") or "").split(",") if a.strip())

    def get(self, key: str) -> str | None:
        for k, v in self.attrs:
            if k == key:
                return v
        return None

    @property
    def edited(self) -> bool:
        """True when the end marker carries a sum and the body no longer matches it."""
        return self.sum is not None and checksum(self.body) != self.sum


def checksum(body: str) -> str:
    """First 10 hex digits of the SHA-256 of the body text (LF line endings)."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:10]


def _parse_marker(text: str) -> tuple[str, dict[str, str], list[str]] | None:
    """('results'|'end', attributes, malformed words) for a wiki marker comment, else None."""
    head, _, rest = text.partition(" ")
    if head not in (START, END):
        return None
    attrs: dict[str, str] = {}
    bad: list[str] = []
    try:
        words = [w.value for w in tokenize(rest) if not w.op]
    except ShellSyntaxError:
        return head, attrs, [rest]
    for word in words:
        key, eq, value = word.partition("=")
        if eq and key:
            attrs[key] = value
        else:
            bad.append(word)
    return head, attrs, bad


def find_regions(page: Page) -> tuple[list[Region], list[Diagnostic]]:
    """Regions of a page in order, and RGN001/RGN005 problems with its markers."""
    regions: list[Region] = []
    diags: list[Diagnostic] = []
    lines = page.lines
    open_marker: tuple[int, int, dict[str, str], str] | None = None  # line, col, attrs, indent

    def err(line: int, col: int, code: str, msg: str) -> None:
        diags.append(Diagnostic(page.path, line, col, code, msg))

    for comment in page.comments:
        parsed = _parse_marker(comment.text)
        if parsed is None:
            continue
        kind, attrs, bad = parsed
        line_text = lines[comment.line - 1] if comment.line - 1 < len(lines) else ""
        if comment.end_line != comment.line or not line_text.strip().startswith("<!--") or (
            not line_text.rstrip().endswith("-->")
        ):
            err(comment.line, comment.col, "RGN001",
                f"'{kind}' marker must stand alone on one line")
            continue
        if kind == START:
            if open_marker is not None:
                err(comment.line, comment.col, "RGN001",
                    f"results region opened inside the region opened on line {open_marker[0]}")
                continue
            for word in bad:
                err(comment.line, comment.col, "RGN005", f"malformed region attribute '{word}'")
            indent = line_text[: len(line_text) - len(line_text.lstrip())]
            open_marker = (comment.line, comment.col, attrs, indent)
            continue
        # END
        if open_marker is None:
            err(comment.line, comment.col, "RGN001",
                "'wiki:end' without a 'wiki:results' before it")
            continue
        start, col, start_attrs, indent = open_marker
        open_marker = None
        end_indent = line_text[: len(line_text) - len(line_text.lstrip())]
        indent = min(indent, end_indent, key=len)
        body_lines = lines[start : comment.line - 1]
        body = "".join(line + "\n" for line in body_lines)
        regions.append(Region(
            path=page.path, start=start, end=comment.line, col=col, end_col=comment.col,
            attrs=tuple(start_attrs.items()), sum=attrs.get("sum"), body=body, indent=indent,
        ))
    if open_marker is not None:
        err(open_marker[0], open_marker[1], "RGN001",
            "results region is not closed (add '<!-- wiki:end -->')")
    for region in regions:
        diags.extend(_attr_problems(region))
    return regions, diags


def _attr_problems(region: Region) -> list[Diagnostic]:
    if region.get("data") is not None:  # a data region: rendering/reported checks its own
        return []
    out = []
    for key, _value in region.attrs:
        if key not in KEYS:
            out.append(Diagnostic(region.path, region.start, region.col, "RGN005",
                                  f"unknown region attribute '{key}' (known: {', '.join(KEYS)})"))
    if not region.runbook:
        out.append(Diagnostic(region.path, region.start, region.col, "RGN005",
                              "results region names no runbook (add runbook=ID)"))
    if region.view not in VIEWS:
        out.append(Diagnostic(region.path, region.start, region.col, "RGN005",
                              f"unknown view '{region.view}' (known: {', '.join(VIEWS)})"))
    return out


def edited_diagnostic(region: Region) -> Diagnostic:
    return Diagnostic(
        region.path, region.start, region.col, "RGN002",
        "results region was edited by hand (its sum no longer matches); left as it is. Tables "
        "come from run records only: move hand-written text outside the markers, then delete "
        "'sum=…' from the end marker so the next render regenerates the region",
    )


def end_marker(body: str, indent: str = "") -> str:
    return f"{indent}<!-- {END} sum={checksum(body)} -->"


def indent_body(body: str, indent: str) -> str:
    """Prefix each non-empty line with the region's indentation (admonition bodies)."""
    if not indent:
        return body
    return "".join((indent + line if line.strip() else line) for line in body.splitlines(True))


_EOL = re.compile(r"\r\n|\r|\n")


def _split_lines(text: str) -> list[tuple[str, str]]:
    """(line, its end of line) pairs, numbered as the page model numbers lines: `\r\n`, `\r`
    and `\n` each end one line; the last pair has an empty end."""
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _EOL.finditer(text):
        out.append((text[pos : m.start()], m.group()))
        pos = m.end()
    out.append((text[pos:], ""))
    return out


def replace_regions(text: str, bodies: Mapping[int, str], regions: list[Region]) -> str:
    """`text` with the body of each region whose start line is in `bodies` replaced (bodies are
    unindented; the region's indentation is added) and its end marker re-summed. `text` is the
    file as stored: only the bytes of the replaced regions change, and they take the line ending
    of their opening marker, so a CRLF page stays CRLF and a byte-order mark stays."""
    lines = _split_lines(text)
    out: list[str] = []
    cursor = 0  # 0-based index of the next line to copy
    for region in sorted(regions, key=lambda r: r.start):
        if region.start not in bodies or region.end > len(lines):
            continue
        out.extend(a + b for a, b in lines[cursor : region.start])  # through the start marker
        eol = lines[region.start - 1][1] or "\n"
        body = indent_body(bodies[region.start], region.indent)
        out.extend(line + eol for line in (body.split("\n")[:-1] if body else []))
        out.append(end_marker(body, region.indent) + lines[region.end - 1][1])
        cursor = region.end  # skip the old body and end marker
    out.extend(a + b for a, b in lines[cursor:])
    return "".join(out)


NO_REGION_CODE = "RGN007"


def unshown_runbooks(pages: Iterable[Page], runbooks: Iterable[Runbook]) -> list[Diagnostic]:
    """A warning at the server block of each runbook that no results region of `pages` names
    (as `runbook=` or in `with=`): a run would write its record, and no page would show it."""
    named: set[str] = set()
    for page in pages:
        for region in find_regions(page)[0]:
            named.update([region.runbook or "", *region.compared])
    return [Diagnostic(
        rb.page, rb.server.line, rb.server.col, NO_REGION_CODE,
        f"runbook '{rb.id}' has no results region on any page, so its results would show "
        f"nowhere: add `<!-- wiki:results runbook={rb.id} view=serving -->` and "
        "`<!-- wiki:end -->` where the table belongs",
        Severity.WARNING) for rb in runbooks if rb.id not in named]
