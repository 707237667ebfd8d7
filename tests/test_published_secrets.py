"""`wiki check` refuses a secret in any file the site would publish: MkDocs copies every file of
the docs folder (a server log, a notes.env), not only the pages. Tokens in a known format are
found everywhere; a secret-named value (`HF_TOKEN=…`) in files that are not pages; prose such
as "token by token: …" and placeholders are no secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.site_tree import site_tree

from wikitools.cli import main

TOKEN = "hf_" + "Xy7" * 8
KEY = "sk-proj-" + "a1B2" * 6


def _findings(tree: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["check", "--root", str(tree)])
    out, err = capsys.readouterr()
    assert TOKEN not in out + err and KEY not in out + err  # the finding never shows the value
    return code, [line for line in out.splitlines() if " SEC001 " in line]


def test_wiki_check_refuses_a_secret_in_any_file_the_site_would_publish(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = site_tree(tmp_path)
    wiki = tree / "wiki"
    (wiki / "logs").mkdir()
    (wiki / "logs" / "server.log").write_text(f"INFO ready\nargs: --hf-token {TOKEN} -tp 2\n")
    (wiki / "notes.env").write_text("PORT=8000\nHF_TOKEN=abcdef0123456789\n")
    (wiki / "data.json").write_text('{"model": "m", "api_key": "plain-secret-value"}\n')
    (wiki / "leak.md").write_text(f"---\ntitle: Leak\n---\n# Leak\n\nThe key `{KEY}` works.\n")
    code, found = _findings(tree, capsys)
    assert code == 1
    assert [f.split(" SEC001 ")[0] for f in found] == [
        "wiki/data.json:1:27:", "wiki/leak.md:6:10:", "wiki/logs/server.log:2:18:",
        "wiki/notes.env:2:10:"]
    assert all("a secret (a token, key or password) in a file the site publishes" in f
               for f in found)


def test_placeholders_prose_and_files_the_site_skips_are_no_secret(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = site_tree(tmp_path)
    wiki = tree / "wiki"
    (wiki / "page.md").write_text(
        "---\ntitle: Page\n---\n# Page\n\nCompare token by token: feed both.\n\n"
        "```bash\nHF_TOKEN=hf_your_token vllm serve m --api-key \"$API_KEY\"\n```\n")
    (wiki / "notes.env").write_text("HF_TOKEN=$HF_TOKEN\nPASSWORD=***\n")
    (wiki / ".secrets.env").write_text(f"HF_TOKEN={TOKEN}\n")  # MkDocs skips dot files
    _code, found = _findings(tree, capsys)
    assert found == []
