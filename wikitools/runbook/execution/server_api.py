"""Talking to a started engine over HTTP: the readiness probe, a one-token completion with the
served model name, warm-up requests, engine version and capacity facts, and spec-decode counters
around each client point. Never raises on a bad answer: it says what it saw."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import httpx

from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines import log_catalog
from wikitools.runbook.engines.markers import (
    metrics_markers,
    server_info_markers,
    spec_acceptance,
    spec_counters,
)
from wikitools.runbook.execution.planned import PlannedServer


def base_url(srv: PlannedServer) -> str:
    return f"http://{srv.host}:{srv.port}"


def probe(http: httpx.Client, url: str) -> str:
    """"healthy" on HTTP 200, else a short "starting (…)" state."""
    try:
        r = http.get(url)
    except httpx.ConnectError:
        return "starting (connection refused)"
    except httpx.HTTPError as exc:
        return f"starting ({type(exc).__name__})"
    if r.status_code == 200:
        return "healthy"
    return f"starting (HTTP {r.status_code})"


def tiny_completion(http: httpx.Client, srv: PlannedServer) -> tuple[bool, str, str | None]:
    """One real completion (max_tokens=1) with the served model name from /v1/models:
    (ok, what went wrong, the model id when /v1/models named one)."""
    base = base_url(srv)
    model_id = None
    try:
        r = http.get(srv.models_url or f"{base}/v1/models")
        data = r.json().get("data") if r.status_code == 200 else None
        if not data:
            return False, f"/v1/models answered HTTP {r.status_code}", None
        model_id = data[0].get("id")
        c = http.post(
            f"{base}/v1/completions",
            json={"model": model_id, "prompt": "Hello", "max_tokens": 1, "temperature": 0},
        )
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return False, type(exc).__name__, model_id
    if c.status_code != 200:
        return False, f"/v1/completions answered HTTP {c.status_code}", model_id
    return True, "", model_id


def warmup(srv: PlannedServer, model_id: str | None, http_timeout: float) -> str | None:
    """A few short completions before anything is measured; None when all answered, else why."""
    body = {"model": model_id, "prompt": "Warm-up request.", "max_tokens": 8, "temperature": 0}
    try:
        with httpx.Client(timeout=max(http_timeout, 120.0)) as http:
            for _ in range(2):
                r = http.post(f"{base_url(srv)}/v1/completions", json=body)
                if r.status_code != 200:
                    return f"warm-up completion answered HTTP {r.status_code}"
    except httpx.HTTPError as exc:
        return f"warm-up request failed: {type(exc).__name__}"
    return None


def _engine(srv: PlannedServer) -> engines.Engine:
    """The engine's facts; a server of unknown engine is read as the first engine is."""
    return engines.engine(srv.engine) or next(iter(engines.ENGINES.values()))


def scrape_server(srv: PlannedServer, http_timeout: float) -> tuple[str | None, dict[str, Any]]:
    """(engine version from its version endpoint, facts from /metrics or /server_info)."""
    eng = _engine(srv)
    base = base_url(srv)
    version: str | None = None
    markers: dict[str, Any] = {}
    with httpx.Client(timeout=http_timeout) as http:
        for path in eng.server_info_paths:
            info = get_json(http, base + path)
            if isinstance(info, dict):
                markers.update(server_info_markers(info))
                break
        if eng.version_path:
            data = get_json(http, base + eng.version_path)
            if isinstance(data, dict) and data.get("version"):
                version = str(data["version"])
        if eng.prometheus:
            text = get_text(http, srv.metrics_url or base + eng.metrics_path)
            if text:
                markers.update(metrics_markers(text))
    return version, markers


def version_from_command(argv: tuple[str, ...]) -> str | None:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"\d+\.\d+[\w.+-]*", out.stdout)
    return m.group(0) if out.returncode == 0 and m else None


def get_json(http: httpx.Client, url: str) -> Any:
    try:
        r = http.get(url)
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def get_text(http: httpx.Client, url: str) -> str | None:
    try:
        r = http.get(url)
        return r.text if r.status_code == 200 else None
    except httpx.HTTPError:
        return None


def spec_snapshot(srv: PlannedServer, http_timeout: float) -> dict[str, float] | None:
    """Spec-decode counters before a client point (None where the engine has no counters)."""
    eng = _engine(srv)
    if not eng.prometheus:
        return None
    with httpx.Client(timeout=http_timeout) as http:
        text = get_text(http, srv.metrics_url or base_url(srv) + eng.metrics_path)
    return spec_counters(text) if text else None


def spec_delta(
    srv: PlannedServer, before: dict[str, float] | None, http_timeout: float
) -> dict[str, Any]:
    """Spec-decode acceptance over one client point: counter deltas from Prometheus, else the
    mean acceptance length the engine's server info reports."""
    eng = _engine(srv)
    if not eng.prometheus:
        if not eng.server_info_paths:
            return {}
        with httpx.Client(timeout=http_timeout) as http:
            info = get_json(http, base_url(srv) + eng.server_info_paths[0])
        states_key, length_key = log_catalog.SERVER_INFO_SPEC_LENGTH
        states = info.get(states_key) if isinstance(info, dict) else None
        if isinstance(states, list) and states and isinstance(states[0], dict):
            length = states[0].get(length_key)
            if length is not None:
                return {"spec_decode_acceptance_length": length}
        return {}
    if before is None:
        return {}
    after = spec_snapshot(srv, http_timeout)
    return spec_acceptance(before, after) if after else {}
