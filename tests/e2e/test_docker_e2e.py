"""Container runbooks end to end against a real Docker daemon and the real vLLM CPU engine.

`wiki runbook run` runs the pages in tests/e2e/docker-tree: `docker run` (detached, with a shell
entrypoint; also from a script of the repository, run as the run's own labelled copy), `docker
compose up -d`, and an image whose entrypoint is the server, each serving the
tiny model from the engine environment bind-mounted into a local Debian image; and the faults:
image missing, container exiting during start-up, container name taken by someone else's
container, `--gpus` without the NVIDIA container runtime, Ctrl-C during the client.

Needs a Docker daemon and the local images from `scripts/setup-docker.sh` (which `make test`
runs), and `.venv-engine`; skipped with the reason otherwise. Every container of these pages
carries the label wiki-e2e=<tag of the test>; after each run none may be left, nor any process
carrying the tag in its environment, and the port must be free.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import BAD_MODEL, ENGINE_VENV, REPO, Run, assert_failed, needs_engine, step

TREE = Path(__file__).resolve().parent / "docker-tree"
DOCKER_CACHE = REPO / ".cache" / "docker"
DEAD_RUNNER = Path(__file__).resolve().parents[1] / "fakes" / "dead_runner.py"
IMAGES = ("wiki-test/bookworm:minbase-v1", "wiki-test/vllm-openai:cpu-v1")


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def _why_no_docker() -> str | None:
    if shutil.which("docker") is None:
        return "docker is not installed (scripts/setup-docker.sh installs it)"
    try:
        info = _docker("info", "--format", "{{.ServerVersion}}", timeout=20)
    except subprocess.TimeoutExpired:
        return "the Docker daemon did not answer within 20 s"
    if info.returncode != 0:
        note = DOCKER_CACHE / "unavailable"
        why = note.read_text().strip() if note.is_file() else info.stderr.strip()[:200]
        return f"no Docker daemon answers ({why}); scripts/setup-docker.sh starts one"
    missing = [i for i in IMAGES if _docker("image", "inspect", i).returncode != 0]
    if missing:
        return f"local images missing ({', '.join(missing)}); scripts/setup-docker.sh builds them"
    return None


_NO_DOCKER = _why_no_docker()

# Under pytest-xdist the container tests (this file and test_docker_ownership.py) run one at
# a time on one worker, as they did before: one daemon, fixed published ports.
pytestmark = [
    pytest.mark.docker,
    pytest.mark.xdist_group("docker"),
    pytest.mark.skipif(_NO_DOCKER is not None, reason=_NO_DOCKER or ""),
]


def serving(test: Callable[..., None]) -> Callable[..., None]:
    """The runs that serve: a real vLLM from the engine environment inside the container."""
    for mark in needs_engine:
        test = mark(test)
    return test


# --------------------------------------------------------------------------- helpers


def _python_home() -> str:
    """The base installation of the engine's Python (its bin/python is a link into it)."""
    cfg = ENGINE_VENV / "pyvenv.cfg"
    for line in cfg.read_text().splitlines() if cfg.is_file() else ():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return os.path.realpath(Path(value.strip()).parent)
    return "/nonexistent-python-home"


def labelled(tag: str) -> list[str]:
    """IDs of containers (running or not) labelled with this test's tag."""
    out = _docker("ps", "-aq", "--no-trunc", "--filter", f"label=wiki-e2e={tag}")
    return out.stdout.split()


def container_exists(ref: str) -> bool:
    return _docker("container", "inspect", ref).returncode == 0


class DockerRun(Run):
    """A run of the Docker tree on a fixed port (the pages publish it); its containers carry the
    label wiki-e2e=<tag>. One measured run per point and no warm-up: these tests prove the
    container path."""

    def __init__(self, root: Path, runbook: str, tiny_model: Path | None, port: int) -> None:
        super().__init__(root, runbook, port=port, model=tiny_model,
                         args=["--repeats", "1", "--no-warmup"],
                         env={"ENGINE_ENV": str(ENGINE_VENV.resolve()),
                              "PYTHON_HOME": _python_home()})

    def leftovers(self) -> list[str]:
        return [f"container {c}" for c in labelled(self.tag)] + super().leftovers()

    def cleanup(self) -> None:
        for cid in labelled(self.tag):
            _docker("rm", "-f", cid)
        super().cleanup()


@pytest.fixture
def make_run(tmp_path: Path, request: pytest.FixtureRequest
             ) -> Iterator[Callable[[str, int], DockerRun]]:
    runs: list[DockerRun] = []
    root = tmp_path / "wiki-root"
    shutil.copytree(TREE, root)
    wants_model = request.node.get_closest_marker("engine") is not None
    model = request.getfixturevalue("tiny_model") if wants_model else None

    def make(runbook: str, port: int) -> DockerRun:
        run = DockerRun(root, runbook, model, port)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.cleanup()


def image_id(image: str) -> str:
    out = _docker("image", "inspect", "--format", "{{.Id}}", image)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def assert_containers_gone(rec: dict[str, Any]) -> list[str]:
    ids = rec["server"]["containers"]
    assert ids, rec["server"]
    for cid in ids:
        assert re.fullmatch(r"[0-9a-f]{64}", cid), cid
        assert not container_exists(cid), f"container {cid} is still there"
    return ids


# --------------------------------------------------------------------------- success


@serving
def test_docker_run_detached_end_to_end(make_run) -> None:
    run = make_run("docker-vllm", 18471)
    rc = run(timeout=900)
    assert rc == 0, run.output
    rec = run.record()
    assert rec["status"] == "ok", rec["message"]
    assert all(s["status"] == "ok" for s in rec["steps"]), rec["steps"]

    # Image name and its content digest (a local image has no registry digest: its ID).
    assert rec["engine"]["image"] == "wiki-test/bookworm:minbase-v1"
    assert rec["engine"]["image_id"] == image_id("wiki-test/bookworm:minbase-v1")
    assert rec["engine"]["image_digest"] == rec["engine"]["image_id"]
    assert rec["engine"]["version"].startswith("0.32.0")

    # `-e` settings are the server's environment, secrets masked everywhere.
    env = rec["server"]["env"]
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    assert env["HF_TOKEN"] == "***"
    assert "hf_e2e_not_a_real_token" not in json.dumps(rec)
    # The executor labelled the container with the run's tag, found it by that label and
    # followed the detached container's log.
    assert '--label "wikitools.run.${WIKI_RUN_TAG}"' in rec["server"]["command"]
    assert rec["markers"]["kv_cache_tokens"] == 2_097_152
    (cid,) = assert_containers_gone(rec)
    assert cid[:12] in step(rec, "teardown")["message"]

    (client,) = rec["clients"]
    (point,) = client["points"]
    assert point["status"] == "ok", point
    (sample,) = point["samples"]
    own = json.loads((run.root / sample["result_file"]).read_text())
    assert own["completed"] == 8 and point["metrics"]["completed"] == 8
    assert point["metrics"]["output_throughput"] == own["output_throughput"]
    run.assert_nothing_left()


@serving
def test_docker_run_in_a_repository_script_end_to_end(make_run) -> None:
    """The docker run sits in a script of the repository: the run labels it in its own copy
    of the script, finds the container by that label and stops it."""
    run = make_run("script-vllm", 18478)
    rc = run(timeout=900)
    assert rc == 0, run.output
    rec = run.record()
    assert rec["status"] == "ok", rec["message"]
    assert rec["server"]["command"] == '"$WIKI_RUN_DIR/scripts/serve-in-docker.sh"'
    assert rec["engine"]["image"] == "wiki-test/bookworm:minbase-v1"
    copy = (run.artifacts() / "scripts" / "serve-in-docker.sh").read_text()
    assert 'docker run --label "wikitools.run.${WIKI_RUN_TAG}" -d --rm' in copy
    assert "--label" not in (run.root / "scripts" / "serve-in-docker.sh").read_text().split(
        "docker run", 1)[1].split("\n", 1)[0]
    (cid,) = assert_containers_gone(rec)
    assert cid[:12] in step(rec, "teardown")["message"]
    (client,) = rec["clients"]
    assert client["points"][0]["status"] == "ok", client
    run.assert_nothing_left()


@serving
def test_compose_up_detached_end_to_end(make_run) -> None:
    run = make_run("compose-vllm", 18472)
    rc = run(timeout=900)
    assert rc == 0, run.output
    rec = run.record()
    assert rec["status"] == "ok", rec["message"]
    assert rec["engine"]["image"] == "wiki-test/bookworm:minbase-v1"
    assert rec["engine"]["image_digest"] == image_id("wiki-test/bookworm:minbase-v1")
    # The compose file's environment is the server's environment.
    assert rec["server"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert rec["server"]["model"] == "tiny"
    assert rec["markers"]["kv_cache_tokens"] == 2_097_152  # `docker compose logs -f` followed
    # The compose file from the page was written beside the run's artifacts and run from there.
    art = run.root / rec["artifacts_dir"]
    assert (art / "compose.yaml").read_text().startswith("services:\n")
    assert "compose" in step(rec, "teardown")["message"]
    assert_containers_gone(rec)
    (client,) = rec["clients"]
    assert client["points"][0]["status"] == "ok"
    run.assert_nothing_left()


# --------------------------------------------------------------------------- faults


@serving
def test_a_declared_helper_inside_the_image_is_checked_against_the_server(make_run) -> None:
    run = make_run("declared-in-image", 18479)
    rc = run(timeout=900)
    assert rc == 0, run.output
    rec = run.record()
    declared = step(rec, "declared")
    assert declared["status"] == "ok", declared
    assert rec["engine"]["image"] == "wiki-test/bookworm:minbase-v1"
    (client,) = rec["clients"]
    assert client["points"][0]["status"] == "ok", client
    assert_containers_gone(rec)
    run.assert_nothing_left()


@serving
def test_a_wrong_declaration_of_a_helper_inside_the_image_fails_and_tears_down(
        make_run) -> None:
    run = make_run("declared-in-image-wrong", 18480)
    rc = run(timeout=900)
    rec = assert_failed(run, rc, "declared")
    message = step(rec, "declared")["message"]
    assert "declared model=tiny-chat, the server serves tiny" in message
    assert "declared tp=2, the server serves tp=1" in message  # read from vLLM's own log
    assert "declared engine" not in message  # it is vLLM, as declared
    assert step(rec, "teardown")["status"] == "ok", rec["steps"]
    assert_containers_gone(rec)
    run.assert_nothing_left()


@serving
def test_ctrl_c_during_client_stops_entrypoint_container(make_run) -> None:
    run = make_run("entrypoint-vllm", 18473)
    run.start()
    run.wait_for_client("*/slow.log")  # the client has written its first lines: it runs
    assert run.proc is not None and run.running()
    run.proc.send_signal(signal.SIGINT)
    rc = run.wait(timeout=120)
    rec = assert_failed(run, rc, "client:slow")
    assert "SIGINT" in rec["message"]
    assert step(rec, "ready")["status"] == "ok"  # the entrypoint image served
    assert step(rec, "teardown")["status"] == "ok", rec["steps"]
    assert rec["engine"]["image"] == "wiki-test/vllm-openai:cpu-v1"
    assert_containers_gone(rec)
    run.assert_nothing_left()


def test_image_missing(make_run) -> None:
    run = make_run("docker-no-image", 18474)
    rc = run(timeout=300)
    # Starting is only spawning `docker run`; its exit is seen while waiting for readiness.
    rec = assert_failed(run, rc, "ready")
    assert rec["message"] == ("server exited with code 125 during start-up: Unable to find "
                              "image 'wiki-test/no-such-image:v0' locally"), rec["message"]
    assert rec["server"]["containers"] == []
    assert step(rec, "teardown")["status"] == "ok"
    run.assert_nothing_left()


@serving
def test_container_exits_during_startup(make_run) -> None:
    run = make_run("docker-exits", 18475)
    rc = run(timeout=600)
    rec = assert_failed(run, rc, "ready")
    # Seen either as the container's exit or (when the exit takes longer than the grace after
    # the traceback) as the fatal line itself.
    # The cause comes from the container's own log (docker logs), not from docker run. The
    # message opens with the container's exit when vLLM exits within FATAL_GRACE_S of that
    # line, and with the line itself when its shutdown takes longer (as on a loaded host).
    cid = rec["server"]["containers"][0][:12]
    assert rec["message"] in (f"container {cid} exited with code 1 during start-up: {BAD_MODEL}",
                              f"fatal log line: {BAD_MODEL}"), rec["message"]
    assert any("/nonexistent/tiny-model" in line for line in rec["server"]["log_tail"])
    # Not started with --rm: the run removes the container it created.
    assert_containers_gone(rec)
    assert step(rec, "teardown")["status"] == "ok"
    run.assert_nothing_left()


def test_container_name_taken_by_someone_else(make_run) -> None:
    run = make_run("docker-name-taken", 18476)
    name = f"wiki-e2e-busy-{run.tag}"
    made = _docker("run", "-d", "--name", name, "--label", f"wiki-e2e-foreign={run.tag}",
                   "--network", "none", "wiki-test/bookworm:minbase-v1", "sleep", "300")
    assert made.returncode == 0, made.stderr
    foreign = made.stdout.strip()
    try:
        rc = run(timeout=300)
        rec = assert_failed(run, rc, "preflight")
        assert (f"container name {name} already in use by a container this run did not "
                f"start") in rec["message"], rec["message"]
        assert foreign[:12] in rec["message"]
        # That container is untouched: same ID, still running.
        state = _docker("container", "inspect", "--format", "{{.Id}} {{.State.Running}}", name)
        assert state.stdout.split() == [foreign, "true"], state
        assert "start" not in [s["name"] for s in rec["steps"]]
    finally:
        _docker("rm", "-f", foreign)
    run.assert_nothing_left()


def test_gpus_without_nvidia_runtime_refused_in_preflight(make_run) -> None:
    info = _docker("info", "--format", "{{json .Runtimes}}")
    if "nvidia" in info.stdout or shutil.which("nvidia-container-runtime-hook"):
        pytest.skip("this host has the NVIDIA container runtime")
    run = make_run("docker-gpus", 18477)
    rc = run(timeout=120)
    rec = assert_failed(run, rc, "preflight")
    assert "--gpus" in rec["message"] and "NVIDIA container runtime" in rec["message"]
    assert "could not select device driver" not in rec["message"]  # not docker's raw error
    assert "start" not in [s["name"] for s in rec["steps"]]
    run.assert_nothing_left()


def test_next_run_stops_the_container_a_killed_run_labelled(tmp_path: Path) -> None:
    """A runner killed with SIGKILL cannot stop its detached container; the next run of the
    runbook in the same checkout stops the containers that carry the dead run's label, and no
    other."""
    from wikitools.runbook.execution.runlock import RunLock

    dead = subprocess.Popen(
        [sys.executable, str(DEAD_RUNNER), str(tmp_path), "rb-dead", "-", str(tmp_path / "ports"),
         "--container"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert dead.stdin is not None and dead.stdout is not None
    tag = dead.stdout.readline().strip()

    def start(name: str, *label: str) -> str:
        out = _docker("run", "-d", "--rm", "--network", "none", "--name", name, *label,
                      IMAGES[0], "sleep", "300")
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    suffix = uuid.uuid4().hex[:8]
    ours = start(f"wiki-dead-run-{suffix}", "--label", f"wikitools.run.{tag}")
    foreign = start(f"someone-else-{suffix}")
    try:
        dead.stdin.write(ours + "\n")
        dead.stdin.flush()
        assert dead.stdout.readline().strip() == "recorded"
        dead.kill()  # the runner dies holding the lock; its state file still says "running"
        dead.wait()

        nxt = RunLock(tmp_path, "rb-dead", None, "20261130T000100.000Z-cafef00d-0000")
        leftovers = nxt.acquire(grace=1)
        nxt.release()
        assert [x.describe() for x in leftovers] == [f"container {ours[:12]}"]
        assert _docker("inspect", ours).returncode != 0, "the dead run's container is still there"
        assert _docker("inspect", foreign).returncode == 0, "a container of no run was stopped"
    finally:
        dead.kill()
        dead.wait()
        _docker("rm", "-f", ours, foreign)
