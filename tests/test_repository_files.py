"""Runbooks that run a file of the wiki's own repository (a launcher script, a compose file):
the file's text is read with the runbooks, by every reader alike, so it is part of the
runbook's hash (an edit of the script makes its records stale), `plan` shows it with its
hash, and a run executes a copy of what was read. Small generated trees; the run uses the fake
engine (a `vllm` test double on PATH)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from harness import free_port, make_tree

from wikitools.cli import main
from wikitools.core.config import load_config
from wikitools.fleet.select import is_stale
from wikitools.pages.load import load_pages
from wikitools.runbook.blocks.extract import extract_runbooks, load_runbooks
from wikitools.runbook.execution import runlock
from wikitools.runbook.execution.host import HostFacts
from wikitools.runbook.records.record import ClientResult, Point, Record, Step, write_record
from wikitools.runbook.rendering.render import render_pages
from wikitools.runbook.session import RunOptions, prepare, run_prepared
from wikitools.site.sitedata import SiteData

FAKE_BIN = Path(__file__).parent / "fakes" / "bin"
SCRIPT = """#!/bin/bash
set -euo pipefail
PORT=${PORT:-8000}
TP=${TP:-2}
echo v1 > "${WIKI_RUN_DIR:-.}/ran"
exec vllm serve org/Model-7B --port "$PORT" --tensor-parallel-size "$TP"
"""


def _tree(tmp_path: Path, page: str, files: dict[str, str]) -> Path:
    root = make_tree(tmp_path / "site", {
        "wiki.yml": "docs_dir: docs\nglossary: docs/glossary.md\n", "docs/p.md": page, **files})
    for rel in files:
        (root / rel).chmod(0o755)
    return root


def _out(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    return out + err


def test_a_block_that_runs_a_repository_script_becomes_a_runbook_that_reads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, "# P\n\n```bash\ncd /root/wiki-checkout\n"
                 "PORT=8402 TP=4 scripts/run-server.sh\n```\n",
                 {"scripts/run-server.sh": SCRIPT.replace("TP:-2", "TP:-4")})
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    assert _out(capsys).splitlines()[0] == (
        "docs/p.md:3:1: server (vllm, org/Model-7B, tp=4); mark it: ```bash "
        "{ #model-7b-tp4 .runbook-server engine=vllm gpus=4 }")
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    assert main(["runbook", "scan", "--check", "--root", str(root)]) == 0
    capsys.readouterr()
    assert main(["runbook", "plan", "model-7b-tp4", "--root", str(root)]) == 1  # no GPUs here
    out = _out(capsys)
    digest = __import__("hashlib").sha256(
        (root / "scripts/run-server.sh").read_bytes()).hexdigest()
    folder = re.search(r"artifacts (\.artifacts/model-7b-tp4/\S+)/", out)
    assert folder is not None
    assert '    PORT=8402 TP=4 "$WIKI_RUN_DIR/scripts/run-server.sh"' in out
    assert (f"  file: {folder[1]}/scripts/run-server.sh (from the repository: "
            f"scripts/run-server.sh, sha256:{digest})") in out
    assert "ready: http://127.0.0.1:8402/health" in out
    assert "runbook needs 4 GPUs" in out


def test_launches_of_files_that_are_not_the_repositorys_stay_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, "# P\n\n```bash\nscripts/outside.sh\n```\n\n"
                 "```bash\nPORT=1 scripts/a.sh\nPORT=2 scripts/b.sh\n```\n\n"
                 "```bash\nscripts/two.sh\n```\n",
                 {"scripts/a.sh": SCRIPT, "scripts/b.sh": SCRIPT,
                  "scripts/two.sh": "start() {\n  vllm serve org/m --port \"$1\"\n}\n"
                                    "start 8000 &\nstart 8001\n"})
    elsewhere = tmp_path / "elsewhere.sh"  # outside the wiki: a symlink does not lead there
    elsewhere.write_text("vllm serve org/x\n")
    (root / "scripts" / "outside.sh").symlink_to(elsewhere)
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    assert _out(capsys).splitlines() == [
        "docs/p.md:9:1: RB014 warning: not proposed as a runbook: the block starts 2 servers "
        "(lines 8, 9): alternatives to choose from, not one run; give each its own block",
        "docs/p.md:13:1: RB014 warning: not proposed as a runbook: runs scripts/two.sh, which "
        "starts 2 servers (its lines 4, 5): one runbook stands for one server",
        "no plain launcher blocks"]


def _record(root: Path, rid: str, page: str, blocks: str) -> None:
    stamp = "20261130T100000Z"
    write_record(root, Record(
        runbook=rid, page=page, blocks_hash=blocks, run_id=f"{stamp}-{blocks[7:15]}",
        started_at="2026-11-30T10:00:00Z", finished_at="2026-11-30T10:00:00Z", status="ok",
        host={"gpus": [], "gpu_count": 0, "cpu_only": True}, engine={"name": "vllm"},
        server={"command": "scripts/run-server.sh", "env": {}, "port": 8000, "log_tail": []},
        markers={}, steps=(Step("ready", "ok", 1.0),),
        clients=(ClientResult("bench", "serving", "vllm bench serve", None, (
            Point(None, "ok", {"completed": 4, "num_prompts": 4,
                               "output_throughput": 40.0}),)),)))


def _hashes(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """The runbook's hash (or what follows from it) as each reader of runbooks sees it."""
    config = load_config(root)
    pages = load_pages(config)
    direct = extract_runbooks(pages, config.root)[0].get("r").blocks_hash
    loaded = load_runbooks(root)[0].get("r").blocks_hash
    prepared = prepare("r", root, RunOptions(), facts=HostFacts(smi_found=False))
    site = SiteData(root)
    capsys.readouterr()
    main(["runbook", "plan", "r", "--root", str(root)])
    planned = re.search(r"blocks  (sha256:\w+)", _out(capsys))
    main(["runbook", "show", "r", "--root", str(root)])
    shown = re.search(r"blocks  (sha256:\w+)", _out(capsys))
    main(["support-bundle", "r", "--no-gpu", "--root", str(root)])
    bundled = re.search(r"runbook blocks hash: `(sha256:\w+)`", _out(capsys))
    _changes, diags = render_pages(pages, config.root)
    main(["fleet", "plan", "--stale", "--root", str(root)])
    fleet = _out(capsys)
    main(["check", "--root", str(root)])
    checked = _out(capsys)
    return {
        "extract": direct, "load_runbooks": loaded, "prepare": prepared.runbook.blocks_hash,
        "record of a run": prepared.run_id.split("-")[1],
        "site": site.runbooks().get("r").blocks_hash,
        "plan": planned[1] if planned else None, "show": shown[1] if shown else None,
        "support-bundle": bundled[1] if bundled else None,
        "render: stale": any(d.code == "RGN003" for d in diags),
        "fleet: stale": is_stale(config.root, extract_runbooks(pages, config.root)[0].get("r")),
        "fleet plan --stale": "docs/p.md" in fleet,
        "check: stale": "RGN003" in checked,
    }


def test_the_hash_is_one_through_every_reader_and_follows_the_repository_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, "# P\n\n```bash { #r .runbook-server engine=vllm gpus=0 }\n"
                 "scripts/run-server.sh\n```\n\n"
                 "<!-- wiki:results runbook=r view=serving -->\n<!-- wiki:end -->\n",
                 {"scripts/run-server.sh": SCRIPT})
    (root / "docs" / "glossary.md").write_text(
        "# Glossary\n\n| Term | Meaning |\n|---|---|\n| TP | tensor parallelism |\n")
    first = load_runbooks(root)[0].get("r").blocks_hash
    _record(root, "r", "docs/p.md", first)
    main(["runbook", "render", "--root", str(root)])
    before = _hashes(root, capsys)
    same = {k: v for k, v in before.items() if isinstance(v, str)}
    assert same == {**dict.fromkeys(same, first), "record of a run": first[7:15]}
    assert not any(v for v in before.values() if isinstance(v, bool))

    script = root / "scripts" / "run-server.sh"
    script.write_text(SCRIPT.replace("TP:-2", "TP:-1"))
    after = _hashes(root, capsys)
    second = load_runbooks(root)[0].get("r").blocks_hash
    assert second != first
    same = {k: v for k, v in after.items() if isinstance(v, str)}
    assert same == {**dict.fromkeys(same, second), "record of a run": second[7:15]}
    assert {k: v for k, v in after.items() if isinstance(v, bool)} == {
        "render: stale": True, "fleet: stale": True, "fleet plan --stale": True,
        "check: stale": True}


def test_a_run_executes_the_copy_the_plan_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(runlock, "_port_locks_dir", lambda: tmp_path / "port-locks")
    port = free_port()
    root = _tree(tmp_path, "# P\n\n```bash { #r .runbook-server engine=vllm gpus=0 "
                 "ready_timeout=30 stop_timeout=3 }\n"
                 f"cd models/x && PORT={port} TP=1 ./serve.sh\n```\n",
                 {"models/x/serve.sh": SCRIPT})
    prepared = prepare("r", root, RunOptions(render=False))
    # An edit after the plan does not reach the run: it runs what the plan read.
    (root / "models/x/serve.sh").write_text(SCRIPT.replace("echo v1", "echo v2"))
    result = run_prepared(prepared, handle_signals=False)
    assert result.record.status == "ok", result.record
    run_dir = root / prepared.plan.artifacts_dir
    assert (run_dir / "serve.sh").read_text() == SCRIPT
    assert (run_dir / "ran").read_text() == "v1\n"
    assert not (root / "models/x/ran").exists()
    assert result.record.blocks_hash == prepared.runbook.blocks_hash


def test_a_repository_compose_file_is_the_runbooks_compose_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compose = ("services:\n  server:\n    image: vllm/vllm-openai:v0.10.0\n"
               "    network_mode: host\n    command: [\"org/Model-7B\", \"--port\", \"8300\", "
               "\"--tensor-parallel-size\", \"2\"]\n")
    root = _tree(tmp_path, "# P\n\n```bash\ndocker compose -f compose/m.yml up -d\n```\n",
                 {"compose/m.yml": compose})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    capsys.readouterr()
    assert main(["runbook", "plan", "model-7b-tp2", "--root", str(root)]) == 1
    out = _out(capsys)
    assert re.search(r'docker compose -p wiki-\S+ -f "\$WIKI_RUN_DIR/compose/m.yml" up -d', out)
    assert "(from the repository: compose/m.yml, sha256:" in out
    assert "image: vllm/vllm-openai:v0.10.0" in out
    assert "ready: http://127.0.0.1:8300/health" in out


def test_a_repository_file_that_is_missing_or_unreadable_is_a_located_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, "# P\n\n```bash { #gone .runbook-server engine=vllm gpus=0 }\n"
                 "scripts/gone.sh\n```\n\n"
                 "```bash { #bad .runbook-server engine=vllm gpus=0 }\n"
                 "PORT=8001 scripts/bad.sh\n```\n", {})
    (root / "scripts").mkdir()
    (root / "scripts" / "bad.sh").write_bytes(b"vllm serve org/m \xff\n")
    assert main(["runbook", "plan", "gone", "--root", str(root)]) == 2
    assert main(["runbook", "plan", "bad", "--root", str(root)]) == 2
    assert "runbook 'bad' (docs/p.md:7) has errors" in _out(capsys)
    assert main(["runbook", "list", "--root", str(root)]) == 1
    out = _out(capsys)
    assert ("docs/p.md:4:1: RB007 error: server command not understood: it runs "
            "scripts/gone.sh, which is no file of the repository") in out
    assert ("docs/p.md:8:11: RB016 error: runs scripts/bad.sh, a file of the repository that "
            "cannot be read: it is not UTF-8 text") in out
    assert "Traceback" not in out


CASES = """#!/bin/bash
MODE=${MODE:-b}
case "$MODE" in
  a) MODEL=org/A-7B ;;
  b|c)
    MODEL=org/B-7B
    ;;
esac
exec vllm serve "$MODEL" --port 8000
"""


@pytest.mark.parametrize(("call", "model"), [
    ("MODE=a scripts/s.sh", "org/A-7B"), ("scripts/s.sh", "org/B-7B"),
    ("export MODE=c\nscripts/s.sh", "org/B-7B")])
def test_a_scripts_case_takes_the_arm_its_caller_chooses(tmp_path: Path, call: str,
                                                         model: str) -> None:
    root = _tree(tmp_path, f"# P\n\n```bash {{ #r .runbook-server engine=vllm }}\n{call}\n```\n",
                 {"scripts/s.sh": CASES})
    runbooks, diags = load_runbooks(root)[:2]
    assert diags == []
    assert runbooks.get("r").server.command.model == model


def test_a_docker_run_inside_a_repository_script_is_labelled_in_the_copy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = ("#!/bin/bash\ndocker rm -f m >/dev/null 2>&1 || true\n"
              "docker run -d --name m --gpus all --network host vllm/vllm-openai:v0.10.0 "
              "--model org/Model-7B --port 8123\n")
    root = _tree(tmp_path, "# P\n\n```bash { #r .runbook-server engine=vllm gpus=1 }\n"
                 "scripts/d.sh\n```\n", {"scripts/d.sh": script})
    prepared = prepare("r", root, RunOptions(), facts=HostFacts(smi_found=False))
    (copy,) = prepared.plan.server.copies
    assert copy.source == "scripts/d.sh" and copy.labelled
    assert copy.text == script.replace(
        "docker run -d", 'docker run --label "wikitools.run.${WIKI_RUN_TAG}" -d')
    assert (root / "scripts/d.sh").read_text() == script
    assert prepared.plan.server.command == '"$WIKI_RUN_DIR/scripts/d.sh"'
    assert prepared.plan.server.image == "vllm/vllm-openai:v0.10.0"
    assert prepared.plan.server.port == 8123
    assert main(["runbook", "plan", "r", "--root", str(root)]) == 1
    assert ("(from the repository: scripts/d.sh, " + copy.sha256 + "; --label wikitools.run.<tag> "
            "added to its docker run)") in _out(capsys)


def test_a_repository_script_never_makes_a_block_a_client(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A sweep script may start servers of its own: run against the runbook's server as its
    # client, it would fight it for the GPUs.
    root = _tree(tmp_path, "# P\n\n```bash\nvllm serve org/Model-7B --port 8000\n```\n\n"
                 "```bash\nCASES=a,b scripts/sweep.sh\n```\n",
                 {"scripts/sweep.sh": "#!/bin/bash\nscripts/run-other.sh\n"
                                      "vllm bench serve --model org/Model-7B --port 8000\n"})
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    assert _out(capsys).splitlines() == [
        "docs/p.md:3:1: server (vllm, org/Model-7B); mark it: ```bash "
        "{ #model-7b-tp1 .runbook-server engine=vllm gpus=1 }",
        "1 block could become runbook blocks"]


def test_a_compose_service_that_runs_a_repository_script_is_refused_saying_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, "# P\n\n```yaml\nservices:\n  ds4:\n    image: docker:27-cli\n"
                 "    volumes:\n      - /root/wiki:/workspace:ro\n    working_dir: /workspace\n"
                 "    environment:\n      IMAGE: ${IMAGE:-vllm/vllm-openai:v0.10.0}\n"
                 "    command: [\"scripts/run-server.sh\"]\n```\n",
                 {"scripts/run-server.sh": SCRIPT})
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    assert _out(capsys).splitlines() == [
        "docs/p.md:3:1: RB016 warning: not proposed as a runbook: service ds4 runs "
        "scripts/run-server.sh, a script of the repository, inside its container, which sees "
        "the script only through the compose file's mounts: a run could not give it the copy it "
        "planned; run the script from the block",
        "no plain launcher blocks"]


def test_a_block_that_runs_an_unreadable_launcher_script_twice_lists_alternatives(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, "# P\n\n```bash\ncd wiki-checkout\nscripts/bench.sh dcp1\n"
                 "scripts/bench.sh dcp4\n```\n",
                 {"scripts/bench.sh": "docker run -d --gpus all --entrypoint "
                                      "/usr/local/bin/serve.sh vllm/vllm-openai:v0.10.0\n"})
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    assert _out(capsys).splitlines()[0] == (
        "docs/p.md:6:1: RB014 warning: not proposed as a runbook: the block starts 2 servers "
        "(lines 5, 6): alternatives to choose from, not one run; give each its own block")


def test_a_repository_script_that_reads_files_beside_itself_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, "# P\n\n```bash\nscripts/run-server.sh\n```\n",
                 {"scripts/run-server.sh": "#!/bin/bash\nsource ./scripts/common.sh\n"
                                           "exec vllm serve org/Model-7B --port 8000\n",
                  "scripts/common.sh": "export A=1\n"})
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    assert _out(capsys).splitlines()[0] == (
        "docs/p.md:4:1: RB016 warning: not proposed as a runbook: runs scripts/run-server.sh, "
        "which reads files beside itself (source ./scripts/common.sh at its line 2): a run "
        "executes a copy in its own folder, where they are not")


def _runs_before_serving(tmp_path: Path, lines: str) -> tuple[Path, Any, list[Any]]:
    """The root, runbooks and diagnostics of a server block that runs scripts/run-server.sh, which
    runs `lines` before it serves; scripts/prep.sh is a file of the repository."""
    page = ("# P\n\n```bash { #m .runbook-server engine=vllm gpus=1 }\n"
            "scripts/run-server.sh\n```\n")
    root = _tree(tmp_path, page, {
        "scripts/run-server.sh": f"#!/bin/bash\n{lines}\n"
                                 "exec vllm serve org/Model-7B --port 8000\n",
        "scripts/prep.sh": "#!/bin/bash\nexport A=1\n"})
    return (root, *extract_runbooks(load_pages(load_config(root)), root))


@pytest.mark.parametrize("nested", ["bash scripts/prep.sh", "./scripts/prep.sh",
                                    "exec scripts/prep.sh", "env A=1 nohup scripts/prep.sh",
                                    "sh -e scripts/prep.sh", "python3 scripts/prep.sh"])
def test_a_repository_script_that_runs_another_is_refused_with_where(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], nested: str) -> None:
    root, runbooks, diags = _runs_before_serving(tmp_path, f"set -e\n{nested}")
    assert list(runbooks.ids()) == []
    assert [d.format() for d in diags] == [
        "docs/p.md:4:1: RB016 error: runs scripts/run-server.sh, which runs scripts/prep.sh "
        "(its line 3): a file the runbook neither reads nor hashes, so an edit to it would "
        "change what runs and leave the results current; run it from the server block itself "
        "(`bash scripts/prep.sh && …`), where it is read and hashed"]
    assert main(["runbook", "plan", "m", "--root", str(root)]) == 2
    assert "runbook 'm' (docs/p.md:3) has errors" in _out(capsys)


def test_a_script_the_block_runs_before_the_launcher_is_read_and_hashed(
        tmp_path: Path) -> None:
    page = ("# P\n\n```bash { #m .runbook-server engine=vllm gpus=1 }\n"
            "bash scripts/prep.sh && scripts/run-server.sh\n```\n")
    root = _tree(tmp_path, page, {
        "scripts/run-server.sh": "#!/bin/bash\nexec vllm serve org/Model-7B --port 8000\n",
        "scripts/prep.sh": "#!/bin/bash\necho prepared\n"})

    def blocks_hash() -> str:
        runbooks, diags = extract_runbooks(load_pages(load_config(root)), root)
        assert diags == []
        return runbooks.get("m").blocks_hash

    before = blocks_hash()
    (root / "scripts/prep.sh").write_text("#!/bin/bash\necho changed\n")
    assert blocks_hash() != before


@pytest.mark.parametrize("nested", ["source scripts/prep.sh", ". ./scripts/prep.sh"])
def test_a_repository_script_that_sources_another_is_refused(tmp_path: Path,
                                                             nested: str) -> None:
    _root, runbooks, diags = _runs_before_serving(tmp_path, nested)
    assert list(runbooks.ids()) == []
    assert [d.format()[:59] for d in diags] == [
        "docs/p.md:4:1: RB016 error: runs scripts/run-server.sh, whi"]
    assert f"({nested} at its line 2)" in diags[0].message


@pytest.mark.parametrize(("script", "near"), [
    ('#!/bin/bash\nhere=${0%/*}\n. "$here/common.sh"\nexec vllm serve org/Model-7B --port 8000\n',
     "${0%"),
    ('#!/bin/bash\nsource "$(realpath "$0" | xargs dirname)/common.sh"\n'
     "exec vllm serve org/Model-7B --port 8000\n", 'realpath "$0'),
], ids=["param-expansion", "realpath"])
def test_a_script_that_finds_its_folder_by_another_spelling_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str, near: str) -> None:
    root = _tree(tmp_path, "# P\n\n```bash\nscripts/run-server.sh\n```\n",
                 {"scripts/run-server.sh": script, "scripts/common.sh": "export A=1\n"})
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    assert _out(capsys).splitlines()[0] == (
        "docs/p.md:4:1: RB016 warning: not proposed as a runbook: runs scripts/run-server.sh, "
        f"which reads files beside itself ({near} at its line 2): a run executes a copy in its "
        "own folder, where they are not")


@pytest.mark.parametrize(("extra", "near"), [
    ("    env_file: ../secrets.env\n", "env_file: ../secrets.env at its line 6"),
    ("    volumes:\n      - ./models:/models\n", "volumes: ./models:/models at its line 7"),
    ("    volumes:\n      - type: bind\n        source: ../data\n        target: /data\n",
     "volumes: ../data at its line 8"),
], ids=["env-file", "bind-mount", "long-bind-mount"])
def test_a_compose_file_that_reads_files_beside_itself_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, near: str) -> None:
    compose = ("services:\n  server:\n    image: vllm/vllm-openai:v0.10.0\n"
               "    network_mode: host\n    command: [\"org/Model-7B\", \"--port\", \"8300\"]\n"
               + extra)
    root = _tree(tmp_path, "# P\n\n```bash { #m .runbook-server engine=vllm gpus=1 }\n"
                 "docker compose -f compose/m.yml up -d\n```\n", {"compose/m.yml": compose})
    assert main(["runbook", "list", "--root", str(root)]) == 1
    assert (f"docs/p.md:4:19: RB016 error: runs compose/m.yml, which reads files beside itself "
            f"({near}): a run executes a copy in its own folder, where they are not"
            ) in _out(capsys)


def test_a_compose_file_with_named_volumes_and_absolute_mounts_is_accepted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compose = ("services:\n  server:\n    image: vllm/vllm-openai:v0.10.0\n"
               "    network_mode: host\n    command: [\"org/Model-7B\", \"--port\", \"8300\"]\n"
               "    volumes:\n      - cache:/root/.cache\n      - /models:/models\n"
               "      - ${HOME}/.cache:/c\n    env_file: /etc/vllm.env\n")
    root = _tree(tmp_path, "# P\n\n```bash { #m .runbook-server engine=vllm gpus=1 }\n"
                 "docker compose -f compose/m.yml up -d\n```\n", {"compose/m.yml": compose})
    assert main(["runbook", "list", "--root", str(root)]) == 0, _out(capsys)


def test_a_repository_script_of_200_mb_is_refused_without_reading_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, "# P\n\n```bash { #big .runbook-server engine=vllm gpus=0 }\n"
                 "scripts/big.sh\n```\n", {})
    (root / "scripts").mkdir()
    with (root / "scripts" / "big.sh").open("w") as f:
        f.write("#!/bin/bash\nexec vllm serve org/m --port 8000\n")
        f.truncate(200 * 1000 * 1000)  # sparse: the size is there, the disk stays free
    assert main(["runbook", "list", "--root", str(root)]) == 1
    assert ("docs/p.md:4:1: RB016 error: runs scripts/big.sh, a file of the repository that "
            "cannot be read: it is 200.0 MB, over the 1 MiB a script or compose file of a "
            "runbook may hold") in _out(capsys)


@pytest.mark.parametrize("wait", [
    "for i in $(seq 1 30); do\n  curl -sf http://127.0.0.1:9000/health && break\n  sleep 1\n"
    "done\n",
    "curl --retry 30 --retry-connrefused -sf http://127.0.0.1:9000/health/\n",
], ids=["loop", "retry"])
def test_a_launcher_script_that_polls_health_before_exec_is_read_as_a_launcher(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], wait: str) -> None:
    script = f"#!/bin/bash\nset -e\n{wait}exec vllm serve org/Model-7B --port 8000\n"
    root = _tree(tmp_path, "# P\n\n```bash { #m .runbook-server engine=vllm gpus=0 }\n"
                 "scripts/serve.sh\n```\n", {"scripts/serve.sh": script})
    assert main(["runbook", "list", "--root", str(root)]) == 0
    out = _out(capsys)
    assert "docs/p.md#m  vllm    org/Model-7B" in out and "RB007" not in out


def test_a_client_that_only_polls_health_is_still_a_client(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = ("# P\n\n```bash { #m .runbook-server engine=vllm gpus=0 }\n"
            "vllm serve org/Model-7B --port 8000\n```\n\n"
            "```bash { .runbook-client for=m name=up }\ncurl -sf http://127.0.0.1:8000/health\n"
            "```\n")
    root = _tree(tmp_path, page, {})
    assert main(["runbook", "show", "m", "--root", str(root)]) == 0
    out = _out(capsys)
    assert "    tool:                    curl\n    launcher:                curl\n" in out
