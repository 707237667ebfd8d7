"""Processes found by a variable in their environment: how tests see everything a run started."""

from __future__ import annotations

from pathlib import Path


def tagged(var: str, value: str) -> list[int]:
    """Live, non-zombie processes whose environment holds var=value."""
    needle = f"{var}={value}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and needle in env.split(b"\0"):
            found.append(int(d.name))
    return found


def group_members(pgid: int) -> list[int]:
    """Live, non-zombie processes of process group `pgid`."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(d.name))
    return found
