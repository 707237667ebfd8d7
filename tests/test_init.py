"""`wiki init` on an existing tree shaped like the community wiki (pages at the top of the
repository, attachments in images/ logs/ data/, a GLOSSARY.md, a hand-kept INDEX.md, years of
acronyms without a policy): afterwards `wiki check` reports only the real page errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from harness import make_tree

from wikitools.cli import main

PAGES = {
    "README.md": "# Community wiki\n\nStart at the [index](INDEX.md), the "
                 "[models](models/README.md) or the [glossary](GLOSSARY.md); "
                 "[a skill](scripts/skill.md).\n",
    "INDEX.md": "# Index\n\n- [A](models/a.md)\n- [Day one](daily/2026-01-01.md)\n",
    "GLOSSARY.md": "# Glossary\n\n| Acronym | Meaning |\n|---|---|\n"
                   "| TP | tensor parallelism |\n",
    "models/README.md": "# Model pages\n\nSee [A](a.md).\n",
    "models/a.md": "# Model A\n\nRun with TP and EP and MTP on the box.\n\n"
                   "A [log](../logs/missing.log) that is not there.\n\n"
                   "Fixed upstream in\n#31782. See [the launch](#launch----sglang).\n\n"
                   "## Launch -- SGLang\n",
    "daily/2026-01-01.md": "# Day one\n\nKV cache, TP, NCCL.\n",
    "scripts/skill.md": "---\nname: x\ndescription: [a, b] c\n---\n# Skill\n",
    "images/attachment.md": "# A pasted attachment\n\nLots of XYZ and QQQ.\n",
}
BINARY = {"images/pic.png": b"\x89PNG", "logs/dmesg.log": b"boot\n", "data/t.csv": b"a,b\n"}


def _tree(root: Path) -> Path:
    make_tree(root, {**PAGES, **BINARY})
    (root / ".git").mkdir()  # the top of a repository: where `wiki` finds the wiki
    return root


def _check(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["check", "--root", str(root)])
    return code, capsys.readouterr().out.splitlines()


def test_init_leaves_only_real_page_errors(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path / "wiki")
    code, before = _check(root, capsys)
    assert code == 1 and len(before) > 6  # acronyms, the index rewrite, the real errors

    pages_before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert main(["init", "--check", "--root", str(root)]) == 1
    assert not (root / "wiki.yml").exists()
    assert main(["init", "--root", str(root)]) == 0
    out, err = capsys.readouterr()
    assert "Next steps:" in out and "wiki check" in out
    assert len(out.splitlines()) < 15  # next steps, not findings
    assert "wrote wiki.yml" in err and "wrote .acronyms-baseline.json" in err
    # Nothing but the two new files: pages, INDEX.md and attachments untouched.
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert {p.name for p in set(after) - set(pages_before)} == {
        "wiki.yml", ".acronyms-baseline.json"}
    assert all(after[p] == data for p, data in pages_before.items())

    config = yaml.safe_load((root / "wiki.yml").read_text())
    assert config["docs_dir"] == "."
    assert config["glossary"] == "GLOSSARY.md"
    assert config["index"]["generate"] is False
    assert [s["path"] for s in config["index"]["sections"]] == [".", "daily", "models",
                                                                 "scripts"]
    assert config["index"]["sections"][2]["title"] == "Model pages"
    assert {"images/", "logs/", "data/"} <= set(config["exclude"])
    assert "INDEX.md" not in config["exclude"]  # the maintainers' own index is a page

    code, findings = _check(root, capsys)
    assert code == 1
    assert findings == [
        "models/a.md:5:3: LNK001 error: link to missing page '../logs/missing.log'",
        "scripts/skill.md:3:21: FM001 error: malformed front matter: expected <block end>, "
        "but found '<scalar>'",
    ]

    # The lines GitHub renders as text but the site as a heading (PG007), and anchors spelled
    # the GitHub way (LNK003), are today's findings too: recorded, not reported.
    baseline = (root / ".acronyms-baseline.json").read_text()
    assert '"code": "PG007"' in baseline and '"code": "LNK003"' in baseline
    assert main(["acronyms", "--root", str(root), "--write-baseline",
                 str(root / ".acronyms-baseline.json")]) == 0
    assert (root / ".acronyms-baseline.json").read_text() == baseline  # page entries kept
    capsys.readouterr()

    # A second init has nothing to do; a new acronym is a new finding.
    assert main(["init", "--check", "--root", str(root)]) == 0
    page = root / "models" / "a.md"
    page.write_text(page.read_text() + "\nNow with FOO too.\n")
    code, findings = _check(root, capsys)
    assert any('"FOO"' in f for f in findings)
    page.write_text(page.read_text() + "\nAnd\n#4. again.\n")
    assert [f for f in _check(root, capsys)[1] if "PG007" in f] == [
        "models/a.md:15:1: PG007 error: line starts with '#' and no space: the site renders it as "
        "a heading (GitHub does not); rewrap the sentence so the '#' is not first on its line"]


def test_index_is_not_written_until_asked(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path / "wiki")
    assert main(["init", "--root", str(root)]) == 0
    index = (root / "INDEX.md").read_bytes()
    assert main(["index", "--root", str(root)]) == 2
    assert "generate: true" in capsys.readouterr().err
    assert (root / "INDEX.md").read_bytes() == index
    # the maintainers' own index page is never stale: --check is silent, --diff a preview
    assert main(["index", "--check", "--root", str(root)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["index", "--check", "--diff", "--root", str(root)]) == 0
    assert capsys.readouterr().out.startswith("--- ")
    assert (root / "INDEX.md").read_bytes() == index
    yml = root / "wiki.yml"
    yml.write_text(yml.read_text().replace("generate: false", "generate: true"))
    assert main(["index", "--root", str(root)]) == 0
    assert (root / "INDEX.md").read_bytes() != index
    capsys.readouterr()


def test_init_refuses_folder_names_that_are_not_utf8(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path / "wiki")
    os.makedirs(os.path.join(os.fsencode(root), b"notes-\xff"))
    (root / os.fsdecode(b"notes-\xff") / "a.md").write_text("# A\n")
    assert main(["init", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "notes-\\xff: folder name is not valid UTF-8" in err and "Traceback" not in err
    assert not (root / "wiki.yml").exists()


def test_init_refuses_page_names_that_are_not_utf8(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path / "wiki")
    (root / "models" / os.fsdecode(b"b\xfe.md")).write_text("# B\n\nTP again.\n")
    assert main(["init", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "models/b\\xfe.md: file name is not valid UTF-8" in err
    assert not (root / "wiki.yml").exists() and not (root / ".acronyms-baseline.json").exists()


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_init_refuses_a_wiki_yml_that_is_not_a_file(tmp_path: Path, kind: str) -> None:
    root = _tree(tmp_path / "wiki")
    if kind == "folder":
        (root / "wiki.yml").mkdir()
    else:
        os.mkfifo(root / "wiki.yml")
    # A subprocess with a deadline: opening a FIFO for reading waits for a writer forever.
    done = subprocess.run([sys.executable, "-m", "wikitools", "init", "--root", str(root)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("wiki: error: wiki.yml: not a regular file (a folder, FIFO, device or "
                           "broken link); remove it or move it away, then run wiki init again\n")


def test_mkdocs_yaml_is_read_as_mkdocs_yml_is(tmp_path: Path) -> None:
    # MkDocs tries mkdocs.yml, then mkdocs.yaml (vLLM's docs use the second spelling)
    from wikitools.core.config import find_root, load_config

    root = tmp_path / "tree"
    (root / "docs" / "serving").mkdir(parents=True)
    (root / "docs" / "serving" / "a.md").write_text("# A\n")
    (root / "mkdocs.yaml").write_text("site_name: X\ndocs_dir: docs\n")
    assert find_root(root / "docs" / "serving") == root
    assert load_config(root).docs_dir == "docs"
    (root / "docs" / "pages").mkdir()
    (root / "mkdocs.yml").write_text("site_name: X\ndocs_dir: docs/pages\n")
    assert load_config(root).docs_dir == "docs/pages"  # mkdocs.yml comes first


@pytest.mark.parametrize(("config", "generator"), [
    ("docusaurus.config.js", "docusaurus"), ("docs/conf.py", "sphinx"),
    ("docs/source/conf.py", "sphinx")])
def test_another_generators_tree_is_a_wiki_with_its_link_rules(tmp_path: Path, config: str,
                                                                generator: str) -> None:
    from wikitools.core.config import load_config

    (tmp_path / "docs" / "source").mkdir(parents=True)
    (tmp_path / config).write_text("# site configuration\n")
    (tmp_path / "docs" / "source" / "a.md").write_text("# A\n\n[B](b)\n")
    (tmp_path / "docs" / "source" / "b.md").write_text("# B\n")
    assert main(["init", "--root", str(tmp_path)]) == 0
    assert load_config(tmp_path).generator == generator
    assert main(["lint", "--root", str(tmp_path)]) == 0
