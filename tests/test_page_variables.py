"""What a page may set for a run: a block of variables (`.runbook-file` without `path=`) holds
literal assignments and here-document writes only, and no block of a runbook sets the run's own
variables (`WIKI_*`). Each refusal is located where the page writes it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from wikitools.cli import main
from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks

SERVER = 'vllm serve org/m --port "$PORT"'


def _page(variables: str, server: str = SERVER, attrs: str = "") -> str:
    return ("# P\n\n```bash { .runbook-file for=m }\n" + variables + "\n```\n\n"
            f"```bash {{ #m .runbook-server engine=vllm gpus=1{attrs} }}\n{server}\n```\n")


def _extract(text: str) -> tuple[list[str], list[str]]:
    runbooks, diags = extract_runbooks([parse_page(text, "p.md")], None)
    return [f"{d.line}:{d.col}: {d.code} {d.message}" for d in diags], list(runbooks.ids())


@pytest.mark.parametrize(("variables", "where"), [
    ("PORT=8000\nexport WIKI_RUN_TAG=other-tag", "5:8"),
    ("PORT=8000 WIKI_RUN_DIR=/tmp/elsewhere", "4:11"),
    ("declare -x WIKI_ANYTHING=1\nPORT=8000", "4:12"),
])
def test_a_variables_block_cannot_set_the_runs_own_variables(variables: str, where: str) -> None:
    diags, ids = _extract(_page(variables))
    assert ids == []  # the runbook does not run without its block of variables
    assert diags[0].startswith(f"{where}: RB004 WIKI_")
    assert "one of the run's own variables" in diags[0]
    assert "RB004 the runbook's file block at p.md:3 has errors" in diags[-1]


def test_no_runbook_block_nor_attribute_sets_the_runs_own_variables() -> None:
    diags, ids = _extract(_page("PORT=8000", "export WIKI_RUN_DIR=/tmp/x\n" + SERVER))
    assert ids == [] and diags[0].startswith("8:8: RB004 WIKI_RUN_DIR is one of the run's own")
    diags, ids = _extract(_page("PORT=8000", attrs=' env="WIKI_RUN_TAG=x"'))
    assert ids == [] and "bad value for env: WIKI_RUN_TAG is one of" in diags[0]
    diags, ids = _extract(_page("PORT=8000", attrs=' variants="WIKI_RUN_DIR=a,b"'))
    assert ids == [] and "bad value for variants: WIKI_RUN_DIR is one of" in diags[0]
    client = ("\n```bash { .runbook-client for=m sweep=\"WIKI_RUN_TAG=a,b\" }\n"
              "vllm bench serve --model org/m\n```\n"
              "\n```bash { .runbook-client for=m name=two }\n"
              "WIKI_RUN_TAG=x vllm bench serve --model org/m\n```\n")
    diags, _ids = _extract(_page("PORT=8000") + client)
    assert [d.split(": ", 1)[0] for d in diags] == ["11:33", "16:1"]
    assert "bad value for sweep: WIKI_RUN_TAG is one of" in diags[0]


@pytest.mark.parametrize(("variables", "where", "why"), [
    ("PORT=$(cat /etc/port)", "4:1", "the value of PORT is not a literal (command substitution)"),
    ("PORT=`id -u`", "4:1", "holds a backtick: command substitution"),
    ("N=$((4*2))", "4:1", "(arithmetic expansion)"),
    ("declare -i N=$'\\x24(id)'", "4:9", "`declare -i` in a block of variables"),
    ("X=$'\\x24(id)'", "4:1", "(ANSI-C quoting)"),
    ("IFS=,\nPORT=8000", "4:1", "IFS changes how bash reads or runs the commands after it"),
    ('PORT="8000\n9000"', "4:1", "(a line break)"),
    ("PORT=8000\nexport -n PORT", "5:8", "`export -n` in a block of variables"),
    ("MODEL_DIR=~/models", "4:1", "(the character '~')"),
    ("ARGS=(--tp 8 ~/x)", "4:1", "(the character '~')"),
    ("a[$(id)]=1", "4:1", "an array element's subscript is evaluated"),
    ("PORT=8000; curl -s x", "4:12", "`curl` runs a command"),
    ("PORT=8000 && (true)", "4:14", "`(` in a block of variables"),
    ("cat > /tmp/x <<EOF\n$(id)\nEOF\nPORT=8000", "4:16", "quote its delimiter (<<'EOF')"),
    ("cat > $(mktemp) <<'EOF'\nx\nEOF\nPORT=8000", "4:7", "the file name `$(mktemp)`"),
])
def test_variables_values_are_literals_or_refused_with_a_located_reason(
        variables: str, where: str, why: str) -> None:
    diags, ids = _extract(_page(variables))
    assert ids == []
    assert diags[0].startswith(f"{where}: RB004 ") and why in diags[0], diags


LITERAL = [
    "PORT=8000",
    "export PORT=8000 N='a b' M=\"x:y,z\"",
    "declare -x PORT=8000\nreadonly N=4",
    "PORT=8000\nMODEL=${MODEL:-org/m}\nDIR=\"$HOME/models\"",
    "COMMON=(\n  --tensor-parallel-size 8\n  --port 8100 \"--x=a b\"\n)\nPORT=8000",
    "cat > /tmp/run-m <<'EOF'\n$(not run)\nEOF\nchmod +x /tmp/run-m\nPORT=8000",
]


@pytest.mark.parametrize("variables", LITERAL)
def test_a_block_of_literal_assignments_is_accepted(variables: str) -> None:
    assert _extract(_page(variables)) == ([], ["m"])


@pytest.mark.parametrize("variables", ["export PORT=8000 N='a b' M=\"x:y,z\"",
                                       "declare -x PORT=8000\nreadonly N=4"])
def test_the_variables_the_plan_names_are_what_bash_sets(variables: str) -> None:
    runbooks, _diags = extract_runbooks([parse_page(_page(variables), "p.md")], None)
    (block,) = runbooks.get("m").files
    script = variables + "\n" + "".join(f'printf "%s\\0" "${k}"\n' for k, _v in block.sets)
    got = subprocess.run(["bash", "-c", script], capture_output=True, check=True,
                         text=True, timeout=30).stdout.split("\0")[:-1]
    assert got == [v for _k, v in block.sets]


def test_scan_takes_no_block_of_variables_the_run_would_refuse() -> None:
    from wikitools.runbook.blocks.scan import scan_wiki

    page = parse_page("# P\n\n```bash\ndeclare -i PORT=8000\n```\n\n"
                      "```bash\nvllm serve org/m --port \"$PORT\"\n```\n", "p.md")
    result = scan_wiki([page])
    assert [s.fence for s in result.suggestions if "runbook-file" in s.fence] == []
    assert any("in a block the run cannot run first: `declare -i` in a block of variables"
               in r.message for r in result.refused), result.refused


def test_the_plan_shows_the_block_of_variables_as_bash_runs_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "wiki.yml").write_text("docs_dir: docs\nglossary: docs/glossary.md\n")
    variables = "export PORT=8123 N='a b'\nARGS=(--max-num-seqs 4)"
    (tmp_path / "docs" / "p.md").write_text(_page(variables, SERVER + ' "${ARGS[@]}"')
                                            .replace("gpus=1", "gpus=0"))
    assert main(["runbook", "plan", "m", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ("  command (bash -c, in the wiki root):\n    export PORT=8123 N='a b'\n"
            "    ARGS=(--max-num-seqs 4)\n    vllm serve org/m --port \"$PORT\" "
            "\"${ARGS[@]}\"\n") in out
    assert "the block at docs/p.md:3 runs first: it sets PORT, N, ARGS" in out
    assert "ready: http://127.0.0.1:8123/health" in out
