"""Masking of secrets (tokens, keys, passwords) in everything the tools store or print: commands,
environments, log lines, failure messages and run records.

`mask_text` is the one masking function. It replaces secret *values* only: shell words are found
with the project's shell reader, and every replacement swaps a run of plain characters (no
quotes, blanks, operators, `$` or backslashes) for `***`, so a masked command splits into exactly
the same words and operators as the command that runs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from wikitools.runbook.engines.shell import ShellSyntaxError, Word, tokenize

MASK = "***"

# --------------------------------------------------------------------------- secret names

_LAST = {"token", "secret", "password", "passwd", "pass", "pwd", "key", "apikey", "auth",
         "credential", "credentials", "cookie", "passphrase"}
_ANY = {"secret", "password", "passwd", "credential", "credentials", "apikey", "passphrase"}
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Names written as one word (`PGPASSWORD`, `MYTOKEN`, `HFTOKEN`) end with one of these, and
# variables that tools read as a password by name.
_ENDS = ("token", "password", "passwd", "secret", "apikey", "passphrase", "credentials")
_KNOWN = {"sshpass", "pgpass", "rsync_password", "mysql_pwd", "redis_auth"}


def _parts(name: str) -> list[str]:
    return [p.lower() for p in _PART.findall(name)]


def is_secret(name: str) -> bool:
    """Whether a variable, flag or key name names a secret: `HF_TOKEN`, `--api-key`,
    `DB_PASS`, `apiKey`, `AWS_SECRET_ACCESS_KEY` (not `--max-tokens`, `--tokenizer`)."""
    parts = _parts(name)
    if not parts:
        return False
    if name.lower().lstrip("-") in _KNOWN or parts[-1].endswith(_ENDS):
        return True
    if parts[-1] in _LAST or _ANY.intersection(parts):
        return True
    return ("api", "key") in pairwise(parts)


# --------------------------------------------------------------------------- values

# A run of characters that carries no shell meaning: swapping it for `***` keeps every word,
# quote and operator where it was. (`*` is only a pattern character inside a word.)
_PLAIN = r"[^\s'\"\\;&|<>()`$,{}\[\]#]"
_RUN = re.compile(f"{_PLAIN}+")
_REFERENCE = re.compile(r"""^(["']?)\$(?:\{\w+\}|\w+)\1$""")  # $NAME, ${NAME}, "$NAME"
_DEFAULT = re.compile(r"^(\$\{\w+:?[-=])([^}$`'\"\\]*)\}$")


def _blank(raw: str) -> str:
    """The raw shell text of a value with its characters masked and its quoting kept:
    `abc` → `***`, `"a b"` → `"***"`, `'x'` → `'***'`. References to variables (`$HF_TOKEN`)
    and command substitutions are kept: they reveal nothing."""
    if not raw or raw == MASK or _REFERENCE.match(raw):
        return raw
    m = _DEFAULT.match(raw)
    if m:  # ${HF_TOKEN:-hf_…}: the default is a value
        return f"{m[1]}{_blank(m[2])}}}" if m[2] else raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            out.append(raw[i : i + 2])  # an escaped character stays as written
            i += 2
            continue
        if c in "'\"":
            end = raw.find(c, i + 1)
            inner = raw[i + 1 : end] if end != -1 else ""
            if end == -1 or (c == '"' and re.search(r"[\\$`]", inner)):
                out.append(raw[i:])  # unusual quoting: leave the rest as written
                break
            out.append(f"{c}{MASK}{c}" if inner else f"{c}{c}")
            i = end + 1
            continue
        if raw.startswith("$'", i):  # ANSI-C quoting: a value, not an expansion
            j = i + 2
            while j < n and raw[j] != "'":
                j += 2 if raw[j] == "\\" else 1
            if j >= n:
                out.append(raw[i:])
                break
            out.append(f"$'{MASK}'" if j > i + 2 else "$''")
            i = j + 1
            continue
        if c in "$`":
            out.append(raw[i:])  # an expansion runs code or reads a variable: shown as written
            break
        m = _RUN.match(raw, i)
        if m:
            out.append(MASK)
            i = m.end()
            continue
        out.append(c)
        i += 1
    return re.sub(r"(?:\*\*\*)+", MASK, "".join(out))


# --------------------------------------------------------------------------- shell words

_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_FLAG = re.compile(r"(-{1,2}[A-Za-z][\w.-]*)(=?)")
_USER_FLAGS = {"-u", "--user", "--proxy-user"}  # curl: user:password
_ATTACHED_ENV = re.compile(r"(?:-e|--env=)([A-Za-z_][A-Za-z0-9_]*)=")  # docker -eK=V, --env=K=V
_ATTACHED_USER = re.compile(r"(?:-u|--user=|--proxy-user=)[^\s:'\"\\$`]+:")


def _word_edits(text: str, words: list[Word]) -> list[tuple[int, int, str]]:
    """(start, end, replacement) for the secret values among shell words."""
    edits: list[tuple[int, int, str]] = []
    pending: str | None = None  # the flag whose value is the next word
    for word in words:
        if word.op:
            pending = None
            continue
        raw = text[word.start : word.end]
        flag, pending = pending, None
        if flag is not None and not raw.startswith("--"):
            if flag in _USER_FLAGS:  # user:password, the password masked
                quote = raw[0] if raw[:1] in "'\"" and raw.endswith(raw[0]) else ""
                inner = raw[1:-1] if quote else raw
                user, colon, _ = inner.partition(":")
                if colon and not set(user) & set("'\"\\$`"):
                    start = word.start + len(quote) + len(user) + 1
                    end = word.end - len(quote)
                    edits.append((start, end, _blank(text[start:end])))
            else:
                edits.append((word.start, word.end, _blank(raw)))
            continue
        m = _ASSIGN.match(raw) or _ATTACHED_ENV.match(raw)
        if m and is_secret(m[1]):
            start = word.start + m.end()
            edits.append((start, word.end, _blank(raw[m.end() :])))
            continue
        m = _ATTACHED_USER.match(raw)
        if m:  # curl --user=admin:password, -uadmin:password
            start = word.start + m.end()
            edits.append((start, word.end, _blank(raw[m.end() :])))
            continue
        m = _FLAG.fullmatch(raw) or _FLAG.match(raw)
        if m is None:
            continue
        flag = m[1]
        if m.end() == len(raw) and (flag in _USER_FLAGS
                                     or (flag.startswith("--") and is_secret(flag))):
            pending = flag
        elif m[2] and flag.startswith("--") and is_secret(flag):
            start = word.start + m.end()
            edits.append((start, word.end, _blank(raw[m.end() :])))
    return edits


def _words(text: str) -> list[Word] | None:
    """The shell words and operators of `text`; None when it is not shell (an unclosed quote)."""
    try:
        return tokenize(text)
    except ShellSyntaxError:
        return None


def _shape(words: list[Word] | None) -> tuple[str, ...] | None:
    """The shell structure: the operators in order and a `w` for each word."""
    return None if words is None else tuple(w.value if w.op else "w" for w in words)


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    out: list[str] = []
    cursor = 0
    for start, end, new in sorted(edits):
        if start < cursor:
            continue
        out += [text[cursor:start], new]
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def _apply_in_words(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with the edits applied, except any that would show another shell structure than
    the one that runs: an edit must stay inside one word and keep every word and operator."""
    edits = [e for e in edits if text[e[0] : e[1]] != e[2]]
    if not edits:
        return text
    words = _words(text)
    if words is None:
        return _apply(text, edits)
    spans = [(w.start, w.end) for w in words if not w.op]
    shape = _shape(words)
    kept: list[tuple[int, int, str]] = []
    for start, end, new in sorted(edits):
        if not any(a <= start and end <= b for a, b in spans):
            continue  # a pattern that read quotes the wrong way: not a value
        # An edit that moved a quote: mask only the plain runs inside its span instead.
        for edit in ((start, end, new), (start, end, _RUN.sub(MASK, text[start:end]))):
            if _shape(_words(_apply(text, [*kept, edit]))) == shape:
                kept.append(edit)
                break
    return _apply(text, kept)


# --------------------------------------------------------------------------- free text

_NAME = r"[A-Za-z_][\w-]*"
_VALUE = f"{_PLAIN}+"
_QUOTED_VALUE = r"(?:'[^'\\$`\n]*'|\"[^\"\\$`\n]*\")"
_PATTERNS: tuple[re.Pattern[str], ...] = (
    # NAME=value anywhere (log lines, lm-eval `--model_args a=b,api_key=sk-…`)
    re.compile(rf"(?<![\w-])(?P<name>{_NAME})=(?P<value>{_QUOTED_VALUE}|{_VALUE})"),
    # --api-key value / --api-key=value / --hf_token<TAB>value, when no shell reading applies
    re.compile(rf"(?<![\w-])(?P<name>--{_NAME})(?:=|[ \t]+)(?P<value>{_QUOTED_VALUE}|{_VALUE})"),
    # JSON and Python mappings: "token": "…", 'api_key': '…'
    re.compile(rf"""(?P<q>["'])(?P<name>{_NAME})(?P=q)\s*:\s*(?P<value>{_QUOTED_VALUE})"""),
    # YAML-ish and log `key: value` with a secret name
    re.compile(rf"(?<![\w-])(?P<name>{_NAME}):[ \t]+(?P<value>{_VALUE})(?=\s|$)"),
)
_HEADERS: tuple[re.Pattern[str], ...] = (
    # Authorization headers: Bearer/Basic/Token credentials
    re.compile(r"(?i)\b(?:proxy-)?authorization\s*:\s*(?:(?:bearer|basic|token|apikey)\s+)?"
               rf"(?P<value>{_VALUE})"),
    re.compile(rf"(?i)\b(?:x-)?api-key\s*:\s*(?P<value>{_VALUE})"),
    # credentials in a URL: scheme://user:password@host
    re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@'\"]+:(?P<value>[^\s/@'\"\\;&|<>()`$]+)@"),
)
# Token formats that are secrets wherever they appear, whatever the text around them says.
_FORMATS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\b(?P<value>(?:sk|rk)-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,})"),
    re.compile(r"\b(?P<value>hf_[A-Za-z0-9]{16,})"),
    re.compile(r"\b(?P<value>(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))"),
    re.compile(r"\b(?P<value>(?:glpat|nvapi)-[A-Za-z0-9_-]{16,})"),
    re.compile(r"\b(?P<value>xox[abprs]-[A-Za-z0-9-]{10,})"),
    re.compile(r"\b(?P<value>(?:AKIA|ASIA)[0-9A-Z]{16})\b"),
    re.compile(r"\b(?P<value>eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
)
_ALWAYS = _HEADERS + _FORMATS
# What every one of _FORMATS starts with: substring tests (fast) tell whether any can match.
_FORMAT_STARTS = ("sk-", "rk-", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
                  "glpat-", "nvapi-", "xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "AKIA", "ASIA",
                  "eyJ")


def _text_edits(text: str) -> list[tuple[int, int, str]]:
    edits = []
    for rx in _PATTERNS:
        for m in rx.finditer(text):
            if is_secret(m["name"]):
                edits.append((m.start("value"), m.end("value"), _blank(m["value"])))
    for rx in _ALWAYS:
        for m in rx.finditer(text):
            if m["value"] != MASK:
                edits.append((m.start("value"), m.end("value"), MASK))
    return edits


# --------------------------------------------------------------------------- entry points


def secret_spans(text: str, *, formats_only: bool = False) -> list[tuple[int, int]]:
    """Where `text` holds a secret value, as sorted (start, end) offsets: what the masking of
    free text replaces. `formats_only`: only values whose own format makes them secrets
    (`hf_…`, `sk-…`, `ghp_…`), for prose, where "token: the next word" is no secret."""
    if formats_only:
        if not any(start in text for start in _FORMAT_STARTS):
            return []
        found = {(m.start("value"), m.end("value")) for rx in _FORMATS
                 for m in rx.finditer(text)}
    else:
        found = {(a, b) for a, b, new in _text_edits(text) if text[a:b] != new}
    return sorted(found)


def mask_text(text: str) -> str:
    """`text` (a command, a log line, a message) with every secret value replaced by `***`.
    Shell words, quotes and operators are kept exactly: only values change. Masking can make a
    text the shell reader refused readable (`HF_TOKEN=(` becomes `***(`), so passes repeat
    until nothing changes: masking the result again changes nothing."""
    for _ in range(4):
        masked = _mask_once(text)
        if masked == text:
            break
        text = masked
    return text


def _mask_once(text: str) -> str:
    if not text:
        return text
    words = _words(text)
    if words is not None:
        text = _apply_in_words(text, _word_edits(text, words))
    return _apply_in_words(text, _text_edits(text))


mask_command = mask_text


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """A sorted copy with the non-empty values of secret-looking variables replaced by `***`
    and secrets inside other values masked."""
    return {k: (MASK if is_secret(k) and v and not _REFERENCE.match(v) else mask_text(v))
            for k, v in sorted(env.items())}


def mask_data(data: Any) -> Any:
    """A copy of JSON-like data with secrets masked: string values under secret-looking keys
    become `***`; every other string goes through `mask_text`."""
    if isinstance(data, str):
        return mask_text(data)
    if isinstance(data, Mapping):
        return {k: (MASK if isinstance(k, str) and is_secret(k) and isinstance(v, str) and v
                    and not _REFERENCE.match(v) else mask_data(v))
                for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(mask_data(v) for v in data)
    return data
