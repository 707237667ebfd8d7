"""The run record's schema (runbook/records/schema.py): runbooks/record.schema.json is what the
dataclasses generate (scripts/record-schema.py), every committed record fits it, and a malformed
record is refused with the field and the reason in the reader's own words."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from harness import load_script

from wikitools.runbook.records.record import SCHEMA_FILE, RecordError, parse_record, record_schema

ROOT = Path(__file__).resolve().parent.parent
RUN = "20261130T100000Z-abcdef12"


def _script() -> Any:
    return load_script(ROOT / "scripts/record-schema.py", "record_schema")


def test_the_committed_json_schema_is_the_generated_one(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    assert (ROOT / SCHEMA_FILE).read_text(encoding="utf-8") == record_schema()
    assert _script().main(["--check"]) == 0
    assert capsys.readouterr().err == ""


def test_every_field_of_the_schema_is_described() -> None:
    defs = json.loads(record_schema())["$defs"]
    undescribed = [f"{name}.{key}" for name, d in defs.items()
                   for key, prop in d.get("properties", {}).items() if "description" not in prop]
    assert undescribed == []
    assert {"Record", "VariantResult", "ClientResult", "Point", "Sample", "Step", "Host",
            "Engine", "Server", "GpuState", "Metric"} <= defs.keys()


def test_every_committed_record_fits_the_json_schema() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(record_schema()))
    records = sorted((ROOT / "runbooks").glob("*/*.json"))
    assert len(records) >= 9
    for path in records:
        assert list(validator.iter_errors(json.loads(path.read_text()))) == [], path


def _record() -> dict[str, Any]:
    client = {"name": "c", "command": "bench", "sweep_var": "N", "points": [
        {"value": "1", "coords": {"N": "1"}, "metrics": {"tps": 1.5, "nested": {"a": 1}},
         "samples": [{"status": "ok", "metrics": {"tps": 1.5}}]}]}
    return {
        "schema_version": 3, "runbook": "rb", "run_id": RUN, "page": "p.md",
        "blocks_hash": "sha256:abcdef12", "started_at": "2026-11-30T10:00:00Z",
        "finished_at": "2026-11-30T10:05:00Z", "status": "ok",
        "host": {"gpus": [{"name": "GPU", "index": 0}], "gpu_count": 1},
        "steps": [{"name": "preflight", "status": "ok", "seconds": 1.0}],
        "variants": [{"coords": [["KV", "fp8"]], "status": "ok", "clients": [client],
                      "server": {"env": {"A": "1"}, "port": 8000},
                      "timings": {"ready": 2.5}, "gpu_state": {"before": {"gpus": []}}}],
    }


def _set(path: str, value: Any) -> dict[str, Any]:
    data = _record()
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(last) if last.isdigit() else last] = value
    return data


V = "variants.0."
P = V + "clients.0.points.0."
# (field set, its value, the error exactly as the reader has always worded it)
MALFORMED = [
    ("status", "done", 'field status: "done" does not match ok|failed'),
    ("status", "ok\n", 'field status: "ok\\n" does not match ok|failed'),
    ("started_at", 5, "field started_at: expected a string, got a number"),
    ("runbook", None, "field runbook: expected a string, got null"),
    ("steps.0.seconds", float("nan"), "field steps[0].seconds: nan is not a finite number"),
    ("steps.0.seconds", 1e19, "field steps[0].seconds: 1e+19 is out of range (-1e+18 to 1e+18)"),
    ("steps.0.seconds", 10**400, "field steps[0].seconds: the number is out of range"),
    ("steps.0.seconds", True, "field steps[0].seconds: expected a number, got a boolean"),
    ("steps.0.name", "x" * ((1 << 20) + 1), "field steps[0].name: the string is too long"),
    ("steps", {"a": 1}, "field steps: expected a list, got an object"),
    ("steps.0", 3, "field steps[0]: expected an object, got a number"),
    ("host", "h200", "field host: expected an object, got a string"),
    ("host.gpus", [1], "field host.gpus[0]: expected an object, got a number"),
    ("host.gpus.0.index", -1, "field host.gpus[0].index: -1 is out of range (0 to 1e+18)"),
    ("host.gpu_count", 5000, "field host.gpu_count: 5000 is out of range (0 to 4096)"),
    ("host.extra", float("inf"), "field host.extra: inf is not a finite number"),
    (V + "server.env", {"A": 1},
     "field variants[0].server.env.A: expected a string, got a number"),
    (V + "server.port", "80", "field variants[0].server.port: expected an integer, got a string"),
    (V + "timings.ready", "x",
     "field variants[0].timings.ready: expected a number, got a string"),
    (V + "coords", [["KV"]],
     "field variants[0].coords[0]: expected a [name, value] pair, got a list"),
    (V + "measured_in", "x", 'field variants[0].measured_in: "x" does not match '
     r"\d{8}T\d{6}(?:\.\d{3})?Z-[0-9a-f]{8}(?:-[0-9a-f]{4}|-[0-9a-f]{8})?"),
    (V + "gpu_state.before.gpus", [None],
     "field variants[0].gpu_state.before.gpus[0]: expected an object, got null"),
    (V + "clients.0.repeats", -1,
     "field variants[0].clients[0].repeats: -1 is out of range (0 to 1e+06)"),
    (P + "coords", {"N": 1},
     "field variants[0].clients[0].points[0].coords.N: expected a string, got a number"),
    (P + "metrics.nested", {"a": [1]}, "field variants[0].clients[0].points[0].metrics.nested.a: "
     "expected a number, string, boolean, null or object, got a list"),
    (P + "samples.0.status", 1,
     "field variants[0].clients[0].points[0].samples[0].status: expected a string, got a number"),
    ("receipt", {"deep": json.loads("[" * 17 + "]" * 17)},
     "field receipt.deep" + "[0]" * 16 + ": nested too deeply"),
]


@pytest.mark.parametrize(("field", "value", "message"), MALFORMED,
                         ids=[f"{f}={str(v)[:20]}" for f, v, _ in MALFORMED])
def test_a_malformed_record_names_the_field_and_the_reason(field: str, value: Any,
                                                           message: str) -> None:
    text = json.dumps(_set(field, value), indent=2)
    with pytest.raises(RecordError) as caught:
        parse_record(text, "r.json")
    err = caught.value
    assert err.detail == message
    assert str(err) == f"r.json:{err.line}:{err.col}: {message}"
    assert err.field == message.split(":")[0].removeprefix("field ")


def test_a_good_record_reads_and_keeps_every_key_of_its_mappings() -> None:
    data = _record()
    data["host"]["newer_writer"] = {"kept": [1, "two"]}
    data["variants"][0]["coords"] = [["KV", "fp8"], ["A", "1"]]
    record = parse_record(json.dumps(data), "r.json")
    assert record.host["newer_writer"] == {"kept": [1, "two"]}
    assert record.variants[0].coords == (("KV", "fp8"), ("A", "1"))  # the block's order
    point = record.variants[0].clients[0].points[0]
    assert point.coords == (("N", "1"),) and point.metrics == {"tps": 1.5, "nested": {"a": 1}}
    again = parse_record(json.dumps(record.to_dict()), "r.json")
    assert again == record and again.to_dict() == record.to_dict()
    assert copy.deepcopy(record) == record
