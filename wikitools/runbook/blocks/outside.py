"""Files of another repository that a launch reads: the page's own `git clone URL` (and the
`git checkout REF` after it) before a `docker compose -f FILE up` whose file the page does not
show. A commit pins the file; a branch (`main`) moves, so what a run would read is not what the
page was written against."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from wikitools.pages.parse import CodeBlock, Page
from wikitools.runbook.engines.compose import compose_call
from wikitools.runbook.engines.shell import ShellSyntaxError, assignment, split_commands

_COMMIT = re.compile(r"[0-9a-f]{7,40}")
_CLONE_VALUE_OPTIONS = {"-b", "--branch", "-o", "--origin", "--depth", "-c", "--config",
                        "--reference", "--filter", "-j", "--jobs", "--template"}


@dataclass(frozen=True, slots=True)
class OutsideFile:
    path: str  # as the command names it
    repo: str  # the URL the page clones
    ref: str | None  # what it checks out (None: the repository's default branch)
    line: int  # the page line of the clone

    @property
    def pinned(self) -> bool:
        return self.ref is not None and _COMMIT.fullmatch(self.ref) is not None


def _clone(argv: list[str]) -> tuple[str, str | None] | None:
    """(URL, branch) of `git clone [options] URL [DIR]`."""
    if argv[:2] != ["git", "clone"]:
        return None
    branch, k, words = None, 2, []
    while k < len(argv):
        a = argv[k]
        if a in _CLONE_VALUE_OPTIONS:
            branch = argv[k + 1] if a in ("-b", "--branch") and k + 1 < len(argv) else branch
            k += 2
            continue
        if not a.startswith("-"):
            words.append(a)
        k += 1
    return (words[0], branch) if words else None


def _checkout(argv: list[str]) -> str | None:
    """The REF of `git checkout REF` / `git switch REF` / `git -C DIR checkout REF`."""
    if argv[:1] != ["git"]:
        return None
    rest = argv[3:] if argv[1:2] == ["-C"] else argv[1:]
    if rest[:1] not in (["checkout"], ["switch"]):
        return None
    refs = [a for a in rest[1:] if not a.startswith("-")]
    return refs[0] if refs else None


def outside_file(page: Page, block: CodeBlock) -> OutsideFile | None:
    """The file of another repository that the block's `docker compose -f FILE up` reads, when
    the page (this block or one before it) clones that repository."""
    try:
        cmds = split_commands(block.content)
    except ShellSyntaxError:
        return None
    calls = [compose_call(cmd.argv, next((k for k, a in enumerate(cmd.argv)
                                          if assignment(a) is None), 0)) for cmd in cmds]
    path = next((c.files[0] for c in calls if c is not None and c.subcommand == "up"
                 and c.files and not c.files[0].startswith(("/", "$", "~"))), None)
    if path is None:
        return None
    found: OutsideFile | None = None
    for b in page.code_blocks:
        if b.line > block.line:
            break
        try:
            for cmd in split_commands(b.content):
                argv = cmd.argv
                if (cloned := _clone(argv)) is not None:
                    found = OutsideFile(path, cloned[0], cloned[1], b.content_line)
                elif found is not None and (ref := _checkout(argv)) is not None:
                    found = OutsideFile(path, found.repo, ref, found.line)
        except ShellSyntaxError:
            continue
    return found


def outside_message(f: OutsideFile) -> str:
    """Why a launch that reads a file of another repository is not proposed."""
    where = f"{f.path} of {f.repo} (cloned at line {f.line})"
    if not f.pinned:
        at = f"its branch {f.ref}" if f.ref else "its default branch"
        return (f"the compose file is {where}, at {at}, which moves: the file a run would read "
                "is not the one the page was written against; pin it to a commit (`wiki "
                f"runbook pin {f.repo} {f.ref or 'HEAD'}` names the current one)")
    commit = f.ref if f.ref and len(f.ref) == 40 else f"<the full commit of {f.ref}>"
    return (f"the compose file is {where}, at commit {f.ref}, which the page does not show: "
            f"name it in a `yaml {{ .runbook-file for=ID path={f.path} repo={f.repo} "
            f"commit={commit} }}` block, fetched when the run is planned, and declare the "
            "server it starts (engine= model= tp= port=)")


_FULL_COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO_URL = re.compile(r"(?:https?|ssh|git|file)://[^\s]+|[\w.-]+@[\w.-]+:[^\s]+")


def pinned_source(opts: dict[str, tuple[str, int]], content: str,
                  error: Callable[[str, str, int], None]) -> tuple[tuple[str, str] | None, bool]:
    """((repository, commit) of a file block's `repo=`/`commit=`, or None without them; False
    after an error: a branch or short commit, a body besides the source, one without the
    other)."""
    if "repo" not in opts and "commit" not in opts:
        return None, True
    if "repo" not in opts or "commit" not in opts:
        error("RB004", "a file of another repository names both repo= and commit=",
              (opts.get("repo") or opts["commit"])[1])
        return None, False
    (repo, col), (commit, commit_col) = opts["repo"], opts["commit"]
    if not _REPO_URL.fullmatch(repo):
        error("RB004", f"bad value for repo: '{repo}' (a git repository URL: https://, ssh://, "
              "git://, file:// or git@host:path)", col)
        return None, False
    if not _FULL_COMMIT.fullmatch(commit):
        error("RB004", f"bad value for commit: '{commit}' (the full 40-digit commit; a branch "
              f"moves: `wiki runbook pin {repo} {commit}` names its commit now)", commit_col)
        return None, False
    if content.strip():
        error("RB004", "a file block with repo= and commit= shows no text of its own: the run "
              "fetches the file from that commit", col)
        return None, False
    return (repo, commit), True


__all__ = ["OutsideFile", "outside_file", "outside_message", "pinned_source"]
