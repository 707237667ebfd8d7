"""`wiki index` answered from the record of its last run (`wikitools.index_answer`): the same
bytes as the whole work, and the whole work again whenever anything it read has changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wikitools import index_answer
from wikitools.cli import main
from wikitools.cli.index import answer_from_record
from wikitools.index_answer import read_options

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "generate-wiki-index.py"
MODES = [[], ["--check"], ["--stdout"], ["--check", "--diff"], ["--diff"], ["--stdout", "--diff"]]


@pytest.fixture
def wiki(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small wiki with its own cache folder; a page with a byte that is not UTF-8 gives the
    answer an error finding (so exit 1 and a summary line)."""
    root = tmp_path / "wiki"
    (root / "docs" / "guides").mkdir(parents=True)
    (root / "wiki.yml").write_text("docs_dir: docs\nindex:\n  title: Catalog\n")
    (root / "README.md").write_text("# Home\n\nThe front page.\n")
    (root / "docs" / "alpha.md").write_text("# Alpha\n\nThe first page.\n")
    (root / "docs" / "guides" / "beta.md").write_text(
        "---\nstatus: measured\n---\n# Beta\n\nThe second page.\n")
    (root / "docs" / "bad.md").write_bytes(b"# Bad \xe2 byte\n\nText.\n")
    monkeypatch.setenv("WIKI_CACHE_DIR", str(tmp_path / "cache"))
    # Time stamps here have nanoseconds and nothing changes a file behind the test's back:
    # files written before a run began are old enough (the real margin has its own test).
    monkeypatch.setattr(index_answer, "_FINE_SLACK_NS", 0)
    return root


def _full(root: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["index", *argv, "--root", str(root)], from_record=False)
    out, err = capsys.readouterr()
    return code, out, err


def _warm(root: Path, argv: list[str],
          capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str] | None:
    code = answer_from_record([*argv, "--root", str(root)])
    out, err = capsys.readouterr()
    if code is None:
        assert (out, err) == ("", "")
        return None
    return code, out, err


def test_the_record_gives_the_same_bytes_as_the_whole_work(
        wiki: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _full(wiki, [], capsys)
    assert first[0] == 1 and "wrote INDEX.md (4 pages)" in first[2]
    assert "docs/bad.md:1:" in first[1] and "PG002" in first[1]
    index = (wiki / "INDEX.md").read_bytes()
    for mode in MODES:
        warm = _warm(wiki, mode, capsys)
        assert warm is not None, mode
        assert warm == _full(wiki, mode, capsys), mode
        assert (wiki / "INDEX.md").read_bytes() == index
    assert _warm(wiki, [], capsys) == (1, first[1], first[2].replace("wrote", "unchanged:"))
    assert _warm(wiki, ["--check"], capsys) == (0, first[1], "INDEX.md is up to date\n")
    # `wiki index` itself takes the record too
    assert main(["index", "--stdout", "--root", str(wiki)]) == 1
    assert capsys.readouterr().out.endswith(index.decode())


def _changed_title_same_size(wiki: Path) -> None:
    page = wiki / "docs" / "alpha.md"
    before = page.stat()
    page.write_text("# Alpho\n\nThe first page.\n")
    os.utime(page, ns=(before.st_atime_ns, before.st_mtime_ns))  # size and mtime as before
    assert page.stat().st_size == before.st_size


def _added(wiki: Path) -> None:
    (wiki / "docs" / "guides" / "gamma.md").write_text("# Gamma\n\nA new page.\n")


def _removed(wiki: Path) -> None:
    (wiki / "docs" / "guides" / "beta.md").unlink()


def _config(wiki: Path) -> None:
    (wiki / "wiki.yml").write_text("docs_dir: docs\nindex:\n  title: Register\n")


def _root_readme(wiki: Path) -> None:
    (wiki / "README.md").write_text("# Welcome\n\nThe front page.\n")


@pytest.mark.parametrize(("change", "seen"), [
    (_changed_title_same_size, "[Alpho]"),
    (_added, "[Gamma]"),
    (_removed, None),
    (_config, "# Register"),
    (_root_readme, "[Welcome]"),
])
def test_a_change_makes_the_whole_work_run(wiki: Path, capsys: pytest.CaptureFixture[str],
                                           change, seen: str | None) -> None:
    _full(wiki, [], capsys)
    assert _warm(wiki, ["--check"], capsys) is not None
    old = (wiki / "INDEX.md").read_text()
    change(wiki)
    assert _warm(wiki, ["--check"], capsys) is None
    assert _warm(wiki, [], capsys) is None
    code, out, _ = _full(wiki, ["--check"], capsys)
    assert (code, out.splitlines()[-1]) == (1, "would change: INDEX.md")
    _full(wiki, [], capsys)
    new = (wiki / "INDEX.md").read_text()
    assert new != old
    if seen is not None:
        assert seen in new
    else:
        assert "[Beta]" in old and "[Beta]" not in new
    # the whole work wrote a new record: the next run is answered from it
    warm = _warm(wiki, ["--check"], capsys)
    assert warm is not None and warm == _full(wiki, ["--check"], capsys)
    assert warm[0] == 0


def test_a_hand_edited_index_is_not_taken_for_the_recorded_one(
        wiki: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _full(wiki, [], capsys)
    index = wiki / "INDEX.md"
    good = index.read_bytes()
    index.write_bytes(good.replace(b"Catalog", b"Catalogue"))
    assert _warm(wiki, ["--check"], capsys) is None
    code, out, _ = _full(wiki, ["--check", "--diff"], capsys)
    assert code == 1 and "-# Catalogue" in out and "+# Catalog" in out
    assert main(["index", "--check", "--root", str(wiki)]) == 1
    capsys.readouterr()
    assert main(["index", "--root", str(wiki)]) == 1  # the PG002 error; the index is rewritten
    assert "wrote INDEX.md" in capsys.readouterr().err
    assert index.read_bytes() == good
    assert main(["index", "--check", "--root", str(wiki)]) == 0
    assert capsys.readouterr().err == "INDEX.md is up to date\n"


def test_a_missing_index_is_written_again(wiki: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _full(wiki, [], capsys)
    good = (wiki / "INDEX.md").read_bytes()
    (wiki / "INDEX.md").unlink()
    assert _warm(wiki, [], capsys) is None
    assert main(["index", "--root", str(wiki)]) == 1
    assert (wiki / "INDEX.md").read_bytes() == good


def test_pages_changed_just_before_the_run_leave_no_record(
        wiki: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A page written within the file system clock's margin of the run could change again
    in the same tick unseen: that run's answer is not recorded."""
    monkeypatch.setattr(index_answer, "_FINE_SLACK_NS", 100_000_000)
    (wiki / "docs" / "alpha.md").write_text("# Alpha\n\nJust now.\n")
    _full(wiki, [], capsys)
    assert _warm(wiki, [], capsys) is None
    assert not any((wiki.parent / "cache").glob("index-*"))


def test_other_code_makes_the_whole_work_run(
        wiki: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The record names the code that made it: another version of any module is another key."""
    package = tmp_path / "package"
    shutil.copytree(REPO / "wikitools", package)
    monkeypatch.setattr(index_answer, "_PACKAGE", str(package))
    _full(wiki, [], capsys)
    assert _warm(wiki, [], capsys) is not None
    with (package / "index.py").open("a") as f:
        f.write("# another version\n")
    assert _warm(wiki, [], capsys) is None


def test_the_code_key_covers_every_module_of_the_facts_cache() -> None:
    from wikitools.checks import facts

    top = {p.stem for p in (REPO / "wikitools").glob("*.py")}
    others = {name.removesuffix(".py") for name in index_answer.CODE}
    assert set(facts._SOURCES) <= top | others


def test_symbolic_links_and_a_disabled_cache_leave_no_record(
        wiki: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (wiki / "docs" / "link.md").symlink_to(wiki / "docs" / "alpha.md")
    _full(wiki, [], capsys)
    assert _warm(wiki, [], capsys) is None
    (wiki / "docs" / "link.md").unlink()
    monkeypatch.setenv("WIKI_CACHE_DIR", "off")
    _full(wiki, [], capsys)
    assert _warm(wiki, [], capsys) is None


def test_a_damaged_record_is_passed_over_and_written_again(
        wiki: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _full(wiki, [], capsys)
    (record,) = (wiki.parent / "cache").glob("index-*")
    good = record.read_bytes()
    for damaged in (b"", b"not marshal", good[: len(good) // 2], b"\xe9" + good[1:]):
        record.write_bytes(damaged)
        assert _warm(wiki, ["--check"], capsys) is None
    assert _full(wiki, ["--check"], capsys)[0] == 0
    assert record.read_bytes() == good
    assert _warm(wiki, ["--check"], capsys) is not None


def test_only_plainly_written_options_are_read_here() -> None:
    assert read_options([]) is not None
    plain = read_options(["--check", "--diff", "--root=w"])
    assert plain is not None and (plain.root, plain.check, plain.diff, plain.stdout) == (
        "w", True, True, False)
    for argv in (["-h"], ["--chec"], ["--stdout", "--check"], ["--check", "--check"],
                 ["--root"], ["--root", "--check"], ["--root", "a", "--root", "b"], ["x"],
                 ["--root="]):
        assert read_options(argv) is None, argv


def test_usage_errors_still_come_from_argparse(
        wiki: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _full(wiki, [], capsys)
    assert main(["index", "--stdout", "--check", "--root", str(wiki)]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def _script(root: Path, cache: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["WIKI_CACHE_DIR"] = cache
    return subprocess.run([sys.executable, "-X", "importtime", str(SCRIPT), *args], cwd=root,
                          env=env, capture_output=True, text=True, check=False, timeout=120)


def _imported(err: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in err.splitlines()
            if line.startswith("import time:")}


def _streams(run: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    err = "".join(f"{line}\n" for line in run.stderr.splitlines()
                  if not line.startswith("import time:"))
    return run.returncode, run.stdout, err


def test_a_warm_script_run_imports_neither_the_parser_nor_yaml(
        wiki: Path, tmp_path: Path) -> None:
    """The script as the community runs it, cold (cache off) and warm, byte for byte."""
    cache = str(tmp_path / "script-cache")
    assert _script(wiki, "off").returncode == 1  # writes INDEX.md (bad.md has an error)
    time.sleep(0.15)  # the pages are now older than the real margin of the clock (0.1 s)
    assert "wikitools.pages.parse" in _imported(_script(wiki, cache).stderr)  # keeps the record
    for mode in MODES:
        warm = _script(wiki, cache, *mode)
        assert not {"wikitools.pages.parse", "markdown_it_pyrs", "yaml", "pathspec",
                    "wikitools.core.config"} & _imported(warm.stderr), mode
        assert _streams(warm) == _streams(_script(wiki, "off", *mode)), mode
