"""A run's folder under the checkout's `.artifacts/`, made one component at a time without
following a link: a symlink committed at `.artifacts/<id>` would otherwise send the server log
and the script copies the run executes to wherever it points."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from wikitools.core.errors import InputError


class ArtifactsPathError(InputError):
    """A component of a run's folder that is a symlink or not a folder. The message starts
    with the path, relative to the checkout."""


def run_folder(root: Path, rel: str) -> Path:
    """`root/rel` as a real folder (created when missing), every component of `rel` checked
    with lstat: a symlink or a file on the way raises ArtifactsPathError, before anything is
    written."""
    at = root
    done: list[str] = []
    for part in PurePosixPath(rel).parts:
        at = at / part
        done.append(part)
        shown = "/".join(done)
        try:
            at.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            raise ArtifactsPathError(f"{shown}: cannot create the run's folder: "
                                     f"{exc.strerror or exc}") from None
        mode = os.lstat(at).st_mode
        if stat.S_ISLNK(mode):
            raise ArtifactsPathError(
                f"{shown}: a symlink where the run's folder belongs (to {at.readlink()}); a "
                "run never writes through a link under .artifacts/: remove it (the folder is "
                "the run's own and is never committed)")
        if not stat.S_ISDIR(mode):
            raise ArtifactsPathError(f"{shown}: a file where the run's folder belongs; move it "
                                     "away")
    return at
