"""Glossary loading (tables, combined entries, markup, errors) and the abbreviation definitions
the MkDocs plugin appends to pages for tooltips (checked against Python-Markdown's real abbr)."""

from __future__ import annotations

from pathlib import Path

import markdown
import pytest
from harness import make_tree

from wikitools.core.errors import ConfigError
from wikitools.pages.glossary import Glossary, abbreviation_lines, load_glossary

GLOSSARY = """\
---
title: Glossary
---

# Glossary

```text
| Acronym | Meaning |
|---|---|
| FAKE | a table inside code is not read |
```

## Terms

| **Acronym** | Meaning | Notes |
|:---|---|---|
| MoE | Mixture of Experts | Routed expert layers. |
| `vLLM` | vLLM inference engine | A *name*. |
| CUDA Graph | CUDA graph capture | |
| cc1 / cc64 | Concurrency 1 / concurrency 64 | |
| ctx0 / 100k | Context 0 / context 100k | |
| TP / DP | tensor or data parallelism | |
| AG+RS | All-Gather plus Reduce-Scatter | |
| Qwen3.5 | a model family | |
| FP8-KV | 8-bit floating point KV cache | |
| PCIe | [PCI Express](https://pcisig.com) | |
| X | too short | |
| MoE | duplicate row | |

## Other table

| Model | Size |
|---|---|
| GLM | 355B |

## Second table

| Term | Stands For |
|---|---|
| KV | Key-Value |
"""


def load(tmp_path: Path, text: str = GLOSSARY, name: str = "wiki/glossary.md") -> Glossary:
    make_tree(tmp_path, {name: text})
    return load_glossary(tmp_path / name, tmp_path)


def test_terms_load(tmp_path: Path) -> None:
    g = load(tmp_path)
    terms = g.terms
    assert list(terms) == [
        "MoE", "vLLM", "CUDA Graph", "cc1", "cc64", "ctx0", "ctx100k", "TP", "DP", "AG+RS",
        "Qwen3.5", "FP8-KV", "PCIe", "KV",
    ]  # fmt: skip
    assert terms["cc64"].expansion == "concurrency 64"
    assert terms["ctx100k"].expansion == "context 100k"
    assert terms["TP"].expansion == "tensor or data parallelism"
    assert terms["PCIe"].expansion == "PCI Express"
    assert terms["MoE"].notes == "Routed expert layers."
    assert terms["vLLM"].notes == "A name."
    assert terms["vLLM"].name and not terms["MoE"].name
    assert (terms["MoE"].line, terms["MoE"].col) == (17, 3)
    assert g.path == "wiki/glossary.md"


def test_warnings_are_located(tmp_path: Path) -> None:
    g = load(tmp_path)
    assert [d.format() for d in g.problems] == [
        'wiki/glossary.md:27:3: GLO003 warning: term "X" is shorter than 2 characters; skipped',
        'wiki/glossary.md:28:3: GLO001 warning: duplicate term "MoE" (first defined at line 17); '
        "this row is ignored",
    ]
    assert g.terms["MoE"].expansion == "Mixture of Experts"


def test_empty_cells_warn(tmp_path: Path) -> None:
    g = load(tmp_path, "| Term | Expansion |\n|---|---|\n| AB | |\n| CD | ok |\n")
    assert [d.code for d in g.problems] == ["GLO002"]
    assert list(g.terms) == ["CD"]


@pytest.mark.parametrize(
    "text",
    ["# Glossary\n\nNo table.\n", "| Word | Description |\n|---|---|\n| AB | x |\n", ""],
)
def test_no_usable_table_is_a_config_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match=r"^wiki/glossary\.md:\d+:1: no glossary table"):
        load(tmp_path, text)


def test_missing_glossary(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="glossary not found"):
        load_glossary(tmp_path / "GLOSSARY.md", tmp_path)


def test_root_glossary_legacy_format(tmp_path: Path) -> None:
    text = (
        "# Glossary\n\n| Acronym | Meaning | Notes |\n|---|---|---|\n"
        "| DCP | Decode Context Parallelism | x |\n"
    )
    g = load(tmp_path, text, "GLOSSARY.md")
    assert g.path == "GLOSSARY.md"
    assert g.terms["DCP"].expansion == "Decode Context Parallelism"


# --------------------------------------------------------------------------- tooltips


def test_abbreviation_lines(tmp_path: Path) -> None:
    text = abbreviation_lines(load(tmp_path))
    lines = text.splitlines()
    assert lines == [
        "*[AG+RS]: All-Gather plus Reduce-Scatter",
        "*[cc1]: Concurrency 1",
        "*[cc64]: concurrency 64",
        "*[ctx0]: Context 0",
        "*[ctx100k]: context 100k",
        "*[CUDA Graph]: CUDA graph capture",
        "*[DP]: tensor or data parallelism",
        "*[DPs]: tensor or data parallelism",
        "*[FP8-KV]: 8-bit floating point KV cache",
        "*[KV]: Key-Value",
        "*[KVs]: Key-Value",
        "*[MoE]: Mixture of Experts",
        "*[PCIe]: PCI Express",
        "*[Qwen3.5]: a model family",
        "*[TP]: tensor or data parallelism",
        "*[TPs]: tensor or data parallelism",
        "*[vLLM]: vLLM inference engine",
    ]
    assert text.endswith("\n") and abbreviation_lines(load(tmp_path)) == text


def test_abbreviations_unsafe_terms_skipped(tmp_path: Path) -> None:
    g = load(tmp_path, "| Term | Expansion |\n|---|---|\n| A\\]B | bad |\n| OK2 | fine |\n")
    assert "*[OK2]: fine" in abbreviation_lines(g)
    assert "A]B" not in abbreviation_lines(g)


def test_tooltips_render_with_python_markdown(tmp_path: Path) -> None:
    abbr = abbreviation_lines(load(tmp_path))
    page = "The MoE on GPUs uses PCIe and KVs and `MoE in code` and AG+RS.\n\n" + abbr
    html = markdown.markdown(page, extensions=["abbr"])
    assert '<abbr title="Mixture of Experts">MoE</abbr>' in html
    assert '<abbr title="PCI Express">PCIe</abbr>' in html
    assert '<abbr title="Key-Value">KVs</abbr>' in html
    assert '<abbr title="All-Gather plus Reduce-Scatter">AG+RS</abbr>' in html
    assert "<code>MoE in code</code>" in html
    assert "*[" not in html
