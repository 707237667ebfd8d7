"""Preflight: is this host able to run this runbook now, and on which GPUs? The host's facts
come from `host` (nvidia-smi, ports); this module only decides. Nothing here starts or stops
anything."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

from wikitools.runbook.blocks.declared import Runbook, ServerBlock
from wikitools.runbook.engines.catalog import MULTICAST_OFF
from wikitools.runbook.engines.shell import env_assignments, expand
from wikitools.runbook.execution.containers import DockerFacts, gather_docker, short
from wikitools.runbook.execution.host import HostFacts, gather_host, port_free, summarise_topology
from wikitools.runbook.execution.planned import Check, GpuInfo, Verdict

BUSY_USED_MIB = 1024  # a GPU with more memory in use than this counts as busy
NO_DRIVER = "nvidia-smi not found: no NVIDIA driver on this host"

# --------------------------------------------------------------------------- decisions


def required_gpus(server: ServerBlock) -> int:
    """gpus= when stated, else what the command's parallel sizes need."""
    if server.requirements.gpus is not None:
        return server.requirements.gpus
    return server.command.gpus


def block_env(server: ServerBlock) -> dict[str, str]:
    """Environment the server block sets for itself (env= attribute, exports, prefixes)."""
    env = dict(server.extra_env)
    env.update(server.command.env)
    return env


def _visible_filter(value: str, gpus: list[GpuInfo]) -> list[GpuInfo] | None:
    """GPUs named by a CUDA_VISIBLE_DEVICES / docker --gpus value; None when unreadable."""
    value = value.strip().strip('"').strip("'")
    if value.startswith("device="):
        value = value[len("device="):]
    if value in ("all", ""):
        return list(gpus) if value == "all" else []
    out: list[GpuInfo] = []
    for item in value.split(","):
        item = item.strip()
        if item.isdigit():
            match = [g for g in gpus if g.index == int(item)]
        elif item.startswith(("GPU-", "MIG-")):
            match = [g for g in gpus if g.uuid.startswith(item)]
        else:
            return None
        out.extend(match)
    return out


def _container_visible(value: str, seen: list[GpuInfo]) -> list[GpuInfo] | None:
    """The GPUs a CUDA_VISIBLE_DEVICES inside a container names: indices count the GPUs the
    container was given (`--gpus device=2,3` then `0` is host GPU 2), in their order."""
    value = value.strip().strip('"').strip("'")
    if not all(item.strip().isdigit() for item in value.split(",")):
        return _visible_filter(value, seen)
    positions = [int(item) for item in value.split(",")]
    return [seen[k] for k in positions if k < len(seen)]


def _visible_gpus(server: ServerBlock, facts: HostFacts, environ: Mapping[str, str],
                  add: Callable[[str, str, str], None]) -> tuple[list[GpuInfo], bool]:
    """(the GPUs the server can use, whether the block names them itself): a container gets
    those of `--gpus` (a compose service's devices), narrowed by a CUDA_VISIBLE_DEVICES of
    its own environment; a process on the host those of the block's CUDA_VISIBLE_DEVICES,
    else the environment's."""
    gpus = sorted(facts.gpus, key=lambda g: g.index)
    cmd = server.command
    container_cvd = dict(cmd.docker_env).get("CUDA_VISIBLE_DEVICES") if cmd.docker else None
    host_cvd = None if cmd.docker else block_env(server).get("CUDA_VISIBLE_DEVICES")
    seen, pinned, told = gpus, False, False
    for source, value in (("docker --gpus", cmd.docker_gpus),
                          ("CUDA_VISIBLE_DEVICES in the container", container_cvd),
                          ("CUDA_VISIBLE_DEVICES in the block", host_cvd)):
        if value is None:
            continue
        bare = value.strip("'\"")
        if source == "docker --gpus" and bare.isdigit():
            add("visible", "ok", f"docker --gpus {bare}: {bare} GPUs the runtime chooses")
            told = True
            continue
        chosen = (_container_visible(value, seen) if source.endswith("container")
                  else _visible_filter(value, seen))
        if chosen is None:
            add("visible", "warn", f"{source}={value} not understood; using every GPU")
            continue
        seen, told = chosen, True
        pinned = pinned or bare != "all"
        add("visible", "ok", f"{source}={value}: GPUs {_idx(seen)}")
    outer = environ.get("CUDA_VISIBLE_DEVICES")
    if not told and outer is not None:
        chosen = _visible_filter(outer, gpus)
        if chosen is None:
            add("visible", "warn", f"CUDA_VISIBLE_DEVICES in the environment={outer} not "
                "understood; using every GPU")
        else:
            seen = chosen
            add("visible", "ok", f"CUDA_VISIBLE_DEVICES in the environment={outer}: GPUs "
                f"{_idx(seen)}")
    return list(seen), pinned


def _arch_ok(gpu: GpuInfo, arch: tuple[str, ...]) -> bool:
    return not arch or gpu.arch in arch or any(a.rstrip("af") == gpu.arch for a in arch)



def multicast_overrides(server: ServerBlock) -> list[str]:
    """`NAME=value` for each assignment in the block that would turn NVLink multicast back on."""
    pairs = [(k, v) for k, v, _ in env_assignments(server.content)]
    pairs += list(server.extra_env) + list(server.command.env)
    return [f"{k}={v}" for k, v in pairs
            if k in MULTICAST_OFF and v.strip().strip("'\"") != MULTICAST_OFF[k]]


def empty_nccl_graph_file(server: ServerBlock) -> bool:
    """Operational rule: never launch with NCCL_GRAPH_FILE set to an empty string."""
    pairs = [(k, v) for k, v, _ in env_assignments(server.content)]
    pairs += list(server.extra_env) + list(server.command.env)
    return any(k == "NCCL_GRAPH_FILE" and v.strip() == "" for k, v in pairs)


def host_record(facts: HostFacts, selected: tuple[int, ...], cpu_only: bool) -> dict[str, Any]:
    by_index = {g.index: g for g in facts.gpus}
    gpus = [by_index[i] for i in selected if i in by_index]
    return {
        "gpus": [
            {"index": g.index, "name": g.name, "compute_capability": g.compute_capability,
             "memory_total_mib": g.memory_total_mib, "memory_free_mib": g.memory_free_mib,
             "pci_bus_id": g.pci_bus_id}
            for g in gpus
        ],
        "gpu_count": len(gpus),
        "driver": facts.driver,
        "cuda": facts.cuda,
        "topology": summarise_topology(facts.topology, selected),
        "hostname_hash": None,
        "cpu_only": cpu_only,
    }


def preflight(
    runbook: Runbook,
    *,
    force: bool = False,
    port: int | None = None,
    facts: HostFacts | None = None,
    environ: Mapping[str, str] | None = None,
    port_checker: Callable[[int], bool] = port_free,
    busy_used_mib: int = BUSY_USED_MIB,
    docker: DockerFacts | None = None,
) -> Verdict:
    """Decide whether `runbook` can run here now. `facts` defaults to `gather_host()`;
    `environ` (default os.environ) supplies an outer CUDA_VISIBLE_DEVICES and the values of
    variables in a container name; `docker` defaults to asking the daemon (containers only)."""
    server = runbook.server
    facts = facts if facts is not None else gather_host()
    environ = os.environ if environ is None else environ
    checks: list[Check] = []
    need = required_gpus(server)
    cpu_only = need == 0
    req = server.requirements

    def add(name: str, status: str, message: str) -> None:
        checks.append(Check(name, status, message))

    def forceable(name: str, message: str) -> None:
        if force:
            add(name, "warn", message + " (forced)")
        else:
            add(name, "fail", message + " (--force to run anyway)")

    selected: tuple[int, ...] = ()
    if not facts.smi_found or facts.smi_error:
        why = NO_DRIVER if not facts.smi_found else f"nvidia-smi failed: {facts.smi_error}"
        if cpu_only:
            add("nvidia-smi", "ok", f"{why} (CPU run: gpus=0)")
        else:
            add("nvidia-smi", "fail", f"{why}; runbook needs {need} GPU{'s' * (need != 1)}")
    elif cpu_only:
        add("gpus", "ok", "CPU run (gpus=0): no GPU used")
    else:
        add("nvidia-smi", "ok", f"{len(facts.gpus)} GPU{'s' * (len(facts.gpus) != 1)}, driver "
            f"{facts.driver or '?'}, CUDA {facts.cuda or '?'}")
        selected = _select(server, facts, need, req.arch, req.min_mem_gib, busy_used_mib, environ,
                           add, forceable)
    # port
    the_port = port or server.port
    if port_checker(the_port):
        add("port", "ok", f"port {the_port} is free")
    else:
        add("port", "fail", f"port {the_port} is in use (stop what listens there or use --port)")
    # docker
    if server.command.docker:
        if facts.docker_found:
            add("docker", "ok", f"docker present for image {server.command.image}")
            _docker_checks(server, docker, environ, add)
        else:
            add("docker", "fail", f"docker not found, needed for image {server.command.image}")
    # operational rules
    if empty_nccl_graph_file(server):
        add("env", "fail", "NCCL_GRAPH_FILE is set to an empty string; unset it instead "
            "(`unset NCCL_GRAPH_FILE`)")
    multicast = multicast_overrides(server)
    if multicast:
        add("env", "fail", f"{', '.join(dict.fromkeys(multicast))}: the executor keeps NVLink "
            f"multicast off ({' '.join(f'{k}={v}' for k, v in MULTICAST_OFF.items())}); "
            "drop the assignment")
    return Verdict(checks=tuple(checks), selected_gpus=selected,
                   host=host_record(facts, selected, cpu_only), forced=force)


def _docker_checks(server: ServerBlock, docker: DockerFacts | None,
                   environ: Mapping[str, str], add: Callable[[str, str, str], None]) -> None:
    """The daemon answers; the container name is free; `--gpus` has an NVIDIA runtime behind it.
    (A Compose run always gets a new project of its own, whatever the page names: nothing to
    check there.) None is forceable:
    each would make docker fail, or make the run touch containers it did not start."""
    use = server.command.container
    if use is None or use.kind not in ("run", "compose"):
        return
    scope = dict(environ)
    scope.update(block_env(server))
    name = expand(use.name, scope) if use.name else None
    facts = docker if docker is not None else gather_docker([name] if name else [])
    if facts.daemon_error:
        add("docker", "fail", f"no Docker daemon answers: {facts.daemon_error}")
        return
    for taken, cid in facts.taken:
        add("container", "fail", f"container name {taken} already in use by a container this "
            f"run did not start (ID {short(cid)}); remove or rename it, or change the name")
    gpus = server.command.docker_gpus
    if gpus and not facts.gpus_ok:
        what = f"--gpus {gpus}" if use.kind == "run" else "GPU devices (compose)"
        runtimes = ", ".join(facts.runtimes) or "none"
        add("docker-gpus", "fail", f"docker {what} needs the NVIDIA container runtime "
            f"(nvidia-container-toolkit), which this host's Docker does not have (runtimes: "
            f"{runtimes}; no nvidia-container-runtime-hook on PATH)")
    if not facts.taken and not (gpus and not facts.gpus_ok):
        add("container", "ok", f"container name {name} is free" if name else
            "the run's containers get names of their own")


def _select(
    server: ServerBlock, facts: HostFacts, need: int, arch: tuple[str, ...],
    min_mem_gib: float | None, busy_used_mib: int, environ: Mapping[str, str],
    add: Callable[[str, str, str], None], forceable: Callable[[str, str], None],
) -> tuple[int, ...]:
    candidates, pinned = _visible_gpus(server, facts, environ, add)
    total = len(candidates)
    if total < need:
        add("gpu-count", "fail", f"runbook needs {need} GPU{'s' * (need != 1)}; "
            f"{total} available ({_idx(candidates) or 'none'})")
        return tuple(g.index for g in candidates)
    add("gpu-count", "ok", f"needs {need}, {total} available")
    # architecture
    wrong = [g for g in candidates if not _arch_ok(g, arch)]
    if arch:
        if wrong and len(candidates) - len(wrong) < need:
            forceable("arch", f"runbook requires {','.join(arch)}; this host has "
                      + ", ".join(sorted({f"{g.name} ({g.arch})" for g in wrong})))
        else:
            add("arch", "ok", f"{','.join(arch)} matches")
    # busy and memory
    busy: dict[int, str] = {}
    for g in candidates:
        procs = [a for a in facts.apps if a[2] == g.uuid]
        if procs:
            busy[g.index] = ", ".join(f"pid {p} uses {m} MiB" for p, m, _ in procs)
        elif g.memory_used_mib > busy_used_mib:
            busy[g.index] = f"{g.memory_used_mib} MiB in use"
    need_mib = math.ceil(min_mem_gib * 1024) if min_mem_gib is not None else 0
    low = {g.index for g in candidates if g.memory_free_mib < need_mib}

    def good(g: GpuInfo) -> bool:
        return _arch_ok(g, arch) and g.index not in busy and g.index not in low

    if pinned:
        chosen = candidates[:need] if len(candidates) > need else candidates
    else:
        ok = [g for g in candidates if good(g)]
        chosen = ok[:need] if len(ok) >= need else (ok + [g for g in candidates
                                                           if not good(g)])[:need]
        chosen.sort(key=lambda g: g.index)
    busy_chosen = [g for g in chosen if g.index in busy]
    if busy_chosen:
        forceable("busy", "GPUs busy: " + "; ".join(f"GPU {g.index}: {busy[g.index]}"
                                                    for g in busy_chosen))
    else:
        add("busy", "ok", f"GPUs {_idx(chosen)} idle")
    if min_mem_gib is not None:
        short = [g for g in chosen if g.index in low]
        if short:
            forceable("memory", f"needs {min_mem_gib:g} GiB free per GPU; " + "; ".join(
                f"GPU {g.index} has {g.memory_free_mib / 1024:.1f} GiB" for g in short))
        else:
            add("memory", "ok", f"at least {min_mem_gib:g} GiB free on GPUs {_idx(chosen)}")
    return tuple(g.index for g in chosen)


def _idx(gpus: list[GpuInfo]) -> str:
    return ",".join(str(g.index) for g in gpus)
