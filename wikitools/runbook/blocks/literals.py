"""What a page may set for a run: a block of variables (a `.runbook-file` without `path=`)
holds assignments whose values are literals (plain words, quoted text, `$NAME` and
`${NAME:-word}`, arrays of those) and here-document writes, so that "it sets A, B" in the plan
is all that bash does with it; no block sets a variable the runner sets itself (`WIKI_*`) or
one that changes how bash reads the commands after it (`IFS`)."""

from __future__ import annotations

import re

from wikitools.pages.page import CodeBlock
from wikitools.runbook.blocks.refusals import Refusal, position
from wikitools.runbook.engines.shell import (
    ShellSyntaxError,
    Word,
    basename,
    split_commands,
    tokenize,
)

CODE = "RB004"
RESERVED_PREFIX = "WIKI_"  # the run's own variables: WIKI_RUN_TAG, WIKI_RUN_DIR, …
# Variables bash itself reads to split words, find files or run code: a value changes what the
# rest of the script does without the script saying so.
SHELL_CONTROL = frozenset({
    "IFS", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "CDPATH",
    "GLOBIGNORE", "POSIXLY_CORRECT", "BASH_XTRACEFD", "BASH_COMPAT", "FUNCNEST", "EXECIGNORE",
    "OPTIND", "BASH_LOADABLES_PATH", "HISTFILE", "TMOUT",
})
DECLARE = ("export", "declare", "typeset", "readonly", "local")
_FLAGS = re.compile(r"-[axrg]+")  # declare -x/-a/-r/-g; not -i (arithmetic), -n, -A, -f
_WRITERS = ("cat", "tee", "chmod", "mkdir")  # a here-document write and its file's mode
_RUNS = ("(", ")", "|", "&", "|&", ";;")
_TARGETS = (">", ">>", ">|", "<", "&>", "&>>")
_SUBST = ("$(", "`")

_SAFE = r"[A-Za-z0-9_./:,@%+=^-]"
_REF = r"\$(?:[A-Za-z_]\w*|\{[A-Za-z_]\w*(?::?[-=][A-Za-z0-9_./:,@%+=^ -]*)?\})"
_SQ = r"'[^'\n]*'"
_DQ = rf'"(?:[^"\\$`\n]|{_REF})*"'
_PART = rf"(?:{_SAFE}|{_SQ}|{_DQ}|{_REF})"
_SCALAR = re.compile(rf"{_PART}*")
_ELEMENTS = re.compile(rf"(?:[ \t\n]|\\\n|{_PART})*")
_ARRAY = re.compile(rf"\({_ELEMENTS.pattern}\)")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?=)(.*)", re.S)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What makes a value code, in the order they are named.
_NOT_LITERAL = (("$((", "arithmetic expansion"), ("$(", "command substitution"),
                ("`", "command substitution"), ("$'", "ANSI-C quoting"),
                ("\n", "a line break"), ("\\", "a backslash escape"), ("${", "a parameter "
                "expansion other than ${NAME} and ${NAME:-word}"))


def reserved(name: str) -> bool:
    return name.startswith(RESERVED_PREFIX)


def name_problem(name: str) -> str | None:
    """Why a page may not set `name`, or None."""
    if reserved(name):
        return (f"{name} is one of the run's own variables (the runner sets every "
                f"{RESERVED_PREFIX}* name): a page cannot set it")
    if name in SHELL_CONTROL:
        return (f"{name} changes how bash reads or runs the commands after it, so the plan "
                "could not say what runs: a page cannot set it")
    return None


def reserved_refusals(block: CodeBlock) -> list[Refusal]:
    """A word of any runbook block that assigns a `WIKI_*` name (`export WIKI_RUN_TAG=x`,
    `env WIKI_RUN_DIR=/elsewhere …`, `-e WIKI_…=`)."""
    try:
        cmds = split_commands(block.content)
    except ShellSyntaxError:
        return []
    out = []
    for w in (w for c in cmds for w in c.words):
        m = _ASSIGN.fullmatch(w.value)
        if m and reserved(m[1]):
            out.append(_refusal(block, w, name_problem(m[1]) or ""))
    return out


def variables_refusals(block: CodeBlock) -> list[Refusal]:
    """What a block of variables holds besides literal assignments and here-document writes,
    each located where the block writes it."""
    try:
        words = tokenize(block.content)
        cmds = split_commands(block.content)
    except ShellSyntaxError as exc:
        return [Refusal(block.content_line, block.col, CODE, "variables",
                        f"a block of variables bash cannot read: {exc}")]
    out = _operator_refusals(block, words)
    for cmd in cmds:
        out += _command_refusals(block, cmd.words)
    first: dict[tuple[int, int], Refusal] = {}
    for r in out:
        first.setdefault((r.line, r.col), r)
    return sorted(first.values(), key=lambda r: (r.line, r.col))


def _operator_refusals(block: CodeBlock, words: list[Word]) -> list[Refusal]:
    """Pipes, subshells and background jobs; redirection targets and here-documents that
    expand a command when the file is written."""
    out = []
    for prev, w in zip([None, *words], words, strict=False):
        if not w.op and "`" in _raw(block, w) and not _SCALAR.fullmatch(_raw(block, w)):
            out.append(_refusal(block, w, f"`{_raw(block, w)}` holds a backtick: command "
                                "substitution, which runs a command"))
        elif w.op and w.value in _RUNS:
            out.append(_refusal(block, w, f"`{w.value}` in a block of variables: it runs no "
                                "pipes, subshells or background jobs"))
        elif w.heredoc is not None and not w.quoted and any(m in w.heredoc for m in _SUBST):
            out.append(_refusal(block, w, f"the here-document <<{w.value} expands `$(…)` and "
                                f"backticks when the file is written: quote its delimiter "
                                f"(<<'{w.value}') so that the file holds the text as written"))
        elif prev is not None and prev.op and prev.value.lstrip("0123456789") in _TARGETS \
                and not w.op and \
                not _SCALAR.fullmatch(_raw(block, w)):
            out.append(_refusal(block, w, f"the file name `{_raw(block, w)}` is not a literal"))
    return out


def _command_refusals(block: CodeBlock, words: list[Word]) -> list[Refusal]:
    if not words:
        return []
    head = words[0].value
    if head in DECLARE:
        flags = [w for w in words[1:] if w.value.startswith("-")]
        bad = [w for w in flags if head == "export" or not _FLAGS.fullmatch(w.value)]
        if bad:
            return [_refusal(block, bad[0], f"`{head} {bad[0].value}` in a block of variables: "
                             "there export takes no option and declare only -x, -a, -r and -g "
                             "(-i evaluates the value as arithmetic, which can run a command)")]
        return [r for w in words[1:] if w not in flags
                for r in _assignment_refusals(block, w, bare=True)]
    if all(_ASSIGN.fullmatch(w.value) for w in words):
        return [r for w in words for r in _assignment_refusals(block, w, bare=False)]
    if basename(head) in _WRITERS:
        return [_refusal(block, w, f"`{_raw(block, w)}` is not a literal") for w in words
                if not _SCALAR.fullmatch(_raw(block, w))]
    first = next((w for w in words if not _ASSIGN.fullmatch(w.value)), words[0])
    return [_refusal(block, first, f"`{_raw(block, first)}` runs a command: a block of "
                     "variables holds only assignments (NAME=value) and here-document writes "
                     "(cat > FILE <<'EOF' … EOF)")]


def _assignment_refusals(block: CodeBlock, word: Word, *, bare: bool) -> list[Refusal]:
    raw = _raw(block, word)
    m = _ASSIGN.fullmatch(raw)
    if m is None:
        if bare and _NAME.fullmatch(raw):  # `export NAME`
            problem = name_problem(raw)
            return [_refusal(block, word, problem)] if problem else []
        return [_refusal(block, word, f"`{raw}` is not an assignment (NAME=value)")]
    name, subscript, value = m[1], m[2], m[4]
    problem = name_problem(name)
    if problem is None and subscript:
        problem = (f"`{name}{subscript}=`: an array element's subscript is evaluated, "
                   "which can run a command; assign the whole array, NAME=(a b)")
    if problem is None and not (_SCALAR.fullmatch(value) or _ARRAY.fullmatch(value)):
        what = next((why for mark, why in _NOT_LITERAL if mark in value), None) or \
            _first_bad(value)
        problem = (f"the value of {name} is not a literal ({what}): a block of variables "
                   "sets plain words, quoted text, $NAME or ${NAME:-word}, or arrays of those")
    return [_refusal(block, word, problem)] if problem else []


def _first_bad(value: str) -> str:
    """The first character of `value` that no literal form allows, named."""
    inner = value.startswith("(")
    end = (_ELEMENTS if inner else _SCALAR).match(value, int(inner)).end()  # type: ignore[union-attr]
    return f"the character {value[end]!r}" if end < len(value) else "an unclosed array"


def _raw(block: CodeBlock, word: Word) -> str:
    return block.content[word.start:word.end]


def _refusal(block: CodeBlock, word: Word, message: str) -> Refusal:
    line, col = position(block, block.content, word.start)
    return Refusal(line, col, CODE, "variables", message)


__all__ = ["RESERVED_PREFIX", "SHELL_CONTROL", "name_problem", "reserved", "reserved_refusals",
           "variables_refusals"]
