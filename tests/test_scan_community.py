"""`wiki runbook scan` on community page shapes (tests/fixtures/community): every launcher shape
the community wiki uses is found and read right (engine, model, tensor-parallel size), and no
block that is not a launcher is reported as one. benchmarks/bench_scan.py prints the figures."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from harness import load_script

from wikitools.cli import main
from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.container_warnings import container_findings
from wikitools.runbook.blocks.extract import load_runbooks

REPO = Path(__file__).resolve().parents[1]
bench_scan = load_script(REPO / "benchmarks" / "bench_scan.py", "bench_scan")

PAGES = REPO / "tests" / "fixtures" / "community"


def test_fixture_corpus_is_large_and_varied() -> None:
    pages, expected = bench_scan.expectations(PAGES)
    assert len(expected) >= 113
    engines = {e.engine for e in expected}
    assert engines == {"vllm", "sglang"}
    texts = "\n".join(p.text for p in pages)
    for shape in ("docker run", "docker exec", "entrypoint:", "command:", "$${", '"$@"',
                  "--tp-size", "--tp ", "-tp ", '\\"', "bash -lc", "<<'", "vllm/vllm-openai"):
        assert shape in texts, shape


def test_scan_reads_community_launchers() -> None:
    s = bench_scan.score(PAGES)
    report = "\n".join(s.lines() + list(s.misses))
    assert s.found >= 0.95 * s.launchers, report
    assert s.engine_right == s.found, report
    assert s.model_right >= 0.95 * s.found, report
    assert s.tp_right >= 0.95 * s.found, report
    assert s.false_positives == 0, report


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "wiki-root"
    shutil.copytree(PAGES, root / "wiki")
    return root


_NEW_REGION = re.compile(r"\n\n<!-- wiki:results runbook=[\w.-]+ view=\w+ -->\n.*?"
                         r"<!-- wiki:end sum=\w+ -->", re.S)


_NEW_SERVER = re.compile(r"\n\n```bash \{ #[\w.-]+ \.runbook-server [^}]*\}\n"
                         r"docker compose up -d\n```(?=\n)")


def test_scan_write_marks_blocks_in_place_and_check_reports_drift(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path)
    page = root / "wiki" / "models" / "ds4-flash-v2.md"
    before = {p: p.read_text() for p in root.rglob("*.md")}

    assert main(["runbook", "scan", "--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "wiki/models/ds4-flash-v2.md:49:1: would mark server block" in out
    assert {p: p.read_text() for p in root.rglob("*.md")} == before  # --check writes nothing

    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    # Blocks that cannot become runbooks are left alone, with the reason.
    assert ("wiki/troubleshooting/inside-a-running-container.md:14:1: RB012 warning: server "
            "block not converted: the server starts inside a running container (dev)") in out
    # A compose file the page runs only in its prose gets a server block after it.
    assert ("wiki/models/minimax-m25.md:6:1: marked server block: ```bash { #minimax-m2.5-tp4-2 "
            ".runbook-server engine=vllm gpus=4 }") in out
    changed = regions = 0
    for path, old in before.items():
        new = path.read_text()
        # the results regions it adds after a runbook's last client; nothing else is added
        new, added = _NEW_REGION.subn("", new) if "wiki:results" not in old else (new, 0)
        regions += added
        new = _NEW_SERVER.sub("", new)
        old_lines, new_lines = old.split("\n"), new.split("\n")
        assert len(old_lines) == len(new_lines), path
        for a, b in zip(old_lines, new_lines, strict=True):
            if a != b:  # only opening fences change, and only their info string
                changed += 1
                assert a.startswith("```") and re.match(r"```(bash|yaml) \{ ", b), (path, a, b)
    assert changed >= 100
    assert regions >= 3
    text = page.read_text()
    assert "```yaml { .runbook-file for=deepseek-v4-flash-tp4 path=compose.yaml }" in text
    assert "```bash { #deepseek-v4-flash-tp4 .runbook-server engine=vllm gpus=4 }" in text

    # The result is a valid wiki of runbooks, and a second pass has nothing left to do.
    runbooks, diags, _pages = load_runbooks(root)
    assert [d.format() for d in diags] == []
    assert len(runbooks) >= 90
    compose = runbooks.get("deepseek-v4-flash-tp4")
    assert [f.path for f in compose.files] == ["compose.yaml"]
    assert compose.server.command.model == "/models/DeepSeek-V4-Flash"
    assert compose.server.command.tp == 4
    assert main(["runbook", "scan", "--check", "--root", str(root)]) == 0
    capsys.readouterr()


def test_lint_says_why_container_blocks_cannot_run() -> None:
    pages, _expected = bench_scan.expectations(PAGES)
    found = {d.format() for p in pages for d in container_findings(p)}
    assert ("compose/glm52-compose.md:95:1: RB013 warning: compose file whose services start no "
            "engine themselves (service glm52 runs /usr/local/bin/serve-gilded-gnosis.sh in "
            "voipmonitor/vllm:gilded-gnosis-v20-vllme1e9426-si200c1db-fi801d57a-cu132-20260804-r28)"
            ": a runbook cannot tell the engine, model or port from it") in found
    assert ("compose/glm52-compose.md:110:1: RB013 warning: docker compose runs the compose file "
            "shown at line 95, whose services start no engine themselves") in found
    assert ("troubleshooting/inside-a-running-container.md:37:1: RB013 warning: the server starts "
            "inside a running container (sglang-dev) that the page does not start: a runbook "
            "could not stop it; start it with docker run or docker compose") in found
    # Compose files with a launcher, and `up` blocks that run them, are not findings.
    assert not any(f.startswith("models/ds4-flash-v2.md") for f in found), found
    lone = parse_page("```bash\ndocker compose -f srv.yaml up -d\n```\n", "p.md")
    assert [d.format() for d in container_findings(lone)] == [
        "p.md:1:1: RB013 warning: docker compose up needs its compose file (srv.yaml) on the "
        "page, in a block marked `yaml { .runbook-file for=ID path=… }`"]
