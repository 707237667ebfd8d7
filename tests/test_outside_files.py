"""Files of another repository at a pinned commit: a file block names `repo=` and `commit=`,
the plan fetches the file at that commit (here from a local git repository standing in for
the remote: no network) and shows its sha256, the run's compose folder gets that text; a
branch or a short commit is refused with the advice to pin it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from wikitools.core.errors import UsageError
from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.execution.fetch import sha256
from wikitools.runbook.execution.plan import PlanOverrides, make_plan
from wikitools.runbook.execution.plantext import format_plan
from wikitools.runbook.execution.receipt import build_receipt

COMPOSE = ("services:\n  glm:\n    image: voipmonitor/vllm:glm52\n    network_mode: host\n"
           "    gpus: all\n    command: /usr/local/bin/serve-glm52.sh\n")


def _git(repo: Path, *argv: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *argv], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def remote(tmp_path: Path) -> tuple[str, str, str]:
    """(URL, first commit, second commit) of a local repository whose compose file changed."""
    repo = tmp_path / "llm-docker"
    (repo / "examples").mkdir(parents=True)
    _git(tmp_path, "init", "-q", str(repo))
    (repo / "examples" / "compose.yml").write_text(COMPOSE)
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "one")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "examples" / "compose.yml").write_text(COMPOSE.replace("glm52", "glm53"))
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "two")
    return f"file://{repo}", first, _git(repo, "rev-parse", "HEAD")


def _page(repo: str, commit: str, body: str = "") -> str:
    return (f"```yaml {{ .runbook-file for=glm path=examples/compose.yml repo={repo} "
            f"commit={commit} }}\n{body}```\n\n"
            "```bash { #glm .runbook-server engine=vllm model=GLM-5.2 tp=4 port=5002 }\n"
            "docker compose -f examples/compose.yml up -d\n```\n")


def _plan(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    runbooks, diags = extract_runbooks([parse_page(text, "p.md")], None)
    assert diags == []
    return runbooks.get("glm"), make_plan(
        runbooks.get("glm"), root=tmp_path, artifacts_dir=".artifacts/glm/x",
        overrides=PlanOverrides(), verdict=None)


Remote = tuple[str, str, str]


def test_the_plan_fetches_the_file_at_its_commit(tmp_path: Path, remote: Remote) -> None:
    url, first, second = remote
    rb, plan = _plan(tmp_path, _page(url, first))
    assert rb.files[0].source == (url, first)
    container = plan.server.container
    assert container is not None and container.kind == "compose"
    assert dict(container.files) == {"examples/compose.yml": COMPOSE}
    assert (f"examples/compose.yml fetched from {url} at commit {first} ({sha256(COMPOSE)})"
            in plan.notes)
    assert (f"  file: .artifacts/glm/x/examples/compose.yml (fetched from {url} at commit "
            f"{first}, {sha256(COMPOSE)})") in format_plan(plan).splitlines()
    # another commit is another runbook (its hash changes) and another file
    rb2, plan2 = _plan(tmp_path, _page(url, second))
    assert rb2.blocks_hash != rb.blocks_hash
    assert "glm53" in dict(plan2.server.container.files)["examples/compose.yml"]  # type: ignore[union-attr]


def test_a_commit_the_remote_does_not_have_fails_the_plan(tmp_path: Path, remote: Remote) -> None:
    url, _first, _second = remote
    with pytest.raises(UsageError, match=r"could not fetch examples/compose.yml from .* at 0{40}"):
        _plan(tmp_path, _page(url, "0" * 40))


@pytest.mark.parametrize(("commit", "message"), [
    ("main", "bad value for commit: 'main' (the full 40-digit commit; a branch moves: "),
    ("beaf6e5", "bad value for commit: 'beaf6e5' (the full 40-digit commit"),
])
def test_a_branch_or_a_short_commit_is_refused_with_the_advice_to_pin(commit: str,
                                                                      message: str) -> None:
    text = _page("https://github.com/example-org/llm-docker.git", commit)
    runbooks, diags = extract_runbooks([parse_page(text, "p.md")], None)
    assert runbooks.ids() == []
    assert [d.code for d in diags][:1] == ["RB004"] and diags[0].message.startswith(message)


def test_a_pinned_file_needs_a_declared_server_and_no_body(remote: tuple[str, str, str],
                                                           ) -> None:
    url, first, _ = remote
    undeclared = _page(url, first).replace(" engine=vllm model=GLM-5.2 tp=4 port=5002", "")
    _r, diags = extract_runbooks([parse_page(undeclared, "p.md")], None)
    assert any("a file of another repository, read only when the run is planned: declare the "
               "server it starts" in d.message for d in diags)
    _r, diags = extract_runbooks([parse_page(_page(url, first, COMPOSE), "p.md")], None)
    assert (diags[0].line, diags[0].message) == (1, (
        "a file block with repo= and commit= shows no text of its own: the run fetches the "
        "file from that commit"))
    _r, diags = extract_runbooks([parse_page(_page("ext::sh", first), "p.md")], None)
    assert diags and diags[0].message.startswith("bad value for repo: 'ext::sh")


def test_pin_resolves_a_branch_to_its_commit(remote: Remote, capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    from wikitools.cli import main

    url, _first, second = remote
    branch = _git(tmp_path / "llm-docker", "rev-parse", "--abbrev-ref", "HEAD")
    assert main(["runbook", "pin", url, branch]) == 0
    assert capsys.readouterr().out == f"repo={url} commit={second}\n"
    assert main(["runbook", "pin", url]) == 0  # the default branch
    assert capsys.readouterr().out == f"repo={url} commit={second}\n"
    assert main(["runbook", "pin", url, "no-such-branch"]) == 2
    assert f"{url} has no branch or tag no-such-branch" in capsys.readouterr().err


def test_the_receipt_names_each_fetched_file_with_its_repository_and_commit(
        tmp_path: Path, remote: Remote) -> None:
    url, first, _second = remote
    _rb, plan = _plan(tmp_path, _page(url, first))
    (entry,) = [f for f in build_receipt(plan, tmp_path, {}, [])["files"]
                if f["role"] == "fetched"]
    assert entry == {"path": "examples/compose.yml", "repo": url, "commit": first,
                     "sha256": sha256(COMPOSE), "role": "fetched"}
