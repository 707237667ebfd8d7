"""The receipt of a run: what a reader needs to reproduce it. SHA-256 of every file the
runbook's commands name (scripts, token inputs, probe files, the model folder's files, compose
files) and of every result file the clients wrote, each marked read or written; the model
snapshot; and the compile/kernel cache folders the engine used, with whether they were warm
(already filled) when the server started. The image digest and engine version are the
record's own `engine` facts."""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.shell import ShellSyntaxError, tokenize
from wikitools.runbook.engines.types import EngineCommand
from wikitools.runbook.execution.fetch import sha256
from wikitools.runbook.execution.planned import Plan, PlannedServer

MAX_FOLDER_FILES = 64  # a folder named by a command: its files (not below), at most this many
# Bounds on the hashing before the server starts (and again after the run): a file larger than
# MAX_HASH_BYTES is named with its size only, and no more than HASH_BUDGET_S is spent in all.
MAX_HASH_BYTES = 16 * 2**30
HASH_BUDGET_S = 30.0
NOT_HASHED = "not hashed: "
_EXT = re.compile(r"\.[A-Za-z0-9]{1,12}$")
_HUB_SNAPSHOT = re.compile(r"/snapshots/([0-9a-f]{7,64})(?:/|$)")
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


_PARAM = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)")


def expand(word: str, env: Mapping[str, str]) -> str:
    """`${VAR:-default}` and `$VAR` replaced from `env` (nothing else is expanded)."""
    return _PARAM.sub(lambda m: env.get(m[1] or m[3]) or (m[2] or ""), word)


def _words(text: str, env: Mapping[str, str]) -> list[str]:
    try:
        words = [expand(w.value, env) for w in tokenize(text) if not w.op]
    except ShellSyntaxError:
        return []
    out = []
    for w in words:
        value = w.split("=", 1)[1] if w.startswith("-") and "=" in w else w
        if value.startswith("-") or "://" in value or "$" in value or not value:
            continue
        if "/" in value or _EXT.search(value):
            out.append(value)
    return out


def named_paths(plan: Plan) -> list[str]:
    """Paths the server and client commands of every variant name (as written, variables
    filled in), the compose files the run writes, and the clients' result files; in order, once
    each."""
    found: list[str] = []
    for v in plan.variants:
        found += _words(v.server.command, {**os.environ, **v.server.env})
        if v.server.container is not None:
            found += [f"{v.server.container.workdir}/{p}" for p, _ in v.server.container.files]
        for c in v.clients:
            for point in c.points:
                for run in point.runs:
                    found += _words(run.command, {**os.environ, **point.env})
                    if run.result_path and not run.warmup:
                        found.append(run.result_path)
    return list(dict.fromkeys(found))


def _files(root: Path, named: str) -> list[tuple[str, Path]]:
    """The file `named`, or the files directly in the folder `named` (a model folder); a
    folder of the run's own artifacts counts only through the result files named in it."""
    path = Path(named) if Path(named).is_absolute() else root / named
    shown = named.removeprefix("./")
    if path.is_file():
        return [(shown, path)]
    if shown.startswith(".artifacts/"):
        return []
    if path.is_dir() and path.resolve() != root.resolve():
        kids = sorted(p for p in path.iterdir() if p.is_file())[:MAX_FOLDER_FILES]
        return [(f"{shown.rstrip('/')}/{p.name}", p) for p in kids]
    return []


def _size(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n:,} bytes"


def file_hash(path: Path, deadline: float) -> str:
    """"sha256:<hex>" of the file, or "not hashed: why" for a file over MAX_HASH_BYTES (known
    from its size, before reading) or one whose hashing would pass `deadline` (monotonic)."""
    size = path.stat().st_size
    if size > MAX_HASH_BYTES:
        return (f"{NOT_HASHED}{_size(size)}, over the {_size(MAX_HASH_BYTES)} a file may have "
                "to be hashed for the receipt")
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            if time.monotonic() > deadline:
                return (f"{NOT_HASHED}{_size(size)}; the {HASH_BUDGET_S:g} s the receipt may "
                        "spend hashing ran out")
            h.update(block)
    return "sha256:" + h.hexdigest()


def snapshot(root: Path, named: list[str], unhashed: frozenset[str] = frozenset()
             ) -> dict[str, str]:
    """{shown path: sha256 or "not hashed: why"} of every file the named paths reach now,
    within HASH_BUDGET_S in all (a model folder may hold hundreds of GiB); the paths in
    `unhashed` (not hashed before the run) are left out."""
    out: dict[str, str] = {}
    deadline = time.monotonic() + HASH_BUDGET_S
    for n in named:
        for shown, path in _files(root, n):
            if shown in unhashed:
                continue
            try:
                out[shown] = file_hash(path, deadline)
            except OSError:
                continue
    return out


def _expand(template: str, env: Mapping[str, str]) -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    xdg = env.get("XDG_CACHE_HOME") or (Path.home() / ".cache").as_posix()
    text = template.replace("{tmp}", tempfile.gettempdir()).replace("{user}", user)
    return Path(text.replace("{xdg_cache}", xdg)).expanduser().as_posix()


def shared_cache_env(server: PlannedServer, root: Path) -> dict[str, str]:
    """The variables that place the run's shared compile and kernel caches, as absolute
    paths (the folders are made here)."""
    out = {}
    for var, rel in server.caches:
        folder = (root / rel).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        out[var] = str(folder)
    return out


def _cache_folders(server: PlannedServer, root: Path) -> list[tuple[engines.CacheDir, Path]]:
    """Each compile/kernel cache of the server's engine and its folder as the server sees it."""
    eng = engines.engine(server.engine)
    env = {**os.environ, **server.env, **{v: (root / r).resolve().as_posix()
                                            for v, r in server.caches}}
    out = []
    for c in eng.cache_dirs if eng is not None else ():
        base = env.get(c.env) or _expand(c.default, env)
        out.append((c, Path(base) / c.suffix if c.suffix else Path(base)))
    return out


def _filled(folder: Path) -> bool:
    try:
        return folder.is_dir() and any(True for _ in folder.iterdir())
    except OSError:
        return False


def warm_caches(server: PlannedServer, root: Path) -> dict[str, bool]:
    """{cache name: already holds something} just before a server starts; nothing for a
    server in a container (its folders are the container's)."""
    if server.docker:
        return {}
    return {c.name: _filled(folder) for c, folder in _cache_folders(server, root)}


def cache_state(plan: Plan, root: Path) -> list[dict[str, Any]]:
    """The engine's cache folders as the first server will see them, and whether each already
    holds something (warm) before it starts; `shared`: the run's own folder, new with it.
    Nothing for a server in a container (its folders are the container's)."""
    srv = plan.server
    if srv.docker:
        return []
    placed = {**os.environ, **srv.env}
    shared = {v for v, _ in srv.caches}
    return [{"name": c.name, "path": folder.as_posix(), "env": c.env,
             "set": c.env in placed, "shared": c.env in shared, "warm": _filled(folder)}
            for c, folder in _cache_folders(srv, root)]


def model_snapshot(cmd: EngineCommand, root: Path,
                   env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Which snapshot of the model: `--revision`, a Hugging Face cache path's
    `snapshots/<hash>`, "main" for a hub id without a revision, or a local folder (whose files
    the receipt hashes)."""
    if cmd.model is None:
        return {}
    model = cmd.model
    env = env if env is not None else os.environ
    try:  # the word as written, when it reads a variable (`"${MODEL:-default}"`)
        raw = [w.value for w in tokenize(cmd.text) if not w.op]
    except ShellSyntaxError:
        raw = []
    for word in raw:
        if "$" in word and expand(word, {}) == model:
            model = expand(word, env)
            break
    revision = cmd.flag("--revision")
    if revision:
        return {"model": model, "snapshot": revision, "from": "--revision"}
    m = _HUB_SNAPSHOT.search(model)
    if m:
        return {"model": model, "snapshot": m[1], "from": "Hugging Face cache path"}
    local = model.startswith(("/", "./", "../", "~")) or (root / model).exists()
    if not local and _HUB_ID.match(model):
        return {"model": model, "snapshot": "main", "from": "no --revision: the default branch"}
    return {"model": model, "snapshot": None, "from": "local folder: its files are hashed"}


def _entry(path: str, old: str | None, new: str | None) -> dict[str, Any]:
    """A file of the receipt: read (the same before and after the run) or written, with its
    hash, or with why it was not hashed (a file not hashed before the run is not hashed after:
    it counts as read)."""
    if old is not None and old.startswith(NOT_HASHED):
        return {"path": path, "sha256": None, "role": "read",
                "not_hashed": old.removeprefix(NOT_HASHED)}
    role = "read" if old is not None and old == new else "written"
    if new is not None and new.startswith(NOT_HASHED):
        return {"path": path, "sha256": None, "role": role,
                "not_hashed": new.removeprefix(NOT_HASHED)}
    return {"path": path, "sha256": new or old, "role": role}


def fetched_files(plan: Plan) -> list[dict[str, Any]]:
    """The files of other repositories the run wrote into its folder: each file's path in
    its repository, the repository and commit it was fetched from, and the sha256 of what was
    fetched (the same file at the same commit wherever the run is repeated)."""
    texts = {path: text for v in plan.variants if v.server.container is not None
             for path, text in v.server.container.files}
    return [{"path": f.path, "repo": f.source[0], "commit": f.source[1],
             "sha256": sha256(texts[f.path]), "role": "fetched"}
            for f in plan.runbook.files if f.source is not None and f.path in texts]


def build_receipt(plan: Plan, root: Path, before: Mapping[str, str],
                  caches: list[dict[str, Any]]) -> dict[str, Any]:
    """The receipt, from the files hashed `before` the run and now."""
    unhashed = frozenset(p for p, why in before.items() if why.startswith(NOT_HASHED))
    after = snapshot(root, named_paths(plan), unhashed)
    files = [_entry(path, before.get(path), after.get(path))
             for path in sorted(set(before) | set(after))]
    cmd = plan.runbook.server.command
    model = model_snapshot(cmd, root, {**os.environ, **plan.server.env})
    receipt: dict[str, Any] = {"files": files + fetched_files(plan), "model": model,
                               "caches": caches}
    if cmd.speculative:  # the drafting method as configured; acceptance is measured per point
        receipt["speculative"] = dict(sorted(cmd.speculative.items()))
    return receipt
