"""Where a kept result file came from. Files live at `data/<source>/<commit>/<path>`, unchanged;
`data/<source>/source.yaml` names the repository, who reported its numbers (`reported_by`,
"the community" when absent), each commit's full id, and the day each file last changed there
(the day its numbers were reported)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from wikitools.core.yamlload import load_yaml
from wikitools.runbook.rendering.reported.tables import DataError

ROOT = "data"
MANIFEST = "source.yaml"


@dataclass(frozen=True, slots=True)
class Pinned:
    """One kept file: its place here, its source, its bytes' sha256 and its text."""

    rel: str  # data/<source>/<commit>/<path>
    repository: str  # https://github.com/owner/name
    commit: str  # full id
    short: str  # the commit as the folder names it
    path: str  # the file's path in the source repository
    reported: str  # YYYY-MM-DD
    sha256: str
    text: str
    reported_by: str = "the community"

    @property
    def url(self) -> str:
        return f"{self.repository}/blob/{self.commit}/{self.path}"


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_pinned(root: Path, rel: str) -> Pinned:
    """The kept file at `rel` with its source; DataError (line 1) when it is not kept as the
    layout says, or is not UTF-8."""
    parts = rel.split("/")
    if len(parts) < 4 or parts[0] != ROOT or ".." in parts:
        raise DataError(1, 1, f"'{rel}' is not a kept file: the layout is "
                              f"{ROOT}/<source>/<commit>/<path in the source>")
    source, short, path = parts[1], parts[2], "/".join(parts[3:])
    manifest = _manifest(root, f"{ROOT}/{source}/{MANIFEST}")
    commit = (manifest.get("commits") or {}).get(short)
    if not isinstance(commit, dict) or not isinstance(commit.get("commit"), str):
        raise DataError(1, 1, f"{ROOT}/{source}/{MANIFEST} names no commit '{short}'")
    reported = (commit.get("files") or {}).get(path)
    if reported is None:
        raise DataError(1, 1, f"{ROOT}/{source}/{MANIFEST} does not list '{path}' under "
                              f"commit {short}")
    if not (root / rel).resolve().is_relative_to((root / ROOT).resolve()):
        raise DataError(1, 1, f"'{rel}' leads outside {ROOT}/ (a link?); keep the file itself")
    try:
        data = (root / rel).read_bytes()
    except OSError as exc:
        raise DataError(1, 1, f"cannot read '{rel}': {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(1, 1, f"'{rel}' is not UTF-8 (byte {exc.start})") from None
    return Pinned(rel, str(manifest.get("repository", "")).rstrip("/"), commit["commit"],
                  short, path, str(reported), sha256_of(data), text,
                  str(manifest.get("reported_by") or "the community"))


def _manifest(root: Path, rel: str) -> dict[str, Any]:
    try:
        text = (root / rel).read_text(encoding="utf-8")
    except OSError:
        raise DataError(1, 1, f"no {rel}: a kept file's source folder names its repository "
                              "there") from None
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" ({rel}:{mark.line + 1}:{mark.column + 1})" if mark is not None else ""
        raise DataError(1, 1, f"{rel} is not valid YAML{where}") from None
    if not isinstance(doc, dict):
        raise DataError(1, 1, f"{rel} is not a mapping")
    return doc
