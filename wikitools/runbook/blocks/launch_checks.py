"""What a server block's understood command says against running it as one server: no model
at all (a flag illustration such as `vllm serve --enforce-eager`), a stand-in for a model
(`vllm serve my-model`), a client run after the server in the same block (it would only run
once the server exits), and a file named by a flag (`--config config.yaml`, `--chat-template
./examples/x.jinja`) that the page does not attach. Said once for `scan` and the block reader."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from wikitools.pages.parse import CodeBlock
from wikitools.runbook.blocks.refusals import STATIC_CODE, Refusal, position
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.launcher import find_in_script, top_level_launches
from wikitools.runbook.engines.shell import ShellSyntaxError, heredoc_files, split_commands
from wikitools.runbook.engines.types import EngineCommand

# Model names that stand for "your model here" in docs (vLLM's `vllm serve my-model`).
_STAND_IN = re.compile(r"(?:my|your|some|example|sample)[-_]?(?:model|llm)(?:[-_]?name)?"
                       r"|model[-_]?(?:name|id|path)", re.I)
# Compound-command words: a client inside `until curl …; do sleep 5; done` waits for the
# server, it does not measure it.
_KEYWORDS = frozenset({"until", "while", "if", "then", "elif", "else", "do", "done", "fi", "!",
                       "for", "case", "esac", "{", "}"})
_FILE_VALUE = re.compile(r"[\w.-]+(?:/[\w.-]+)*\.(?:ya?ml|json|jinja2?|j2|py|txt|toml)|"
                         r"\.{1,2}/\S+")


def _at(block: CodeBlock, needle: str) -> tuple[int, int]:
    offset = block.content.find(needle)
    return position(block, block.content, max(offset, 0))


def _no_model(block: CodeBlock, cmd: EngineCommand) -> Refusal | None:
    if cmd.model:
        return None
    line, col = _at(block, (cmd.launcher or "").split(" ")[0] or cmd.text.strip()[:1])
    return Refusal(line, col, STATIC_CODE, "no-model",
                   f"the command names no model ({cmd.launcher} with only flags): a flag "
                   "illustration, not a launch; write the model it serves")


def _stand_in(block: CodeBlock, cmd: EngineCommand) -> Refusal | None:
    model = (cmd.model or "").strip("'\"")
    if not _STAND_IN.fullmatch(model):
        return None
    line, col = _at(block, model)
    return Refusal(line, col, STATIC_CODE, "placeholder",
                   f"the command holds a placeholder, {model} (a stand-in for a model's "
                   "name): write the model it stands for")


def _client_after(block: CodeBlock, files: Mapping[str, str]) -> Refusal | None:
    """A client command (curl, a benchmark) at the top level of the block after the server's
    launch: the block would run it only once the server exits, or before it is ready."""
    text = block.content
    launches = top_level_launches(text, files)
    if not launches:
        return None
    try:
        cmds = split_commands(text)
    except ShellSyntaxError:
        return None
    for cmd in cmds:
        argv = cmd.argv
        if not argv or cmd.words[0].start <= launches[0][0] or argv[0] in _KEYWORDS:
            continue
        try:
            found = find_in_script(text[cmd.words[0].start : cmd.words[-1].end])
        except ShellSyntaxError:
            continue
        if found is not None and found[0].kind == "client":
            line, col = position(block, text, cmd.words[0].start)
            return Refusal(line, col, STATIC_CODE, "client-in-server",
                           f"the block starts the server and then runs a client "
                           f"({found[0].launcher}, line {line}): the client would run only "
                           "once the server exits; put it in a block of its own after this "
                           "one")
    return None


def _unattached_file(block: CodeBlock, cmd: EngineCommand, files: Mapping[str, str],
                     ) -> Refusal | None:
    """A relative file named by a flag that reads one, which no file block of the runbook, no
    here-document of the block and no repository file it runs provides."""
    have = {posixpath.normpath(p) for p in [*files, *heredoc_files(block.content)]}
    for flag, value in cmd.flags:
        if flag not in engines.FILE_FLAGS or not value:
            continue
        path = value.strip("'\"")
        if path.startswith(("/", "~", "$")) or not _FILE_VALUE.fullmatch(path) or \
                posixpath.normpath(path) in have:
            continue
        line, col = _at(block, path)
        return Refusal(line, col, "RB016", "unattached-file",
                       f"{flag} {path} names a file that the page does not attach: the run "
                       "would not have it; show it in a `.runbook-file` block with "
                       f"path={posixpath.normpath(path)}, or write the path it has on the host")
    return None


def _cd_before_compose(block: CodeBlock, cmd: EngineCommand, files: Mapping[str, str],
                       ) -> Refusal | None:
    """`cd DIR` before a `docker compose up` of a compose file of the page: Compose would read
    the file in DIR, not the copy the run writes into its own folder."""
    use = cmd.container
    if use is None or use.kind != "compose" or use.compose_file in heredoc_files(block.content):
        return None
    launches = top_level_launches(block.content, files)
    try:
        cmds = split_commands(block.content)
    except ShellSyntaxError:
        return None
    for c in cmds:
        if c.argv[:1] == ["cd"] and launches and c.words[0].start < launches[0][0]:
            line, col = position(block, block.content, c.words[0].start)
            where = " ".join(c.argv[1:2]) or "~"
            return Refusal(line, col, "RB016", "cd-before-compose",
                           f"the block changes to {where} before docker compose up, so Compose "
                           "would read the compose file there, not the page's copy the run "
                           "writes into its own folder; leave the cd out")
    return None


def command_refusals(block: CodeBlock, cmd: EngineCommand, files: Mapping[str, str],
                     ) -> list[Refusal]:
    """Why the understood command of `block` does not stand for one server (a declared
    server's model is its declaration's)."""
    if cmd.engine is None:
        return []
    found = [_no_model(block, cmd), _stand_in(block, cmd), _client_after(block, files),
             _unattached_file(block, cmd, files), _cd_before_compose(block, cmd, files)]
    return [r for r in found if r is not None]


__all__ = ["command_refusals"]
