"""The second-expansion rule: a term is written out once per page, at its first use; writing
it out again ("Mixture of Experts (MoE)" twice) is ACR003.

Code: ACR003 (warning) a glossary term expanded a second time on the same page, located at the
second expansion, naming the line of the first.

It reads the same uses as the first-use rule (`wikitools.checks.acronyms.find_uses`: prose
only, code and generated results regions skipped, the same match and expansion policies), so the two
rules never disagree about what counts as a use or an expansion. Every context counts here,
labels included: an expansion in a heading or a status box title followed by another in the
body is the repetition a reader notices.
"""

from __future__ import annotations

from collections.abc import Iterable

from wikitools.checks.acronyms import Matcher, Use, find_uses
from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.pages.parse import Page

CODE = "ACR003"


def check_page(
    page: Page, matcher: Matcher, uses: Iterable[Use] | None = None
) -> list[Diagnostic]:
    """ACR003 for every expansion of a term after its first expansion on the page (`uses`:
    the page's uses when the caller has found them already)."""
    first: dict[str, int] = {}
    diags: list[Diagnostic] = []
    for use in find_uses(page, matcher) if uses is None else uses:
        if use.entry is None or not use.expanded:
            continue
        term = use.entry.term
        if term not in first:
            first[term] = use.line
            continue
        diags.append(
            Diagnostic(
                page.path,
                use.line,
                use.col,
                CODE,
                f'"{term}" is expanded again (first expanded on line {first[term]}): '
                f'write "{use.token}" alone',
                Severity.WARNING,
            )
        )
    return diags
