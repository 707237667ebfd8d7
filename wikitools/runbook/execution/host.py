"""This host's GPUs and ports: the one reader of `nvidia-smi` (GPU list, driver banner, topology,
compute apps, memory in use) and the one port check. Parsing is pure (tested on captured
fixtures); `gather_host` and `gpu_memory_used` run the commands. Nothing here decides anything."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wikitools.runbook.execution.planned import GpuInfo

GPU_QUERY = ("index,name,compute_cap,memory.total,memory.used,memory.free,driver_version,"
             "pci.bus_id,uuid")
APPS_QUERY = "pid,used_memory,gpu_uuid,process_name"  # the name last: it may hold commas

# link kinds from best to worst (nvidia-smi topo -m legend)
_LINK_ORDER = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# --------------------------------------------------------------------------- pure parsing


def _num(value: str) -> int:
    value = value.strip()
    try:
        return int(float(value))
    except ValueError:
        return 0  # "[N/A]", "[Not Supported]"


def parse_gpu_query(text: str) -> list[GpuInfo]:
    """`nvidia-smi --query-gpu=GPU_QUERY --format=csv,noheader,nounits` → GPUs by index."""
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 9 or not parts[0].isdigit():
            raise ValueError(f"unexpected nvidia-smi --query-gpu line: {line!r}")
        # a name never holds a comma in practice; join defensively if it did
        extra = len(parts) - 9
        name = ", ".join(parts[1 : 2 + extra])
        rest = parts[2 + extra :]
        gpus.append(GpuInfo(
            index=int(parts[0]), name=name, compute_capability=rest[0],
            memory_total_mib=_num(rest[1]), memory_used_mib=_num(rest[2]),
            memory_free_mib=_num(rest[3]), driver=rest[4], pci_bus_id=rest[5], uuid=rest[6],
        ))
    return sorted(gpus, key=lambda g: g.index)


def parse_smi_header(text: str) -> dict[str, str | None]:
    """Driver and CUDA versions from the plain `nvidia-smi` banner."""
    driver = re.search(r"Driver Version:\s*([\w.\-]+)", text)
    cuda = re.search(r"CUDA Version:\s*([\w.\-]+)", text)
    smi = re.search(r"NVIDIA-SMI\s+([\w.\-]+)", text)
    return {
        "driver": driver.group(1) if driver else None,
        "cuda": cuda.group(1) if cuda else None,
        "smi": smi.group(1) if smi else None,
    }


def parse_topology(text: str) -> dict[tuple[int, int], str]:
    """`nvidia-smi topo -m` → {(i, j): link} for GPU pairs (i != j), e.g. "NV18", "PHB"."""
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    header: list[str] | None = None
    links: dict[tuple[int, int], str] = {}
    for line in lines:
        cells = [c.strip() for c in line.split("\t")]
        if header is None:
            if any(re.fullmatch(r"GPU\d+", c) for c in cells) and not re.match(r"GPU\d+", cells[0]):
                header = cells
            continue
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            if line.startswith("Legend"):
                break
            continue
        row = int(cells[0][3:])
        for col_name, value in zip(header[1:], cells[1:], strict=False):
            if re.fullmatch(r"GPU\d+", col_name):
                col = int(col_name[3:])
                if col != row and value and value != "X":
                    links[(row, col)] = value
    return links


def _link_rank(link: str) -> int:
    for rank, kind in enumerate(_LINK_ORDER):
        if link.startswith(kind):
            return rank
    return len(_LINK_ORDER)


def summarise_topology(links: Mapping[tuple[int, int], str], selected: tuple[int, ...]) -> str:
    """The worst link between any two selected GPUs (NV# < PIX < PXB < PHB < NODE < SYS);
    "none" for fewer than two GPUs or when the matrix is unknown."""
    pairs = [links[(a, b)] for a in selected for b in selected if a != b and (a, b) in links]
    if len(selected) < 2 or not pairs:
        return "none"
    return max(pairs, key=lambda link: (_link_rank(link), link))


def parse_compute_apps(text: str) -> list[tuple[int, int, str]]:
    """`nvidia-smi --query-compute-apps=APPS_QUERY …` → [(pid, MiB, uuid)]."""
    return [(pid, mib, uuid) for pid, mib, uuid, _name in parse_compute_apps_named(text)]


def parse_compute_apps_named(text: str) -> list[tuple[int, int, str, str | None]]:
    """The same with the process name (None when the query had no name column)."""
    apps: list[tuple[int, int, str, str | None]] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            name = ", ".join(parts[3:]) or None
            apps.append((int(parts[0]), _num(parts[1]), parts[2], name))
    return apps


# --------------------------------------------------------------------------- host facts


@dataclass(slots=True)
class HostFacts:
    smi_found: bool = True
    smi_error: str | None = None  # nvidia-smi present but failed (driver/library mismatch)
    gpus: list[GpuInfo] = field(default_factory=list)
    driver: str | None = None
    cuda: str | None = None
    topology: dict[tuple[int, int], str] = field(default_factory=dict)
    apps: list[tuple[int, int, str]] = field(default_factory=list)
    docker_found: bool = False

    @classmethod
    def from_outputs(cls, query: str, banner: str = "", topo: str = "", apps: str = "",
                     docker_found: bool = False) -> HostFacts:
        gpus = parse_gpu_query(query)
        head = parse_smi_header(banner)
        return cls(
            gpus=gpus, driver=head["driver"] or (gpus[0].driver if gpus else None),
            cuda=head["cuda"], topology=parse_topology(topo), apps=parse_compute_apps(apps),
            docker_found=docker_found,
        )


def _run(argv: list[str], timeout: float = 20.0) -> tuple[int, str, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout, proc.stderr


SMI_ENV = "WIKI_NVIDIA_SMI"  # another nvidia-smi executable (replayed captures in tests)


def nvidia_smi() -> str:
    """The nvidia-smi to run: $WIKI_NVIDIA_SMI when set, else the one on PATH."""
    return os.environ.get(SMI_ENV) or "nvidia-smi"


def gather_host(smi: str | None = None) -> HostFacts:
    """Run nvidia-smi (query, banner, topology, compute apps) and look for docker."""
    docker = shutil.which("docker") is not None
    path = shutil.which(smi or nvidia_smi())
    if path is None:
        return HostFacts(smi_found=False, docker_found=docker)
    try:
        rc, query, err = _run([path, f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"])
        if rc != 0:
            first = (err or query).strip().splitlines()
            return HostFacts(smi_error=first[0] if first else f"nvidia-smi exited {rc}",
                             docker_found=docker)
        _, banner, _ = _run([path])
        _, topo, _ = _run([path, "topo", "-m"])
        _, apps, _ = _run([path, f"--query-compute-apps={APPS_QUERY}",
                           "--format=csv,noheader,nounits"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return HostFacts(smi_error=f"nvidia-smi failed: {exc}", docker_found=docker)
    try:
        return HostFacts.from_outputs(query, banner, topo, apps, docker_found=docker)
    except ValueError as exc:
        return HostFacts(smi_error=str(exc), docker_found=docker)


def gpu_memory_used() -> dict[int, int] | None:
    """Used MiB per GPU index from nvidia-smi; None when there is no nvidia-smi or it fails."""
    try:
        rc, out, _err = _run([nvidia_smi(), f"--query-gpu={GPU_QUERY}",
                              "--format=csv,noheader,nounits"], timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if rc != 0:
        return None
    try:
        gpus = parse_gpu_query(out)
    except ValueError:
        return None
    return {g.index: g.memory_used_mib for g in gpus} or None


# --------------------------------------------------------------------------- GPU state

# (nvidia-smi field, record key). Explains why two runs of one runbook differ: clocks, power,
# temperature, link, other load. The same query as tests/fixtures/gpu/h200-x1/gpu-state.csv.
STATE_FIELDS: tuple[tuple[str, str], ...] = (
    ("index", "index"),
    ("uuid", "uuid"),
    ("clocks.sm", "clocks_sm_mhz"),
    ("clocks.max.sm", "clocks_max_sm_mhz"),
    ("clocks.mem", "clocks_mem_mhz"),
    ("clocks.max.mem", "clocks_max_mem_mhz"),
    ("power.draw", "power_draw_w"),
    ("power.limit", "power_limit_w"),
    ("pstate", "pstate"),
    ("persistence_mode", "persistence_mode"),
    ("temperature.gpu", "temperature_c"),
    ("utilization.gpu", "utilization_gpu_pct"),
    ("utilization.memory", "utilization_memory_pct"),
    ("memory.used", "memory_used_mib"),
    ("ecc.mode.current", "ecc_mode"),
    ("pcie.link.gen.current", "pcie_link_gen"),
    ("pcie.link.gen.max", "pcie_link_gen_max"),
    ("pcie.link.width.current", "pcie_link_width"),
    ("pcie.link.width.max", "pcie_link_width_max"),
    ("clocks_event_reasons.active", "clocks_event_reasons"),
    ("fan.speed", "fan_pct"),
    ("driver_version", "driver"),
)
STATE_QUERY = ",".join(f for f, _ in STATE_FIELDS)
_TEXT_KEYS = frozenset({"uuid", "pstate", "clocks_event_reasons", "driver"})
_ON_OFF = {"enabled": True, "disabled": False}


def _state_value(key: str, raw: str) -> Any:
    """One field: None for "[N/A]", "[Not Supported]", "N/A" or empty; numbers without units;
    Enabled/Disabled as true/false; text otherwise."""
    text = raw.strip()
    if not text or text.strip("[]").lower() in ("n/a", "not supported", "unknown error",
                                                 "insufficient permissions", "gpu is lost"):
        return None
    if key in _TEXT_KEYS:
        return text
    if text.lower() in _ON_OFF:
        return _ON_OFF[text.lower()]
    number = text.split()[0]  # "465 MHz" when queried without nounits
    try:
        value = float(number)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in number else value


def parse_gpu_state(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi --query-gpu=STATE_QUERY --format=csv,noheader,nounits` → one mapping per GPU
    (keys from STATE_FIELDS), by index. Lines that do not fit are skipped, never fatal."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(STATE_FIELDS) or not parts[0].isdigit():
            continue
        gpus.append({key: _state_value(key, raw)
                     for (_, key), raw in zip(STATE_FIELDS, parts, strict=True)})
    return sorted(gpus, key=lambda g: g["index"])


def gpu_state(indices: tuple[int, ...] | None = None) -> dict[str, Any]:
    """The state of this host's GPUs now (only `indices` when given) and the compute processes
    on them, for the run record. Never raises: a failing nvidia-smi is recorded as `error`."""
    path = shutil.which(nvidia_smi())
    if path is None:
        return {"error": "nvidia-smi not found"}
    try:
        rc, out, err = _run([path, f"--query-gpu={STATE_QUERY}",
                             "--format=csv,noheader,nounits"], timeout=15)
        if rc != 0:
            first = (err or out).strip().splitlines()
            return {"error": first[0] if first else f"nvidia-smi exited {rc}"}
        _, apps_text, _ = _run([path, f"--query-compute-apps={APPS_QUERY}",
                                "--format=csv,noheader,nounits"], timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"nvidia-smi failed: {exc}"}
    gpus = parse_gpu_state(out)
    if indices is not None:
        gpus = [g for g in gpus if g["index"] in indices]
    by_uuid = {g["uuid"]: g["index"] for g in gpus}
    processes = [
        {"pid": pid, "name": name, "used_mib": mib, "gpu": by_uuid[uuid]}
        for pid, mib, uuid, name in parse_compute_apps_named(apps_text) if uuid in by_uuid
    ]
    return {"gpus": gpus, "processes": sorted(processes, key=lambda p: (p["gpu"], p["pid"]))}


# --------------------------------------------------------------------------- ports


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on `port`: no connection is accepted on host:port and the port
    can be bound on 0.0.0.0 and 127.0.0.1."""
    try:
        with socket.create_connection((host, port), timeout=0.3):
            return False
    except OSError:
        pass
    for addr in ("0.0.0.0", "127.0.0.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((addr, port))
            except OSError:
                return False
    return True


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick on 127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
