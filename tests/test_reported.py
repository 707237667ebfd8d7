"""Data regions: the community's own result files, kept unchanged, rendered as tables and charts
with their source, hash and date; a changed file, a bad file or a missing column is a located
error. The real files are the repository's kept copies under data/."""

from __future__ import annotations

import shutil
from pathlib import Path

import markdown_it_pyrs
import pytest

from wikitools.pages.parse import parse_page
from wikitools.runbook.rendering.render import check_regions, render_pages
from wikitools.runbook.rendering.reported.sources import sha256_of

REPO = Path(__file__).resolve().parent.parent
KEPT = "data/voipmonitor-rtx6kpro/738985b"
TSV = f"{KEPT}/benchmarks/glm52-v18-validation-summary.tsv"
AWQ_MTP = f"{KEPT}/benchmarks/inference-throughput/vllm_awq_mtp.json"
AWQ = f"{KEPT}/benchmarks/inference-throughput/vllm_awq_nomtp.json"
SWEEP = f"{KEPT}/data/blackwell-server-pl-sweep-summary.csv"
COMMIT = "738985bb6e99b73413c18ece14798432efce148a"


def html_of(page: str) -> str:
    """The page as a CommonMark renderer with GitHub's tables shows it (raw HTML kept, so any
    markup that got through is visible)."""
    return markdown_it_pyrs.MarkdownIt("commonmark").enable("table").render(page)


def sha(rel: str, root: Path = REPO) -> str:
    return sha256_of((root / rel).read_bytes())


def render(text: str, root: Path = REPO, path: str = "wiki/models/p.md", check: bool = False):
    changes, diags = render_pages([parse_page(text, path)], root, check=check)
    return {c.path: c.new for c in changes}, [d.format() for d in diags]


def region(attrs: str) -> str:
    return f"# P\n\n<!-- wiki:results {attrs} -->\n<!-- wiki:end -->\n"


def test_a_tsv_file_becomes_the_named_columns_of_the_rows_asked_for() -> None:
    out, diags = render(region(f'data={TSV} sha256={sha(TSV)} where=tp=6,mtp=3 '
                               'columns="case:Case,dcp:DCP,decode_cc1:Decode tok/s,kv_tokens"'))
    assert diags == []
    page = out["wiki/models/p.md"]
    assert ("| Case | DCP | Decode tok/s | kv_tokens |\n|---|---:|---:|---:|\n"
            "| mxfp4-a8-online-mxfp8 | 3 | 97.9 | 851,862 |\n"
            "| mxfp4-a8-orig | 3 | 95.8 | 680,107 |\n") in page
    assert (f"Reported by the community on 2026-07-18, from "
            f"[`benchmarks/glm52-v18-validation-summary.tsv`]"
            f"(https://github.com/voipmonitor/rtx6kpro/blob/{COMMIT}/benchmarks/"
            "glm52-v18-validation-summary.tsv) at `738985b`; not re-run here.") in page
    assert "measured" not in page.lower()


def test_the_decode_benchmark_matrix_pivots_across_files_with_a_chart_file() -> None:
    attrs = (f'data={AWQ_MTP},{AWQ} sha256={sha(AWQ_MTP)},{sha(AWQ)} labels="AWQ MTP,AWQ" '
             'table=results where=concurrency=1 chart=t-awq title="One request" '
             'pivot="file:Checkpoint,context_tokens:Context,per_request_avg_tps:tok/s"')
    out, diags = render(region(attrs))
    assert diags == []
    page = out["wiki/models/p.md"]
    # the community's README retypes these as 147, 110, 88, 61, 40 and 104, 104, 103, 100, 96
    assert "| AWQ MTP | 147 | 110 | 88.4 | 60.7 | 39.8 |" in page
    assert "| AWQ | 104 | 103 | 102 | 100 | 95.5 |" in page
    assert "| Checkpoint | Context 0 | Context 16,384 |" in page
    # two files of one folder, commit and date: one line that links each
    assert (f"Reported by the community on 2026-03-14, from [`vllm_awq_mtp.json`](https://github"
            f".com/voipmonitor/rtx6kpro/blob/{COMMIT}/benchmarks/inference-throughput/vllm_awq_"
            f"mtp.json), [`vllm_awq_nomtp.json`](") in page
    assert page.count("Reported by the community") == 1
    assert "![One request](../assets/data/t-awq.svg)" in page
    svg = out["wiki/assets/data/t-awq.svg"]
    assert svg.startswith("<svg xmlns=") and "<title>AWQ MTP: 147</title>" in svg
    html = html_of(page)
    assert "<table>" in html and '<img src="../assets/data/t-awq.svg"' in html


def test_the_prefill_part_is_an_object_keyed_by_context() -> None:
    out, diags = render(region(f'data={AWQ_MTP} sha256={sha(AWQ_MTP)} table=prefill '
                               'columns="key:Prompt tokens,tok_per_sec:Prefill tok/s"'))
    assert diags == []
    assert "| 131,072 | 15,260 |" in out["wiki/models/p.md"]


def test_a_plain_table_charts_its_first_column_against_the_others() -> None:
    out, diags = render(region(f'data={SWEEP} sha256={sha(SWEEP)} chart=t-sweep '
                               'columns="power_limit_w:Power limit,gflops:GFLOPS"'))
    assert diags == []
    svg = out["wiki/assets/data/t-sweep.svg"]
    assert ">300W</text>" in svg and "<title>GFLOPS: 157k</title>" in svg


def test_rendering_is_deterministic_and_a_rendered_region_checks_clean(tmp_path: Path) -> None:
    text = region(f'data={SWEEP} sha256={sha(SWEEP)} chart=t columns=power_limit_w,gflops')
    out1, _ = render(text)
    out2, _ = render(text)
    assert out1 == out2
    root = _kept_root(tmp_path, SWEEP)
    page = out1["wiki/models/p.md"]
    (root / "wiki/assets/data").mkdir(parents=True)
    (root / "wiki/assets/data/t.svg").write_text(out1["wiki/assets/data/t.svg"])
    assert check_regions([parse_page(page, "wiki/models/p.md")], root) == []


def _kept_root(tmp_path: Path, *rels: str) -> Path:
    for rel in rels:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    (tmp_path / "data/voipmonitor-rtx6kpro").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "data/voipmonitor-rtx6kpro/source.yaml",
                tmp_path / "data/voipmonitor-rtx6kpro/source.yaml")
    return tmp_path


def test_a_kept_file_that_changes_is_reported_at_the_region(tmp_path: Path) -> None:
    root = _kept_root(tmp_path, TSV)
    text = region(f"data={TSV} sha256={sha(TSV)} columns=case")
    assert render(text, root)[1] == []
    with (root / TSV).open("a") as f:
        f.write("extra\t4\t4\t0\t1\t1\t1\t0\t0\tFalse\n")
    _, diags = render(text, root)
    assert diags == [f"wiki/models/p.md:3:1: RGN007 error: {TSV} changed since this region "
                     f"recorded it: sha256 is now {sha(TSV, root)} (kept files stay as their "
                     "source published them)"]


def _hostile(tmp_path: Path, name: str, content: str) -> tuple[Path, str]:
    root = _kept_root(tmp_path)
    rel = f"{KEPT}/bad/{name}"
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(content)
    manifest = root / "data/voipmonitor-rtx6kpro/source.yaml"
    manifest.write_text(manifest.read_text() + f"      bad/{name}: 2026-01-01\n")
    return root, rel


@pytest.mark.parametrize(("name", "content", "where", "message"), [
    ("short.csv", "a,b\n1,2\n3\n", "3:1", "row has 1 fields, the header 2"),
    ("quote.csv", 'a,b\n1,"2\n', "2:1", "not valid CSV: unexpected end of data"),
    ("twice.tsv", "a\tb\ta\n1\t2\t3\n", "1:3", "column 'a' is named twice in the header"),
    ("empty.csv", "", "1:1", "the file has no header row"),
    ("broken.json", '{"results": [\n  {"a": 1},\n  {"a": }\n]}\n', "3:9",
     "not valid JSON: Expecting value"),
    ("lines.jsonl", '{"a": 1}\n[1, 2]\n', "2:1", "the file holds a list where objects are"),
])
def test_a_bad_file_is_an_error_at_its_own_line_and_column(
        tmp_path: Path, name: str, content: str, where: str, message: str) -> None:
    root, rel = _hostile(tmp_path, name, content)
    _, diags = render(region(f"data={rel} sha256={sha(rel, root)} columns=a"), root)
    assert diags == [f"{rel}:{where}: RGN008 error: {message}"]


def test_a_missing_column_is_an_error_at_the_region_with_a_hint() -> None:
    _, diags = render(region(f"data={TSV} sha256={sha(TSV)} columns=case,decode_cc"))
    assert len(diags) == 1
    assert diags[0].startswith(f"wiki/models/p.md:3:1: RGN008 error: column 'decode_cc' is not "
                               f"in {TSV}; did you mean 'decode_cc1'? (columns: accept_len,")


@pytest.mark.parametrize(("attrs", "message"), [
    ("data=data/elsewhere/x.csv sha256=0 columns=a",
     "RGN008 error: 'data/elsewhere/x.csv' is not a kept file: the layout is "
     "data/<source>/<commit>/<path in the source>"),
    (f"data={KEPT}/benchmarks/nothing.csv sha256=0 columns=a",
     "RGN008 error: data/voipmonitor-rtx6kpro/source.yaml does not list "
     "'benchmarks/nothing.csv' under commit 738985b"),
    (f"data={TSV} columns=case",
     f"RGN005 error: data region records no sha256 for {TSV} (add it to sha256=; the file's "
     f"is {sha(TSV)})"),
    (f"data={TSV} sha256=0 colums=case",
     "RGN005 error: unknown data region attribute 'colums'; did you mean 'columns'? (known: "
     "data, sha256, labels, table, where, columns, pivot, chart, title)"),
    (f"data={TSV} sha256=0 table=results columns=case",
     "RGN008 error: 'table=results' names a part, but a TSV file has none"),
    (f"data={AWQ} sha256={sha(AWQ)} table=result columns=a",
     "RGN008 error: the document has no part 'result' (it has: metadata, prefill, results, "
     "summary_table)"),
    (f"data={AWQ} sha256={sha(AWQ)} table=results pivot=context_tokens,concurrency",
     "RGN005 error: 'pivot=context_tokens,concurrency' is not row,column,value"),
    (f"data={AWQ} sha256={sha(AWQ)} table=results where=concurrency=1 "
     "pivot=concurrency,num_errors,aggregate_tps",
     "RGN008 error: two rows have concurrency=1 and num_errors=0: narrow them with where="),
    (f"data={TSV} sha256={sha(TSV)} where=tp=5 columns=case",
     f"RGN008 error: no row of {TSV} matches where=tp=5"),
])
def test_a_region_that_cannot_be_rendered_says_why_at_its_marker(attrs: str, message: str) -> None:
    out, diags = render(region(attrs))
    assert out == {}
    assert diags == [f"wiki/models/p.md:3:1: {message}"]


def test_a_hand_edited_data_region_is_left_alone() -> None:
    text = region(f"data={TSV} sha256={sha(TSV)} columns=case")
    page = render(text)[0]["wiki/models/p.md"]
    edited = page.replace("| nf3-hybrid-a16 |", "| faster |", 1)
    out, diags = render(edited)
    assert out == {} and [d.split(": ")[1] for d in diags] == ["RGN002 error"]


def test_cells_and_labels_from_a_file_cannot_inject_markup(tmp_path: Path) -> None:
    root, rel = _hostile(tmp_path, "inject.csv", 'a,b\n"<script>x</script> | [l](j:x)",1\n')
    page = render(region(f"data={rel} sha256={sha(rel, root)} columns=a,b"), root)[0][
        "wiki/models/p.md"]
    html = html_of(page)
    assert "<script>" not in html and "<a " not in html.split("Reported")[0]


def test_a_pivot_row_may_join_two_columns() -> None:
    csv_file = f"{KEPT}/benchmarks/benchmark_results.csv"
    out, diags = render(region(f'data={csv_file} sha256={sha(csv_file)} where=benchmark=GPQA '
                               'pivot="model+mtp:Checkpoint and MTP,run:Run,score:GPQA"'))
    assert diags == []
    page = out["wiki/models/p.md"]
    assert ("| QuantTrio/Qwen3.5-397B-A17B-AWQ, yes | 87.9 | 89.9 | 88.9 | 89.9 | 87.4 | 89.4 |"
            " 85.9 |") in page
    assert "| lukealonso/Qwen3.5-397B-A17B-NVFP4, no |" in page


def test_where_matches_numbers_as_numbers_and_patterns_with_a_star() -> None:
    out, diags = render(region(f"data={TSV} sha256={sha(TSV)} where=case=nvfp4-a4-*,tp=8.0,mtp=3 "
                               "columns=case,dcp,accept_rate"))
    assert diags == []
    rows = [line for line in out["wiki/models/p.md"].splitlines() if line.startswith("| nvfp4")]
    assert rows == ["| nvfp4-a4-online-mxfp8 | 1 | 0.591 |", "| nvfp4-a4-orig | 1 | 0.677 |"]


def test_one_summary_object_is_one_row_with_dotted_names() -> None:
    rel = f"{KEPT}/models/glm5.1/results/vllm-pciebarrier-mtp-voipmonitor-llmtest-20260502.json"
    out, diags = render(region(f"data={rel} sha256={sha(rel)} table=selected_summary "
                               "columns=attempted,correct,completion_tokens.p50"))
    assert diags == []
    assert "| 30 | 28 | 5,864 |" in out["wiki/models/p.md"]


def test_a_source_folder_without_its_manifest_is_named(tmp_path: Path) -> None:
    (tmp_path / TSV).parent.mkdir(parents=True)
    shutil.copy(REPO / TSV, tmp_path / TSV)
    _, diags = render(region(f"data={TSV} sha256=0 columns=case"), tmp_path)
    assert diags == ["wiki/models/p.md:3:1: RGN008 error: no data/voipmonitor-rtx6kpro/"
                     "source.yaml: a kept file's source folder names its repository there"]


def test_a_chart_name_cannot_be_a_path() -> None:
    out, diags = render(region(f"data={SWEEP} sha256={sha(SWEEP)} chart=../../x "
                               "columns=power_limit_w,gflops"))
    assert out == {}
    assert diags == ["wiki/models/p.md:3:1: RGN005 error: chart name '../../x' is not lower-case "
                     "letters, digits and hyphens (it names wiki/assets/data/NAME.svg)"]


def test_a_kept_file_that_links_outside_data_is_refused(tmp_path: Path) -> None:
    root, rel = _hostile(tmp_path, "link.csv", "a\n1\n")
    (root / rel).unlink()
    (tmp_path / "outside.csv").write_text("a\n1\n")
    (root / rel).symlink_to(tmp_path / "outside.csv")
    _, diags = render(region(f"data={rel} sha256=0 columns=a"), root)
    assert diags == [f"wiki/models/p.md:3:1: RGN008 error: '{rel}' leads outside data/ (a link?); "
                     "keep the file itself"]
