"""Why a server block cannot stand for one run, said once for `scan` (which then proposes
nothing) and for the block reader (an RB014 error, so `plan` and `run` exit 2): placeholders
(`<model-path>`, `...` as an argument, `/path/to/…`, `xxx`), several launches in one block
(alternatives to choose from), an interactive shell, a launch that needs several nodes, and
variables the command needs (RB015, read by `sources`)."""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.pages.parse import CodeBlock, Page
from wikitools.runbook.blocks.variables import SHELL_VARS, reads, sets
from wikitools.runbook.engines.compose import compose_call
from wikitools.runbook.engines.docker_cli import COMPOSE_START_SUBCOMMANDS
from wikitools.runbook.engines.in_image import IDLE, container_program, run_image
from wikitools.runbook.engines.launcher import top_level_launches
from wikitools.runbook.engines.shell import (
    ShellSyntaxError,
    assignment,
    basename,
    heredoc_files,
    split_commands,
)

STATIC_CODE = "RB014"
UNSET_CODE = "RB015"

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")
_ANGLE = re.compile(r"(?<![<\w$|-])<(?![<(=|])([A-Za-z_][^<>\n]{0,80}?[^<>\s|])>(?!>)")
# Tags a model's output or chat template uses, written in commands as they are: not placeholders.
_MARKUP = frozenset({"<think>", "<answer>", "<tool_call>", "<br>", "<eos>", "<bos>", "<pad>",
                     "<unk>", "<image>"})
_ELLIPSIS = re.compile(r"(?:(?<=\s)|^)(\.\.\.|…|\[\.\.\.\]|<\.\.\.>)(?=\s|$|\\$)")
_PATH_TO = re.compile(r"/path/to\b|\bpath/to/", re.I)
# Template syntax a docs build fills in: Jinja `{{ version }}`, Sphinx/MyST `|version|`; not
# Go templates a command itself reads (`docker ps --format '{{.Names}}'`), nor `grep 'a|b|c'`.
_TEMPLATE = re.compile(r"\{\{\s*[A-Za-z_][\w.]*\s*\}\}|(?<![\w|])\|[a-z_][\w-]*\|(?![\w|])")
_XXX = re.compile(r"""=(["']?)(x{3,}|X{3,}|x\.x\.x\.x|your[-_][\w-]+)\1(?=\s|$|;)""", re.I)
_MULTI_NODE = re.compile(
    r"--(?:node[-_]rank|dist[-_]init[-_]addr|headless|data[-_]parallel[-_]address|"
    r"data[-_]parallel[-_]start[-_]rank|master[-_]addr|dp[-_]address|nnodes[ =]+(?:[2-9]|\d\d))"
    r"\b|\bray\s+start\b|\bmpirun\b")
_SHELLS = {"bash", "sh", "zsh", "dash", "fish"}
_INTERACTIVE = re.compile(r"^-(?:[a-zA-Z]*i[a-zA-Z]*t[a-zA-Z]*|[a-zA-Z]*t[a-zA-Z]*i[a-zA-Z]*|i|t)$"
                          r"|^--(?:interactive|tty)$")
# Set by the shell or the login session, or secrets the user keeps in the environment (a run
# passes them through; a missing token fails with the engine's own message).
AMBIENT = frozenset({
    "HOME", "USER", "LOGNAME", "PWD", "OLDPWD", "PATH", "SHELL", "HOSTNAME", "UID", "EUID",
    "GID", "PPID", "TMPDIR", "LANG", "TERM", "RANDOM", "SECONDS", "LINENO", "IFS", "BASH_SOURCE",
    "BASHPID", "REPLY", "OPTARG", "OPTIND",
})
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY", re.I)


@dataclass(frozen=True, slots=True)
class Refusal:
    """One reason, located in the page (1-based line and column)."""

    line: int
    col: int
    code: str  # RB014 (what the block says) | RB015 (a variable nothing sets)
    reason: str  # placeholder | alternatives | interactive | multi-node | unset
    message: str
    variables: tuple[str, ...] = ()


def _code_lines(text: str) -> list[tuple[int, str, bool]]:
    """(index, line, in a here-document body) for every line that is not a comment."""
    out: list[tuple[int, str, bool]] = []
    ends: list[str] = []
    for i, line in enumerate(text.split("\n")):
        if ends:
            if line.strip() == ends[0]:
                ends.pop(0)
                continue
            out.append((i, line, True))
            continue
        if line.lstrip().startswith("#"):
            continue
        ends += [m[2] for m in _HEREDOC.finditer(line)]
        out.append((i, line, False))
    return out


def placeholders(text: str) -> list[tuple[int, int, str]]:
    """(line index, column index, the placeholder) for each placeholder in shell text."""
    found: list[tuple[int, int, str]] = []
    for i, line, in_body in _code_lines(text):
        for rx in (_ANGLE, _PATH_TO, _XXX, _TEMPLATE):
            found += [(i, m.start(), m[0].lstrip("=")) for m in rx.finditer(line)
                      if m[0].lower() not in _MARKUP]
        if not in_body:  # `...` in a script body may be code (Python's Ellipsis)
            found += [(i, m.start(1), m[1]) for m in _ELLIPSIS.finditer(line)]
    return sorted(set(found))


def _interactive_shell(text: str) -> tuple[int, bool | str] | None:
    """(offset, with -it) of a `docker run -it … bash` (or `docker exec -it … sh`, or a
    `docker run … IMAGE bash` without -it, whose shell the reader means to type in) that opens
    a shell."""
    try:
        cmds = split_commands(text)
    except ShellSyntaxError:
        return None
    for cmd in cmds:
        argv = cmd.argv
        i = next((k for k, a in enumerate(argv) if basename(a) in ("docker", "podman")), None)
        if i is None or argv[i + 1 : i + 2] not in (["run"], ["exec"]):
            continue
        flags = [a for a in argv[i + 2 :] if a.startswith("-")]
        tty = any(_INTERACTIVE.match(f) for f in flags)
        if any(f in ("-d", "--detach") or re.fullmatch(r"-[a-z]*d[a-z]*", f) for f in flags) \
                or not (tty or argv[i + 1] == "run"):
            continue
        entry = next((argv[k + 1] for k, a in enumerate(argv[:-1]) if a == "--entrypoint"),
                     None)
        entry = entry or next((a.split("=", 1)[1] for a in argv if a.startswith(
            "--entrypoint=")), None)
        runs_script = any(a in ("-c", "-lc", "-ic", "-ec") for a in argv[i + 2 :])
        shell_entry = entry is not None and basename(entry) in _SHELLS
        # the last word is the shell itself (`… IMAGE bash`), or a shell entrypoint with no
        # script to run (`--entrypoint /bin/bash IMAGE`)
        bare = argv[i + 1] == "run" and run_image(argv, i)[0] == len(argv) - 1  # no command
        if not runs_script and (basename(argv[-1]) in _SHELLS or (tty and bare) or (
                tty and shell_entry and not argv[-1].startswith("-") and ":" in argv[-1])):
            return cmd.words[0].start, "bare" if tty and bare and not shell_entry and \
                basename(argv[-1]) not in _SHELLS else tty
    return None


def position(block: CodeBlock, text: str, offset: int) -> tuple[int, int]:
    line = block.content_line + text.count("\n", 0, offset)
    col = offset - (text.rfind("\n", 0, offset) + 1)
    return line, block.col + col


def static_refusals(block: CodeBlock, files: Mapping[str, str] | None = None) -> list[Refusal]:
    """What the block's own text says against running it as one runbook."""
    text = block.content
    out: list[Refusal] = []
    marks = placeholders(text)
    if marks:
        i, col, what = marks[0]
        more = sorted({m[2] for m in marks} - {what})
        extra = f" (and {', '.join(more[:3])})" if more else ""
        out.append(Refusal(block.content_line + i, block.col + col, STATIC_CODE, "placeholder",
                           f"the command holds a placeholder, {what}{extra}: write the value "
                           "it stands for"))
    nodes = _multi_node(block)
    launches = top_level_launches(text, files)
    if len(launches) > 1 and nodes is None:  # one launch per node is one run, not a choice
        line, col = position(block, text, launches[1][0])
        firsts = ", ".join(str(position(block, text, o)[0]) for o, _h in launches)
        out.append(Refusal(line, col, STATIC_CODE, "alternatives",
                           f"the block starts {len(launches)} servers (lines {firsts}): "
                           "alternatives to choose from, not one run; give each its own block"))
    shell = _interactive_shell(text)
    if shell is not None:
        line, col = position(block, text, shell[0])
        how = "docker -it … bash" if shell[1] else "docker run … IMAGE bash, to type in"
        how = "docker run -it IMAGE, with no command" if shell[1] == "bare" else how
        out.append(Refusal(line, col, STATIC_CODE, "interactive",
                           f"the block opens an interactive shell in a container ({how}); what "
                           "is typed in it is not part of the block"))
    return [*out, nodes] if nodes is not None else out


def _multi_node(block: CodeBlock) -> Refusal | None:
    """A launch across several nodes (`--nnodes 2 --node-rank 1`, `ray start`, `mpirun`)."""
    for i, line_text, _body in _code_lines(block.content):
        m = _MULTI_NODE.search(line_text)
        if m:
            return Refusal(block.content_line + i, block.col + m.start(), STATIC_CODE,
                           "multi-node", f"a launch across several nodes ({m[0].strip()}): "
                           "a runbook runs on one host")
    return None


def required_variables(text: str, files: Iterable[str] = ()) -> list[tuple[str, int]]:
    """Variables the block's command (and the compose files it runs) read without a default
    and do not set themselves, leaving out the shell's own and secrets a user keeps in the
    environment: (name, offset of its first use in `text`, or -1 when only a file reads it)."""
    code = "\n".join(line for _i, line, _b in _code_lines(text))
    texts = [code, *files]
    given = set(SHELL_VARS) | AMBIENT
    for t in [*texts, *heredoc_files(text).values()]:  # a launcher script sets its own
        given |= sets(t)
    out: dict[str, int] = {}
    for index, t in enumerate(texts):
        for name in reads(t.replace("$$", "")):
            if name in given or _SECRET.search(name) or name in out:
                continue
            m = re.search(rf"\$\{{?{name}\b", text) if index == 0 else None
            out[name] = m.start() if m else -1
    return sorted(out.items(), key=lambda kv: (kv[1] < 0, kv[1], kv[0]))


_LAUNCH = re.compile(
    r"\bvllm\s+serve\b|vllm\.entrypoints|sglang\.launch_server|\bsglang\s+serve\b"
    r"|\bllama-server\b|\bdocker[ -]compose\b[^\n]*\bup\b"
    r"|\b(?:docker|podman)\s+(?:container\s+)?run\b[^\n]*(?:\s-d\b|--detach|--gpus|\\$)",
    re.M)
_SCRIPT = re.compile(r"(?:^|[\s'\"])((?:\.{0,2}/)[\w./-]+\.(?:sh|py)|/opt/[\w./-]+|"
                     r"\./[\w./-]+)")


def page_scripts(page: Page) -> dict[str, int]:
    """Files the page's plain shell blocks write with a here-document: path → block line."""
    out: dict[str, int] = {}
    for block in page.code_blocks:
        if "<<" in block.content:
            for path in heredoc_files(block.content):
                out.setdefault(path, block.line)
    return out


def runs_file(text: str, path: str) -> list[int]:
    """Offsets of top-level commands of `text` that run `path` (directly, or through bash/sh
    or `docker compose -f`)."""
    try:
        cmds = split_commands(text)
    except ShellSyntaxError:
        return []
    out: list[int] = []
    for cmd in cmds:
        argv = cmd.argv
        words = [a for a in argv if "=" not in a.split("/")[0] or a.startswith("/")]
        if not words or words[0] in ("cat", "chmod", "tee", "rm", "ls", "mkdir", "cp", "mv"):
            continue
        lead = next((k for k, a in enumerate(argv) if assignment(a) is None), 0)
        call = compose_call(argv, lead)
        if call is not None and call.subcommand not in COMPOSE_START_SUBCOMMANDS:
            continue  # `docker compose -f FILE down` (or logs, ps) stops or reads it
        if path in argv or f"./{path}" in argv or path.removeprefix("./") in argv:
            out.append(cmd.words[0].start)
    return out


_ENGINE_WORD = re.compile(r"vllm|sglang|llama", re.I)
_ENGINE_REF = re.compile(r"[\w./-]*(?:vllm|sglang|llama)[\w./-]*:[\w.-]+", re.I)


def _one_off(block: CodeBlock) -> Refusal | None:
    """A `docker run` that is not detached and starts no server: it runs a command in an
    engine's image (a version check, a test script) and exits."""
    try:
        cmds = split_commands(block.content)
    except ShellSyntaxError:
        return None
    for cmd in cmds:
        argv = cmd.argv
        i = next((k for k, a in enumerate(argv) if basename(a) in ("docker", "podman")), None)
        if i is None or argv[i + 1 : i + 2] != ["run"] or any(
                a in ("-d", "--detach") for a in argv[i + 2 :]):
            continue
        line, col = position(block, block.content, cmd.words[0].start)
        shown = re.sub(r"\s+", " ", " ".join(argv[i:]))
        shown = shown if len(shown) <= 70 else shown[:69] + "…"
        return Refusal(line, col, "RB016", "one-off",
                       f"`{shown}` runs a command in the container and exits: a one-off "
                       "command, not a server")
    return None


def unproposed_reason(page: Page, block: CodeBlock, problems: Iterable[str] = (),
                      scripts: Mapping[str, int] | None = None) -> Refusal | None:
    """Why a plain shell block that looks like a launch (an engine launcher, `docker run -d`,
    `docker compose up`, or a run of a launcher script the page writes) is not proposed; None
    when it does not look like one."""
    text = block.content
    code = "\n".join(line for _i, line, _b in _code_lines(text))
    scripts = scripts if scripts is not None else page_scripts(page)
    written = set()
    if "<<" in text:
        written = set(heredoc_files(text))
    elsewhere = {p: ln for p, ln in scripts.items() if p not in written
                 and not (block.line <= ln <= block.end_line)}
    runs = {p: runs_file(text, p) for p in elsewhere}
    runs = {p: offs for p, offs in runs.items() if offs}
    if not (_LAUNCH.search(code) or runs):
        if not _ENGINE_WORD.search(code):
            return None
        marks = [r for r in static_refusals(block) if r.reason in ("placeholder", "interactive")] \
            if re.search(r"\b(?:docker|podman)\s+run\b", code) else []
        return marks[0] if marks else _one_off(block)
    found = static_refusals(block)
    if found:
        return found[0]

    def at(offset: int) -> tuple[int, int]:
        return position(block, text, offset)

    offsets = sorted(o for offs in runs.values() for o in offs)
    if len(offsets) > 1:
        line, col = at(offsets[1])
        return Refusal(line, col, STATIC_CODE, "alternatives",
                       f"the block starts {len(offsets)} servers (lines "
                       f"{', '.join(str(at(o)[0]) for o in offsets)}): alternatives to choose "
                       "from, not one run; give each its own block")
    if runs:
        path, offs = next(iter(runs.items()))
        line, col = at(offs[0])
        return Refusal(line, col, "RB016", "elsewhere",
                       f"runs {path}, which the block at line {elsewhere[path]} writes: one "
                       "runbook block must write and run it (or run what it holds)")
    for path in sorted(written):
        later = [b.line for b in page.code_blocks if b.line > block.end_line
                 and runs_file(b.content, path)]
        if later and not runs_file(text, path):
            return Refusal(block.line, block.col, "RB016", "elsewhere",
                           f"writes {path} and leaves running it to the block at line "
                           f"{later[0]}: one runbook block must write and run it")
    program = container_program(text)
    if program is not None and basename(program[1]) in IDLE:
        line, col = at(program[0])
        return Refusal(line, col, "RB016", "idle",
                       f"the container runs `{program[1]}`, not a server: it keeps a container "
                       "for later `docker exec` commands, so the block starts no server")
    if program is None and "--gpus" not in code and (one := _one_off(block)) is not None:
        return one
    if program is not None and program[1] not in written:
        return Refusal(block.line, block.col, "RB016", "opaque",
                       f"the server is {program[1]}, a script inside the image: the engine, "
                       "model and port cannot be read from the page")
    script = next((m[1] for m in _SCRIPT.finditer(code) if m[1] not in written), None)
    if script is not None and script.startswith("/opt/"):
        return Refusal(block.line, block.col, "RB016", "opaque",
                       f"the server is {script}, a script inside the image: the engine, model "
                       "and port cannot be read from the page")
    if script is not None:
        return Refusal(block.line, block.col, "RB016", "opaque",
                       f"the launch runs {script}, which the page does not show: the engine, "
                       "model and port cannot be read from it")
    why = next(iter(problems), None) or "no engine launcher found in what the block runs"
    return Refusal(block.line, block.col, "RB016", "unknown" if not problems else "opaque",
                   f"a launch the reader does not understand: {why}")


def later_runner(page: Page, block: CodeBlock) -> CodeBlock | None:
    """The first later plain block of the page that runs a file `block` writes with a
    here-document (and does not write it itself)."""
    written = heredoc_files(block.content) if "<<" in block.content else {}
    for other in page.code_blocks:
        if other.line <= block.end_line or other.attrs.brace:
            continue
        mine = heredoc_files(other.content) if "<<" in other.content else {}
        if any(p not in mine and runs_file(other.content, p) for p in written):
            return other
    return None


def runner_reason(block: CodeBlock, writers: Mapping[int, CodeBlock], files: Mapping[str, str],
                  problems: Iterable[str]) -> Refusal:
    """Why a block that runs a launcher another block writes is not proposed."""
    found = static_refusals(block, files)
    if found:
        return found[0]
    where = ", ".join(f"line {n}" for n in sorted(writers))
    why = next(iter(problems), None) or "no engine launcher found in it"
    bodies = [b for w in writers.values() for b in heredoc_files(w.content).values()]
    scripts = [m[1] for b in bodies for m in _SCRIPT.finditer(b)]
    inside = [p for p in scripts if p.startswith(("/opt/", "/usr/"))]
    programs = [p[1] for w in writers.values() if (p := container_program(w.content))]
    if inside or programs:
        named = next((p for p in inside if p.endswith((".sh", ".py")) or "/scripts/" in p
                      or "/bin/" in p), None) or next(iter(programs), None)
        why = (f"it starts {named or 'a script'} inside the image, so the engine, model and "
               "port cannot be read from the page")
    return Refusal(block.line, block.col, "RB016", "opaque",
                   f"runs a launcher the block at {where} writes, which the reader does not "
                   f"understand: {why}")


def writer_refusals(page: Page, runner: CodeBlock, writers: Mapping[int, CodeBlock],
                    why: Refusal, claimed: Container[int] = ()) -> list[Diagnostic]:
    """The same reason, located at each block that writes what `runner` runs (unless it is
    already the file block of another runbook: a line of `claimed`)."""
    return [Diagnostic(page.path, w.line, w.col, why.code,
                       f"not proposed as a runbook: writes {', '.join(heredoc_files(w.content))}"
                       f", which the block at line {runner.line} runs: {why.message}",
                       Severity.WARNING) for n, w in sorted(writers.items()) if n not in claimed]
