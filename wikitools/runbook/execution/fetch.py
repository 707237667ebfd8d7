"""Files of another repository that a runbook names at a commit (`.runbook-file … repo=
commit=`), fetched when the run is planned: one shallow `git fetch` of that commit into a
temporary folder that is removed again (nothing is kept between runs), then the file's text at
that commit. The plan shows its sha256; the run writes that text into its own folder."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile

from wikitools.core.errors import UsageError

FETCH_TIMEOUT_S = 300.0


def _git(argv: list[str], what: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # never ask for a password
    try:
        done = subprocess.run(["git", "-c", "protocol.ext.allow=never", *argv], env=env,
                              capture_output=True, timeout=FETCH_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"could not fetch {what}: {exc}") from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(f"could not fetch {what}: {lines[-1] if lines else 'git failed'}")
    return done


def fetch_file(repo: str, commit: str, path: str) -> str:
    """The text of `path` in `repo` at `commit` (a UsageError, exit 2, when it cannot be
    fetched or is not text)."""
    what = f"{path} from {repo} at {commit}"
    with tempfile.TemporaryDirectory(prefix="wiki-fetch-") as tmp:
        _git(["init", "-q", tmp], what)
        _git(["-C", tmp, "fetch", "-q", "--depth", "1", "--no-tags", repo, commit], what)
        shown = _git(["-C", tmp, "show", f"{commit}:{path}"], what)
    try:
        return shown.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} is not UTF-8 text") from None


def resolve_ref(repo: str, ref: str = "HEAD") -> str:
    """The commit a branch or tag of `repo` names now (`git ls-remote`; an annotated tag's
    commit, not the tag object), for a maintainer pinning a file block."""
    what = f"{ref} of {repo}"
    listed = _git(["ls-remote", repo], what).stdout.decode("utf-8", "replace").splitlines()
    refs: dict[str, str] = {}
    for line in listed:
        commit, _, name = line.partition("\t")
        refs[name] = commit
    names = [ref] if ref == "HEAD" or ref.startswith("refs/") else [
        f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}"]
    found = next((refs[n] for n in names if n in refs), None)
    if found is None:
        raise UsageError(f"{repo} has no branch or tag {ref}")
    return found


def sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


__all__ = ["fetch_file", "resolve_ref", "sha256"]
