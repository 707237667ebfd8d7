"""Files of the wiki's own repository that a server block runs: a script (`scripts/run-x.sh`,
`bash ./start.sh`) or a compose file (`docker compose -f compose/x.yml up`) named by a relative
path that resolves inside the wiki root (from a `cd DIR` of the block, the root or the page's
folder; never outside the root, nor through a symlink out of it). Their text is read once, with
the runbooks: it is part of the runbook (its hash, what `plan` shows, what the launcher reader
reads), and a run executes a copy of it, never the file as it may be by then."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from wikitools.pages.parse import CodeBlock
from wikitools.runbook.blocks.declared import RepoFile
from wikitools.runbook.blocks.refusals import (
    _ENGINE_REF,
    _ENGINE_WORD,
    _LAUNCH,
    _MULTI_NODE,
    _SHELLS,
    STATIC_CODE,
    Refusal,
    _code_lines,
    position,
)
from wikitools.runbook.engines.compose import (
    ComposeError,
    beside_paths,
    compose_call,
    looks_like_compose,
    parse_compose,
)
from wikitools.runbook.engines.docker_cli import COMPOSE_START_SUBCOMMANDS
from wikitools.runbook.engines.launcher import top_level_launches
from wikitools.runbook.engines.shell import (
    ShellSyntaxError,
    SimpleCommand,
    assignment,
    basename,
    split_commands,
)

REPOSITORY_CODE = "RB016"
# What the run puts in the server's environment: the absolute path of the run's own folder,
# where the copies of the repository files lie.
RUN_DIR_VAR = "WIKI_RUN_DIR"
_PATHLIKE = re.compile(r"^(?:\./)?[\w.-]+(?:/[\w.-]+)+$|^\./[\w.-]+$")
_RELATIVE = re.compile(r"[\w.-]+(?:/[\w.-]+)*")
_FILE_FLAGS = ("-f", "--file")
# A script that finds files by its own place (`$(dirname "$0")`, `${0%/*}`, `realpath "$0"`,
# `$BASH_SOURCE`) or reads another file by a relative path (`source ./env.sh`, `. lib/x.sh`).
_BESIDE = re.compile(r"""(?:dirname|realpath|readlink\s+-f)\s+["']?\$(?:0|\{0\})"""
                     r"""|\$\{0[%#/:]|\$\{?BASH_SOURCE"""
                     r"""|(?:^|[;&|]\s*)(?:source|\.)\s+["']?(?!/|\$|~)[\w.-]+/?[\w./-]*""")
# The most a script or compose file the runbook runs may hold: it is read, hashed, shown by
# `plan` and copied with the runbook, whatever command reads it.
MAX_REPOSITORY_FILE = 1024 * 1024
# A server script inside the image (`--entrypoint /usr/local/bin/serve-x.sh`, `exec /opt/…`).
_IMAGE_SCRIPT = re.compile(r"(?:--entrypoint[ =]+|\bexec\s+|[\s'\"])"
                           r"((?:/opt|/usr/local/bin|/workspace)/[\w./-]+)")


@dataclass(frozen=True, slots=True)
class RunWord:
    """A word of a block that names a file the command runs, by a relative path."""

    command: int  # offset of the command's first word in the text
    start: int  # the word's own span in the text
    end: int
    spelled: str  # the path as written, normalised (`./x.sh` is `x.sh`)
    prefix: str = ""  # `--file=` when the path shares its word with the flag


def run_words(text: str) -> list[RunWord]:
    """The words of `text`'s top-level commands that name a file the command runs: the command
    word itself (`./run.sh`, `scripts/run.sh`), the script a shell runs (`bash run.sh`), and the
    files of a `docker compose -f FILE up` (or run/start/create). Reads text only."""
    try:
        cmds = split_commands(text)
    except ShellSyntaxError:
        return []
    out: list[RunWord] = []
    for cmd in cmds:
        argv, words = cmd.argv, cmd.words
        lead = next((k for k, a in enumerate(argv) if assignment(a) is None), None)
        if lead is None:
            continue
        at = words[0].start
        call = compose_call(argv, lead)
        if call is not None:
            if call.subcommand not in COMPOSE_START_SUBCOMMANDS:
                continue
            for k in range(lead + 1, len(argv)):
                a, w = argv[k], words[k]
                if argv[k - 1] in _FILE_FLAGS and a in call.files:
                    out.append(RunWord(at, w.start, w.end, posixpath.normpath(a)))
                elif a.startswith("--file=") and a[7:] in call.files:
                    out.append(RunWord(at, w.start, w.end, posixpath.normpath(a[7:]),
                                       "--file="))
            continue
        k = lead
        if basename(argv[lead]) in _SHELLS:
            k = next((j for j in range(lead + 1, len(argv)) if not argv[j].startswith("-")),
                     len(argv))
            if any(a.startswith("-") and "c" in a for a in argv[lead + 1 : k]):
                continue  # `bash -c "…"` runs a string, not a file
        if k < len(argv) and _PATHLIKE.match(argv[k]) and ".." not in argv[k].split("/"):
            out.append(RunWord(at, words[k].start, words[k].end, posixpath.normpath(argv[k])))
    return out


def repository_file(root: Path, page: str, text: str, spelled: str) -> str | None:
    """The repository path (POSIX, relative to `root`) of a file a block's command names by a
    relative path: from a `cd DIR` of the block, the wiki root or the page's folder; never a
    file outside the root (nor reached through a symlink out of it)."""
    if not _RELATIVE.fullmatch(spelled) or ".." in spelled.split("/"):
        return None
    top = root.resolve()
    cds = [m[1] for m in re.finditer(r"(?m)^\s*cd\s+([\w./-]+)\s*(?:&&|;|$)", text)]
    bases = [*(top / d for d in cds if not d.startswith("/")), top,
             top / posixpath.dirname(page)]
    for base in bases:
        candidate = (base / spelled).resolve()
        if candidate.is_file() and candidate.is_relative_to(top):
            return candidate.relative_to(top).as_posix()
    return None


@dataclass(frozen=True, slots=True)
class Repository:
    """What a block runs of the repository: the files read, and the ones that could not be."""

    files: tuple[RepoFile, ...] = ()
    unreadable: tuple[tuple[RunWord, str, str], ...] = ()  # (word, repository path, why)
    missing: tuple[str, ...] = ()  # relative paths it runs that name no file of the repository

    def missing_reason(self) -> str | None:
        """Why a server command that runs a path naming no file of the repository is not
        understood; None when every path it runs is one."""
        if not self.missing:
            return None
        return (f"it runs {self.missing[0]}, which is no file of the repository (looked from "
                "the block's cd, the wiki root and the page's folder)")

    def texts(self) -> dict[str, str]:
        """The files by the path the command uses (for the launcher reader)."""
        return {f.spelled: f.content for f in self.files}


def read_repository(root: Path | None, page: str, text: str) -> Repository:
    """The files of the repository that `text` runs, read now."""
    if root is None:
        return Repository()
    files: dict[str, RepoFile] = {}
    bad: list[tuple[RunWord, str, str]] = []
    for word in run_words(text):
        rel = repository_file(root, page, text, word.spelled)
        if rel is None or word.spelled in files:
            continue
        content, why = _read_bounded(root / rel)
        if content is None:
            bad.append((word, rel, why))
            continue
        files[word.spelled] = RepoFile(word.spelled, rel, content)
    missing = tuple(w.spelled for w in run_words(text) if "/" in w.spelled
                    and repository_file(root, page, text, w.spelled) is None)
    return Repository(tuple(files.values()), tuple(bad), missing)


def _read_bounded(path: Path) -> tuple[str | None, str]:
    """(the file's text, "") or (None, why it is not read): no more than MAX_REPOSITORY_FILE
    bytes are read, so a huge file costs neither the time nor the memory of reading it."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_REPOSITORY_FILE + 1)
    except OSError as exc:
        return None, exc.strerror or "it cannot be read"
    if len(data) > MAX_REPOSITORY_FILE:
        size = path.stat().st_size
        return None, (f"it is {size / 1e6:,.1f} MB, over the {MAX_REPOSITORY_FILE / 2**20:g} MiB a "
                      "script or compose file of a runbook may hold")
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return None, "it is not UTF-8 text"


def _beside(f: RepoFile) -> tuple[int, str] | None:
    """(0-based line, what) of the first place a script or compose file reads a file beside
    itself: by a path relative to its own folder, which names another file when the run
    executes its copy under the run's folder. One rule for scripts and compose files."""
    if looks_like_compose(f.content):
        first = next(iter(beside_paths(f.content)), None)
        if first is None:
            return None
        key, path = first
        at = f.content.find(path)
        return (f.content.count("\n", 0, at) if at >= 0 else 0), f"{key}: {path}"
    return next(((i, m[0]) for i, code, _b in _code_lines(f.content)
                 for m in [_BESIDE.search(code)] if m), None)


_FUNCTION = re.compile(
    r"(?m)^([ \t]*)(?:function[ \t]+)?([A-Za-z_][\w.-]*)[ \t]*\(\)[ \t]*\{?[ \t]*$")
_LOOP_OPEN = ("for", "while", "until", "select")
_MAX_CALL_DEPTH = 8


def _functions(script: str) -> dict[str, tuple[int, int, int]]:
    """The shell functions a script defines: name → (offset of its name, the span of its body
    up to the `}` at the indentation of its definition)."""
    out: dict[str, tuple[int, int, int]] = {}
    for m in _FUNCTION.finditer(script):
        close = re.compile(rf"(?m)^{re.escape(m[1])}\}}").search(script, m.end())
        out.setdefault(m[2], (m.start(2), m.end(), close.start() if close else len(script)))
    return out


def server_starts(script: str) -> list[int]:
    """Offsets of the servers a script starts, a launch counted once for each call of the
    functions that hold it (and twice inside a loop): more than one means the script starts
    several servers, which one runbook cannot stand for."""
    try:
        cmds = split_commands(script)
    except ShellSyntaxError:
        return []
    functions = _functions(script)
    looped: set[int] = set()
    depth = 0
    calls: list[tuple[int, str]] = []
    for cmd in cmds:
        argv = cmd.argv
        if not argv:
            continue
        if argv[0] in _LOOP_OPEN:
            depth += 1
        elif argv[0] == "done":
            depth = max(0, depth - 1)
        if depth:
            looped.add(cmd.words[0].start)
        if argv[0] in functions and functions[argv[0]][0] != cmd.words[0].start:
            calls.append((cmd.words[0].start, argv[0]))

    def starts(offset: int, level: int) -> list[int]:
        inside = [n for n, (_d, a, b) in functions.items() if a <= offset < b]
        own = min(inside, key=lambda n: functions[n][2] - functions[n][1]) if inside else None
        here = [offset, offset] if offset in looped else [offset]
        if own is None or level >= _MAX_CALL_DEPTH:
            return here
        return [o for at, name in calls if name == own for o in starts(at, level + 1)]

    found = {at for at, _head in top_level_launches(script)}
    found |= set(_launch_lines(script, cmds))
    return [o for at in sorted(found) for o in starts(at, 0)]


def _launch_lines(script: str, cmds: list[SimpleCommand]) -> list[int]:
    """Offsets of the commands on a code line that reads as a launch (an engine launcher,
    `docker run` of a server, `docker compose up`), for launches the reader cannot follow
    (an image in a variable, arguments in an array)."""
    starts = sorted(c.words[0].start for c in cmds if c.words)
    out: list[int] = []
    offset = 0
    for line in script.split("\n"):
        code = line.split(" #", 1)[0]
        m = None if line.lstrip().startswith("#") else _LAUNCH.search(code)
        if m is not None:
            at = offset + m.start()
            before = [s for s in starts if s <= at]
            if before and before[-1] >= offset:
                out.append(before[-1])
        offset += len(line) + 1
    return out


def repository_refusals(block: CodeBlock, repo: Repository) -> list[Refusal]:
    """What the repository files a block runs say against running it as one runbook: a file
    that cannot be read, a script that starts several servers or launches across nodes."""
    text = block.content
    out: list[Refusal] = []
    at = {w.spelled: w for w in run_words(text)}
    for bad, rel, why in repo.unreadable:
        line, col = position(block, text, bad.start)
        out.append(Refusal(line, col, REPOSITORY_CODE, "repository",
                           f"runs {rel}, a file of the repository that cannot be read: {why}"))
    for f in repo.files:
        word = at.get(f.spelled)
        line, col = (position(block, text, word.start) if word is not None
                     else (block.line, block.col))
        launches = server_starts(f.content)
        if len(launches) > 1:
            lines = ", ".join(str(f.content.count("\n", 0, o) + 1)
                              for o in sorted(set(launches)))
            out.append(Refusal(line, col, STATIC_CODE, "alternatives",
                               f"runs {f.path}, which starts {len(launches)} servers (its lines "
                               f"{lines}): one runbook stands for one server"))
        nested = _nested_runs(f.content)
        if nested:
            spelled, offset = nested[0]
            out.append(Refusal(line, col, REPOSITORY_CODE, "repository",
                               f"runs {f.path}, which runs {spelled} (its line "
                               f"{f.content.count(chr(10), 0, offset) + 1}): a file the runbook "
                               "neither reads nor hashes, so an edit to it would change what "
                               "runs and leave the results current; run it from the server "
                               "block itself (`bash "
                               f"{spelled} && …`), where it is read and hashed"))
        near = _beside(f)
        if near is not None and not nested:
            out.append(Refusal(line, col, REPOSITORY_CODE, "repository",
                               f"runs {f.path}, which reads files beside itself ({near[1]} at "
                               f"its line {near[0] + 1}): a run executes a copy in its own "
                               "folder, where they are not"))
        for i, code, _body in _code_lines(f.content):
            m = _MULTI_NODE.search(code)
            if m:
                out.append(Refusal(line, col, STATIC_CODE, "multi-node",
                                   f"runs {f.path}, which launches across several nodes "
                                   f"({m[0].strip()} at its line {i + 1}): a runbook runs on "
                                   "one host"))
                break
    return out


_INTERPRETERS = (*_SHELLS, "python", "python3", "perl", "ruby", "node")
_WRAPPERS = ("exec", "nohup", "env", "time", "command", "nice", "setsid")


def _nested_runs(script: str) -> list[tuple[str, int]]:
    """(path, offset) of each file a repository script runs by a relative path (`bash
    scripts/prep.sh`, `exec ./prep.sh`, `python3 tools/x.py`, `docker compose -f x.yml up`):
    the run would execute it as it is then, unread."""
    found = [(w.spelled, w.command) for w in run_words(script)]
    try:
        cmds = split_commands(script)
    except ShellSyntaxError:
        cmds = []
    for cmd in cmds:
        argv = [a for a in cmd.argv if assignment(a) is None]
        while argv and argv[0] in _WRAPPERS:
            argv = [a for a in argv[1:] if not a.startswith("-") and assignment(a) is None]
        if argv and basename(argv[0]) in _INTERPRETERS:
            argv = [a for a in argv[1:] if not a.startswith("-")][:1]
        path = argv[0] if argv else ""
        if path and not path.startswith(("/", "$", "~")) and _RELATIVE.fullmatch(path) and \
                ("/" in path or path.endswith((".sh", ".py"))):
            found.append((posixpath.normpath(path), cmd.words[0].start))
    return sorted(set(found), key=lambda f: f[1])


def with_copies(text: str, files: tuple[RepoFile, ...]) -> str:
    """`text` with each word that names one of `files` pointing at its copy in the run's
    folder (`"$WIKI_RUN_DIR/scripts/run.sh"`), so the run executes what the plan read."""
    names = {f.spelled for f in files}
    edits = [w for w in run_words(text) if w.spelled in names]
    for w in sorted(edits, key=lambda w: w.start, reverse=True):
        text = f'{text[:w.start]}{w.prefix}"${RUN_DIR_VAR}/{w.spelled}"{text[w.end:]}'
    return text


def repository_launch(repo: Repository, block: CodeBlock, why: str) -> Refusal | None:
    """A block that runs a script or compose file of the repository that starts an engine the
    launcher reader does not understand (`why`): said, located at the command; a block that
    runs such files several times lists alternatives."""
    launching = {f.spelled for f in repo.files if _LAUNCH.search(f.content) or (
        re.search(r"(?m)^services:", f.content) and _ENGINE_REF.search(f.content))}
    runs = [w for w in run_words(block.content) if w.spelled in launching]
    if len(runs) > 1:
        lines = [position(block, block.content, w.command)[0] for w in runs]
        line, col = position(block, block.content, runs[1].command)
        return Refusal(line, col, STATIC_CODE, "alternatives",
                       f"the block starts {len(runs)} servers (lines "
                       f"{', '.join(map(str, lines))}): alternatives to choose from, not one "
                       "run; give each its own block")
    for f in repo.files:
        compose = re.search(r"(?m)^services:", f.content) and _ENGINE_REF.search(f.content)
        if not (_LAUNCH.search(f.content) or compose):
            continue
        word = next((w for w in run_words(block.content) if w.spelled == f.spelled), None)
        line, col = (position(block, block.content, word.command) if word is not None
                     else (block.line, block.col))
        code = "\n".join(c for _i, c, _b in _code_lines(f.content))
        inside = _IMAGE_SCRIPT.search(code)
        if inside is not None:
            why = (f"it starts {inside[1]} inside the image, so the engine, model and port "
                   "cannot be read from it")
        return Refusal(line, col, REPOSITORY_CODE, "repository",
                       f"runs {f.path}, a file of the repository that starts an engine the "
                       f"reader does not understand: {why}")
    return None




def compose_reason(block: CodeBlock, root: Path | None = None, page: str = "") -> str | None:
    """Why a compose file whose services start an engine image cannot be read, or None when
    its images are not engines (a database, a proxy) or it is not readable at all."""
    try:
        services = parse_compose(block.content).services
    except ComposeError:
        return None
    if not any(_ENGINE_WORD.search(s.image or "") for s in services) and \
            not _ENGINE_REF.search(block.content):  # nor passes one on (a launcher's IMAGE)
        return None
    inside = next(((s, p) for s in services for p in s.argv[:1]
                   if root is not None and repository_file(root, page, "", p)), None)
    if inside is not None:  # the container sees the repository only through the file's mounts
        return (f"service {inside[0].name} runs {inside[1]}, a script of the repository, inside "
                "its container, which sees the script only through the compose file's mounts: "
                "a run could not give it the copy it planned; run the script from the block")
    runs = "; ".join(f"service {s.name} runs {' '.join(s.argv) or 'its image default'}"
                     for s in services[:2])
    return (f"compose file whose services start no engine the reader knows ({runs}): the "
            "engine, model and port cannot be read from it")
