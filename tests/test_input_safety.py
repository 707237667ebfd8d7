"""Pages the tools must survive: symbolic links, FIFOs, bad bytes, huge paragraphs and long
hyphen chains, and commands run from a subfolder or outside any wiki."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness import make_tree

from wikitools.cli import main
from wikitools.pages.glossary import abbreviation_lines, load_glossary
from wikitools.pages.parse import parse_page

REPO = Path(__file__).resolve().parent.parent
GLOSSARY = "# Glossary\n\n| Acronym | Meaning |\n|---|---|\n| GPU | graphics processing unit |\n"


def make_wiki(root: Path, files: dict[str, str | bytes]) -> Path:
    return make_tree(root, {"wiki.yml": "docs_dir: wiki\n", "wiki/glossary.md": GLOSSARY, **files})


def wiki(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`wiki ARGS` in a child process, so that a hang fails the test instead of blocking it."""
    return subprocess.run(
        [sys.executable, "-m", "wikitools", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
    )


@pytest.mark.parametrize("command", [["check"], ["lint"], ["index", "--check"], ["acronyms"]])
def test_fifo_page_is_skipped_with_a_warning(tmp_path: Path, command: list[str]) -> None:
    root = make_wiki(tmp_path, {"wiki/a.md": "# A\n"})
    os.mkfifo(root / "wiki" / "pipe.md")
    done = wiki(command, root, timeout=60)
    assert "Traceback" not in done.stderr
    assert "wiki/pipe.md:1:1: PG004 warning: not a regular file" in done.stdout + done.stderr


def test_dangling_symlink_page_is_skipped_with_a_warning(tmp_path: Path, capsys) -> None:
    root = make_wiki(tmp_path, {"wiki/a.md": "# A\n"})
    (root / "wiki" / "gone.md").symlink_to(root / "wiki" / "missing.md")
    code = main(["lint", "--root", str(root)])
    out = capsys.readouterr().out
    assert code == 0
    assert "wiki/gone.md:1:1: PG004 warning: broken symbolic link" in out


def test_self_looping_symlink_page_is_skipped_with_a_warning(tmp_path: Path, capsys) -> None:
    root = make_wiki(tmp_path, {"wiki/a.md": "# A\n"})
    (root / "wiki" / "loop.md").symlink_to(root / "wiki" / "loop.md")
    assert main(["index", "--root", str(root)]) == 0
    captured = capsys.readouterr()
    assert "wiki/loop.md:1:1: PG004 warning: symbolic link that loops" in captured.out
    assert "loop.md" not in (root / "INDEX.md").read_text()


def test_symlink_outside_the_repository_is_not_read_or_indexed(tmp_path: Path, capsys) -> None:
    secret = tmp_path / "outside" / "secret.md"
    secret.parent.mkdir()
    secret.write_text("# Private notes\n\nThe password is hunter2.\n")
    root = make_wiki(tmp_path / "repo", {"wiki/a.md": "# A\n"})
    (root / "wiki" / "notes.md").symlink_to(secret)
    assert main(["index", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "wiki/notes.md:1:1: PG005 warning: symbolic link to" in out
    index = (root / "INDEX.md").read_text()
    assert "notes.md" not in index and "Private notes" not in index


def test_symlink_inside_the_repository_is_read(tmp_path: Path, capsys) -> None:
    root = make_wiki(tmp_path, {"wiki/a.md": "# Real page\n"})
    (root / "wiki" / "alias.md").symlink_to(root / "wiki" / "a.md")
    assert main(["index", "--root", str(root), "--stdout"]) == 0
    assert "[Real page](wiki/alias.md)" in capsys.readouterr().out


RUNBOOK_PAGE = b"""# Caf\xe9 page

```{ .bash #tiny-bad-byte .runbook-server engine=vllm gpus=1 }
vllm serve org/model --port 8011
```
"""


def test_invalid_utf8_is_located_and_the_page_still_processed(tmp_path: Path, capsys) -> None:
    root = make_wiki(tmp_path, {"wiki/a.md": RUNBOOK_PAGE})
    assert main(["index", "--root", str(root), "--stdout"]) == 1
    captured = capsys.readouterr()
    assert "wiki/a.md:1:6: PG002 error: byte 0xe9 is not valid UTF-8" in captured.err
    assert "[Caf\ufffd page](wiki/a.md)" in captured.out
    assert main(["runbook", "list", "--root", str(root)]) == 0
    assert "tiny-bad-byte" in capsys.readouterr().out


def test_nul_byte_is_located(tmp_path: Path, capsys) -> None:
    root = make_wiki(tmp_path, {"wiki/a.md": b"# A\n\nSome\x00text and more\x00.\n"})
    assert main(["lint", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "wiki/a.md:3:5: PG006 error: NUL byte in the page (2 in all)" in out


def test_nul_byte_in_glossary_keeps_its_table(tmp_path: Path, capsys) -> None:
    glossary = (
        "# Glossary\n\n| Acronym | Meaning |\n|---|---|\n| GPU | graphics\x00 processing unit |\n"
        "| TP | tensor parallelism |\n"
    )
    root = make_wiki(tmp_path, {"wiki/glossary.md": glossary.encode()})
    found = load_glossary(root / "wiki" / "glossary.md", root)
    assert "*[TP]: tensor parallelism" in abbreviation_lines(found)
    assert "*[GPU]:" in abbreviation_lines(found)
    assert main(["check", "--root", str(root)]) == 1
    assert "wiki/glossary.md:5:17: PG006 error: NUL byte" in capsys.readouterr().out


def test_long_paragraph_parses_in_linear_time(tmp_path: Path) -> None:
    # 48,000 lines: seconds when linear, many minutes when quadratic (16,000 took 79 s).
    code = (
        "from wikitools.pages.parse import parse_page\n"
        "page = parse_page('# T\\n\\n' + 'word and more words here\\n' * 48000)\n"
        "assert len(page.paragraphs) == 1 and page.spans[-1].line == 48002\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=REPO)


def test_acronym_chain_is_checked_in_linear_time(tmp_path: Path) -> None:
    # A 160 KB `GPU-GPU-…` chain: well under a second when linear; 40 KB took 93 s before.
    root = make_wiki(tmp_path, {"wiki/a.md": "# A\n\n" + "GPU-" * 40000 + "GPU\n"})
    done = wiki(["acronyms", "--root", str(root)], tmp_path, timeout=120)
    assert done.stdout.count("ACR001") == 1, done.stdout + done.stderr


def test_running_from_a_subfolder_is_the_same_as_from_the_root(tmp_path: Path) -> None:
    root = make_wiki(tmp_path, {
        "wiki/index.md": "# Home\n\nThe GPU (graphics processing unit) page.\n",
        "wiki/models/m.md": "# M\n\nA GPU here.\n",
    })
    assert wiki(["index"], root).returncode == 0
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    from_root = wiki(["check"], root)
    from_sub = wiki(["check"], root / "wiki" / "models")
    assert (from_sub.returncode, from_sub.stdout) == (from_root.returncode, from_root.stdout)
    for command in (["index"], ["runbook", "render"]):
        assert wiki(command, root / "wiki").returncode == 0
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before  # no stray files, nothing rewritten


def test_measured_table_is_kept_when_rendering_from_a_subfolder(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    for name in ("wiki", "runbooks", "data"):
        shutil.copytree(REPO / name, root / name)
    for name in ("wiki.yml", "mkdocs.yml", "INDEX.md"):
        shutil.copy(REPO / name, root / name)
    page = root / "wiki" / "reference" / "sm90-h200.md"
    text = page.read_text()
    done = wiki(["runbook", "render"], root / "wiki")
    assert done.returncode == 0, done.stderr
    assert page.read_text() == text


def test_outside_a_wiki_is_refused(tmp_path: Path) -> None:
    done = wiki(["check"], tmp_path)
    assert done.returncode == 2
    assert "not inside a wiki" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_backtick_the_parser_fails_on_is_read_as_text(tmp_path: Path) -> None:
    # markdown-it-pyrs 0.4 panics on a lone backtick inside an unclosed `[` (markdown-it-rust
    # issue 40): the page is read all the same, that backtick as text and the code span as
    # code, with a located warning and no panic message on stderr.
    source = "# A\n\nSee [the `x` tool and ` here.\n"
    page = parse_page(source, "a.md")
    assert [(s.text, s.col) for s in page.spans] == [("A", 3), ("See [the ", 1),
                                                     (" tool and ` here.", 13)]
    root = make_wiki(tmp_path, {"wiki/a.md": source})
    done = wiki(["lint", "--root", str(root)], tmp_path, timeout=120)
    assert "wiki/a.md:3:23: PG008 warning: this backtick closes no code span" in done.stdout
    assert done.stderr == "0 errors, 1 warning in 1 file (2 pages)\n", done.stderr  # no panic
    assert done.returncode == 0


LINKED_RUNBOOK_PAGE = ("# A\n\n```bash { #a-rb .runbook-server engine=vllm gpus=0 }\n"
                "vllm serve org/m --port 8000\n```\n")


@pytest.mark.parametrize(("target", "why"), [
    ("missing.md", "broken symbolic link"), ("loop.md", "symbolic link that loops")],
    ids=["broken", "looping"])
def test_runbook_list_and_plan_report_a_page_that_is_a_bad_symlink(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, why: str) -> None:
    root = make_wiki(tmp_path, {"wiki/a.md": LINKED_RUNBOOK_PAGE})
    (root / "wiki" / "loop.md").symlink_to(root / "wiki" / target)
    assert main(["runbook", "list", "--root", str(root)]) == 0  # a warning, as in `wiki check`
    out, err = capsys.readouterr()
    assert "wiki/a.md#a-rb" in out
    assert f"wiki/loop.md:1:1: PG004 warning: {why}" in err
    main(["runbook", "plan", "a-rb", "--root", str(root)])
    assert f"wiki/loop.md:1:1: PG004 warning: {why}" in capsys.readouterr().err
    assert main(["runbook", "plan", "wiki/loop.md#x", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "unknown runbook 'x'" in err and f"wiki/loop.md:1:1: PG004 warning: {why}" in err
