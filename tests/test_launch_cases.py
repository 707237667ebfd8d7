"""The launch reader and its refusals on one block at a time, as markdown-it-style fixture
files in tests/fixtures/launches/*.md.

Each case is `title` / `.` / a page (Markdown) / `.` / what `wiki runbook scan` says of each
launch block / `.`: `server L: engine=… model=… tp=… image=… wrappers=…` and the fence it would
get for a proposed server block, `client L: TOOL`, or `refused L:C CODE reason`.
`pytest --update-goldens` rewrites the expected parts."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import Case, read_cases

from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.scan import scan_wiki
from wikitools.runbook.engines.types import ClientCommand, EngineCommand

FIXTURES = Path(__file__).parent / "fixtures" / "launches"


def _cases() -> list[Case]:
    return read_cases(FIXTURES)


def dump(source: str) -> str:
    result = scan_wiki([parse_page(source, "p.md")])
    out: list[str] = []
    for s in result.suggestions:
        cmd = s.command
        if isinstance(cmd, EngineCommand):
            shown = [f"engine={cmd.engine}", f"model={cmd.model}", f"tp={cmd.tp or 1}"]
            shown += [f"image={cmd.image}"] if cmd.image else []
            shown += [f"wrappers={','.join(cmd.wrappers)}"] if cmd.wrappers else []
            shown += [f"gpus={cmd.docker_gpus}"] if cmd.docker_gpus else []
            out.append(f"{s.role} {s.line}: {' '.join(shown)}")
            out.append(f"  mark {s.fence}")
        elif isinstance(cmd, ClientCommand):
            out.append(f"client {s.line}: {cmd.tool}")
        else:
            out.append(f"{s.role} {s.line}: {s.brace}")
    for d in result.refused:
        reason = d.message.removeprefix("not proposed as a runbook: ")
        out.append(f"refused {d.line}:{d.col} {d.code} {reason}")
    return "\n".join(out)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c.file.stem}:{c.line}")
def test_launch_case(case: Case, update_goldens: bool) -> None:
    got = dump(case.source)
    if update_goldens and got != case.expected:
        text = case.file.read_text(encoding="utf-8")
        def body(expected: str) -> str:
            return f"{case.title}\n.\n{case.source}.\n" + (f"{expected}\n" if expected else "")

        old, new = body(case.expected) + ".\n", body(got) + ".\n"
        assert old in text
        case.file.write_text(text.replace(old, new, 1), encoding="utf-8")
        return
    assert got == case.expected, case.title


def test_a_config_file_the_runbook_attaches_is_read() -> None:
    from wikitools.runbook.blocks.extract import extract_runbooks

    page = ("```yaml { .runbook-file for=qwen path=config.yaml }\nmax-model-len: 4096\n```\n\n"
            "```bash { #qwen .runbook-server }\nvllm serve Qwen/Qwen3-0.6B --config config.yaml\n"
            "```\n")
    runbooks, diags = extract_runbooks([parse_page(page, "p.md")], None)
    assert runbooks.ids() == ["qwen"] and not diags
    missing = page.replace("yaml { .runbook-file for=qwen path=config.yaml }", "yaml")
    runbooks, diags = extract_runbooks([parse_page(missing, "p.md")], None)
    assert runbooks.ids() == []
    assert [(d.line, d.code) for d in diags] == [(6, "RB016")]
    assert "--config config.yaml names a file that the page does not attach" in diags[0].message
