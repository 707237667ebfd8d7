"""Run records: deterministic JSON, round trip, ordering, secrets."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from wikitools.core.errors import WikiError
from wikitools.runbook.engines.secrets import mask_command, mask_env
from wikitools.runbook.records.record import (
    RUN_ID,
    ClientResult,
    Point,
    Record,
    RecordError,
    Sample,
    Step,
    dumps,
    latest_record,
    load_records,
    make_run_id,
    masked,
    read_record,
    write_record,
)


def make(run_id="20261130T100000Z-abcdef12", started="2026-11-30T10:00:00Z", status="ok",
         clients=None, **kw) -> Record:
    return Record(
        runbook="rb", page="wiki/p.md", blocks_hash="sha256:abcdef12" + "0" * 56,
        run_id=run_id, started_at=started, finished_at=started, status=status,
        host={"gpus": [], "gpu_count": 0, "cpu_only": True},
        engine={"name": "vllm", "version": "0.26.0", "image": None, "image_digest": None},
        server={"command": "vllm serve m", "env": {}, "port": 8000, "log_tail": []},
        markers={"kv_cache_tokens": 1274576},
        timings={"ready_s": 48.1},
        steps=(Step("preflight", "ok", 0.1),),
        clients=clients or (ClientResult("bench", "serving", "vllm bench serve", "C", (
            Point("1", "ok", {"output_throughput": 435.76204086905074, "completed": 16},
                  "a/b.json", coords=(("C", "1"),)),
        )),),
        artifacts_dir=".artifacts/rb/x",
        **kw,
    )


def test_json_is_deterministic_and_round_trips(tmp_path):
    rec = make()
    text = dumps(rec)
    assert text.endswith("}\n") and "\r" not in text
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["schema_version"] == 2
    assert data["clients"][0]["points"][0]["metrics"]["output_throughput"] == 435.76204086905074
    path = write_record(tmp_path, rec)
    assert path == tmp_path / "runbooks" / "rb" / "20261130T100000Z-abcdef12.json"
    assert path.read_text() == text
    assert read_record(path) == rec
    assert dumps(read_record(path)) == text


def test_load_sorted_by_started_at(tmp_path):
    write_record(tmp_path, make("20261130T120000Z-abcdef12", "2026-11-30T12:00:00Z"))
    write_record(tmp_path, make("20261130T080000Z-abcdef12", "2026-11-30T08:00:00Z"))
    write_record(tmp_path, make("20261130T100000Z-abcdef12", "2026-11-30T10:00:00Z",
                                status="failed", failed_step="ready", message="x"))
    got = load_records(tmp_path, "rb")
    assert [r.started_at[11:13] for r in got] == ["08", "10", "12"]
    assert latest_record(tmp_path, "rb").run_id.startswith("20261130T12")
    assert load_records(tmp_path, "missing") == []
    assert latest_record(tmp_path, "missing") is None


def test_bad_record_is_named(tmp_path):
    folder = tmp_path / "runbooks" / "rb"
    folder.mkdir(parents=True)
    (folder / "bad.json").write_text('{"schema_version": 9}')
    with pytest.raises(RecordError,
                       match=r"runbooks/rb/bad.json:1:20: field schema_version: 9 is not 1 or 2"):
        load_records(tmp_path, "rb")


def test_run_id():
    started = datetime(2026, 11, 30, 10, 0, 5, tzinfo=UTC)
    run_id = make_run_id(started, "sha256:0123456789abcdef")
    assert re.fullmatch(r"20261130T100005\.000Z-01234567-[0-9a-f]{8}", run_id)
    assert RUN_ID.match(run_id) and RUN_ID.match("20261130T100005Z-01234567")


def test_redaction():
    env = mask_env({"HF_TOKEN": "hf_abc", "OPENAI_API_KEY": "sk", "CUDA_VISIBLE_DEVICES": "0"})
    assert env == {"CUDA_VISIBLE_DEVICES": "0", "HF_TOKEN": "***", "OPENAI_API_KEY": "***"}
    cmd = ('HF_TOKEN=hf_abc NCCL_P2P_DISABLE=1 vllm serve m --api-key sk-1 && '
           'curl -H "Authorization: Bearer sk-2" http://x -H "Content-Type: application/json"')
    out = mask_command(cmd)
    assert "hf_abc" not in out and "sk-1" not in out and "sk-2" not in out
    assert "NCCL_P2P_DISABLE=1" in out
    assert '-H "Content-Type: application/json"' in out
    assert "--api-key ***" in out


def test_record_never_replaces_another_runs_record(tmp_path):
    first = make()
    path = write_record(tmp_path, first)
    second = make(message="the second run")
    with pytest.raises(RecordError, match="already exists"):
        write_record(tmp_path, second)
    assert read_record(path) == first
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_unwritable_record_is_a_located_error_without_temp_files(tmp_path):
    (tmp_path / "runbooks").write_text("not a folder")
    with pytest.raises(RecordError, match=r"^runbooks/rb/20261130T100000Z-abcdef12\.json: "
                       r"cannot write the record: "):
        write_record(tmp_path, make())
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "runbooks").mkdir()
    (folder / "runbooks" / "rb").mkdir()
    (folder / "runbooks" / "rb").chmod(0o500)
    try:
        if os.access(folder / "runbooks" / "rb", os.W_OK):
            return  # running as root: permissions do not stop a write
        with pytest.raises(RecordError, match="cannot write the record"):
            write_record(folder, make())
        assert list((folder / "runbooks" / "rb").iterdir()) == []
    finally:
        (folder / "runbooks" / "rb").chmod(0o700)


def test_unreadable_record_is_located_at_line_and_column(tmp_path):
    folder = tmp_path / "runbooks" / "rb"
    folder.mkdir(parents=True)
    (folder / "x.json").write_text('{\n  "schema_version": 1,\n  "runbook": oops\n}\n')
    with pytest.raises(RecordError, match=r"^runbooks/rb/x.json:3:14: not valid JSON: "):
        load_records(tmp_path, "rb")
    (folder / "x.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(RecordError, match=r"^runbooks/rb/x.json: not UTF-8 text \(byte 7\)"):
        load_records(tmp_path, "rb")
    assert issubclass(RecordError, WikiError)


def test_record_on_disk_has_every_secret_masked(tmp_path):
    key = "sk-proj-Zx81LmQpW0rTy7Vb2Nc4Kd9Qe"
    rec = make(message=f"client failed: unrecognized arguments: --api_key {key}")
    rec = replace(rec, server={"command": f"vllm serve m --api-key {key}",
                               "env": {"OPENAI_API_KEY": key},
                               "log_tail": [f"non-default args: {{'api_key': '{key}'}}"]})
    path = write_record(tmp_path, rec)
    text = path.read_text()
    assert key not in text and text.count("***") == 4
    assert read_record(path) == masked(rec)


def test_samples_and_gpu_state_round_trip(tmp_path):
    samples = (Sample("ok", {"output_throughput": 100.0}, 3.0, "r1.json"),
               Sample("ok", {"output_throughput": 110.0}, 3.1, "r2.json"),
               Sample("failed", {}, 0.5, None, "exit 1"))
    point = Point("8", "ok", {"output_throughput": 105.0}, samples=samples,
                  coords=(("C", "8"),))
    rec = make(clients=(ClientResult("bench", "serving", "cmd", "C", (point,), ("C",), 3, True),),
               gpu_state={"before": {"gpus": [{"index": 0, "pstate": "P0"}]}})
    path = write_record(tmp_path, rec)
    back = read_record(path)
    assert back == rec
    got = back.clients[0].points[0]
    assert got.repeats == 2
    sp = got.spread("output_throughput")
    assert (sp.median, sp.low, sp.high, sp.count) == (105.0, 100.0, 110.0, 2)
    assert sp.noisy is False and round(sp.relative, 4) == 0.0952


def test_schema_1_records_still_read():
    """The committed H200 records are schema 1: one sample per point, coordinates from the
    sweep variable."""
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    recs = load_records(root, "sm90-llama1b-shape-tp1")
    old = [r for r in recs if r.schema_version == 1]
    assert old, "the first H200 record is schema 1"
    point = old[0].clients[0].points[0]
    assert point.samples == () and point.repeats == 1
    assert point.coords == (("CONCURRENCY", "1"),)
    assert old[0].clients[0].sweep_vars == ("CONCURRENCY",)
    assert point.spread("output_throughput").count == 1


def test_point_from_samples_takes_medians_and_keeps_every_run():
    from wikitools.runbook.records.record import point_from_samples
    runs = [Sample("ok", {"output_throughput": t, "completed": 64}, 10.0, f"r{i}.json")
            for i, t in enumerate((452.0, 541.0, 499.0))]
    point = point_from_samples("1", runs, (("C", "1"),))
    assert (point.status, point.metrics, point.seconds) == (
        "ok", {"output_throughput": 499.0, "completed": 64}, 30.0)
    assert point.samples == tuple(runs) and point.result_file == "r0.json"
    failed = point_from_samples("8", [*runs[:1], Sample("timeout", {}, 900.0, None, "no result")])
    assert (failed.status, failed.message, failed.metrics) == (
        "timeout", "no result", {"output_throughput": 452.0, "completed": 64})
    assert point_from_samples("32", []).status == "skipped"
