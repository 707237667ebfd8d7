"""Text from records and logs made inert on a page: escaped for Markdown and HTML (`md_text`),
or shown as a code span that nothing inside can close (`md_code`). Every string a record or a
log supplies passes through one of them before it reaches a page or the site."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

# Markdown punctuation that can open an element inline: links and images ([ ] !), emphasis
# (* and _ at a word edge), code (`), attribute lists ({ }), table cells (|), escapes (\).
_MD_PUNCT = re.compile(r"[\\`*{}\[\]|]|(?<!\w)_|_(?!\w)")


def md_text(value: Any) -> str:
    """`value` as plain text inside a Markdown line: whitespace collapsed to single spaces,
    `& < >` as HTML entities (no raw HTML), Markdown punctuation backslash-escaped."""
    text = " ".join(str(value).split())
    text = html.escape(text, quote=False)
    return _MD_PUNCT.sub(lambda m: "\\" + m.group(0), text)


def md_code(value: Any) -> str:
    """`value` as an inline code span: whitespace collapsed, fenced by one backtick more than
    the longest run of backticks inside (padded when it starts or ends with one), and table
    pipes escaped. HTML inside a code span is shown, not run."""
    text = " ".join(str(value).split()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def escaped(value: Any) -> Any:
    """A free-form record value (a mapping of GPU state, markers, …) with every string in it
    passed through `md_text`; keys and non-strings as they are."""
    if isinstance(value, str):
        return md_text(value)
    if isinstance(value, Mapping):
        return {k: escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escaped(v) for v in value]
    return value
