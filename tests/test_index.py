"""Golden tests for INDEX.md: tests/golden/index/<case>/{args.txt, in/, expected/, expected.txt}.

Each case copies `in/` to a temporary root, runs `main(["index", ..., "--root", root])`, and
compares the files that changed or appeared (`expected/`) and the exit code and streams
(`expected.txt`). `pytest --update-goldens` rewrites both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wikitools.checks.index import encode_path, escape_text, natural_key
from wikitools.cli import main
from wikitools.core.config import iter_pages, load_config

GOLDEN = Path(__file__).parent / "golden" / "index"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "args.txt").is_file())
REPO = Path(__file__).resolve().parent.parent


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _run(root: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([*argv, "--root", str(root)])
    out, err = capsys.readouterr()
    return code, out, err.replace(str(root), "ROOT")


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, tmp_path: Path, capsys, update_goldens: bool) -> None:
    src = GOLDEN / case
    root = tmp_path / "root"
    shutil.copytree(src / "in", root)
    before = _snapshot(root)
    argv = (src / "args.txt").read_text().split()
    code, out, err = _run(root, argv, capsys)
    report = f"exit: {code}\n--- stdout\n{out}--- stderr\n{err}"
    after = _snapshot(root)
    changed = {k: v for k, v in after.items() if before.get(k) != v}
    assert set(before) <= set(after), "files were removed"
    if update_goldens:
        shutil.rmtree(src / "expected", ignore_errors=True)
        for rel, data in changed.items():
            target = src / "expected" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (src / "expected.txt").write_text(report, encoding="utf-8")
        return
    expected_dir = src / "expected"
    expected = _snapshot(expected_dir) if expected_dir.is_dir() else {}
    assert report == (src / "expected.txt").read_text(encoding="utf-8")
    assert sorted(changed) == sorted(expected)
    for rel, data in expected.items():
        assert changed[rel].decode() == data.decode(), rel


@pytest.mark.parametrize("case", [c for c in CASES if "check" not in c and "bad" not in c])
def test_idempotent(case: str, tmp_path: Path, capsys) -> None:
    """Writing twice changes nothing; afterwards --check is clean."""
    root = tmp_path / "root"
    shutil.copytree(GOLDEN / case / "in", root)
    first_code = _run(root, ["index"], capsys)[0]
    # The golden's own exit code (1 where a page has a read error and is still listed).
    golden = (GOLDEN / case / "expected.txt").read_text(encoding="utf-8").splitlines()[0]
    assert f"exit: {first_code}" == golden
    first = _snapshot(root)
    code, _, err = _run(root, ["index"], capsys)
    assert code == first_code
    assert "unchanged: INDEX.md" in err
    assert _snapshot(root) == first
    assert _run(root, ["index", "--check"], capsys)[0] == 0


def test_stdout_matches_written_file(tmp_path: Path, capsys) -> None:
    root = tmp_path / "root"
    shutil.copytree(GOLDEN / "escapes" / "in", root)
    _, printed, _ = _run(root, ["index", "--stdout"], capsys)
    assert not (root / "INDEX.md").exists()
    _run(root, ["index"], capsys)
    assert (root / "INDEX.md").read_text(encoding="utf-8") == printed


def test_write_is_skipped_when_equal(tmp_path: Path, capsys) -> None:
    root = tmp_path / "root"
    shutil.copytree(GOLDEN / "check-fresh" / "in", root)
    index = root / "INDEX.md"
    os.utime(index, (1_000_000, 1_000_000))
    assert _run(root, ["index"], capsys)[0] == 0
    assert index.stat().st_mtime == 1_000_000


def test_natural_key_orders_versions() -> None:
    names = ["glm5.1_v10", "glm5.1_v2", "ds4dspark-v20-r16", "ds4dspark-v7", "ds4dspark-v20-r9"]
    assert sorted(names, key=natural_key) == [
        "ds4dspark-v7",
        "ds4dspark-v20-r9",
        "ds4dspark-v20-r16",
        "glm5.1_v2",
        "glm5.1_v10",
    ]


def test_escape_and_encode() -> None:
    assert escape_text("a ] `b` *c* <think>") == r"a \] \`b\` \*c\* \<think\>"
    assert encode_path("wiki/a b/é#1.md") == "wiki/a%20b/%C3%A9%231.md"


def test_default_docs_dir_and_glossary(tmp_path: Path) -> None:
    (tmp_path / "GLOSSARY.md").write_text("# G\n")
    assert load_config(tmp_path).docs_dir == "."
    assert load_config(tmp_path).glossary == "GLOSSARY.md"
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "glossary.md").write_text("# G\n")
    (tmp_path / "wiki.yml").write_text("docs_dir: wiki\n")
    config = load_config(tmp_path)
    assert (config.docs_dir, config.glossary) == ("wiki", "wiki/glossary.md")


def test_without_a_config_the_whole_tree_is_the_wiki(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.md").write_text("# M\n")
    config = load_config(tmp_path)
    assert config.docs_dir == "."
    rels = [p.relative_to(tmp_path).as_posix() for p in iter_pages(config)]
    assert rels == ["docs/guide.md", "models/m.md"]


def test_mkdocs_docs_dir_is_used_without_a_wiki_yml(tmp_path: Path) -> None:
    (tmp_path / "pages").mkdir()
    (tmp_path / "mkdocs.yml").write_text(
        "docs_dir: pages\nmarkdown_extensions:\n  - x:\n      f: !!python/name:os.getcwd\n"
    )
    assert load_config(tmp_path).docs_dir == "pages"


def test_script_runs_as_documented(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(GOLDEN / "setext" / "in", root)
    script = REPO / "scripts" / "generate-wiki-index.py"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(script), "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Setext Title" in (root / "INDEX.md").read_text(encoding="utf-8")
    again = subprocess.run(
        [sys.executable, str(script), "--root", str(root), "--check"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert again.returncode == 0, again.stdout + again.stderr
