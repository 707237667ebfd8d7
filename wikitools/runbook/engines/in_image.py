"""What a `docker run` runs inside its image when it is not a launcher the reader knows: the
program named by `--entrypoint`, or the first word after the image (past `bash -lc '…'` and
the script's preamble). Says which script inside the image stands between the page and the
engine, or that the container only idles for later `docker exec` commands."""

from __future__ import annotations

import re

from wikitools.runbook.engines import docker_cli as dk
from wikitools.runbook.engines.shell import (
    ShellSyntaxError,
    assignment,
    basename,
    heredoc_files,
    split_commands,
)

_ARRAY = re.compile(r"\$\{\w+\[[@*]\]\}")  # "${EXTRA_FLAGS[@]}" among the options
_SHELLS = {"bash", "sh", "zsh", "dash", "fish"}
IDLE = frozenset({"sleep", "tail", "true", "cat"})
# Programs whose arguments the launcher reader reads itself (engines and their interpreters).
_LAUNCHER_PROGRAM = re.compile(r"^(?:vllm|sglang|llama-server|python[\d.]*|uv|env|nohup|"
                               r"timeout|numactl|taskset|nsys)$")


_PREAMBLE = frozenset({"unset", "export", "cd", "set", "source", ".", "mkdir", "echo", "rm",
                       "ulimit", "exec", "true"})


def _program_words(words: list[str]) -> list[str]:
    """The words of the program a container command runs, past a shell and its `-c` script's
    preamble (`unset X; cd /opt/vllm && exec ./serve.sh` → `./serve.sh`)."""
    while words and basename(words[0]) in _SHELLS:
        script = next((words[k + 1] for k, a in enumerate(words[:-1])
                       if re.fullmatch(r"-[a-z]*c", a)), None)
        if script is None:
            return words[1:]
        try:
            cmds = [c.argv for c in split_commands(script) if c.argv]
        except ShellSyntaxError:
            return []
        words = next((a for a in cmds if a[0] not in _PREAMBLE or (
            a[0] == "exec" and len(a) > 1)), [])
    words = [w for w in words if assignment(w) is None]
    return words[1:] if words[:1] == ["exec"] else words


def run_image(argv: list[str], i: int) -> tuple[int, str | None]:
    """(index of the image, the `--entrypoint` if any) in `docker run` argv (`docker` at i)."""
    j, entry = i + 2, None
    while j < len(argv) and (argv[j].startswith("-") or _ARRAY.fullmatch(argv[j])):
        flag, eq, value = argv[j].partition("=")
        takes = not eq and (flag in dk.RUN_VALUE_FLAGS or (
            re.fullmatch(r"-[a-zA-Z]+", flag) is not None and flag[-1] in dk.RUN_VALUE_SHORT))
        if flag == dk.ENTRYPOINT_FLAG:
            entry = value if eq else argv[j + 1] if j + 1 < len(argv) else None
        j += 2 if takes else 1
    return j, entry


def container_program(text: str) -> tuple[int, str] | None:
    """(offset of the command, the program it runs in the container) for the first `docker run`
    of `text` (or of a here-document it writes) that runs neither a shell to type in nor a
    launcher the reader knows: its `--entrypoint`, or the first word of what follows the image
    (through `bash -lc 'exec PROGRAM …'`)."""
    try:
        cmds = [(c, c.words[0].start) for c in split_commands(text) if c.words]
        for body in heredoc_files(text).values() if "<<" in text else ():
            cmds += [(c, -1) for c in split_commands(body) if c.words]
    except ShellSyntaxError:
        return None
    for cmd, offset in cmds:
        argv = cmd.argv
        i = next((k for k, a in enumerate(argv) if basename(a) in ("docker", "podman")), None)
        if i is None or argv[i + 1 : i + 2] != ["run"]:
            continue
        j, entry = run_image(argv, i)
        if not any(a in ("-d", "--detach", "--gpus") or a.startswith("--gpus=") or
                   re.fullmatch(r"-[it]*d[it]*", a) for a in argv[i + 2 : j]):
            continue  # a command run in the foreground without GPUs: a one-off
        words = _program_words(([entry] if entry else []) + argv[j + 1 :])
        if words and not words[0].startswith("-") and not _LAUNCHER_PROGRAM.match(
                basename(words[0])):
            return max(offset, 0), words[0]
    return None


__all__ = ["IDLE", "container_program", "run_image"]
