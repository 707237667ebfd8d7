"""Malformed and hostile run records: every reader (check, render, history, compare, list,
support-bundle) refuses them with a located RGN006-style error naming the file and the field,
never a traceback; records that cite another runbook's place are refused; odd files (a FIFO,
/dev/zero) are not read."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from fakes.sweep_page import sweep_page
from harness import MKDOCS, make_tree

from wikitools.cli import main
from wikitools.runbook.records.record import RecordError, read_record

RB = "tiny-rb"
RUN = "20261130T100000Z-abcdef12"
PAGE = sweep_page(RB, "Tiny page")


def good_record() -> dict[str, Any]:
    point = {"value": "1", "coords": {"CONCURRENCY": "1"}, "status": "ok", "seconds": 1.0,
             "metrics": {"output_throughput": 100.5, "median_tpot_ms": 9.5, "completed": 4,
                         "num_prompts": 4}}
    return {
        "schema_version": 2, "runbook": RB, "run_id": RUN, "page": "wiki/tiny.md",
        "blocks_hash": "sha256:abcdef12", "started_at": "2026-11-30T10:00:00Z",
        "finished_at": "2026-11-30T10:05:00Z", "status": "ok",
        "host": {"gpus": [{"name": "NVIDIA H200", "compute_capability": "9.0", "index": 0}],
                 "gpu_count": 1, "driver": "580.1", "cuda": "13.0"},
        "engine": {"name": "vllm", "version": "0.26.0"},
        "steps": [{"name": "preflight", "status": "ok"}],
        "clients": [{"name": "throughput", "kind": "serving", "command": "vllm bench serve",
                     "sweep_var": "CONCURRENCY", "points": [point]}],
    }


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path, {**MKDOCS, "wiki/tiny.md": PAGE})


def _write(tree: Path, text: str, name: str = RUN) -> Path:
    folder = tree / "runbooks" / RB
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(text)
    return path


def _mutated(change: Any) -> str:
    data = good_record()
    change(data)
    return json.dumps(data, indent=2, sort_keys=True)


def _set(path: str, value: Any) -> Any:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return change


METRIC = "clients.0.points.0.metrics.output_throughput"
METRIC_FIELD = "clients[0].points[0].metrics.output_throughput"
# case -> (change, the field named, what the located line of the file holds)
MALFORMED = {
    "started_at-number": (_set("started_at", 5), "started_at", '"started_at": 5'),
    "started_at-null": (_set("started_at", None), "started_at", '"started_at": null'),
    "metric-infinity": (_set(METRIC, float("inf")), METRIC_FIELD, "Infinity"),
    "metric-nan": (_set(METRIC, float("nan")), METRIC_FIELD, "NaN"),
    "metric-huge-integer": (_set(METRIC, 10**400), METRIC_FIELD, "1" + "0" * 400),
    "metric-list": (_set(METRIC, [1, 2]), METRIC_FIELD, '"output_throughput": ['),
    "engine-list": (_set("engine", ["vllm"]), "engine", '"engine": ['),
    "host-string": (_set("host", "h200"), "host", '"host": "h200"'),
    "host-gpus-numbers": (_set("host.gpus", [1, 2]), "host.gpus[0]", "1,"),
    "runbook-other": (_set("runbook", "other-rb"), "runbook", '"runbook": "other-rb"'),
    "runbook-dotdot": (_set("runbook", "../.."), "runbook", '"runbook": "../.."'),
    "run_id-dotdot": (_set("run_id", "../../etc"), "run_id", '"run_id": "../../etc"'),
}


def _assert_clean_failure(rc: int, expected: int, out: str, err: str) -> None:
    assert rc == expected, (rc, out, err)
    assert "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_record_is_reported_by_every_reader_without_a_traceback(
    tree: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    change, field, held = MALFORMED[case]
    text = _mutated(change)
    path = _write(tree, text)
    rel = path.relative_to(tree).as_posix()
    root = ["--root", str(tree)]

    rc = main(["check", *root])
    out, err = capsys.readouterr()
    _assert_clean_failure(rc, 1, out, err)  # a finding
    finding = next(line for line in out.splitlines() if line.startswith(rel))
    assert f" RGN006 error: field {field}:" in finding, finding
    line, col = (int(n) for n in finding.split(":")[1:3])
    assert text.splitlines()[line - 1][col - 1:].startswith(held.split(": ")[-1]), finding
    assert held in text.splitlines()[line - 1], finding

    # render reports the record as a finding (1); compare and history cannot read their
    # input at all (2)
    for argv, expected in ((["runbook", "render", "--check", *root], 1),
                           (["runbook", "compare", str(path), str(path), *root], 2),
                           (["runbook", "history", f"wiki/tiny.md#{RB}", *root], 2)):
        rc = main(argv)
        out, err = capsys.readouterr()
        _assert_clean_failure(rc, expected, out, err)
        assert rel in out + err and f"field {field}" in out + err, (argv, out, err)

    # the list flags the record (1); the support bundle names it and is still written (0)
    for argv, expected in ((["runbook", "list", *root], 1),
                           (["support-bundle", RB, "--no-gpu", *root], 0)):
        rc = main(argv)
        out, err = capsys.readouterr()
        assert rc == expected, (argv, rc, err)
        assert "Traceback" not in err and "internal error" not in err
        assert rel in out + err, (argv, out, err)


def test_deeply_nested_record_is_refused_without_recursion_error(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tree, "[" * 100_000)
    with pytest.raises(RecordError, match="nested too deeply"):
        read_record(path)
    rc = main(["check", "--root", str(tree)])
    out, err = capsys.readouterr()
    _assert_clean_failure(rc, 1, out, err)
    assert f"runbooks/{RB}/{RUN}.json:1:1: RGN006 error: not a run record: nested too deeply" \
        in out


def test_good_record_reads_and_nan_metric_is_never_written(tree: Path) -> None:
    from wikitools.runbook.records.record import Record, dumps

    record = Record.from_dict(good_record())
    assert record.clients[0].points[0].metrics["output_throughput"] == 100.5
    nan = Record.from_dict(good_record())
    point = nan.clients[0].points[0]
    bad = type(point)(value="1", metrics={"output_throughput": float("nan")})
    text = dumps(type(nan)(**{**{f: getattr(nan, f) for f in nan.__dataclass_fields__},
                              "clients": (type(nan.clients[0])("c", points=(bad,)),)}))
    assert "NaN" not in text and '"output_throughput": null' in text


def test_record_naming_another_place_is_not_cited(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = good_record()
    data["run_id"] = "20261130T100000Z-00000000"
    _write(tree, json.dumps(data))
    rc = main(["runbook", "render", "--root", str(tree)])
    out, err = capsys.readouterr()
    assert rc == 1 and "Traceback" not in err
    assert "20261130T100000Z-00000000" not in (tree / "wiki" / "tiny.md").read_text()
    assert "field run_id" in out + err


def test_compare_refuses_dev_zero_and_a_fifo_without_reading_them(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tree, json.dumps(good_record()))
    fifo = tree / "pipe.json"
    os.mkfifo(fifo)
    for odd in ("/dev/zero", str(fifo)):
        rc = main(["runbook", "compare", odd, str(good), "--root", str(tree)])
        out, err = capsys.readouterr()
        assert rc == 2 and "not a regular file" in err, (odd, out, err)


def test_compare_refuses_an_oversized_file(tree: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    good = _write(tree, json.dumps(good_record()))
    big = tree / "big.json"
    with big.open("wb") as f:
        f.truncate((64 << 20) + 1)
    rc = main(["runbook", "compare", str(big), str(good), "--root", str(tree)])
    out, err = capsys.readouterr()
    assert rc == 2 and "larger than 64 MiB" in err, (out, err)


def test_a_pipe_in_a_record_string_stays_inside_its_table_cell(tree: Path) -> None:
    """Each string is escaped once: a `|` escaped twice (`\\\\|`) would end the cell there."""
    data = good_record()
    data["engine"]["version"] = "0.26|x"
    point = data["clients"][0]["points"][0]
    point["value"] = point["coords"]["CONCURRENCY"] = "1|2"
    _write(tree, json.dumps(data))
    assert main(["runbook", "render", "--root", str(tree)]) == 0
    text = (tree / "wiki" / "tiny.md").read_text()
    assert "\\\\|" not in text
    lines = [ln.strip() for ln in text.splitlines()]
    tables = [(lines[i - 2], ln) for i, ln in enumerate(lines)
              if ln.startswith("|") and ("1\\|2" in ln or "0.26\\|x" in ln)]
    assert len(tables) == 3  # the short and full serving tables and the history
    for header, row in tables:
        cells = len(re.split(r"(?<!\\)\|", header))
        assert len(re.split(r"(?<!\\)\|", row)) == cells, (header, row)
