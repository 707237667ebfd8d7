"""Containers a run starts: `docker run` (foreground or `-d`) and `docker compose up` (foreground
or `-d`). The executor only ever acts on containers that carry the run's own mark: the label with
the run's tag that the plan added to `docker run`, or the labels Compose puts on the containers of
the run's own project (which the plan sets, whatever the page says). It follows a
detached container's log (`docker logs -f`) and exit (`docker wait`), stops with `docker stop` /
`docker compose down`, removes what the run created, and verifies each ID is gone.

Also the Docker facts preflight needs: does a daemon answer, is a container name taken (and by
which ID), does a Compose project already have containers, can `--gpus` work (NVIDIA runtime)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wikitools.runbook.execution.planned import PlannedContainer
from wikitools.runbook.execution.processes import TAG_VAR, spawn, stop_group

DOCKER_TIMEOUT_S = 30.0  # any single docker CLI call
GONE_TIMEOUT_S = 15.0  # how long a stopped container may take to disappear
HOOK = "nvidia-container-runtime-hook"  # what dockerd runs for `--gpus`
REMOVED = -1  # `exited()` when the container was removed before its exit code was read
RUN_LABEL = "wikitools.run."  # + the run's tag: the label key the plan adds to `docker run`
PROJECT_LABEL = "com.docker.compose.project"
WORKDIR_LABEL = "com.docker.compose.project.working_dir"


def short(cid: str) -> str:
    return cid[:12]


def _docker(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
            timeout: float = DOCKER_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    full = None
    if env:
        full = dict(os.environ)
        full.update(env)
    try:
        return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                              check=False, env=full, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(args), 125, "", str(exc))


def first_error(text: str) -> str:
    """The line of docker's output that says what went wrong."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "Error" in ln or "error" in ln or ln.startswith("ERROR"):
            return ln
    return lines[-1] if lines else "no output"


_CONFLICT = re.compile(r'container name "/?(?P<name>[^"]+)" is already in use by container '
                       r'"(?P<id>[0-9a-f]+)"')


def explain(line: str) -> str:
    """A docker error line in the words of the run: a name conflict says whose container."""
    m = _CONFLICT.search(line)
    if m:
        return (f"container name {m['name']} already in use by a container this run did not "
                f"start (ID {short(m['id'])})")
    return line


# --------------------------------------------------------------------------- facts for preflight


@dataclass(frozen=True, slots=True)
class DockerFacts:
    daemon_error: str | None = None  # why no daemon answers (None: it answers)
    runtimes: tuple[str, ...] = ()
    nvidia_hook: bool = False
    taken: tuple[tuple[str, str], ...] = ()  # (container name, ID of the container holding it)

    @property
    def gpus_ok(self) -> bool:
        return self.nvidia_hook or "nvidia" in self.runtimes


def gather_docker(names: Sequence[str] = ()) -> DockerFacts:
    """Ask the daemon: runtimes and the holders of `names`."""
    info = _docker(["docker", "info", "--format", "{{json .Runtimes}}"], timeout=20)
    if info.returncode != 0:
        return DockerFacts(daemon_error=first_error(info.stderr or info.stdout))
    try:
        runtimes = tuple(sorted(json.loads(info.stdout or "{}")))
    except ValueError:
        runtimes = ()
    taken = []
    for name in names:
        held = container_id(name)
        if held:
            taken.append((name, held))
    return DockerFacts(None, runtimes, shutil.which(HOOK) is not None, tuple(taken))


def container_id(ref: str) -> str | None:
    """Full ID of the container named (or identified by) `ref`; None when there is none."""
    out = _docker(["docker", "container", "inspect", "--format", "{{.Id}}", ref])
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def exists(cid: str) -> bool:
    return container_id(cid) is not None


def project_containers(project: str) -> list[str]:
    return labelled(f"{PROJECT_LABEL}={project}")


def labelled(label: str) -> list[str]:
    """Full IDs of the containers (running or not) that carry `label` (KEY or KEY=VALUE)."""
    out = _docker(["docker", "ps", "-aq", "--no-trunc", "--filter", f"label={label}"])
    return out.stdout.split() if out.returncode == 0 else []


def _label(cid: str, key: str) -> str | None:
    out = _docker(["docker", "container", "inspect", "--format",
                   "{{json .Config.Labels}}", cid])
    try:
        labels = json.loads(out.stdout or "null") if out.returncode == 0 else None
    except ValueError:
        return None
    value = labels.get(key) if isinstance(labels, dict) else None
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class ImageFacts:
    image_id: str | None
    digest: str | None  # the registry digest (repo@sha256:…) when the image came from one


def image_of(cid: str) -> ImageFacts:
    """The image a container actually runs: its ID and registry digest."""
    out = _docker(["docker", "container", "inspect", "--format", "{{.Image}}", cid])
    image = out.stdout.strip() if out.returncode == 0 else ""
    if not image:
        return ImageFacts(None, None)
    return image_facts(image)


def image_facts(image: str) -> ImageFacts:
    out = _docker(["docker", "image", "inspect", "--format",
                   "{{.Id}} {{json .RepoDigests}}", image])
    if out.returncode != 0 or not out.stdout.strip():
        return ImageFacts(None, None)
    image_id, _, digests = out.stdout.strip().partition(" ")
    try:
        repo = json.loads(digests) or []
    except ValueError:
        repo = []
    return ImageFacts(image_id, repo[0] if repo else None)


# --------------------------------------------------------------------------- a run's containers


@dataclass
class Containers:
    """The containers of one run. `poll()` while the server starts: it finds the container IDs
    (by the run's label, or its own Compose project) and, for detached containers, starts
    following their log and exit. `exited()` says whether they stopped; `stop()` tears them down."""

    spec: PlannedContainer
    root: Path
    log_path: Path
    env: Mapping[str, str]
    ids: list[str] = field(default_factory=list)
    helpers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    following: bool = False
    exit_path: Path | None = None
    _last_ps: float = 0.0

    @property
    def tag(self) -> str:
        return self.env.get(TAG_VAR, "")

    @property
    def workdir(self) -> Path:
        return self.root / self.spec.workdir

    def poll(self, launcher_code: int | None) -> None:
        """`launcher_code`: the exit code of the block's shell (None while it runs)."""
        spec = self.spec
        if spec.kind == "run":
            now = time.monotonic()
            if not self.ids and now - self._last_ps >= 0.5 and self.tag:
                self._last_ps = now
                self.ids.extend(labelled(RUN_LABEL + self.tag))
        elif launcher_code == 0 or (launcher_code is None and not spec.detached):
            now = time.monotonic()
            if now - self._last_ps >= 1.0 and spec.project:
                self._last_ps = now
                for cid in project_containers(spec.project):
                    if cid not in self.ids:
                        self.ids.append(cid)
        if spec.detached and self.ids and launcher_code == 0 and not self.following:
            self._follow()

    def _follow(self) -> None:
        """Append the detached containers' output to the server log; record their exit."""
        self.following = True
        if self.spec.kind == "compose":
            logs = [*self.spec.compose_program, *self.spec.compose_args, "logs", "-f",
                    "--no-color"]
        else:
            logs = ["docker", "logs", "-f", self.ids[0]]
        self.helpers.append(spawn(f"exec {shlex.join(logs)} >> {shlex.quote(str(self.log_path))}"
                                  " 2>&1", self.env, self.log_path.with_suffix(".follow"),
                                  self.workdir))
        self.exit_path = self.log_path.with_suffix(".exit")
        self.exit_path.unlink(missing_ok=True)
        self.helpers.append(spawn(f"exec {shlex.join(['docker', 'wait', *self.ids])}", {},
                                  self.exit_path, self.workdir))

    def exited(self) -> int | None:
        """Exit code once the detached container(s) stopped (the first non-zero, else 0);
        None while running or when not followed."""
        if not self.following or len(self.helpers) < 2:
            return None
        waiter = self.helpers[1]
        if waiter.poll() is None:
            return None
        assert self.exit_path is not None
        codes = [int(x) for x in self.exit_path.read_text().split() if x.lstrip("-").isdigit()]
        if not codes:
            return REMOVED  # gone (docker run --rm) before `docker wait` could read its code
        return next((c for c in codes if c != 0), 0)

    def stop(self, grace: float) -> tuple[list[str], list[str]]:
        """docker stop / compose down, remove what the run created, verify every observed ID
        is gone. Returns (problems, notes)."""
        problems: list[str] = []
        notes: list[str] = []
        spec = self.spec
        if spec.kind == "compose":
            # The run's own project: whatever it holds now was created by this run.
            for cid in project_containers(spec.project) if spec.project else []:
                if cid not in self.ids:
                    self.ids.append(cid)
            down = _docker([*spec.compose_program, *spec.compose_args, "down", "--timeout",
                            str(int(grace))], env=self.env, cwd=self.workdir,
                           timeout=grace + DOCKER_TIMEOUT_S)
            if down.returncode != 0:
                problems.append(f"docker compose down failed: {first_error(down.stderr)}")
            else:
                notes.append("docker compose down")
        for cid in self.ids:
            if spec.kind == "run" and exists(cid):
                out = _docker(["docker", "stop", "-t", str(int(grace)), cid],
                              timeout=grace + DOCKER_TIMEOUT_S)
                if out.returncode != 0 and exists(cid):
                    problems.append(f"docker stop {short(cid)} failed: {first_error(out.stderr)}")
            if exists(cid) and not (spec.remove and _gone(cid, GONE_TIMEOUT_S)):
                _docker(["docker", "rm", "-f", cid])  # the run created it: it removes it
            if _gone(cid, GONE_TIMEOUT_S):
                notes.append(f"container {short(cid)} stopped and gone")
            else:
                problems.append(f"container {short(cid)} still exists after teardown")
        for proc in self.helpers:
            stop_group(proc, 2.0)
        self.helpers.clear()
        return problems, notes


def stop_labelled(tag: str, projects: list[str], root: Path, grace: float) -> list[str]:
    """Stop and remove what a run of checkout `root` that has since died left: the containers
    that carry its label, and those of its own Compose projects created in its artifacts folder
    (both labels checked on each). Returns their short IDs."""
    if shutil.which("docker") is None:
        return []
    mine = set(labelled(RUN_LABEL + tag)) if tag else set()
    artifacts = str(root.resolve() / ".artifacts") + os.sep
    for project in projects:
        if re.fullmatch(r"wiki-[a-z0-9_-]+", project):
            mine.update(c for c in project_containers(project)
                        if (_label(c, WORKDIR_LABEL) or "").startswith(artifacts))
    for cid in sorted(mine):
        _docker(["docker", "stop", "-t", str(int(grace)), cid], timeout=grace + DOCKER_TIMEOUT_S)
        if exists(cid):
            _docker(["docker", "rm", "-f", cid])
    return [short(c) for c in sorted(mine)]


def _gone(cid: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while exists(cid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def write_files(root: Path, spec: PlannedContainer) -> None:
    """Write the page's file blocks (a compose file) where the server command runs."""
    for rel, content in spec.files:
        path = root / spec.workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
