"""A real multi-node Ray cluster on this machine, inside a network namespace made for it.

Ray will not run several nodes on loopback (it swaps 127.0.0.1 for the host's interface
address), so the cluster gets its own namespace with one address on its loopback device; every
node, the driver and everything they start stay there. Each node is a `ray start` with its own
resources and environment. Every process the cluster starts carries WIKI_FLEET_CLUSTER=<tag>
(and WIKI_FLEET_NODE=<tag>:<node>) in its environment, which is how they are found and stopped
by PID; nothing is stopped by name, and `ray stop` is never used.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

from fakes.procs import tagged
from harness import wait_until

from wikitools.runbook.execution.processes import command_of

CLUSTER_VAR = "WIKI_FLEET_CLUSTER"
NODE_VAR = "WIKI_FLEET_NODE"
OBJECT_STORE_BYTES = 100_000_000


def why_not() -> str | None:
    """Why a cluster cannot be made here, or None."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "making a network namespace needs root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is missing"
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed: pip install -e '.[fleet]'"
    return None


def cmdline(pid: int) -> str:
    text = command_of(pid, limit=100_000)
    return "" if text == "?" else text


def kill_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


class RayCluster:
    """Head and worker nodes in a private network namespace; `stop()` leaves nothing."""

    def __init__(self, python_bin: Path) -> None:
        self.bin = python_bin  # the bin/ folder holding `ray` and `python`
        self.tag = uuid.uuid4().hex[:12]
        rng = random.Random(self.tag)
        self.ns = f"wikifleet-{self.tag[:8]}"
        self.ip = f"10.{rng.randrange(200, 250)}.{rng.randrange(1, 250)}.1"
        self.port = rng.randrange(20000, 30000)
        self.temp = Path(f"/tmp/rf-{self.tag[:8]}")  # short: Ray's socket paths must fit
        self.nodes: list[str] = []
        self.made_ns = False

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    def netns(self, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    def make_namespace(self) -> None:
        self._ip("netns", "add", self.ns)
        self.made_ns = True
        self._ip("-n", self.ns, "link", "set", "lo", "up")
        self._ip("-n", self.ns, "addr", "add", f"{self.ip}/32", "dev", "lo")
        self._ip("-n", self.ns, "route", "add", "default", "dev", "lo", "src", self.ip)
        self.temp.mkdir(parents=True, exist_ok=True)

    def env(self, node: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("VIRTUAL_ENV", None)
        env.update({CLUSTER_VAR: self.tag, NODE_VAR: f"{self.tag}:{node}",
                    "RAY_USAGE_STATS_ENABLED": "0", "NO_COLOR": "1"})
        env.update(extra or {})
        return env

    def start_node(
        self, name: str, *, head: bool = False, num_cpus: float = 0, num_gpus: int = 0,
        resources: Mapping[str, float] | None = None, env: Mapping[str, str] | None = None,
    ) -> None:
        self.start_nodes([{"name": name, "head": head, "num_cpus": num_cpus, "num_gpus": num_gpus,
                               "resources": resources, "env": env}])

    def start_nodes(self, specs: list[dict]) -> None:
        """`ray start` for each spec (start_node's keywords), one after the other: nodes that
        share an address must not start at once (each finds itself by that address)."""
        for spec in specs:
            out = subprocess.run(self.netns(*self._start_argv(spec)),
                                 env=self.env(spec["name"], spec.get("env")),
                                 capture_output=True, text=True, timeout=120, check=False)
            if out.returncode != 0:
                raise RuntimeError(f"ray start {spec['name']} failed:\n{out.stdout}\n"
                                   f"{out.stderr}")
            self.nodes.append(spec["name"])

    def _start_argv(self, spec: dict) -> list[str]:
        argv = [str(self.bin / "ray"), "start", "--node-name", spec["name"],
                "--num-cpus", f"{spec.get('num_cpus', 0):g}",
                "--num-gpus", str(spec.get("num_gpus", 0)),
                "--object-store-memory", str(OBJECT_STORE_BYTES), "--disable-usage-stats"]
        if spec.get("resources"):
            argv += ["--resources", _json(spec["resources"])]
        if spec.get("head"):
            argv += ["--head", "--port", str(self.port), "--node-ip-address", self.ip,
                     "--temp-dir", str(self.temp), "--include-dashboard=false"]
        else:
            argv += ["--address", self.address]
        return argv

    def node_pids(self, name: str) -> list[int]:
        return tagged(NODE_VAR, f"{self.tag}:{name}")

    def raylet_pid(self, name: str) -> int:
        pids = [p for p in self.node_pids(name) if "/raylet/raylet" in cmdline(p).split(" ")[0]]
        if len(pids) != 1:
            raise RuntimeError(f"expected one raylet for {name}, found {pids}")
        return pids[0]

    def kill_node(self, name: str) -> None:
        """The host goes away: its raylet first, then everything else it ran, all SIGKILL."""
        os.kill(self.raylet_pid(name), signal.SIGKILL)

        def gone() -> bool:
            pids = self.node_pids(name)
            kill_all(pids, signal.SIGKILL)
            return not pids

        wait_until(gone, 10, interval=0.2)

    def pids(self) -> list[int]:
        return tagged(CLUSTER_VAR, self.tag)

    def stop(self, grace: float = 5.0) -> list[int]:
        """TERM every process of the cluster, KILL what is left after `grace`, delete the
        namespace and the temp dir. Returns the PIDs that needed KILL."""
        kill_all(self.pids(), signal.SIGTERM)
        wait_until(lambda: not self.pids(), grace, interval=0.2)
        stubborn = self.pids()
        kill_all(stubborn, signal.SIGKILL)
        wait_until(lambda: not self.pids(), 10)
        if self.made_ns:
            subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, timeout=30,
                           check=False)
            self.made_ns = False
        shutil.rmtree(self.temp, ignore_errors=True)
        return stubborn

    def namespace_exists(self) -> bool:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             timeout=30, check=False)
        return any(line.split()[0] == self.ns for line in out.stdout.splitlines() if line)


def _json(mapping: Mapping[str, float]) -> str:
    return "{" + ", ".join(f'"{k}": {v:g}' for k, v in sorted(mapping.items())) + "}"


def fake_smi(folder: Path, capture: str, captures: Path) -> Path:
    """An nvidia-smi that replays a captured host (tests/fixtures/nvidia-smi/<capture>.*)."""
    base = captures / f"{capture}.synthetic"
    script = folder / f"nvidia-smi-{capture}"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=*) cat '{base}.query.csv' ;;\n"
        f"  --query-compute-apps=*) cat '{base}.apps.csv' ;;\n"
        f"  topo) cat '{base}.topo.txt' ;;\n"
        f"  *) cat '{base}.smi.txt' ;;\n"
        "esac\n")
    script.chmod(0o755)
    return script
