"""Which containers a run may touch, against the real Docker daemon: only those carrying its own
label or of its own Compose project, whatever a page or a file under .artifacts/ says. The
containers here run `sleep` from the local Debian image (no engine needed), on the host network
or none; every container a test starts carries the label wiki-e2e=<tag of the test> and is
removed by the test."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import wait_until

from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.execution import containers as docker
from wikitools.runbook.execution.plan import make_plan
from wikitools.runbook.execution.processes import TAG_VAR, spawn, stop_group
from wikitools.runbook.execution.runlock import RunLock

IMAGE = "wiki-test/bookworm:minbase-v1"
DEAD_RUNNER = Path(__file__).resolve().parents[1] / "fakes" / "dead_runner.py"


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def _why_no_docker() -> str | None:
    if shutil.which("docker") is None:
        return "docker is not installed (scripts/setup-docker.sh installs it)"
    try:
        if _docker("info", "--format", "{{.ServerVersion}}", timeout=20).returncode != 0:
            return "no Docker daemon answers; scripts/setup-docker.sh starts one"
    except subprocess.TimeoutExpired:
        return "the Docker daemon did not answer within 20 s"
    if _docker("image", "inspect", IMAGE).returncode != 0:
        return f"local image {IMAGE} missing; scripts/setup-docker.sh builds it"
    return None


_NO_DOCKER = _why_no_docker()
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("docker"),  # see test_docker_e2e.py
              pytest.mark.skipif(_NO_DOCKER is not None, reason=_NO_DOCKER or "")]


@pytest.fixture
def test_tag() -> Iterator[str]:
    tag = uuid.uuid4().hex[:12]
    yield tag
    for cid in _docker("ps", "-aq", "--filter", f"label=wiki-e2e={tag}").stdout.split():
        _docker("rm", "-f", cid)


def _sleeper(tag: str, *extra: str) -> str:
    out = _docker("run", "-d", "--rm", "--network", "none", "--label", f"wiki-e2e={tag}",
                  *extra, IMAGE, "sleep", "300")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _polled(box: docker.Containers) -> docker.Containers:
    """`box` after one look at its containers (for polling with wait_until)."""
    box.poll(0)
    return box


def _running(cid: str) -> bool:
    out = _docker("container", "inspect", "--format", "{{.State.Running}}", cid)
    return out.stdout.strip() == "true"


def test_lock_file_of_another_checkout_is_never_acted_on(tmp_path: Path, test_tag: str) -> None:
    """A lock file that is not this checkout's (crafted and committed into the checkout, or the
    state of a dead run of another checkout the checkout was copied from) names a container and
    a tag: the next run stops nothing."""
    victim = _sleeper(test_tag)
    tagged = _sleeper(test_tag, "--label", "wikitools.run.20261130T000000Z-x-feed")
    lock = tmp_path / ".artifacts" / "locks" / "rb.json"  # where a committed one would lie
    lock.parent.mkdir(parents=True)
    crafted = {"state": "running", "tag": "20261130T000000Z-x-feed", "docker": True,
               "containers": [victim, tagged], "projects": [],
               "processes": [], "holder": {"pid": 1, "run_id": "x"}}
    lock.write_text(json.dumps(crafted))
    run = RunLock(tmp_path, "rb", None, "20261201T000000Z-next")
    assert run.acquire(grace=1) == []
    run.release()
    # A run of another checkout dies holding its lock; that checkout is copied with `cp -a`.
    other = tmp_path / "other"
    other.mkdir()
    dead = subprocess.Popen([sys.executable, str(DEAD_RUNNER), str(other), "rb", "-",
                             str(tmp_path / "ports"), "--container"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert dead.stdin is not None and dead.stdout is not None
        dead.stdout.readline()  # its tag: the victim carries no label of it
        dead.stdin.write(victim + "\n")
        dead.stdin.flush()
        assert dead.stdout.readline().strip() == "recorded"
    finally:
        dead.kill()  # it dies holding the lock; its state file names the victim
        dead.wait()
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(other), str(copy)], check=True)
    nxt = RunLock(copy, "rb", None, "20261201T000001Z-copy")
    assert nxt.acquire(grace=1) == []
    nxt.release()
    assert _running(victim) and _running(tagged)


PAGE = """\
```{{ .yaml .runbook-file for=r path=compose.yaml }}
services:
  srv:
    image: {image}
    network_mode: host
    labels:
      - wiki-e2e={tag}
    entrypoint: ["sh", "-c", "echo serving; sleep 300; vllm serve m --port 18641"]
```

```{{ .bash #r .runbook-server engine=vllm gpus=0 }}
COMPOSE_PROJECT_NAME={victim} docker compose {how} --profile '$(touch {canary})' \\
  -f compose.yaml up -d
```
"""


@pytest.mark.parametrize("how", ["-p{victim}", "--project-name {victim}",
                                 "--project-name={victim}", ""])
def test_compose_project_is_the_runs_own_whatever_the_page_says(
        tmp_path: Path, test_tag: str, how: str) -> None:
    """The page names another project (-pX, --project-name, COMPOSE_PROJECT_NAME) and a
    `--profile` that is shell code: up, logs and down act on the run's own project only, and
    the log follower runs the profile as a word, never as code."""
    victim = f"victim{test_tag}"
    victim_cid = _sleeper(test_tag, "--label", f"com.docker.compose.project={victim}")
    canary = tmp_path / "injected"
    page = parse_page(PAGE.format(image=IMAGE, tag=test_tag, victim=victim, canary=canary,
                                  how=how.format(victim=victim)), "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert diags == []
    artifacts = f".artifacts/r/20261201T000000Z-{test_tag}"
    plan = make_plan(runbooks.get("r"), artifacts_dir=artifacts)
    spec = plan.server.container
    assert spec is not None and spec.project == f"wiki-20261201t000000z-{test_tag}"
    assert victim not in plan.server.command.replace(f"COMPOSE_PROJECT_NAME={victim}", "")
    docker.write_files(tmp_path, spec)
    env = {**plan.server.env, TAG_VAR: f"run-{test_tag}"}
    log = tmp_path / plan.server.log_path
    box = docker.Containers(spec, tmp_path, log, env)
    launcher = spawn(plan.server.command, env, log, tmp_path / spec.workdir)
    try:
        assert launcher.wait(timeout=60) == 0, log.read_text()
        wait_until(lambda: _polled(box).following, 30, interval=0.2)
        assert box.following and len(box.ids) == 1, log.read_text()
        assert docker._label(box.ids[0], docker.PROJECT_LABEL) == spec.project
        wait_until(lambda: "serving" in log.read_text(), 15, interval=0.2)
        assert "serving" in log.read_text()  # the follower ran
        problems, _notes = box.stop(1.0)
        assert problems == []
        assert docker.project_containers(spec.project) == []
    finally:
        stop_group(launcher, 1.0)
        for cid in docker.project_containers(spec.project):
            _docker("rm", "-f", cid)
    assert not canary.exists(), "the page's --profile was executed as shell code"
    assert _running(victim_cid), "the page's project was touched"


def test_page_cidfile_does_not_hide_the_container_from_teardown(tmp_path: Path,
                                                                 test_tag: str) -> None:
    """The page's own `--cidfile` on `docker run -d` (after the options the run adds): the run
    still finds its container by its label and stops it."""
    page = parse_page(
        "```{ .bash #r .runbook-server engine=vllm gpus=0 }\n"
        f"docker run -d --rm --network host --cidfile page.cid --label wiki-e2e={test_tag} "
        f"{IMAGE} sh -c 'sleep 300; vllm serve m --port 18642'\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert diags == []
    plan = make_plan(runbooks.get("r"), artifacts_dir=".artifacts/r/x")
    spec = plan.server.container
    assert spec is not None
    env = {TAG_VAR: f"run-{test_tag}"}
    log = tmp_path / plan.server.log_path
    box = docker.Containers(spec, tmp_path, log, env)
    launcher = spawn(plan.server.command, env, log, tmp_path)
    try:
        assert launcher.wait(timeout=60) == 0, log.read_text()
        assert (tmp_path / "page.cid").is_file()
        wait_until(lambda: _polled(box).ids, 15, interval=0.2)
        (cid,) = box.ids
        assert (tmp_path / "page.cid").read_text().strip() == cid
        problems, notes = box.stop(1.0)
        assert problems == [] and f"container {cid[:12]} stopped and gone" in notes
    finally:
        stop_group(launcher, 1.0)
