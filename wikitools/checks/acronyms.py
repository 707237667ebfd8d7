"""The acronym rule: on each page, the first prose use of a glossary term is expanded, as
`Expansion (ACR)` or `ACR (Expansion)`; all-caps tokens the glossary lacks are reported.

Codes: ACR001 (error) first use not expanded; ACR002 (error) unknown acronym: the contributing
guide asks for a glossary row with every new acronym, so the check insists on it (with a "did
you mean" when the glossary has a term whose expansion stands beside it or whose letters it
transposes: "MEO (Mixture of Experts)" → MoE); ACR004 (error) a term written all in capitals that
the glossary writes in mixed case (MOE for MoE), once per page.

Where it looks. Only `Page.spans` (prose the reader sees); code, HTML, comments, front matter,
URLs and link targets never reach it. Inside prose it skips, as a whole, any word that is a
file path (`foo/bar.py`, `./x`, `~/y`, `org/model-name`), an environment variable or other
identifier (anything with `_`: `NCCL_P2P_DISABLE`), a setting (`KEY=value`), a command-line
flag (`--tp`), a `$VAR`, a Docker image or other `name:tag`, a file name (`config.json`), an
e-mail or `@version`, and JSON objects (`{"key": …}`). Generated results regions
(`<!-- wiki:results … -->` … `<!-- wiki:end -->`) are skipped: their text comes from run records.

Where a use counts (the context policy):
* Body prose (paragraphs, list items, block quotes, admonition bodies) is where a term must be
  expanded: the first body-prose use of each term is ACR001 unless it is written out there, or
  an expanded use (in any context) came before it.
* Headings, table cells, link text, image alt text and admonition titles are labels. A use
  there is never flagged and does not count as the first use, but an expansion written there
  ("## Mixture of Experts (MoE)", a table cell "Key-Value (KV) cache") does satisfy the rule
  for later uses. A term used only in labels is not flagged: the site's tooltips explain it.

How a use is recognised (the match policy):
* The term as written in the glossary, case-sensitively (MoE, vLLM, PCIe); also its all-caps
  spelling (MOE, VLLM); terms with a digit match in any case (nvfp4, sm120, Fp8); a lowercase
  term also matches capitalised at the start of a sentence. Other lowercase spellings (moe,
  sglang, cuda) are not uses: they collide with English words and with package names, which
  belong in code spans anyway.
* Compound forms: plurals (PRs, MoEs), digits after a term ending in a letter (TP8, DCP4),
  slash lists (TP/DCP/MTP), hyphenated words (FP8-KV, NVFP4-quantized), a term before a
  capitalised word (RMSNorm, KVCache). Multi-word terms allow a space or hyphen between words
  and either case on the first letter of later words (CUDA graph). The longest term wins at a
  position (`CUDA Graph` over `CUDA`, `AG+RS` over `AG`, `NVFP4` is not a use of `FP4`).
* Expansions match case-insensitively, with any run of spaces, hyphens or punctuation between
  words, and each word tolerant of plural and suffix variants ("mixture-of-experts (MoE)",
  "Decode Context Parallel (DCP)" for "Decode Context Parallelism"); `ACR (a/an/the …)` too.
* A glossary row whose expansion contains the term itself ("vLLM inference engine") names a
  product; it gets a tooltip but its first use needs no expansion.

Unknown acronyms (ACR002, an error): a token of two or more capital letters A-Z and nothing else
(optionally followed by a plural "s") that is not a glossary term, reported once per page at
its first use, in any context. Tokens with digits (H200, GB202, A3B, EXL3) are model, product
and format names and are never reported; a few all-caps words that are not acronyms
(`NOT_ACRONYMS`: NOTE, TODO, DO NOT, units such as GB and MB, Roman numerals) are not either.
Add a real acronym to the glossary, even a familiar one (GPU, CPU), so it gets a tooltip.
"""

from __future__ import annotations

import bisect
import operator
import re
import string
from collections.abc import Callable, Container, Iterable, Iterator
from typing import NamedTuple

from wikitools.core.diagnostics import Diagnostic, sort_key
from wikitools.pages.glossary import Entry, Glossary
from wikitools.pages.parse import Page
from wikitools.runbook.blocks.regions import find_regions

BODY_CONTEXTS = frozenset({"paragraph"})

_NOT_ACRONYMS_TEXT = """
    A I OK TODO FIXME XXX TBD WIP NB PS FAQ README INDEX GLOSSARY LICENSE CHANGELOG CONTRIBUTING
    NOTE NOTES WARNING WARNINGS CAUTION IMPORTANT TIP TIPS INFO DANGER ERROR ERRORS FAIL FAILED
    FAILS PASS PASSED OKAY DONE YES NO NOT DO DONT AND OR THE IS IT IF ON OFF ALL ANY ONLY MUST
    NEVER ALWAYS NEW OLD SEE USE NOW THEN ONE TWO BUT FOR WITH WITHOUT TRUE FALSE NONE NULL
    STOP START DISABLED ENABLED BROKEN WORKS FIXED UPDATE UPDATED DEPRECATED EXPERIMENTAL
    B KB MB GB TB PB KIB MIB GIB TIB BPS KBPS MBPS GBPS MS US NS HZ KHZ MHZ GHZ W KW V MV
    II III IV VI VII VIII IX XI XII XIII XIV XV XX AM PM
    """
NOT_ACRONYMS = frozenset(_NOT_ACRONYMS_TEXT.split())

# Characters that may form one "word" with a match; the word decides whether the match is
# inside a path, identifier, flag, tag or setting.
_WORD_EDGE = re.compile(r"[^\s()\[\]{}<>\"'`,;!?*|]")
_WORD_RUN = re.compile(r"[^\s()\[\]{}<>\"'`,;!?*|]+")
_TRIM = ".:-"
_FILE_NAME = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,5}$")
_JSON = re.compile(r"\{[^{}\n]*\"[^\"\n]*\"\s*:[^{}\n]*\}")
_TAIL = r"(?:(?:es|s)?(?![A-Za-z0-9_])|(?<=[A-Za-z])(?=\d)|(?<=[A-Z])(?=[A-Z][a-z]))"
_WORDCHARS = frozenset(string.ascii_letters + string.digits + "_")
_STOPS = frozenset("()[]{}<>\"'`,;!?*|")  # with whitespace, the characters a word stops at
_CODE_CHAR = re.compile(r"[_=@:$/.]")  # what makes `_skip_word` look closer at a word
_LINE_COL = operator.itemgetter(1, 2)  # a TextSpan's (line, col)
_ARTICLE = r"(?:(?:an?|the)\s+)?"
# The letters that match an ASCII letter when case is ignored (the `re` documentation of
# IGNORECASE): İ ı ſ K.
_FOLDING = "\u0130\u0131\u017f\u212a"
_SUFFIX = re.compile(r"(?:isms?|ing|ed|es|s)$", re.IGNORECASE)


class Use(NamedTuple):
    """One recognised use of a glossary term (or an unknown acronym when entry is None)."""

    token: str
    entry: Entry | None
    line: int
    col: int
    context: str
    expanded: bool
    hint: str | None = None  # the term an unknown token's first use on the page probably means


class Matcher:
    """One compiled alternation of every term spelling (longest first) plus an all-caps
    fallback, scanned once over a page's prose; the matched spelling is looked up in a dict."""

    def __init__(self, glossary: Glossary) -> None:
        self.glossary = glossary
        self.exact: dict[str, Entry] = {}
        self.folded: dict[str, Entry] = {}  # casefolded key, for terms with a digit
        rests: dict[str, dict[str, int]] = {}  # first character -> rest pattern -> length
        for entry in glossary.entries:
            for spelling, firsts, rest, any_case in _spellings(entry.term):
                table = self.folded if any_case else self.exact
                key = _key(spelling) if any_case else spelling
                table.setdefault(key, entry)
                for first in firsts:
                    rests.setdefault(first, {}).setdefault(rest, len(spelling))
        self.regex = re.compile(f"(?P<t>{_grouped(rests)}){_TAIL}")
        self.known_upper = {e.term.upper() for e in glossary.entries}
        self._expansions: dict[tuple[str, bool], tuple[re.Pattern[str], re.Pattern[str]]] = {}
        self.seen: dict[str, Entry | None] = {}  # spelling -> entry, as looked up
        self.anagrams: dict[str, str] = {}  # sorted capitals -> the first term spelt with them
        self.openers: list[tuple[Entry, str]] = []  # (entry, its expansion's first stem)
        for entry in (e for e in glossary.entries if not e.name):
            if len(entry.term) > 2:
                self.anagrams.setdefault("".join(sorted(entry.term.upper())), entry.term)
            words = re.findall(r"[A-Za-z0-9]+", entry.expansion)[:1]
            self.openers.append((entry, _word_stem(words[0]).casefold() if words else ""))

    def entry_for(self, spelling: str) -> Entry | None:
        try:
            return self.seen[spelling]
        except KeyError:
            found = self.exact.get(spelling) or self.folded.get(_key(spelling))
            self.seen[spelling] = found
            return found

    def expansion_patterns(
        self, entry: Entry, folds: bool = False
    ) -> tuple[re.Pattern[str], re.Pattern[str]]:
        """The entry's expansion written before a `(` (searched for up to it), and after one
        (matched from the term on), case ignored. `folds`: the text holds one of the four
        non-ASCII letters that ignoring case makes ASCII ones (`_FOLDING`); only then is the
        whole pattern compiled ignoring case, which takes about four times as long (its
        character classes are then worked out over all of Unicode)."""
        cached = self._expansions.get((entry.term, folds))
        if cached is None:
            words = [_word_pattern(w, folds)
                     for w in re.findall(r"[A-Za-z0-9]+", entry.expansion)]
            expansion = (r"[^A-Za-z0-9()]+".join(words) if words
                         else f"(?i:{re.escape(entry.expansion)})")
            flags = re.IGNORECASE if folds else 0
            before = re.compile(
                rf"(?<![A-Za-z0-9]){expansion}[\s*_]*[(\[][\s*_]*$", flags)
            after = re.compile(
                rf"^[A-Za-z0-9]*[\s*_]*[(\[][\s*_]*(?i:{_ARTICLE}){expansion}(?![A-Za-z])", flags)
            cached = self._expansions[(entry.term, folds)] = (before, after)
        return cached


def _key(spelling: str) -> str:
    return " ".join(re.split(r"[\s-]+", spelling)).casefold()


_Spelling = tuple[str, tuple[str, ...], str, bool]


def _spellings(term: str) -> list[_Spelling]:
    """(spelling, first characters, regex for the rest, any_case) for every accepted spelling
    of a term. The regex is grouped by first character so that `re` can skip ahead to the
    characters that may start a term (one compiled pattern, no per-term scans)."""
    words = term.split()
    if len(words) > 1:
        later = [
            f"[{w[0].upper()}{w[0].lower()}]{re.escape(w[1:])}" if w[0].isalpha() else re.escape(w)
            for w in words[1:]
        ]
        rest = re.escape(words[0][1:]) + "".join(r"[\s-]+" + r for r in later)
        out: list[_Spelling] = [(" ".join(words), (words[0][0],), rest, True)]
        upper = [w.upper() for w in words]
        if upper != words:
            rest = re.escape(upper[0][1:]) + "".join(r"[\s-]+" + re.escape(w) for w in upper[1:])
            out.append((" ".join(upper), (upper[0][0],), rest, True))
        return out
    if any(c.isdigit() for c in term):
        firsts = tuple(sorted({term[0].upper(), term[0].lower()}))
        return [(term, firsts, f"(?i:{re.escape(term[1:])})", True)]
    single: list[_Spelling] = [(term, (term[0],), re.escape(term[1:]), False)]
    if term.upper() != term:
        single.append((term.upper(), (term[0].upper(),), re.escape(term.upper()[1:]), False))
    if term.islower() and term[0].isalpha():
        single.append((term.capitalize(), (term[0].upper(),), re.escape(term[1:]), False))
    return single


def _grouped(rests: dict[str, dict[str, int]]) -> str:
    """`A(?:G\\+RS|G|[A-Z]+)|B(?:F16|[A-Z]+)|…`: longest rest first; every capital letter also
    takes the all-caps fallback that finds unknown acronyms."""
    branches = []
    for first in sorted(set(rests) | set(string.ascii_uppercase)):
        options = sorted(rests.get(first, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        alts = [rest for rest, _ in options]
        if first in string.ascii_uppercase:
            alts.append("[A-Z]+")
        branches.append(re.escape(first) + "(?:" + "|".join(alts) + ")")
    return "|".join(branches)


def _word_stem(word: str) -> str:
    stem = _SUFFIX.sub("", word) if len(word) >= 5 and not word.isdigit() else word
    return stem if len(stem) >= 4 else word


def _word_pattern(word: str, folds: bool) -> str:
    long = len(word) >= 5 and not word.isdigit()
    stem = f"(?i:{re.escape(_word_stem(word))})"
    return stem + ((r"[a-z]*" if folds else r"[A-Za-z]*") if long else r"(?i:es|s)?")


def _skip_word(word: str, matcher: Matcher) -> bool:
    """True when the word around a match is code-like: path, identifier, flag, tag, setting."""
    if "_" in word or "=" in word or "@" in word or "://" in word or "$" in word:
        return True
    if word.startswith("-") and (word.startswith("--") or word[1:2].islower()):
        return True
    if ":" in word:
        return True
    if "/" in word:
        if word.startswith(("/", "./", "../", "~/", ".")):
            return True
        parts = [p for p in word.split("/") if p]
        for part in parts:
            if "." in part:
                return True
            if part[0].islower() and matcher.entry_for(part) is None:
                return True
        return False
    return bool(_FILE_NAME.search(word)) and matcher.entry_for(word) is None


class _Words:
    """The word around a match (a maximal run of `_WORD_EDGE` characters, or two runs joined
    by a multi-word match), and whether it is code-like. Runs are found once each, so a page
    that is one long run (`GPU-GPU-…`) costs linear time, not quadratic."""

    def __init__(self, text: str, matcher: Matcher) -> None:
        self.text = text
        self.matcher = matcher
        self.runs: list[tuple[int, int]] = [(-1, -1), (-1, -1)]  # the last two runs found
        self.last: tuple[int, int, bool] = (-1, -1, False)

    def _run(self, pos: int) -> tuple[int, int]:
        for a, b in self.runs:
            if a <= pos < b:
                return a, b
        text = self.text
        left = pos
        while left > 0 and _WORD_EDGE.match(text, left - 1):
            left -= 1
        m = _WORD_RUN.match(text, pos)
        found = (left, m.end() if m else pos + 1)
        self.runs = [self.runs[1], found]
        return found

    def skip(self, start: int, end: int) -> bool:
        text = self.text
        if start == 0 or text[start - 1] in _STOPS or text[start - 1].isspace():
            # the common cases, quickly: a word that starts here and holds no character that
            # `_skip_word` looks for is prose (first: a word of letters and digits alone)
            after = text[end : end + 1]
            if (not after or after in _STOPS or after.isspace()) and text[start:end].isalnum():
                return False
            run = _WORD_RUN.match(text, start)
            if run and run.end() >= end and not _CODE_CHAR.search(run.group().rstrip(_TRIM)):
                return False
        left = self._run(start)[0]
        right = self._run(end - 1)[1]
        if (left, right) == self.last[:2]:
            return self.last[2]
        word = self.text[left:right].rstrip(_TRIM)
        word = word.lstrip(":") if not word.startswith(("-", ".")) else word
        decision = _skip_word(word, self.matcher)
        self.last = (left, right, decision)
        return decision


def find_uses(page: Page, matcher: Matcher, settled: Container[str] = frozenset()) -> Iterator[Use]:
    """Every use of a glossary term and every unknown all-caps token in the page's prose,
    in document order, with whether it is written out next to its expansion (worked out only
    for terms not in `settled`, which the caller may grow while iterating)."""
    generated = [(r.start, r.end) for r in find_regions(page)[0]]
    spans = sorted(
        (s for s in page.spans if not any(a < s.line < b for a, b in generated))
        if generated else page.spans,
        key=_LINE_COL,
    )
    if not spans:
        return
    starts: list[int] = []
    parts: list[str] = []
    offset = 0
    for span in spans:
        starts.append(offset)
        parts.append(span.text)
        offset += len(span.text) + 1
    text = " ".join(parts)
    if "{" in text:
        text = _JSON.sub(lambda m: " " * len(m.group(0)), text)
    words = _Words(text, matcher)
    hinted: set[str] = set()
    folds = any(c in text for c in _FOLDING)
    size = len(text)
    entry_for, known_upper, seen = matcher.entry_for, matcher.known_upper, matcher.seen
    for m in matcher.regex.finditer(text):
        start, stop = m.span()
        if start and text[start - 1] in _WORDCHARS:
            continue  # inside a word: NVFP4 holds no use of FP4
        head = m.group("t")
        entry = seen[head] if head in seen else entry_for(head)
        if entry is None and (
            not (head.isascii() and head.isalpha() and head.isupper() and len(head) > 1)
            or head in NOT_ACRONYMS
            or head in known_upper
            or (stop < size and text[stop] in _WORDCHARS)
        ):
            continue
        if words.skip(start, stop):
            continue
        k = bisect.bisect_right(starts, start) - 1
        span = spans[k]
        col = span.col + (start - starts[k])
        if entry is None:
            hint = None if head in hinted else _near_miss(matcher, head, text, start, stop, folds)
            hinted.add(head)  # only the first use of an unknown token is reported
            yield Use(head, None, span.line, col, span.context, False, hint)
            continue
        expanded = False
        if entry.term not in settled and not entry.name:
            # Cheap tests first: an expansion needs a "(" or "[" right before or after.
            end = start + len(head)
            opens_before = text[max(0, start - 6) : start].rstrip(" *_").endswith(("(", "["))
            near = text[end : end + 12]
            opens_after = "(" in near or "[" in near
            if opens_before or opens_after:
                before, after = matcher.expansion_patterns(entry, folds)
                expanded = bool(
                    (opens_before and before.search(text, max(0, start - 400), start))
                    or (opens_after and after.match(text[end : end + 400]))
                )
        yield Use(head, entry, span.line, col, span.context, expanded)


def _near_miss(matcher: Matcher, token: str, text: str, start: int, end: int,
               folds: bool) -> str | None:
    """The glossary term an unknown acronym probably misspells: the one whose expansion is
    written beside it ("MEO (Mixture of Experts)" → MoE), else one with the same letters."""
    opens_before = text[max(0, start - 6) : start].rstrip(" *_").endswith(("(", "["))
    opens_after = "(" in text[end : end + 12] or "[" in text[end : end + 12]
    if opens_before or opens_after:
        window = (text[max(0, start - 400) : start] * opens_before + "\0"
                  + text[end : end + 400] * opens_after).casefold()
        for entry, opener in matcher.openers:  # an expansion stands only where its first word is
            if opener not in window:
                continue
            before, after = matcher.expansion_patterns(entry, folds)
            if (opens_before and before.search(text, max(0, start - 400), start)) or (
                    opens_after and after.match(text[end : end + 400])):
                return entry.term
    # by spelling, only the same letters in another order (MEO for MoE): a one-letter change
    # is as often another acronym (CPU and GPU, TPU and TP)
    return matcher.anagrams.get("".join(sorted(token.upper())))


def check_page(
    page: Page, matcher: Matcher, glossary_path: str, uses: Iterable[Use] | None = None
) -> list[Diagnostic]:
    """ACR001/ACR002 findings of one page; `uses` when the caller has found them already
    (with every expansion worked out), else they are found here."""
    diags: list[Diagnostic] = []
    settled: set[str] = set()
    unknown: set[str] = set()
    for use in find_uses(page, matcher, settled) if uses is None else uses:
        if use.entry is None:
            if use.token not in unknown:
                unknown.add(use.token)
                diags.append(
                    Diagnostic(
                        page.path,
                        use.line,
                        use.col,
                        "ACR002",
                        f'unknown acronym "{use.token}": did you mean "{use.hint}"? (or add a '
                        f"row for it to {glossary_path})" if use.hint else
                        f'unknown acronym "{use.token}": add a row for it to {glossary_path}',
                    )
                )
            continue
        term = use.entry.term
        if use.token != term and _case_variant(use.token, term) and use.token not in unknown:
            unknown.add(use.token)
            diags.append(Diagnostic(page.path, use.line, use.col, "ACR004",
                                    f'"{use.token}" is written "{term}" (as in {glossary_path})'))
        if term in settled or use.entry.name:
            continue
        if use.expanded:
            settled.add(term)
        elif use.context in BODY_CONTEXTS:
            settled.add(term)
            diags.append(
                Diagnostic(
                    page.path,
                    use.line,
                    use.col,
                    "ACR001",
                    f'first use of "{term}" is not expanded: write '
                    f'"{use.entry.expansion} ({term})" or "{term} ({use.entry.expansion})"',
                )
            )
    return diags


def _case_variant(token: str, term: str) -> bool:
    """`MOE` for the glossary's `MoE`, `VLLM` for `vLLM`: the all-caps spelling of a term that
    the glossary writes in mixed case (terms with digits match in any case on purpose; a plural
    or a digit suffix is not part of the spelling)."""
    if any(c.isdigit() for c in term) or term.upper() == term or " " in term:
        return False
    stem = token[: len(term)]
    return stem != term and stem == term.upper()


GENERATED_MARK = re.compile(r"\A\s*<!--\s*(?:generated|auto-generated|do not edit)", re.IGNORECASE)


def is_checked(page: Page, glossary_path: str) -> bool:
    """The glossary itself, INDEX.md and generated files are not checked."""
    name = page.path.rsplit("/", 1)[-1]
    if page.path == glossary_path or name == "INDEX.md":
        return False
    if page.front_matter.get("generated") is True:
        return False
    return not GENERATED_MARK.match(page.text[:200])


Rule = Callable[[Page, "Matcher"], list[Diagnostic]]


def check_pages(
    pages: Iterable[Page], glossary: Glossary, *, glossary_path: str | None = None,
    rule: Rule | None = None,
) -> list[Diagnostic]:
    """The findings of `rule` for every checked page, sorted; by default the first-use rule
    (ACR001/ACR002). The second-expansion rule is `wikitools.checks.expansions.check_page`."""
    gpath = glossary_path or glossary.path
    matcher = Matcher(glossary)
    check = rule or (lambda page, m: check_page(page, m, gpath))
    diags: list[Diagnostic] = []
    for page in pages:
        if is_checked(page, gpath):
            diags.extend(check(page, matcher))
    return sorted(diags, key=sort_key)
