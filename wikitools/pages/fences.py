"""Fence info strings with an attribute list: read in both forms, written in one.

`bash { #id .runbook-server engine=vllm }` is the canonical form: GitHub and every CommonMark
renderer take the first word as the language, and pymdownx.superfences reads the braces. The
older `{ .bash #id … }` form is still read (the language is its first class), but outside MkDocs
its language becomes `{` and the block loses its highlighting."""

from __future__ import annotations

import re

from wikitools.pages.page import FenceAttrs

__all__ = ["block_hash_info", "format_fence_info", "modernise_info", "parse_fence_info"]

_ATTR_TOKEN = re.compile(
    r"""\s*(?:(?P<id>\#[^\s}]+)|(?P<cls>\.[^\s}]+)|(?P<key>[A-Za-z_][\w:.-]*)\s*=\s*"""
    r"""(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s}"']+)))"""
)
# The language superfences accepts before an attribute list (its own pattern for a language).
_LANG_FIRST = re.compile(r"(?P<lang>[\w#+-][\w#.+-]*)[ \t]*(?=\{)")


def parse_fence_info(info: str, info_col: int = 1) -> FenceAttrs:
    """Parse a fence info string. `info_col` is the column of `info[0]` in the source line,
    so that option columns point into the file. In both forms the language is `lang` and the
    first entry of `classes`."""
    stripped = info.strip()
    lead = len(info) - len(info.lstrip())
    first = _LANG_FIRST.match(stripped)
    if first:
        lang: str | None = first["lang"]
        brace_at = first.end()
    elif stripped.startswith("{"):
        lang, brace_at = None, 0
    else:
        return FenceAttrs(lang=stripped.split()[0] if stripped else None)
    after = stripped[brace_at:]
    close = after.rfind("}")
    if close == -1:
        return FenceAttrs(lang=lang, brace=True, lang_first=lang is not None,
                          error="attribute list opened with '{' is never closed")
    inner = after[1:close]
    base = info_col + lead + brace_at + 1
    classes: list[str] = [lang] if lang else []
    options: list[tuple[str, str, int]] = []
    ident: str | None = None
    pos = 0
    while pos < len(inner):
        if not inner[pos:].strip():
            break
        m = _ATTR_TOKEN.match(inner, pos)
        if not m:
            bad = pos + len(inner[pos:]) - len(inner[pos:].lstrip())
            return FenceAttrs(
                lang=lang, brace=True, lang_first=lang is not None,
                error=f"cannot read attribute at column {base + bad}: {inner[bad:]!r}",
            )
        if m["id"]:
            ident = m["id"][1:]
        elif m["cls"]:
            classes.append(m["cls"][1:])
        else:
            value = next(v for v in (m["dq"], m["sq"], m["bare"]) if v is not None)
            options.append((m["key"], value, base + m.start("key")))
        pos = m.end()
    return FenceAttrs(
        lang=classes[0] if classes else None, id=ident, classes=tuple(classes),
        options=tuple(options), brace=True, lang_first=lang is not None,
    )


def format_fence_info(lang: str, inner: str) -> str:
    """The canonical info string: `LANG { INNER }` (INNER: `#id .class key=value …`)."""
    return f"{lang} {{ {inner.strip()} }}"


def _split_legacy(info: str) -> tuple[str, str] | None:
    """(`bash`, `#id .runbook-server …`) for a readable `{ .bash #id .runbook-server … }`."""
    stripped = info.strip()
    attrs = parse_fence_info(stripped)
    if not attrs.brace or attrs.lang_first or attrs.error or not attrs.lang:
        return None
    m = re.fullmatch(r"\{\s*\.(?P<lang>[^\s}]+)(?P<rest>.*)\}", stripped, re.S)
    if m is None or m["lang"] != attrs.lang:
        return None
    return m["lang"], m["rest"]


def modernise_info(info: str) -> str | None:
    """`bash { #id … }` for an older `{ .bash #id … }` info string; None when `info` is not
    in the older form (or its language is not its first class)."""
    parts = _split_legacy(info)
    return format_fence_info(*parts) if parts else None


def block_hash_info(info: str) -> str:
    """The info string a runbook's block hash covers. Both forms of one attribute list give
    the same text (the older form's, which records made before the canonical form carry), so
    moving a fence to the canonical form does not make its measured tables stale."""
    stripped = info.strip()
    attrs = parse_fence_info(stripped)
    if not (attrs.brace and attrs.lang_first and attrs.lang) or attrs.error:
        return stripped
    first = _LANG_FIRST.match(stripped)
    assert first is not None  # lang_first means the pattern matched
    after = stripped[first.end():].strip()
    inner = after[1:after.rfind("}")].strip()
    return "{ ." + attrs.lang + (" " + inner if inner else "") + " }"
