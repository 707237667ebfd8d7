"""The one reader of shell text. A block's text runs through `bash -c`; this module only reads
it the way a POSIX shell would: words and operators (quotes, escapes, backslash-newline
continuations, comments, `;`/`&&`/`||`/`|`/newline separators, heredocs), simple commands,
`$VAR` expansion, `NAME=value` assignments, and quoting for text put back into a command."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from wikitools.core.errors import InputError
from wikitools.runbook.engines import docker_cli

# --------------------------------------------------------------------------- shell words


@dataclass(slots=True)
class Word:
    value: str  # after quote removal (no expansion)
    start: int  # offset of the first raw character in the text
    end: int  # offset after the last raw character
    quoted: bool = False  # any quoting inside the word
    op: bool = False  # an operator (; && || | & ( ) newline) or redirection
    heredoc: str | None = None  # for a `<<` delimiter word: the here-document's text


@dataclass(slots=True)
class SimpleCommand:
    words: list[Word] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        return [w.value for w in self.words]


class ShellSyntaxError(InputError, ValueError):
    """Shell text that cannot be read (an unclosed quote or parenthesis)."""


_SEPARATORS = {";", "&&", "||", "|", "&", "\n", "(", ")", "|&", ";;"}
_REDIRECT_AT = re.compile(r"\d*(?:>>|>&|<&|>\||<<<|<<-|<<|>|<)")
_PLAIN = re.compile(r"[^ \t\r\n;&|()<>\\'\"$=]+")  # characters that are just themselves
_REDIRECT = re.compile(r"^(\d*)(>>|>&|<&|>\||>|<<<|<<-|<<|<)$|^&>>?$")


def tokenize(text: str) -> list[Word]:
    """Split shell text into words and operators. Raises ShellSyntaxError on an unclosed quote.
    The readers of a block (launcher, refusals, here-documents, scan) each ask for its words:
    the last few texts are kept (the words are never changed once read)."""
    return list(_tokens(text))


@lru_cache(maxsize=16)
def _tokens(text: str) -> tuple[Word, ...]:
    out: list[Word] = []
    i, n = 0, len(text)
    heredocs: list[tuple[Word, bool]] = []  # (delimiter word, strip tabs) pending at a newline

    while i < n:
        c = text[i]
        if c in " \t\r":
            i += 1
            continue
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            i += 2
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c == "\n":
            out.append(Word("\n", i, i + 1, op=True))
            i += 1
            if heredocs:
                i = _skip_heredocs(text, i, heredocs)
                heredocs = []
            continue
        op = _operator_at(text, i)
        if op is not None:
            out.append(Word(op, i, i + len(op), op=True))
            i += len(op)
            if op.lstrip("0123456789") in ("<<", "<<-"):  # not the here-string `<<<`
                i = _heredoc_word(text, i, op.endswith("-"), out, heredocs)
            continue
        word, i = _read_word(text, i)
        if word is not None:
            out.append(word)
    return tuple(out)



def _operator_at(text: str, i: int) -> str | None:
    """The control operator or redirection starting at `text[i]`, if any: `&>`, `&>>`, `&&`,
    `||`, `|&`, `;;`, one of `;&|()`, or [n]> >> < << <<- <<< >& <&."""
    c, two = text[i], text[i : i + 2]
    if two == "&>":  # &> file, &>> file: redirection of both streams
        return "&>>" if text[i : i + 3] == "&>>" else "&>"
    if two in ("&&", "||", "|&", ";;"):
        return two
    if c in ";&|()":
        return c
    m = _REDIRECT_AT.match(text, i) if c in "<>0123456789" else None
    if m and (m.group(0)[0] in "<>" or _at_word_start(text, i)):
        return m.group(0)
    return None


def _heredoc_word(text: str, i: int, strip: bool, out: list[Word],
                  heredocs: list[tuple[Word, bool]]) -> int:
    """Read the delimiter word after `<<`/`<<-` at `text[i]` (its body follows the line)."""
    while i < len(text) and text[i] in " \t":
        i += 1
    word, i = _read_word(text, i)
    if word is not None:
        out.append(word)
        heredocs.append((word, strip))
    return i


def split_words(text: str) -> list[str]:
    """The words of one command line as the shell reads them (quotes removed, nothing
    expanded; operators are words, line breaks are spaces): what Compose and Docker make of a
    `command:`/`--entrypoint` string. Text the shell cannot read (an unclosed quote) is split
    at white space, as those tools' users would read it."""
    try:
        return [w.value for w in tokenize(text) if not (w.op and w.value == "\n")]
    except ShellSyntaxError:
        return text.split()


def _at_word_start(text: str, i: int) -> bool:
    return i == 0 or text[i - 1] in " \t\n;&|()"


def _skip_heredocs(text: str, i: int, heredocs: list[tuple[Word, bool]]) -> int:
    """Skip the bodies of the pending here-documents; each body goes to its delimiter word."""
    for word, strip in heredocs:
        body: list[str] = []
        while i < len(text):
            eol = text.find("\n", i)
            line = text[i:] if eol == -1 else text[i:eol]
            i = len(text) if eol == -1 else eol + 1
            if (line.lstrip("\t") if strip else line) == word.value:
                break
            body.append(line.lstrip("\t") if strip else line)
        word.heredoc = "\n".join(body) + "\n" if body else ""
    return i


def _read_word(text: str, i: int) -> tuple[Word | None, int]:
    start = i
    n = len(text)
    buf: list[str] = []
    quoted = False
    while i < n:
        plain = _PLAIN.match(text, i)
        if plain is not None:
            buf.append(plain.group(0))
            i = plain.end()
            continue
        c = text[i]
        if c in " \t\r\n;&|()<>":
            if c in "<>" and buf and buf[-1] == "=":  # a=<x> is unusual; stop anyway
                break
            break
        if c == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i += 2
                continue
            if i + 1 < n:
                buf.append(text[i + 1])
                quoted = True
                i += 2
                continue
            i += 1
            continue
        if c == "'":
            end = text.find("'", i + 1)
            if end == -1:
                raise ShellSyntaxError(f"unclosed single quote at offset {i}")
            buf.append(text[i + 1 : end])
            quoted = True
            i = end + 1
            continue
        if c == '"':
            i = _double_quoted(text, i + 1, start, buf)
            quoted = True
            continue
        if c == "$" and text[i + 1 : i + 2] in ("(", "{"):
            j = _match_paren(text, i + 1) if text[i + 1] == "(" else _match_brace(text, i + 1)
            buf.append(text[i:j])
            i = j
            continue
        if c == "=" and text[i + 1 : i + 2] == "(" and re.fullmatch(r"[A-Za-z_]\w*", "".join(buf)):
            j = _match_paren(text, i + 1)  # bash array assignment NAME=( … )
            buf.append(text[i:j])
            i = j
            continue
        buf.append(c)
        i += 1
    if i == start:
        return None, i
    return Word("".join(buf), start, i, quoted=quoted), i



def _double_quoted(text: str, i: int, start: int, buf: list[str]) -> int:
    """Read a double-quoted string's inside from `text[i]` into `buf`; the offset after its
    closing quote. `start`: where the word began (for the message of an unclosed quote)."""
    n = len(text)
    while True:
        if i >= n:
            raise ShellSyntaxError(f"unclosed double quote at offset {start}")
        d = text[i]
        if d == '"':
            return i + 1
        if d == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                buf.append(text[i + 1])
            i += 2
            continue
        if d == "$" and text[i + 1 : i + 2] == "(":
            j = _match_paren(text, i + 1)
            buf.append(text[i:j])
            i = j
            continue
        buf.append(d)
        i += 1


def _match_paren(text: str, i: int) -> int:
    """`text[i]` is '('; return the offset after its match (quotes respected)."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = text.find("'", i + 1)
            i = n if end == -1 else end + 1
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ShellSyntaxError("unclosed '('")


def _match_brace(text: str, i: int) -> int:
    end = text.find("}", i)
    if end == -1:
        raise ShellSyntaxError("unclosed '${'")
    return end + 1


def split_commands(text: str) -> list[SimpleCommand]:
    """Simple commands in order; redirections (and their targets) are dropped."""
    cmds: list[SimpleCommand] = []
    cur = SimpleCommand()
    words = tokenize(text)
    skip_next = False
    for w in words:
        if skip_next:
            skip_next = False
            continue
        if w.op and _REDIRECT.match(w.value):
            skip_next = True  # the target file, or the heredoc delimiter
            continue
        if w.op:
            if cur.words:
                cmds.append(cur)
            cur = SimpleCommand()
            continue
        cur.words.append(w)
    if cur.words:
        cmds.append(cur)
    return cmds


def heredoc_files(text: str) -> dict[str, str]:
    """Files a script writes from here-documents (`cat > PATH <<'EOF'`, `cat <<EOF >PATH`,
    `tee PATH <<EOF`): PATH → text. Unreadable shell text gives none."""
    files: dict[str, str] = {}
    try:
        words = tokenize(text)
    except ShellSyntaxError:
        return files
    argv: list[str] = []
    target: str | None = None
    body: str | None = None
    expect: str | None = None  # "target" after > / >>, "delim" after << / <<-
    for w in [*words, Word("\n", len(text), len(text), op=True)]:
        if w.op and w.value in (">", ">>", ">|"):
            expect = "target"
            continue
        if w.op and w.value in ("<<", "<<-"):
            expect = "delim"
            continue
        if w.op and _REDIRECT.match(w.value):
            expect = "other"
            continue
        if w.op:
            if body is not None and argv and basename(argv[0]) in ("cat", "tee"):
                path = target or next((a for a in argv[1:] if not a.startswith("-")), None)
                if path:
                    files[path] = body
            argv, target, body, expect = [], None, None, None
            continue
        if expect == "target":
            target = w.value
        elif expect == "delim":
            body = w.heredoc
        elif expect is None:
            argv.append(w.value)
        expect = None
    return files


# --------------------------------------------------------------------------- expansion

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_VAR = re.compile(r"\$\{([A-Za-z_]\w*|\d+)(?:(:?[-=+?])([^}]*))?\}|\$([A-Za-z_]\w*|\d)")


def expand(value: str, env: dict[str, str]) -> str:
    """Expand `$V`, `${V}`, `${V:-default}` from `env`; unknown variables become their default
    (or stay as written when there is none). No command substitution."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        op, default = m.group(2), m.group(3)
        if name in env and (env[name] != "" or not (op or "").startswith(":")):
            return env[name] if op not in ("+", ":+") else (default or "")
        if op in ("-", ":-", "=", ":="):
            return expand(default or "", env)
        return m.group(0)

    return _VAR.sub(sub, value)


def resolve(value: str, env: dict[str, str], depth: int = 5) -> str:
    """`expand`, also expanding the values taken from `env` (which may refer to other
    variables: `MODEL=${MODEL:-org/name}` then `"$MODEL"`), a few levels deep. A variable is
    not looked up again in its own value, so a self-reference falls back to its default."""
    used: set[str] = set()  # variables already substituted in an earlier round
    out = value
    for _ in range(depth):
        again = expand(out, {k: v for k, v in env.items() if k not in used})
        if again == out:
            break
        used |= {m.group(1) or m.group(4) for m in _VAR.finditer(out)}
        out = again
    return out



def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def assignments(words: list[str]) -> list[tuple[str, str]]:
    """The `NAME=value` words among `words`, as (name, value), in order."""
    return [(m.group(1), m.group(2)) for m in map(_ASSIGN.match, words) if m]


def assignment(word: str) -> tuple[str, str] | None:
    """(name, value) when `word` is a `NAME=value` assignment."""
    m = _ASSIGN.match(word)
    return (m.group(1), m.group(2)) if m else None


def env_assignments(text: str) -> list[tuple[str, str, str]]:
    """Every environment assignment in a block, wherever it is: (name, value, how) with how one
    of prefix | export | docker-e | assign. Used by operational-rule checks (empty
    NCCL_GRAPH_FILE)."""
    out: list[tuple[str, str, str]] = []
    _collect_env(text, out, 0)
    return out


def _collect_env(text: str, out: list[tuple[str, str, str]], depth: int) -> None:
    try:
        cmds = split_commands(text)
    except ShellSyntaxError:
        return
    for cmd in cmds:
        argv = cmd.argv
        if not argv:
            continue
        if argv[0] in ("export", "local", "declare", "typeset", "readonly"):
            out.extend((k, v, "export") for k, v in assignments(
                [a for a in argv[1:] if not a.startswith("-")]))
            continue
        i = 0
        while i < len(argv) and _ASSIGN.match(argv[i]):
            m = _ASSIGN.match(argv[i])
            assert m
            out.append((m.group(1), m.group(2), "prefix" if i + 1 < len(argv) or i else "assign"))
            i += 1
        rest = argv[i:]
        if i == len(argv) and i == 1:
            out[-1] = (out[-1][0], out[-1][1], "assign")
        for j, a in enumerate(rest):
            if a in docker_cli.ENV_FLAGS and j + 1 < len(rest):
                k, eq, v = rest[j + 1].partition("=")
                if eq:
                    out.append((k, v, "docker-e"))
            elif a.startswith("--") and a.partition("=")[0] in docker_cli.ENV_FLAGS:
                k, eq, v = a.partition("=")[2].partition("=")
                if eq:
                    out.append((k, v, "docker-e"))
            elif a.startswith("-") and "c" in a[1:] and not a.startswith("--") and depth < 4:
                base = basename(rest[0]) if rest else ""
                if base in ("bash", "sh", "zsh", "dash") and j + 1 < len(rest):
                    _collect_env(rest[j + 1], out, depth + 1)
