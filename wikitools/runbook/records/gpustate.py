"""The GPU state a record holds (`gpu_state.before` / `.after`, read through `host`), said in a
sentence for the page's provenance line: clocks, power, performance state, temperature, load,
ECC and the PCIe link of each GPU, and any other process that was on them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _pair(cur: Any, top: Any, unit: str) -> str | None:
    if cur is None and top is None:
        return None
    if top is None:
        return f"{cur} {unit}"
    return f"{'?' if cur is None else cur}/{top} {unit}"


def _watts(v: Any) -> str:
    return f"{v:,.0f}" if isinstance(v, int | float) else "?"


def describe_gpu(g: Mapping[str, Any]) -> str:
    parts = []
    sm = _pair(g.get("clocks_sm_mhz"), g.get("clocks_max_sm_mhz"), "MHz")
    if sm:
        parts.append(f"SM clock {sm}")
    mem = _pair(g.get("clocks_mem_mhz"), g.get("clocks_max_mem_mhz"), "MHz")
    if mem:
        parts.append(f"memory clock {mem}")
    if g.get("power_draw_w") is not None or g.get("power_limit_w") is not None:
        parts.append(f"{_watts(g.get('power_draw_w'))} W of a {_watts(g.get('power_limit_w'))} W "
                     "limit")
    if g.get("pstate"):
        parts.append(str(g["pstate"]))
    if g.get("persistence_mode") is not None:
        parts.append("persistence " + ("on" if g["persistence_mode"] else "off"))
    if g.get("temperature_c") is not None:
        parts.append(f"{g['temperature_c']} °C")
    if g.get("utilization_gpu_pct") is not None:
        parts.append(f"{g['utilization_gpu_pct']} % busy")
    if g.get("ecc_mode") is not None:
        parts.append("ECC " + ("on" if g["ecc_mode"] else "off"))
    gen, width = g.get("pcie_link_gen"), g.get("pcie_link_width")
    if gen is not None or width is not None:
        link = f"PCIe gen {gen if gen is not None else '?'} ×{width if width is not None else '?'}"
        gmax, wmax = g.get("pcie_link_gen_max"), g.get("pcie_link_width_max")
        if (gmax, wmax) != (gen, width) and (gmax is not None or wmax is not None):
            link += f" (card max gen {gmax if gmax is not None else '?'} ×"
            link += f"{wmax if wmax is not None else '?'})"
        parts.append(link)
    return ", ".join(parts)


def describe_state(state: Mapping[str, Any] | None, when: str) -> str:
    """'GPU state before the run: GPU 0: …; GPU 1: …. Other processes on these GPUs: none.'
    ('' when the record has no state)."""
    if not state:
        return ""
    if state.get("error"):
        return f"GPU state {when}: not read ({state['error']})."
    gpus = state.get("gpus") or []
    if not gpus:
        return ""
    body = "; ".join(f"GPU {g.get('index', '?')}: {describe_gpu(g)}" for g in gpus)
    procs = state.get("processes") or []
    if procs:
        names = ", ".join(f"{p.get('name') or 'pid ' + str(p.get('pid'))} on GPU {p.get('gpu')} "
                          f"({p.get('used_mib', '?')} MiB)" for p in procs)
        others = f" Other processes on these GPUs: {names}."
    else:
        others = " No other process was on these GPUs." if when == "before the run" else ""
    return f"GPU state {when}: {body}.{others}"


__all__ = ["describe_gpu", "describe_state"]
